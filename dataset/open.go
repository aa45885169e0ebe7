package dataset

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// Sources is a dataset as a training job names it (HugeCTR's
// DataReaderParams): one or more sources read one after another as one
// pass, in a schema the job gives (the model's), not one detected from the
// files. OpenSources reads it.
type Sources struct {
	// Spec gives the format (Norm, Raw or Parquet), Norm's check mode, the
	// Raw layout and SkipCorrupt. Its SlotSizeArray is not applied: keys
	// reach the trainer slot-local (the device adds offsets once).
	Spec Spec
	// Paths are file lists (Norm, Parquet) or data files (Raw), read in
	// order as one pass (HugeCTR's list of training sources). A source's
	// last partial batch stays partial (HugeCTR starts each source anew).
	Paths []string
	// Schema is the schema batches have; the readers check each file
	// against it. For Raw it is the file's sample (RawSchema), with the
	// file's dense width when dense values are aligned.
	Schema formats.Schema
	// Async, for Raw, reads with HugeCTR's RawAsync engine (raw.OpenAsync:
	// O_DIRECT unless Async.Buffered, its AlignedType padding the dense
	// width) instead of the synchronous reader.
	Async *asyncio.Params
	// AlignDense pads the synchronous Raw reader's dense width to a
	// multiple of 8 (RawAsync's aligned_type Auto with Async nil).
	AlignDense bool
	// NumSamples > 0 reads the first NumSamples samples of each pass; data
	// holding fewer is an error.
	NumSamples int64
	// Window, when set, reads only samples [Lo, Hi) of every batch (the
	// Raw readers' raw.Options.Window; one Raw file): a
	// process's part of each global batch. NumSamples is then left to the
	// caller (it counts the global batch's samples), and only checked
	// against the file's count.
	Window raw.Window
	// Files, when Parts > 1, reads only files Part, Part+Parts, … (from
	// 0) of each file list (Norm, Parquet) or of Paths (Raw data files):
	// one process's files with --data-shard files. A list with fewer files
	// than Parts is an error, and so is NumSamples.
	Files FilePart
}

// FilePart is a part of a list of files: those at Part, Part+Parts, ….
type FilePart struct{ Part, Parts int }

// pick returns part f of files; what names the list in errors.
func (f FilePart) pick(files []string, what string) ([]string, error) {
	if f.Parts <= 1 {
		return files, nil
	}
	if f.Part < 0 || f.Part >= f.Parts {
		return nil, fmt.Errorf("file part %d of %d", f.Part, f.Parts)
	}
	if len(files) < f.Parts {
		return nil, fmt.Errorf("%s has %d %s for %d readers, each of which reads its own files: give at least %d files", what,
			len(files), map[bool]string{true: "file", false: "files"}[len(files) == 1], f.Parts, f.Parts)
	}
	var out []string
	for i := f.Part; i < len(files); i += f.Parts {
		out = append(out, files[i])
	}
	return out, nil
}

// OpenSources opens src with the reader options o (batch size, repeat,
// workers, shuffle and seed, Alloc for the batches readers lend). The
// reader lends its batches (formats.Lender) when the format's reader does
// (Parquet, RawAsync): a trainer reads them with Next, into memory from
// o.Alloc, without a copy.
func OpenSources(src Sources, o formats.Options) (formats.Reader, error) {
	if len(src.Paths) == 0 {
		return nil, fmt.Errorf("no %s data path", src.Spec.Format)
	}
	o.SlotSizeArray = nil
	if src.Window.Set() {
		switch {
		case src.Spec.Format != Raw:
			return nil, fmt.Errorf("a window of each batch is read from Raw files only, not %s", src.Spec.Format)
		case len(src.Paths) != 1:
			return nil, fmt.Errorf("a window of each batch is read from one Raw file, not %d", len(src.Paths))
		}
		return openSource(&src, src.Paths[0], o)
	}
	if src.Files.Parts > 1 {
		if src.NumSamples > 0 {
			return nil, fmt.Errorf("num_samples %d with each reader reading its own files: the readers would read %d samples each", src.NumSamples, src.NumSamples)
		}
		if src.Spec.Format == Raw {
			paths, err := src.Files.pick(src.Paths, "the Raw source list")
			if err != nil {
				return nil, err
			}
			src.Paths = paths
		}
	}
	if len(src.Paths) == 1 && src.NumSamples == 0 {
		return openSource(&src, src.Paths[0], o)
	}
	first, err := openSource(&src, src.Paths[0], o)
	if err != nil {
		return nil, err
	}
	c := &chain{src: &src, o: o, cur: first}
	if _, ok := first.(formats.Lender); ok {
		return &lendingChain{c}, nil
	}
	return c, nil
}

