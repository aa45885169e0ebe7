package criteo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/ctrkit/ctrkit/formats"
)

// chunk is a run of whole lines of one file and, once a worker has parsed
// it, their samples. The producer owns it between receiving it from free and
// sending it on order and work; a worker owns it until it signals ready; the
// consumer owns it from then until it sends it back on free.
type chunk struct {
	buf   []byte // capacity chunkSize
	text  []byte // whole lines, aliasing buf
	path  string
	off   int64 // byte offset of text[0] in its file
	rec   int64 // data line index of text's first line in its file
	sep   byte
	lines int // lines in text (the last may lack its '\n')

	n       int       // samples parsed
	labels  []float32 // [n]
	dense   []float32 // [n·nd], only with wantDense
	keys    []uint64  // [n·nc]: mapped keys (offsets added), or CatValues
	skipped int64     // bad lines skipped (SkipBad)
	clamped int64     // dense values clamped to int32
	err     error     // after the n samples: a parse or producer error
	ready   chan struct{}
}

// mapping turns categorical values into keys in a worker.
type mapping struct {
	buckets []int64 // hashing, or
	vocab   *Vocab  // vocabulary, or neither: values pass through
	offsets []int64 // slot offsets added to keys (nil: none)
}

func (m *mapping) key(s int, v uint64) uint64 {
	var k uint64
	switch {
	case m.buckets != nil:
		k = uint64(Hash(v, m.buckets[s]))
	case m.vocab != nil:
		k = uint64(m.vocab.ID(s, v))
	default:
		return v
	}
	if m.offsets != nil {
		k += uint64(m.offsets[s])
	}
	return k
}

// pipeline parses text files in parallel with ordered output: one producer
// goroutine cuts the files into chunks of whole lines, workers parse chunks,
// and the consumer (next) takes chunks in the order they were cut, waiting
// for each to be parsed. Memory is bounded by the fixed set of chunks
// circulating through free.
type pipeline struct {
	paths     []string
	layout    Layout // with defaults
	repeat    bool
	wantDense bool
	m         mapping
	chunkSize int

	cancel context.CancelFunc
	ctx    context.Context
	g      *errgroup.Group
	free   chan *chunk
	work   chan *chunk
	order  chan *chunk
}

