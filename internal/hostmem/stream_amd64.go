package hostmem

// streamBlocks is in stream_amd64.s.
//
//go:noescape
func streamBlocks(dst, src *byte, n int)

// Streaming reports whether StreamCopy uses non-temporal stores here.
const Streaming = true
