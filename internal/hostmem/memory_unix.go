//go:build unix

package hostmem

import (
	"bytes"
	"os"
	"runtime/metrics"
	"strconv"

	"golang.org/x/sys/unix"
)

// mappedBytes is the process's virtual size (/proc/self/statm), or what
// the Go runtime has mapped where there is no /proc.
func mappedBytes() int64 {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := bytes.Fields(b); len(f) > 0 {
			if pages, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil && pages >= 0 {
				return pages * int64(os.Getpagesize())
			}
		}
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		return int64(s[0].Value.Uint64())
	}
	return 0
}

// addressSpaceLeft returns RLIMIT_AS less the address space the Go runtime
// has mapped, when a limit is set.
func addressSpaceLeft() (int64, bool) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur > 1<<62 {
		return 0, false
	}
	return max(int64(rl.Cur)-mappedBytes(), 0), true
}
