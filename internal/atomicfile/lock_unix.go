//go:build unix

package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// tryLock opens path (a file or a directory) and takes an exclusive flock
// on it without waiting; it returns the open file holding the lock (closed
// to release it), or nil when the lock is held elsewhere or cannot be
// taken.
func tryLock(path string) *os.File {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil
	}
	return f
}
