//go:build !amd64

package hostmem

func streamBlocks(dst, src *byte, n int) { panic("hostmem: no streaming stores on this architecture") }

// Streaming reports whether StreamCopy uses non-temporal stores here.
const Streaming = false
