package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// A temporary output (a Stage's directory, a File's temporary name) is
// locked (flock, exclusive) by the process writing it: a Stage's directory
// until it is renamed or removed, a File's name until the file is complete
// (renamed by its Commit, or closed and waiting for its Stage's Commit, so
// that a Stage of thousands of files does not hold thousands of locks).
// The lock goes with the process: a temporary output whose lock can be
// taken was left by a run that was killed (SIGKILL, a crash, a lost
// machine) or is complete and about to be renamed, and the next output with
// the same final name removes it (removeStale) when it is also older than
// staleAge, instead of leaving it to fill the disk unseen.

// staleAge is how old (modification time) an unlocked temporary output must
// be to be removed: it covers the moment between its creation and its lock
// (microseconds) and a complete Stage file's wait for its Stage's Commit,
// with room to spare. Tests set it to zero.
var staleAge = 5 * time.Second

// tempFinal returns the final name whose temporary name name is:
// ".<final>.tmp-" followed by the digits or hex digits of MkdirTemp's or
// randomSuffix's random part (a previous dataset moved aside, ".old", is
// not one: a crash may have left it as the only copy).
func tempFinal(name string) (string, bool) {
	i := strings.LastIndex(name, ".tmp-")
	if i < 2 || name[0] != '.' {
		return "", false
	}
	rest := name[i+len(".tmp-"):]
	if rest == "" || len(rest) > 20 {
		return "", false
	}
	for _, c := range rest {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return name[1:i], true
}

// tempsIn lists the temporary names in dir by their final names.
func tempsIn(dir string) map[string][]string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var m map[string][]string
	for _, e := range ents {
		if f, ok := tempFinal(e.Name()); ok {
			if m == nil {
				m = map[string][]string{}
			}
			m[f] = append(m[f], e.Name())
		}
	}
	return m
}

// removeTemps removes those of dir's temporary names that no live process
// holds and that are older than staleAge. Errors are ignored: what cannot
// be removed stays as it was.
func removeTemps(dir string, names []string) {
	for _, n := range names {
		p := filepath.Join(dir, n)
		info, err := os.Lstat(p)
		if err != nil || time.Since(info.ModTime()) < staleAge {
			continue
		}
		lock := tryLock(p)
		if lock == nil {
			continue // a live writer's (or locks do not work here)
		}
		os.RemoveAll(p)
		lock.Close()
	}
}

// splitFinal is filepath.Split with "." for no directory.
func splitFinal(final string) (dir, base string) {
	dir, base = filepath.Split(final)
	if dir == "" {
		dir = "."
	}
	return dir, base
}

// removeStale removes the killed runs' temporary outputs of final (a path).
func removeStale(final string) {
	dir, base := splitFinal(final)
	removeTemps(dir, tempsIn(dir)[base])
}

// staleScan is removeStale for the many files of one Stage: each directory
// is listed once.
type staleScan struct {
	mu   sync.Mutex
	dirs map[string]map[string][]string
}

func (sc *staleScan) remove(final string) {
	dir, base := splitFinal(final)
	sc.mu.Lock()
	if sc.dirs == nil {
		sc.dirs = map[string]map[string][]string{}
	}
	m, ok := sc.dirs[dir]
	if !ok {
		m = tempsIn(dir)
		sc.dirs[dir] = m
	}
	names := m[base]
	delete(m, base)
	sc.mu.Unlock()
	removeTemps(dir, names)
}
