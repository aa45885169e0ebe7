package input

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"unsafe"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// DataShard is how the ranks of a run share the reading of the data
// (ctrkit train --data-shard; docs/MULTI_GPU.md).
type DataShard uint8

const (
	// ShardNone: every rank reads all of the data (each takes its block
	// of every global batch).
	ShardNone DataShard = iota
	// ShardSamples: rank r of W reads samples [r·B_g/W, (r+1)·B_g/W) of
	// every global batch (only those bytes of the Raw file) and the ranks
	// all-gather their parts, so every rank holds the global batch one
	// reader reads: training is exactly that of ShardNone.
	ShardSamples
	// ShardFiles: rank r reads files r, r+W, … of the source's file list
	// in batches of B_g/W; the global batch is the ranks' batches in rank
	// order. The sample order differs from one reader's.
	ShardFiles
)

// ParseDataShard reads --data-shard's value: none, samples or files.
func ParseDataShard(s string) (DataShard, error) {
	switch s {
	case "", "none":
		return ShardNone, nil
	case "samples":
		return ShardSamples, nil
	case "files":
		return ShardFiles, nil
	}
	return ShardNone, fmt.Errorf("--data-shard %q (want none, samples or files)", s)
}

func (d DataShard) String() string {
	switch d {
	case ShardNone:
		return "none"
	case ShardSamples:
		return "samples"
	case ShardFiles:
		return "files"
	}
	return fmt.Sprintf("DataShard(%d)", uint8(d))
}

// Exchanger is one rank's all-gather of byte strings of any length over
// the ranks (collective.Gatherer): every rank calls AllGatherBytes as
// often, and gets every rank's bytes in rank order.
type Exchanger interface {
	Rank() int
	Size() int
	AllGatherBytes(b []byte) ([][]byte, error)
	// Close ends the exchanger; a pending AllGatherBytes returns at once.
	Close() error
}

// Shard is one rank's share of the reading (OpenShard).
type Shard struct {
	Mode DataShard
	// X exchanges the ranks' parts; its Rank and Size are the rank's.
	X Exchanger
	// Where names a rank in messages ("process 1 (rank 1)"); nil: "rank r".
	Where func(rank int) string
}

func (sh *Shard) where(r int) string {
	if sh.Where != nil {
		return sh.Where(r)
	}
	return fmt.Sprintf("rank %d", r)
}

// CheckShard refuses a source that mode cannot shard, naming the flag:
// samples reads a part of each batch from one Raw or RawAsync file only
// (fixed-size records); files
// needs a file list (Norm, Parquet) or several Raw files, and no
// NumSamples, and with ranks > 1 at least ranks files in each list.
func CheckShard(src *Source, mode DataShard, ranks int) error {
	switch mode {
	case ShardNone:
		return nil
	case ShardSamples:
		switch {
		case src.Format != dataset.Raw:
			return fmt.Errorf("--data-shard samples reads a part of every batch from Raw files (fixed-size records), not %s data: use --data-shard files (each process its own files) or none", src.FormatName())
		case len(src.paths()) > 1:
			return fmt.Errorf("--data-shard samples reads one Raw file, the source lists %d: use --data-shard files or none", len(src.paths()))
		}
	case ShardFiles:
		if src.NumSamples > 0 {
			return fmt.Errorf("--data-shard files with num_samples %d: each process would read its own first %d samples; remove num_samples or use --data-shard samples", src.NumSamples, src.NumSamples)
		}
		if src.Format == dataset.Raw {
			if len(src.paths()) < 2 {
				return fmt.Errorf("--data-shard files: the Raw source is one file (%s): each process reads its own files; give several Raw sources, or use --data-shard samples", src.paths()[0])
			}
			if ranks > 1 && len(src.paths()) < ranks {
				return fmt.Errorf("--data-shard files: %d Raw sources for %d ranks, each of which reads its own files: give at least %d, or use --data-shard samples", len(src.paths()), ranks, ranks)
			}
			return nil
		}
		if ranks > 1 {
			for _, p := range src.paths() {
				files, err := formats.ReadFileList(p)
				if err != nil {
					return fmt.Errorf("--data-shard files: %w", err)
				}
				if len(files) < ranks {
					return fmt.Errorf("--data-shard files: file list %s has %d %s for %d ranks, each of which reads its own files: give at least %d files, or use --data-shard none",
						p, len(files), map[bool]string{true: "file", false: "files"}[len(files) == 1], ranks, ranks)
				}
			}
		}
	default:
		return fmt.Errorf("--data-shard %s", mode)
	}
	return nil
}

