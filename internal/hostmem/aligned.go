package hostmem

import "unsafe"

// HugePage is the size of a transparent huge page (x86-64, and arm64 with
// 4 KiB pages).
const HugePage = 2 << 20

// AlignedAlloc returns n bytes of Go heap memory aligned to align (a power
// of two ≤ HugePage). A buffer of HugePage bytes or more starts on a huge
// page boundary and is advised to be backed by huge pages (Linux
// madvise(MADV_HUGEPAGE); a no-op elsewhere or where the kernel has none):
// first touching large buffers, and pinning them for O_DIRECT, is then an
// order of magnitude cheaper. The page of slack it is allocated with is
// never touched.
func AlignedAlloc(n, align int) []byte {
	if n < HugePage {
		buf := make([]byte, n+align)
		off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & uintptr(align-1))
		return buf[off : off+n : off+n]
	}
	m := (n + HugePage - 1) &^ (HugePage - 1)
	buf := make([]byte, m+HugePage)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & (HugePage - 1))
	adviseHuge(buf[off : off+m])
	return buf[off : off+n : off+n]
}