// openSource opens one source of src.
func openSource(src *Sources, path string, o formats.Options) (formats.Reader, error) {
	s := src.Schema.Clone()
	sp := &src.Spec
	if src.Spec.Format == Raw {
		if src.Async != nil {
			r, err := raw.OpenAsync(path, &s, raw.AsyncOptions{Options: o, Layout: sp.RawLayout, Async: *src.Async, Window: src.Window})
			if err != nil {
				return nil, err
			}
			if src.NumSamples > r.NumSamples() && !o.Repeat {
				r.Close()
				return nil, fmt.Errorf("%s holds %d samples, fewer than num_samples %d", path, r.NumSamples(), src.NumSamples)
			}
			return r, nil
		}
		ro := raw.Options{Options: o, Layout: sp.RawLayout, AlignDense: src.AlignDense}
		ro.Window = src.Window
		r, err := raw.Open(path, &s, ro)
		if err != nil {
			return nil, err
		}
		if src.NumSamples > r.NumSamples() && !o.Repeat {
			r.Close()
			return nil, fmt.Errorf("%s holds %d samples, fewer than num_samples %d", path, r.NumSamples(), src.NumSamples)
		}
		return r, nil
	}
	var files, all []string
	if src.Files.Parts > 1 && (sp.Format == Norm || sp.Format == Parquet) {
		var err error
		if all, err = formats.ReadFileList(path); err != nil {
			return nil, fmt.Errorf("opening %s file list: %w", sp.Format, err)
		}
		if files, err = src.Files.pick(all, "file list "+path); err != nil {
			return nil, err
		}
	}
	switch sp.Format {
	case Norm:
		no := norm.Options{Options: o, KeyType: s.KeyType, Check: sp.Check, SkipCorrupt: sp.SkipCorrupt}
		if files != nil {
			return norm.OpenFiles(files, &s, no)
		}
		return norm.OpenList(path, &s, no)
	case Parquet:
		po := parquet.Options{Options: o, KeyType: s.KeyType}
		if files != nil {
			meta, err := parquet.ReadMetadata(filepath.Join(filepath.Dir(all[0]), parquet.MetadataName))
			if err != nil {
				return nil, err
			}
			return parquet.OpenFiles(files, meta, &s, po)
		}
		return parquet.OpenList(path, &s, po)
	}
	return nil, fmt.Errorf("%s: training reads Norm, Raw or Parquet data, not %s", path, sp.Format)
}

// chain reads several sources one after another and stops after
// NumSamples samples (when > 0).
type chain struct {
	src  *Sources
	o    formats.Options
	next int // index of cur in src.Paths
	cur  formats.Reader
	read int64
	done bool          // cur has ended; the next read opens the next source
	view formats.Batch // a lent batch cut to NumSamples
}

func (c *chain) Schema() *formats.Schema { return c.cur.Schema() }

func (c *chain) Read(b *formats.Batch) (int, error) {
	for {
		if err := c.switchIfDone(); err != nil {
			return 0, err
		}
		if c.src.NumSamples > 0 && c.read >= c.src.NumSamples {
			b.SetLen(0)
			return 0, io.EOF
		}
		n, err := c.cur.Read(b)
		if c.src.NumSamples > 0 && c.read+int64(n) > c.src.NumSamples {
			n = int(c.src.NumSamples - c.read)
			b.SetLen(n)
		}
		if err = c.count(n, err); err != nil || n > 0 {
			return n, err
		}
	}
}

// count counts n samples read with err and returns the error to report:
// the end of a source is io.EOF only after the last one (a short pass is
// an error then); otherwise the next read opens the next source.
func (c *chain) count(n int, err error) error {
	c.read += int64(n)
	if !errors.Is(err, io.EOF) {
		return err
	}
	if c.next+1 >= len(c.src.Paths) || c.src.NumSamples > 0 && c.read >= c.src.NumSamples {
		if c.src.NumSamples > 0 && c.read < c.src.NumSamples {
			return fmt.Errorf("the data holds %d samples, fewer than num_samples %d", c.read, c.src.NumSamples)
		}
		return io.EOF
	}
	c.done = true
	return nil
}

// switchIfDone opens the next source once the current one has ended (not
// before: a lent batch of the current one stays valid until then).
func (c *chain) switchIfDone() error {
	if !c.done {
		return nil
	}
	c.done = false
	c.cur.Close()
	c.next++
	r, err := openSource(c.src, c.src.Paths[c.next], c.o)
	if err != nil {
		c.cur = eofReader{c.cur.Schema()}
		return err
	}
	c.cur = r
	return nil
}

func (c *chain) Close() error { return c.cur.Close() }

// lendingChain is a chain of lending readers.
type lendingChain struct{ *chain }

func (c *lendingChain) Next() (*formats.Batch, error) {
	for {
		if err := c.switchIfDone(); err != nil {
			return nil, err
		}
		if c.src.NumSamples > 0 && c.read >= c.src.NumSamples {
			return nil, io.EOF
		}
		l, ok := c.cur.(formats.Lender)
		if !ok {
			return nil, io.EOF // a source that failed to open
		}
		b, err := l.Next()
		n := 0
		if b != nil {
			n = b.N
			if c.src.NumSamples > 0 && c.read+int64(n) > c.src.NumSamples {
				n = int(c.src.NumSamples - c.read)
				c.view = *b
				c.view.SetLen(n)
				b = &c.view
			}
		}
		if err = c.count(n, err); err != nil || n > 0 {
			if n == 0 {
				b = nil
			}
			return b, err
		}
	}
}

// eofReader stands in for a source that failed to open.
type eofReader struct{ s *formats.Schema }

func (e eofReader) Schema() *formats.Schema        { return e.s }
func (eofReader) Read(*formats.Batch) (int, error) { return 0, io.EOF }
func (eofReader) Close() error                     { return nil }
