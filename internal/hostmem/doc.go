// Package hostmem provides host memory for ctrkit's readers and writers:
// aligned, huge-page-backed buffers (AlignedAlloc) for batches, O_DIRECT
// reads and row-group slabs, copies with non-temporal stores into memory
// this core will not read again (StreamCopy), and the memory budget (Available, CheckAlloc,
// ErrMemory) that sizes read from files or flags are checked against before
// anything is allocated.
//
// It imports nothing of ctrkit. The data model (formats) and the I/O engine
// (asyncio) import it; it is internal so that the module's public API stays
// formats' Allocator.
package hostmem
