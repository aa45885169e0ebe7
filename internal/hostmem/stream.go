package hostmem

import "unsafe"

// streamMin is the shortest copy StreamCopy streams; a shorter one is
// copied through the cache.
const streamMin = 256

// StreamCopy copies min(len(dst), len(src)) bytes from src to dst like
// copy, with non-temporal stores on amd64 (MOVNTDQ, then SFENCE) for the
// 16-byte-aligned, 64-byte multiple middle of dst: the bytes go to memory
// without first reading dst's cache lines, and without evicting the cache.
// That halves the memory traffic of filling a large buffer that this core
// will not read again soon (a batch another goroutine or the device reads)
// from a small, cache-resident one. The bytes are visible to other
// goroutines, like any store, once the channel operation or lock that
// hands dst over happens after StreamCopy returns. dst and src must not
// overlap. Elsewhere StreamCopy is copy.
func StreamCopy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if !Streaming || n < streamMin {
		return copy(dst, src[:n])
	}
	head := int(-uintptr(unsafe.Pointer(unsafe.SliceData(dst))) & 15)
	body := (n - head) &^ 63
	copy(dst[:head], src[:head])
	streamBlocks(unsafe.SliceData(dst[head:]), unsafe.SliceData(src[head:]), body)
	copy(dst[head+body:n], src[head+body:n])
	return n
}
