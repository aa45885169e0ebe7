package asyncio

import (
	"io"
	"sync"
	"time"
)

// MemFile is an in-memory File whose reads can be cut short, delayed or
// failed: the fault-injection side of the file seam, for tests of the
// engine and of the readers built on it. Set the fault fields before the
// first read.
type MemFile struct {
	Path string
	Data []byte
	// Short, when > 0, makes every read return at most this many bytes
	// (and no error), as a read interrupted by a signal does.
	Short int
	// FailAt, when ≥ 0, makes a read covering this offset fail with
	// FailErr (EIO, say).
	FailAt  int64
	FailErr error
	// Trunc, when > 0, makes reads see the file as this long, as if it
	// shrank after it was opened (Size still reports len(Data)).
	Trunc int64
	// Delay, when set, is slept before each read, so that reads complete
	// out of order.
	Delay func() time.Duration

	mu     sync.Mutex // guards closed and reads
	closed bool
	reads  int
}

// NewMemFile returns a MemFile of data named path, with no faults.
func NewMemFile(path string, data []byte) *MemFile {
	return &MemFile{Path: path, Data: data, FailAt: -1}
}

// ReadAt implements io.ReaderAt with the configured faults.
func (m *MemFile) ReadAt(p []byte, off int64) (int, error) {
	if m.Delay != nil {
		time.Sleep(m.Delay())
	}
	m.mu.Lock()
	m.reads++
	m.mu.Unlock()
	if m.FailAt >= 0 && off <= m.FailAt && m.FailAt < off+int64(len(p)) {
		return 0, m.FailErr
	}
	size := int64(len(m.Data))
	if m.Trunc > 0 {
		size = m.Trunc
	}
	if off >= size {
		return 0, io.EOF
	}
	n := copy(p, m.Data[off:size])
	if m.Short > 0 && n > m.Short {
		return m.Short, nil
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Close marks the file closed.
func (m *MemFile) Close() error { m.mu.Lock(); m.closed = true; m.mu.Unlock(); return nil }

// Closed reports whether Close was called.
func (m *MemFile) Closed() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.closed }

// Reads returns the number of ReadAt calls so far.
func (m *MemFile) Reads() int { m.mu.Lock(); defer m.mu.Unlock(); return m.reads }

// Name implements File.
func (m *MemFile) Name() string { return m.Path }

// Size implements File.
func (m *MemFile) Size() int64 { return int64(len(m.Data)) }

// Direct implements File: reads are never direct.
func (m *MemFile) Direct() bool { return false }

// BlockSize implements File.
func (m *MemFile) BlockSize() int { return 0 }
