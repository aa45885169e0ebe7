package parquet

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// streamWindow is the initial window of a chunkStream. A row group's
// column chunks are read side by side, rowChunk rows at a time, so one
// decoding task holds a window per selected column (40 in the Criteo shape:
// 10 MiB) rather than whole chunks; a compressed page larger than the window
// is read into the task's scratch instead. 256 KiB is the pool's smallest
// size class cut from huge pages: smaller windows cost a fresh reader a
// page fault per 4 KiB.
var streamWindow = 256 << 10

// maxPageHeader bounds how far a page header may reach; numeric columns'
// headers (statistics of at most 8-byte values) are a few dozen bytes.
const maxPageHeader = 1 << 20

// chunkStream reads one column chunk, the file's bytes [start, end), through
// a window refilled with pread (ReadAt). Reading page cache through pread
// into a reused window costs one copy at memory speed; a fresh mapping of
// the file instead paid a first-touch cost per 4 KiB page that, in virtual
// machines, made it several times slower.
//
//	file:  … consumed | buf[lo:hi]: read, not yet consumed | [off, end): not yet read | …
type chunkStream struct {
	f      *os.File
	path   string
	off    int64 // next file byte to read
	end    int64 // end of the column chunk in the file
	buf    []byte
	lo, hi int
	// short, when set, has load read only the bytes asked for (at least
	// shortRead) rather than a whole window: the decoder sets it while the
	// chunk's pages are larger than the window, whose bodies are read
	// into scratch straight from the file (read), so that a window load
	// for a page header would copy the body's head twice.
	short bool
}

// shortRead is the least a short load reads: a page header and then some.
const shortRead = 4096

// avail is the number of unconsumed bytes in the window.
func (s *chunkStream) avail() int { return s.hi - s.lo }

// left is the number of bytes of the chunk not yet consumed.
func (s *chunkStream) left() int64 { return int64(s.hi-s.lo) + s.end - s.off }

// errShortFile reports a column chunk that runs past the end of its file
// (truncated, possibly while being read).
var errShortFile = errors.New("column chunk runs past the end of the file")

// fill makes at least k bytes (k ≤ left()) available in the window; see
// load.
func (s *chunkStream) fill(pool *poolAllocator, k int) error {
	if k <= s.avail() {
		return nil
	}
	return s.load(pool, k)
}

// load moves the unconsumed bytes to the window's start (so that buf[lo] is
// 64-byte aligned) and reads as much of the chunk as the window holds, at
// least k bytes in all (k ≤ left()); the window grows from pool when k
// exceeds it. Slices of the window taken before are invalid afterwards.
func (s *chunkStream) load(pool *poolAllocator, k int) error {
	if int64(k) > s.left() {
		return fmt.Errorf("%w: %d bytes needed at offset %d, the chunk ends at %d", errShortFile, k, s.off-int64(s.avail()), s.end)
	}
	if k > len(s.buf) {
		nb := pool.Allocate(max(k, 2*len(s.buf), streamWindow))
		nb = nb[:cap(nb)]
		copy(nb, s.buf[s.lo:s.hi])
		if s.buf != nil {
			pool.Free(s.buf)
		}
		s.buf = nb
	} else {
		copy(s.buf, s.buf[s.lo:s.hi])
	}
	s.hi -= s.lo
	s.lo = 0
	n := int(min(int64(len(s.buf)-s.hi), s.end-s.off))
	if s.short {
		n = min(n, max(k-s.hi, shortRead))
	}
	got, err := s.f.ReadAt(s.buf[s.hi:s.hi+n], s.off)
	s.hi += got
	s.off += int64(got)
	if got < n {
		if err == nil || err == io.EOF {
			err = errShortFile
		}
		return fmt.Errorf("reading %s at offset %d: %w", s.path, s.off, err)
	}
	return nil
}

// take consumes n available bytes and returns them; they stay valid until
// the next fill.
func (s *chunkStream) take(n int) []byte {
	b := s.buf[s.lo : s.lo+n : s.lo+n]
	s.lo += n
	return b
}

// read consumes len(p) bytes (≤ left()) into p: those in the window, then
// the rest straight from the file, leaving the window empty.
func (s *chunkStream) read(p []byte) error {
	n := copy(p, s.buf[s.lo:s.hi])
	s.lo += n
	if n == len(p) {
		return nil
	}
	if int64(len(p)-n) > s.end-s.off {
		return fmt.Errorf("%w: %d bytes needed at offset %d, the chunk ends at %d", errShortFile, len(p)-n, s.off, s.end)
	}
	got, err := s.f.ReadAt(p[n:], s.off)
	s.off += int64(got)
	if got < len(p)-n {
		if err == nil || err == io.EOF {
			err = errShortFile
		}
		return fmt.Errorf("reading %s at offset %d: %w", s.path, s.off, err)
	}
	return nil
}

// skip consumes n bytes (n ≤ left()), reading past those not in the window.
func (s *chunkStream) skip(n int64) {
	if a := int64(s.avail()); n > a {
		s.off += n - a
		s.lo = s.hi
		return
	}
	s.lo += int(n)
}

// release returns the window to pool.
func (s *chunkStream) release(pool *poolAllocator) {
	if s.buf != nil {
		pool.Free(s.buf)
	}
	*s = chunkStream{}
}
