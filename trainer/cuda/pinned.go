package cuda

// PinnedAllocator is a formats.Allocator handing out pinned host memory of
// one device's context (portable, so any context may copy from it): batches
// decoded into it upload at full PCIe speed with asynchronous copies.
type PinnedAllocator struct{ Dev *Device }

// Alloc returns n bytes of pinned memory (64-byte aligned: cuMemHostAlloc
// returns page-aligned blocks and the cache hands whole blocks out).
func (a PinnedAllocator) Alloc(n int) ([]byte, error) {
	var b []byte
	err := a.Dev.Do(func(c *Ctx) error {
		var err error
		b, err = c.HostAlloc(n)
		return err
	})
	return b, err
}

// Free returns b to the device's pinned cache.
func (a PinnedAllocator) Free(b []byte) {
	a.Dev.Do(func(c *Ctx) error { return c.HostFree(b) })
}