func startPipeline(paths []string, l Layout, repeat, wantDense bool, m mapping, workers, nchunks, chunkSize int) *pipeline {
	p := &pipeline{paths: paths, layout: l, repeat: repeat, wantDense: wantDense, m: m, chunkSize: chunkSize}
	p.free = make(chan *chunk, nchunks)
	p.work = make(chan *chunk, nchunks)
	p.order = make(chan *chunk, nchunks)
	for i := 0; i < nchunks; i++ {
		c := &chunk{buf: make([]byte, chunkSize), ready: make(chan struct{}, 1)}
		p.free <- c
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.g, p.ctx = errgroup.WithContext(ctx)
	p.g.Go(p.produce)
	for w := 0; w < workers; w++ {
		p.g.Go(p.parseLoop)
	}
	return p
}

// stop cancels the goroutines and waits for them.
func (p *pipeline) stop() {
	p.cancel()
	p.g.Wait()
}

// next returns the next parsed chunk in order, or io.EOF after the last.
func (p *pipeline) next() (*chunk, error) {
	select {
	case <-p.ctx.Done():
		return nil, ErrClosed
	case c, ok := <-p.order:
		if !ok {
			return nil, io.EOF
		}
		select {
		case <-p.ctx.Done():
			return nil, ErrClosed
		case <-c.ready:
			return c, nil
		}
	}
}

// release returns a chunk taken from next.
func (p *pipeline) release(c *chunk) {
	c.n, c.skipped, c.clamped, c.err, c.text = 0, 0, 0, nil, nil
	p.free <- c // never blocks: free holds every chunk
}

func (p *pipeline) getFree() (*chunk, error) {
	select {
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	case c := <-p.free:
		return c, nil
	}
}

// emit sends a cut chunk to the consumer and, unless it only carries an
// error, to the workers.
func (p *pipeline) emit(c *chunk) error {
	select {
	case <-p.ctx.Done():
		return p.ctx.Err()
	case p.order <- c:
	}
	if c.err != nil {
		c.ready <- struct{}{}
		return nil
	}
	select {
	case <-p.ctx.Done():
		return p.ctx.Err()
	case p.work <- c:
	}
	return nil
}

var utf8BOM = []byte("\xef\xbb\xbf")

// errStop tells produce that an error chunk has been emitted.
var errStop = errors.New("stop")

func (p *pipeline) fail(err error) error {
	c, gerr := p.getFree()
	if gerr != nil {
		return gerr
	}
	c.err = err
	if e := p.emit(c); e != nil {
		return e
	}
	return errStop
}

func (p *pipeline) produce() error {
	defer close(p.order)
	defer close(p.work)
	carry := make([]byte, 0, p.chunkSize)
	for {
		var lines int64
		for _, path := range p.paths {
			n, err := p.produceFile(path, &carry)
			if err == errStop {
				return nil
			}
			if err != nil {
				return err
			}
			lines += n
		}
		if !p.repeat {
			return nil
		}
		if lines == 0 {
			err := p.fail(fmt.Errorf("no data lines to repeat in %d files", len(p.paths)))
			if err == errStop {
				return nil
			}
			return err
		}
	}
}

// produceFile cuts one file into chunks and returns its number of data lines.
func (p *pipeline) produceFile(path string, carry *[]byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, p.fail(&formats.Error{Format: "criteo", Path: path, Offset: -1, Record: -1, Op: "open", Err: err})
	}
	defer f.Close()
	var off, rec int64
	*carry = (*carry)[:0]
	first, eof := true, false
	sep := p.layout.Format.sep()
	for !eof {
		c, err := p.getFree()
		if err != nil {
			return rec, err
		}
		buf := c.buf[:cap(c.buf)]
		k := copy(buf, *carry)
		n, rerr := io.ReadFull(f, buf[k:])
		n += k
		switch rerr {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			eof = true
		default:
			p.free <- c
			return rec, p.fail(&formats.Error{Format: "criteo", Path: path, Offset: off + int64(n), Record: -1, Op: "reading", Err: rerr})
		}
		text := buf[:n]
		if !eof {
			i := bytes.LastIndexByte(text, '\n')
			if i < 0 {
				p.free <- c
				return rec, p.fail(formats.Errorf("criteo", path, off, rec, formats.ErrSchema,
					"line longer than %d bytes", p.chunkSize))
			}
			*carry = append((*carry)[:0], text[i+1:]...)
			text = text[:i+1]
		}
		if first && bytes.HasPrefix(text, utf8BOM) {
			text = text[len(utf8BOM):]
			off += int64(len(utf8BOM))
		}
		if first && len(text) > 0 {
			first = false
			line := text
			if i := bytes.IndexByte(text, '\n'); i >= 0 {
				line = text[:i]
			}
			if sep == 0 {
				switch {
				case bytes.IndexByte(line, '\t') >= 0:
					sep = '\t'
				case bytes.IndexByte(line, ',') >= 0:
					sep = ','
				default:
					p.free <- c
					return rec, p.fail(formats.Errorf("criteo", path, 0, -1, formats.ErrSchema,
						"first line has neither tabs nor commas (%s)", quote(line)))
				}
			}
			if isHeader(line, sep) {
				if err := checkHeader(line, sep, p.layout.NumDense, p.layout.NumCat, p.layout.AnyHeader); err != nil {
					p.free <- c
					return rec, p.fail(&formats.Error{Format: "criteo", Path: path, Offset: 0, Record: -1, Op: "header", Err: err})
				}
				adv := min(len(line)+1, len(text))
				text = text[adv:]
				off += int64(adv)
			}
		}
		if len(text) == 0 {
			p.free <- c
			continue
		}
		lines := bytes.Count(text, []byte{'\n'})
		if text[len(text)-1] != '\n' {
			lines++
		}
		c.text, c.path, c.off, c.rec, c.sep, c.lines = text, path, off, rec, sep, lines
		off += int64(len(text))
		rec += int64(lines)
		if err := p.emit(c); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

func (p *pipeline) parseLoop() error {
	l := p.layout
	s := Sample{Dense: make([]int32, l.NumDense), Cat: make([]uint64, l.NumCat)}
	for {
		select {
		case <-p.ctx.Done():
			return p.ctx.Err()
		case c, ok := <-p.work:
			if !ok {
				return nil
			}
			p.parse(c, &s)
			c.ready <- struct{}{}
		}
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// parse parses the lines of c into its sample arrays.
func (p *pipeline) parse(c *chunk, s *Sample) {
	nd, nc := len(s.Dense), len(s.Cat)
	c.labels = grow(c.labels, c.lines)
	if p.wantDense {
		c.dense = grow(c.dense, c.lines*nd)
	}
	c.keys = grow(c.keys, c.lines*nc)
	text, off, rec := c.text, c.off, c.rec
	for len(text) > 0 {
		line, adv := text, len(text)
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, adv = text[:i], i+1
		}
		cl, err := ParseLine(s, line, c.sep)
		switch {
		case err != nil && p.layout.SkipBad:
			c.skipped++
		case err != nil:
			c.err = &formats.Error{Format: "criteo", Path: c.path, Offset: off, Record: rec, Err: err}
			return
		default:
			i := c.n
			c.labels[i] = s.Label
			if p.wantDense {
				d := c.dense[i*nd : (i+1)*nd]
				for j, x := range s.Dense {
					d[j] = formats.DenseFromInt32(x)
				}
			}
			k := c.keys[i*nc : (i+1)*nc]
			for j, v := range s.Cat {
				k[j] = p.m.key(j, v)
			}
			c.clamped += int64(cl)
			c.n++
		}
		text = text[adv:]
		off += int64(adv)
		rec++
	}
}
