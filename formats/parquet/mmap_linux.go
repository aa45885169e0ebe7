package parquet

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of f read-only.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, os.ErrInvalid
	}
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func unmapFile(b []byte) { unix.Munmap(b) }

// populate maps in the file pages of m[off:off+n] (already in the page
// cache, or read now) in one call rather than one page fault per page;
// errors (kernels before 5.14) are ignored: the pages then fault in as they
// are read.
func populate(m []byte, off, n int64) {
	lo := off &^ int64(os.Getpagesize()-1)
	if n > 0 && lo >= 0 && off+n <= int64(len(m)) {
		unix.Madvise(m[lo:off+n], unix.MADV_POPULATE_READ)
	}
}