// OpenShard opens sh's rank's share of src (as Open; batch is the global
// batch B_g, which the rank count must divide) and returns a reader of
// the global batches: its Read exchanges the ranks' parts (sh.X) and
// returns the global batch, so that the pipeline, prefetcher and staging
// read it as any reader (it copies into the caller's batch: it lends
// none). The reader's Close closes sh.X too; when OpenShard fails, sh.X is
// left as it was (unused).
func OpenShard(src Source, in *graph.Input, batch int, sh Shard) (formats.Reader, error) {
	if err := src.Validate(); err != nil {
		return nil, err
	}
	if err := CheckShard(&src, sh.Mode, sh.X.Size()); err != nil {
		return nil, err
	}
	w, r := sh.X.Size(), sh.X.Rank()
	if w < 1 || batch%w != 0 {
		return nil, fmt.Errorf("--data-shard %s: batch size %d does not split over %d ranks", sh.Mode, batch, w)
	}
	local := batch / w
	ds, err := src.Sources(in)
	if err != nil {
		return nil, err
	}
	o := formats.Options{BatchSize: batch, Repeat: src.Repeat, Workers: ReaderWorkers(src.Workers, runtime.GOMAXPROCS(0)), Shuffle: src.Shuffle, Seed: src.Seed}
	switch sh.Mode {
	case ShardSamples:
		ds.Window = raw.Window{Lo: r * local, Hi: (r + 1) * local}
	case ShardFiles:
		ds.Files = dataset.FilePart{Part: r, Parts: w}
		o.BatchSize = local
	default:
		return nil, fmt.Errorf("--data-shard %s: OpenShard of no sharding", sh.Mode)
	}
	inner, err := dataset.OpenSources(ds, o)
	if err != nil {
		return nil, fmt.Errorf("--data-shard %s: %s: %w", sh.Mode, sh.where(r), err)
	}
	buf, err := formats.NewBatch(inner.Schema(), o.BatchSize, nil)
	if err != nil {
		inner.Close()
		return nil, err
	}
	sr := &shardReader{sh: sh, inner: inner, buf: buf, local: local, batch: batch}
	if sh.Mode == ShardSamples {
		sr.limit = src.NumSamples // the global batches' samples, as one reader's chain counts them
	}
	return sr, nil
}

// shardReader is OpenShard's reader.
type shardReader struct {
	sh           Shard
	inner        formats.Reader
	buf          *formats.Batch
	local, batch int
	ended        bool  // the inner reader reported io.EOF
	err          error // sticky
	batches      int64 // global batches returned
	limit, done  int64 // NumSamples (samples mode) and the samples returned
	parts        []part
}

func (s *shardReader) Schema() *formats.Schema { return s.inner.Schema() }

// NumSamples is the source's sample count with --data-shard samples (the
// Raw file's or num_samples, as one reader's), unknown (0) with files.
func (s *shardReader) NumSamples() int64 {
	if s.limit > 0 {
		return s.limit
	}
	if c, ok := s.inner.(interface{ NumSamples() int64 }); ok && s.sh.Mode == ShardSamples {
		return c.NumSamples()
	}
	return 0
}

func (s *shardReader) Close() error {
	s.sh.X.Close()
	err := s.inner.Close()
	if s.buf != nil {
		s.buf.Free()
		s.buf = nil
	}
	if s.err == nil {
		s.err = errors.New("reader closed")
	}
	return err
}

// The part header: flags, samples, label and dense widths, slots, key
// bytes, keys; then labels, dense, the offsets, the keys (or, with
// partError, the error's text).
const (
	partHeader = 4 * 8
	partEOF    = 1
	partError  = 2
)

type part struct {
	flags, n, label, dense, slots, keySize int
	keys                                   int
	labels, denseV, offsets, keyBytes      []byte
	msg                                    string
}

func f32Bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

func i32Bytes(v []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

func keyBytes(b *formats.Batch) []byte {
	if b.Keys64 != nil {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b.Keys64))), 8*len(b.Keys64))
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b.Keys32))), 4*len(b.Keys32))
}

