//go:build linux

package asyncio

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func openFile(path string, direct bool) (File, string, error) {
	if !direct {
		fd, err := os.Open(path)
		if err != nil {
			return nil, "", err
		}
		f, err := statOpen(fd, false, 0)
		return f, "", err
	}
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) {
			fd, err2 := os.Open(path)
			if err2 != nil {
				return nil, "", err2
			}
			f, err2 := statOpen(fd, false, 0)
			return f, fmt.Sprintf("%s: the file system refused O_DIRECT (%v); reading through the page cache", path, err), err2
		}
		return nil, "", err
	}
	f, err := statOpen(fd, true, logicalBlockSize(fd))
	return f, "", err
}

// logicalBlockSize finds the logical block size of the device holding fd
// from sysfs (the partition's parent queue when fd is on a partition), 512
// when it cannot tell.
func logicalBlockSize(fd *os.File) int {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd.Fd()), &st); err != nil {
		return 512
	}
	maj, min := unix.Major(st.Dev), unix.Minor(st.Dev)
	base := fmt.Sprintf("/sys/dev/block/%d:%d/", maj, min)
	for _, p := range []string{base + "queue/logical_block_size", base + "../queue/logical_block_size"} {
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 && n&(n-1) == 0 {
				return n
			}
		}
	}
	return 512
}
