package formats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
)

// ErrMemory is the error of a size read from a file or a flag that the
// machine cannot hold: a batch, a decoded row group. It is not a
// corruption (the file may be valid); the message says what to lower.
var ErrMemory = errors.New("larger than the memory available")

// AvailableMemory returns the bytes this process can still expect to
// allocate: the least of the memory the kernel reports available
// (/proc/meminfo MemAvailable), the cgroup's memory.max less its usage, and
// the address-space limit (RLIMIT_AS, ulimit -v) less what the Go runtime
// has mapped. It is math.MaxInt64 where none of them is known. The value
// is read once per process (limits do not change under a running command);
// callers compare sizes read from files with it before allocating.
func AvailableMemory() int64 {
	memOnce.Do(func() { memAvail = readAvailableMemory() })
	return memAvail
}

var (
	memOnce  sync.Once
	memAvail int64
)

func readAvailableMemory() int64 {
	avail := int64(math.MaxInt64)
	if v, ok := meminfo("MemAvailable:"); ok {
		avail = min(avail, v)
	}
	if limit, ok := readInt("/sys/fs/cgroup/memory.max"); ok {
		used, _ := readInt("/sys/fs/cgroup/memory.current")
		avail = min(avail, max(limit-used, 0))
	}
	if as, ok := addressSpaceLeft(); ok {
		avail = min(avail, as)
	}
	return avail
}

// meminfo returns the /proc/meminfo field key (kB) in bytes.
func meminfo(key string) (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(key)) {
			continue
		}
		fs := bytes.Fields(line[len(key):])
		if len(fs) == 0 {
			return 0, false
		}
		v, err := strconv.ParseInt(string(fs[0]), 10, 64)
		if err != nil || v < 0 || v > math.MaxInt64>>10 {
			return 0, false
		}
		return v << 10, true
	}
	return 0, false
}

// readInt reads a file holding one decimal number ("max" is not one).
func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return v, err == nil && v >= 0
}

// CheckAlloc returns an ErrMemory error when n bytes (what, for the
// message) are more than half of AvailableMemory: the other half is left to
// the buffers around them. hint says what to lower, e.g. "the batch size
// (--batchsize)".
func CheckAlloc(what string, n int64, hint string) error {
	avail := AvailableMemory()
	if n >= 0 && n <= avail/2 {
		return nil
	}
	msg := fmt.Sprintf("%s needs %s", what, FormatBytes(n))
	if n < 0 {
		msg = what + " needs more bytes than an int64 holds"
	}
	if avail == math.MaxInt64 {
		return fmt.Errorf("%w: %s", ErrMemory, msg)
	}
	if hint != "" {
		hint = "; lower " + hint
	}
	return fmt.Errorf("%w: %s, more than half of the %s available%s", ErrMemory, msg, FormatBytes(avail), hint)
}

// FormatBytes formats n as "12.0 GiB", "512 KiB" or "100 B".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), -1
	for f >= unit && i < 5 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTPE"[i])
}

// MulSize returns a·b·… or -1 when a factor is negative or the product
// overflows an int64.
func MulSize(factors ...int64) int64 {
	p := int64(1)
	for _, f := range factors {
		if f < 0 {
			return -1
		}
		if f != 0 && p > math.MaxInt64/f {
			return -1
		}
		p *= f
	}
	return p
}