// encode is this rank's part: b's n samples with flags, or an error.
func encode(b *formats.Batch, n, flags int, rerr error) []byte {
	sc := b.Schema
	S := len(sc.Slots)
	var body [][]byte
	keys := 0
	if rerr != nil {
		flags |= partError
		n = 0
		body = [][]byte{[]byte(rerr.Error())}
	} else if n > 0 {
		keys = b.NumKeys()
		body = [][]byte{f32Bytes(b.Labels[:n*sc.LabelDim]), f32Bytes(b.Dense[:n*sc.DenseDim]), i32Bytes(b.Offsets[:n*S+1]), keyBytes(b)}
	}
	size := partHeader
	for _, x := range body {
		size += len(x)
	}
	out := make([]byte, partHeader, size)
	for i, v := range []int{flags, n, sc.LabelDim, sc.DenseDim, S, sc.KeyType.Size(), keys, 0} {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
	}
	for _, x := range body {
		out = append(out, x...)
	}
	return out
}

// decode reads rank r's part p.
func (s *shardReader) decode(r int, p []byte) (part, error) {
	bad := func(format string, a ...any) (part, error) {
		return part{}, fmt.Errorf("--data-shard %s: %s sent a damaged data part (%s)", s.sh.Mode, s.sh.where(r), fmt.Sprintf(format, a...))
	}
	if len(p) < partHeader {
		return bad("%d bytes", len(p))
	}
	var h [8]int
	for i := range h {
		h[i] = int(binary.LittleEndian.Uint32(p[4*i:]))
	}
	x := part{flags: h[0], n: h[1], label: h[2], dense: h[3], slots: h[4], keySize: h[5], keys: h[6]}
	body := p[partHeader:]
	if x.flags&partError != 0 {
		x.msg = string(body)
		return x, nil
	}
	sc := s.Schema()
	if x.label != sc.LabelDim || x.dense != sc.DenseDim || x.slots != len(sc.Slots) || x.keySize != sc.KeyType.Size() {
		return part{}, fmt.Errorf("--data-shard %s: %s reads %d labels, %d dense values and %d slots of %d-byte keys a sample, %s %d, %d and %d of %d-byte keys: do all processes run the same config and data?",
			s.sh.Mode, s.sh.where(r), x.label, x.dense, x.slots, x.keySize, s.sh.where(s.sh.X.Rank()), sc.LabelDim, sc.DenseDim, len(sc.Slots), sc.KeyType.Size())
	}
	if x.n > s.batch {
		return bad("%d samples, more than the batch of %d", x.n, s.batch)
	}
	if x.n == 0 {
		return x, nil
	}
	sizes := []int{4 * x.n * x.label, 4 * x.n * x.dense, 4 * (x.n*x.slots + 1), x.keySize * x.keys}
	total := 0
	for _, z := range sizes {
		total += z
	}
	if x.keys < 0 || len(body) != total {
		return bad("%d bytes for %d samples and %d keys", len(p), x.n, x.keys)
	}
	cut := func(n int) []byte { b := body[:n]; body = body[n:]; return b }
	x.labels, x.denseV, x.offsets, x.keyBytes = cut(sizes[0]), cut(sizes[1]), cut(sizes[2]), cut(sizes[3])
	offs := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(x.offsets))), x.n*x.slots+1)
	prev := offs[0]
	for _, o := range offs {
		if o < prev {
			return bad("decreasing key offsets")
		}
		prev = o
	}
	if int(offs[len(offs)-1]-offs[0]) != x.keys {
		return bad("offsets for %d keys, %d keys sent", offs[len(offs)-1]-offs[0], x.keys)
	}
	return x, nil
}

// Read reads this rank's part, exchanges the parts and fills b with the
// global batch (see OpenShard).
func (s *shardReader) Read(b *formats.Batch) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.read(b)
	if err != nil {
		s.err = err
	}
	return n, err
}

