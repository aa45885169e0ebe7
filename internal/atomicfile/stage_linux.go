package atomicfile

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// exchange swaps the directories a and b atomically.
func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// mountPoint reports whether the directory dir is on another device than
// its parent (a mount point cannot be renamed).
func mountPoint(dir string) bool {
	var a, b unix.Stat_t
	if unix.Stat(dir, &a) != nil || unix.Stat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}
