package model

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/childtest"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// The crash test re-executes the test binary as a training child that
// snapshots every iteration (keeping 3) and kills it at random moments
// with SIGKILL and SIGINT. After each kill every snapshot in the directory
// must load completely or be refused with its file named; after SIGINT the
// child must have stopped cleanly (exit 0) and left no temporary files.

const crashEnv = "CTRKIT_CRASH_CHILD"

func crashModel(t testing.TB) *Model {
	opt := graph.DefaultOptimizer()
	opt.Type, opt.LearningRate = "Adam", 0.01
	m, err := Build(bnModel(), cpuBackend(t), Options{BatchSize: 32, Seed: 3, Optimizer: opt})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// crashChild trains until killed: fresh, or resumed from the newest
// complete snapshot.
func crashChild(t *testing.T, prefix string, resume bool) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m := crashModel(t)
	if resume {
		if iters, err := snapshotIters(prefix); err == nil {
			last := int64(-1)
			for it, ok := range iters {
				if ok && it > last {
					last = it
				}
			}
			if last >= 0 {
				if err := m.Load(prefix, last); err != nil {
					fmt.Fprintln(os.Stderr, "resuming:", err)
					os.Exit(3)
				}
			}
		}
	}
	train := newPlanted(1, 512, 4, smallSlots)
	fmt.Println("ready")
	_, err := m.Fit(ctx, FitOptions{OpenTrain: func() (formats.Reader, error) { return train.reader(32), nil },
		MaxIter: int(m.Iter()) + 1_000_000, Snapshot: 1, SnapshotPrefix: prefix, KeepSnapshots: 3})
	if errors.Is(err, context.Canceled) {
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "training:", err)
	os.Exit(2)
}

func tempFiles(dir string) map[string]bool {
	out := map[string]bool{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp-") {
			out[p] = true
		}
		return nil
	})
	return out
}

func TestSnapshotCrash(t *testing.T) {
	if p := os.Getenv(crashEnv); p != "" {
		crashChild(t, p, os.Getenv(crashEnv+"_RESUME") != "")
		return
	}
	if testing.Short() {
		t.Skip("crash test: -short")
	}
	dir := t.TempDir()
	prefix := filepath.Join(dir, "c")
	rng := rand.New(rand.NewPCG(11, 13))
	names := regexp.MustCompile(`^c(?:_snapshot_([0-9]+)\.json|_dense_([0-9]+)\.model)$`)
	var loaded, refused int
	const trials = 2 * 20
	for trial := range trials {
		sig := os.Signal(syscall.SIGKILL)
		if trial%2 == 1 {
			sig = syscall.SIGINT
		}
		before := tempFiles(dir)
		env := []string{crashEnv + "=" + prefix}
		if trial%4 >= 2 { // half the children resume, half rewrite the same iterations afresh
			env = append(env, crashEnv+"_RESUME=1")
		}
		cmd, stderr := childtest.Start(t, "TestSnapshotCrash", "ready", env...)
		time.Sleep(time.Duration(rng.IntN(60_000)) * time.Microsecond) // a random moment of training and saving
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		if sig == syscall.SIGINT {
			if err != nil {
				t.Errorf("trial %d: SIGINT: %v\n%s", trial, err, stderr.String())
			}
			for p := range tempFiles(dir) {
				if !before[p] {
					t.Errorf("trial %d: SIGINT left %s", trial, p)
				}
			}
		} else if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("trial %d: child ended before SIGKILL: %v\n%s", trial, err, stderr.String())
		}
		// Every snapshot loads completely or is refused by name.
		ents, _ := os.ReadDir(dir)
		iters := map[int64]bool{}
		for _, e := range ents {
			if sm := names.FindStringSubmatch(e.Name()); sm != nil {
				it, _ := strconv.ParseInt(sm[1]+sm[2], 10, 64)
				iters[it] = true
			}
		}
		var list []int64
		for it := range iters {
			list = append(list, it)
		}
		sort.Slice(list, func(a, b int) bool { return list[a] < list[b] })
		for _, it := range list {
			err := crashModel(t).Load(prefix, it)
			if err == nil {
				loaded++
				if _, serr := os.Stat(ManifestFile(prefix, it)); serr != nil {
					t.Errorf("trial %d: snapshot %d loaded without its manifest", trial, it)
				}
				continue
			}
			refused++
			var se *SnapshotError
			var le *LoadError
			switch {
			case errors.As(err, &se) && strings.HasPrefix(se.Path, dir):
			case errors.As(err, &le) && strings.HasPrefix(le.Path, dir):
			default:
				t.Errorf("trial %d: snapshot %d refused without naming its file: %v", trial, it, err)
			}
		}
	}
	t.Logf("%d trials: %d snapshot loads, %d refusals", trials, loaded, refused)
	if loaded == 0 {
		t.Error("no snapshot ever loaded")
	}
}
