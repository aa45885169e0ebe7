package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A temporary output (a Stage's directory, a File's temporary name) is
// locked (flock, exclusive) by the process writing it until it is renamed
// or removed. The lock goes with the process: a temporary output whose lock
// can be taken was left by a run that was killed (SIGKILL, a crash, a lost
// machine), and the next output with the same final name removes it
// (removeStale) instead of leaving it to fill the disk unseen.

// staleAge is how old (modification time) an unlocked temporary output must
// be to be removed: it covers the moment between its creation and its lock
// (microseconds), with room to spare.
// Tests set it to zero.
var staleAge = 5 * time.Second

// isTempOf reports whether name is one of final's temporary names:
// ".<final>.tmp-" followed by the digits or hex digits of MkdirTemp's or
// randomSuffix's random part (a previous dataset moved aside, ".old", is
// not: a crash may have left it as the only copy).
func isTempOf(name, final string) bool {
	rest, ok := strings.CutPrefix(name, "."+final+".tmp-")
	if !ok || rest == "" || len(rest) > 20 {
		return false
	}
	for _, c := range rest {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// removeStale removes the temporary outputs of final (a path) that no live
// process holds; it returns their paths. Errors are ignored: what cannot be
// removed stays as it was.
func removeStale(final string) []string {
	dir, base := filepath.Split(final)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		if !isTempOf(e.Name(), base) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleAge {
			continue
		}
		lock := tryLock(p)
		if lock == nil {
			continue // a live writer's (or locks do not work here)
		}
		err = os.RemoveAll(p)
		lock.Close()
		if err == nil {
			removed = append(removed, p)
		}
	}
	return removed
}
