//go:build linux

package bench

import (
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CPUTime returns the process's user+system CPU time.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CachedFraction returns the fraction of the files' pages resident in the
// page cache (mincore over a read-only mapping), or -1 when it cannot tell.
func CachedFraction(paths []string) float64 {
	var cached, total int64
	page := int64(os.Getpagesize())
	seen := map[string]bool{} // a file listed again is looked at once
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		f, err := os.Open(p)
		if err != nil {
			return -1
		}
		st, err := f.Stat()
		if err != nil || st.Size() == 0 {
			f.Close()
			continue
		}
		const chunk = 1 << 30
		for off := int64(0); off < st.Size(); off += chunk {
			n := min(chunk, st.Size()-off)
			m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				f.Close()
				return -1
			}
			vec := make([]byte, (n+page-1)/page)
			if err := mincore(m, vec); err != nil {
				unix.Munmap(m)
				f.Close()
				return -1
			}
			for _, v := range vec {
				if v&1 != 0 {
					cached++
				}
			}
			total += int64(len(vec))
			unix.Munmap(m)
		}
		f.Close()
	}
	if total == 0 {
		return -1
	}
	return float64(cached) / float64(total)
}

func mincore(m, vec []byte) error {
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		return e
	}
	return nil
}

// DropCache asks the kernel to drop the files' clean pages from the page
// cache (posix_fadvise DONTNEED; no privilege needed). It returns the first
// error.
func DropCache(paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