func (s *shardReader) read(b *formats.Batch) (int, error) {
	mode := s.sh.Mode
	if s.limit > 0 && s.done >= s.limit {
		b.SetLen(0)
		return 0, io.EOF // every rank stops here: the same counts
	}
	for {
		n, flags := 0, 0
		var rerr error
		if s.ended {
			flags = partEOF
		} else {
			n, rerr = s.inner.Read(s.buf)
			if errors.Is(rerr, io.EOF) {
				rerr, s.ended = nil, true
				if n == 0 {
					flags = partEOF
				}
			}
		}
		all, err := s.sh.X.AllGatherBytes(encode(s.buf, n, flags, rerr))
		if err != nil {
			return 0, fmt.Errorf("--data-shard %s: exchanging global batch %d between the processes: %w", mode, s.batches, err)
		}
		if rerr != nil {
			return 0, rerr
		}
		s.parts = s.parts[:0]
		eofs, total, keys := 0, 0, 0
		for r, p := range all {
			x, err := s.decode(r, p)
			if err != nil {
				return 0, err
			}
			if x.flags&partError != 0 {
				return 0, fmt.Errorf("--data-shard %s: %s failed reading its part of global batch %d: %s", mode, s.sh.where(r), s.batches, x.msg)
			}
			if x.flags&partEOF != 0 {
				eofs++
			}
			s.parts = append(s.parts, x)
			total += x.n
			keys += x.keys
		}
		if eofs == len(all) {
			b.SetLen(0)
			return 0, io.EOF
		}
		if mode == ShardSamples {
			if err := s.checkSamples(eofs); err != nil {
				return 0, err
			}
		}
		if total == 0 {
			continue // files: readers still going returned nothing yet
		}
		if total > b.Cap() {
			return 0, fmt.Errorf("--data-shard %s: the ranks' parts hold %d samples, the batch %d", mode, total, b.Cap())
		}
		if err := s.assemble(b, total, keys); err != nil {
			return 0, fmt.Errorf("--data-shard %s: global batch %d: %w", mode, s.batches, err)
		}
		if s.limit > 0 && s.done+int64(total) > s.limit {
			total = int(s.limit - s.done)
			b.SetLen(total)
		}
		s.done += int64(total)
		s.batches++
		return total, nil
	}
}

// checkSamples checks the parts of one batch read by windows: every
// rank's window of the same batch, so none ended alone, each at most
// B_g/W samples, and the parts full up to the last non-empty one.
func (s *shardReader) checkSamples(eofs int) error {
	mode := s.sh.Mode
	if eofs > 0 {
		for r, x := range s.parts {
			if x.flags&partEOF == 0 {
				for q, y := range s.parts {
					if y.flags&partEOF != 0 {
						return fmt.Errorf("--data-shard %s: %s reached the end of its data at global batch %d, %s did not: do all processes read the same file with the same batch size and seed?",
							mode, s.sh.where(q), s.batches, s.sh.where(r))
					}
				}
			}
		}
	}
	for r, x := range s.parts {
		if x.n > s.local {
			return fmt.Errorf("--data-shard %s: global batch %d: %s read %d samples, more than its part of %d: do all processes run with the same batch size?",
				mode, s.batches, s.sh.where(r), x.n, s.local)
		}
		if r > 0 && x.n > 0 && s.parts[r-1].n < s.local {
			return fmt.Errorf("--data-shard %s: global batch %d: %s read %d samples after %s read %d of %d (the parts fill the batch in rank order): do all processes read the same file?",
				mode, s.batches, s.sh.where(r), x.n, s.sh.where(r-1), s.parts[r-1].n, s.local)
		}
	}
	return nil
}

// assemble writes the parts into b in rank order.
func (s *shardReader) assemble(b *formats.Batch, total, keys int) error {
	b.SetLen(0)
	if err := b.ReserveKeys(keys); err != nil {
		return err
	}
	labels, dense, offsets, k32, k64 := b.Full()
	var kb []byte
	if k64 != nil {
		kb = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(k64))), 8*len(k64))
	} else {
		kb = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(k32))), 4*len(k32))
	}
	lb, db := f32Bytes(labels), f32Bytes(dense)
	li, di, ki, oi := 0, 0, 0, 0
	base := int32(0)
	offsets[0] = 0
	for _, x := range s.parts {
		if x.n == 0 {
			continue
		}
		li += copy(lb[li:], x.labels)
		di += copy(db[di:], x.denseV)
		ki += copy(kb[ki:], x.keyBytes)
		offs := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(x.offsets))), x.n*x.slots+1)
		for j := 1; j < len(offs); j++ {
			oi++
			offsets[oi] = base + offs[j] - offs[0]
		}
		base = offsets[oi]
	}
	b.SetLen(total)
	return nil
}
