package model

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// memoryLimit is the smallest of the physical memory (/proc/meminfo
// MemTotal), the cgroup's memory limit (v2 memory.max, v1
// memory.limit_in_bytes) and RLIMIT_AS.
func memoryLimit() (int64, string) {
	var best int64
	what := ""
	take := func(n int64, w string) {
		if n > 0 && (best == 0 || n < best) {
			best, what = n, w
		}
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				fs := strings.Fields(rest)
				if len(fs) > 0 {
					if kb, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
						take(kb<<10, "physical memory")
					}
				}
			}
		}
		f.Close()
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n < 1<<60 {
				take(n, "cgroup memory limit")
			}
		}
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &rl); err == nil && rl.Cur != ^uint64(0) && rl.Cur < 1<<62 {
		take(int64(rl.Cur), "RLIMIT_AS")
	}
	return best, what
}
