//go:build !linux

package asyncio

import "os"

func openFile(path string, direct bool) (File, string, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	f, err := statOpen(fd, false, 0)
	notice := ""
	if direct && err == nil {
		notice = path + ": O_DIRECT is not supported on this system; reading through the page cache"
	}
	return f, notice, err
}
