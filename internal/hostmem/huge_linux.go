//go:build linux

package hostmem

import "golang.org/x/sys/unix"

// adviseHuge asks for transparent huge pages for b (ignored where the
// kernel has none).
func adviseHuge(b []byte) { unix.Madvise(b, unix.MADV_HUGEPAGE) }
