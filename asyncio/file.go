package asyncio

import (
	"io"
	"os"
)

// File is what the reader needs of a file. *os.File satisfies ReadAt and
// Close; OpenFile adds the rest.
type File interface {
	io.ReaderAt
	io.Closer
	// Name is the path used in errors.
	Name() string
	// Size is the file size in bytes.
	Size() int64
	// Direct reports whether reads bypass the page cache (O_DIRECT).
	Direct() bool
	// BlockSize is the device's logical block size (the O_DIRECT
	// alignment); 0 when unknown or not direct.
	BlockSize() int
}

// osFile is an opened OS file.
type osFile struct {
	*os.File
	size   int64
	direct bool
	block  int
}

func (f *osFile) Size() int64    { return f.size }
func (f *osFile) Direct() bool   { return f.direct }
func (f *osFile) BlockSize() int { return f.block }

// OpenFile opens path for reading, with O_DIRECT when direct is true and the
// file system accepts it. notice is non-empty when O_DIRECT was asked for
// but refused and the file was opened for buffered reads instead.
func OpenFile(path string, direct bool) (f File, notice string, err error) {
	return openFile(path, direct)
}

func statOpen(fd *os.File, direct bool, block int) (File, error) {
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, err
	}
	return &osFile{File: fd, size: st.Size(), direct: direct, block: block}, nil
}
