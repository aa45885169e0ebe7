package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCrashTrain kills `ctrkit train --snapshot` (SIGKILL and SIGINT, 20
// times each) at random moments, half the runs resuming from the newest
// snapshot: afterwards every snapshot on disk either resumes completely
// (`train --load-prefix --load-iter`, optimizer state included) or is
// refused with a message naming what is missing; after SIGINT the exit
// status is 130 (0 when training had finished) and no temporary file is
// left.
func TestCrashTrain(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	dir := t.TempDir()
	src := genSource(t, filepath.Join(dir, "data"), 3, 2, 4000)
	snap := filepath.Join(dir, "snap", "m")
	sizes := strings.TrimSuffix(strings.Repeat("1000,", 8), ",")
	base := []string{"train", "--model", "dlrm", "--dense-dim", "4", "--width", "0.0625", "--vec-size", "8", "--source", src, "--slot-size-array", sizes, "--batchsize", "128",
		"--device", "cpu", "--optimizer", "adam", "--lr", "0.001", "--snapshot", "4", "--snapshot-prefix", snap,
		"--keep-snapshots", "3", "--num-workers", "1", "--seed", "5"}
	run := func(sig syscall.Signal, delay time.Duration, extra ...string) (int, string) {
		return crashRun(t, dir, sig, delay, append(slices.Clone(base), extra...)...)
	}
	start := time.Now()
	if code, o := run(0, -1, "--max-iter", "40"); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, o)
	}
	span := time.Since(start) + 20*time.Millisecond
	dense := regexp.MustCompile(`^m_dense_(\d+)\.model$`)
	iters := func() []int {
		var out []int
		ents, _ := os.ReadDir(filepath.Dir(snap))
		for _, e := range ents {
			if m := dense.FindStringSubmatch(e.Name()); m != nil {
				n, _ := strconv.Atoi(m[1])
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	rng := rand.New(rand.NewPCG(7, 8))
	refused, good := 0, -1 // good: the newest snapshot seen to resume
	for i := range 40 {
		sig := syscall.SIGKILL
		if i%2 == 1 {
			sig = syscall.SIGINT
		}
		extra := []string{"--max-iter", "40"}
		if last := good; i%4 >= 2 && last > 0 && slices.Contains(iters(), last) {
			extra = []string{"--load-prefix", snap, "--load-iter", strconv.Itoa(last), "--max-iter", strconv.Itoa(last + 24)}
		}
		delay := time.Duration(rng.Int64N(int64(span)))
		code, o := run(sig, delay, extra...)
		what := "run " + strconv.Itoa(i) + " " + sig.String() + " after " + delay.String()
		if sig == syscall.SIGINT {
			if code != 0 && code != exitSIGINT && code != -int(syscall.SIGINT) {
				t.Fatalf("%s: exit %d, want 130 (or 0 when done)\n%s", what, code, o)
			}
			if tmp := temps(dir); len(tmp) > 0 {
				t.Fatalf("%s: temporary files left: %v\n%s", what, tmp, o)
			}
		}
		// The newest snapshot (the one a kill may have cut) resumes or is
		// refused by name; a refused one is what a later run prunes. A run
		// killed while it re-saved or pruned an older snapshot (the one
		// before it resumed from, say) may have cut that one too: only the
		// snapshot checked after the last run is resumed from.
		good = -1
		if have := iters(); len(have) > 0 {
			n := have[len(have)-1]
			code, o := run(0, -1, "--load-prefix", snap, "--load-iter", strconv.Itoa(n), "--max-iter", strconv.Itoa(n+1),
				"--snapshot", "0", "--snapshot-prefix", filepath.Join(dir, "check", "c"))
			switch {
			case code == 0:
				good = n
			case strings.Contains(o, filepath.Dir(snap)) && strings.Contains(o, "snapshot"):
				refused++
			default:
				t.Fatalf("%s: snapshot %d neither resumes nor is refused by name: exit %d\n%s", what, n, code, o)
			}
			os.RemoveAll(filepath.Join(dir, "check"))
		}
		for _, p := range temps(dir) { // a SIGKILL's leftovers
			os.RemoveAll(p)
		}
	}
	t.Logf("40 kills; newest snapshot refused by name %d times", refused)
}
