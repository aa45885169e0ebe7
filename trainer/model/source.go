package model

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// Source is where a model's data comes from: HugeCTR's DataReaderParams
// for one of source / eval_source.
type Source struct {
	// Format is Norm, Raw (one-hot), Parquet or RawAsync (multi-hot when
	// some slot has more than one key, one key per slot of nnz_per_slot).
	Format string
	// Path is a file list (Norm, Parquet) or a data file (Raw).
	Path string
	// Paths, when it has more than one entry, are sources read one after
	// another as one pass (HugeCTR's list of training sources: an epoch
	// covers every one in order); Path is then Paths[0].
	Paths []string
	// Check is Norm's framing: "Sum" or "None".
	Check string
	// SkipCorrupt skips Norm records with a bad check byte.
	SkipCorrupt bool
	// SlotSizeArray adds slot offsets to keys (SPEC §3.3); empty: none.
	SlotSizeArray []int64
	// FloatLabelDense: Raw labels and dense values are float32 (else
	// int32). The settings below override it per value.
	FloatLabelDense bool
	// Layout is the Raw layout when LayoutSet; otherwise Raw is one-hot and
	// RawAsync multi-hot when some slot holds several keys.
	Layout    raw.Layout
	LayoutSet bool
	// LabelType and DenseType of Raw values when set. Otherwise one-hot
	// files take both from FloatLabelDense; multi-hot files (HugeCTR's
	// RawAsync multi_hot_reader) have int32 labels always and float32 dense
	// values when FloatLabelDense.
	LabelType, DenseType       formats.ValueType
	LabelTypeSet, DenseTypeSet bool
	// AlignDense is RawAsync's dense.aligned Auto: the file's FileDenseDim
	// dense values are padded with zeros to the model's dense width, a
	// multiple of 8 (Job pads the model's input).
	AlignDense   bool
	FileDenseDim int
	// NumSamples > 0 reads the first NumSamples samples of each pass
	// (HugeCTR Raw num_samples); a source holding fewer is an error.
	NumSamples int64
	// CacheBatches > 0 keeps the first CacheBatches evaluation batches in
	// memory after the first evaluation (HugeCTR cache_eval_data).
	CacheBatches int
	I64Keys      bool
	Workers      int
	Repeat       bool
	Shuffle      bool
	Seed         uint64
}

// paths returns the sources in read order.
func (s *Source) paths() []string {
	if len(s.Paths) > 0 {
		return s.Paths
	}
	return []string{s.Path}
}

// Validate reports an unusable source: an unknown format, no path, or a
// path that does not exist.
func (s *Source) Validate() error {
	switch s.Format {
	case "Norm", "Raw", "RawAsync", "Parquet":
	default:
		return fmt.Errorf("data format %q (want Norm, Raw, Parquet or RawAsync)", s.Format)
	}
	for _, p := range s.paths() {
		if p == "" {
			return fmt.Errorf("no %s data path", s.Format)
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s data: %w", s.Format, err)
		}
	}
	if s.NumSamples < 0 || s.CacheBatches < 0 {
		return fmt.Errorf("negative num_samples %d or cache_eval_data %d", s.NumSamples, s.CacheBatches)
	}
	return nil
}

// SlotOffsets returns the per-slot key offsets the source's readers add
// (for Options.SlotOffsets), or nil.
func (s *Source) SlotOffsets() []int64 {
	if len(s.SlotSizeArray) == 0 {
		return nil
	}
	off := make([]int64, len(s.SlotSizeArray))
	var o int64
	for i, v := range s.SlotSizeArray {
		off[i] = o
		o += v
	}
	return off
}

// ReaderSources maps a JSON config's data section onto the training and
// evaluation sources, refusing by name what ctrkit cannot honour. name is
// the config file (for errors).
func ReaderSources(rp *graph.ReaderParams, in *graph.Input, i64 bool, name string) (train, eval Source, err error) {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%s: layers[0].%s: %s", name, key, fmt.Sprintf(format, args...))
	}
	src := Source{Format: rp.Format, Check: rp.Check, SlotSizeArray: rp.SlotSizeArray,
		FloatLabelDense: rp.FloatLabelDense, I64Keys: i64, Workers: rp.NumWorkers}
	isRaw := rp.Format == "Raw" || rp.Format == "RawAsync"
	if rp.FloatLabelDense && !isRaw {
		return train, eval, bad("float_label_dense", "only Raw and RawAsync data have int32 or float32 values (format is %s)", rp.Format)
	}
	if (rp.NumSamples > 0 || rp.EvalNumSamples > 0) && !isRaw {
		return train, eval, bad("num_samples", "HugeCTR reads num_samples and eval_num_samples only for Raw data (format is %s): remove them", rp.Format)
	}
	if rp.NumSamples < 0 || rp.EvalNumSamples < 0 {
		return train, eval, bad("num_samples", "negative sample count")
	}
	if a := rp.Async; a != nil {
		if rp.Format != "RawAsync" {
			return train, eval, bad("async_param", "only for format RawAsync (format is %s)", rp.Format)
		}
		if a.MultiHotReaderSet {
			src.Layout, src.LayoutSet = raw.OneHot, true
			if a.MultiHotReader {
				src.Layout = raw.MultiHot
			}
		}
		if a.IsDenseFloatSet {
			src.DenseType, src.DenseTypeSet = formats.Int32, true
			if a.IsDenseFloat {
				src.DenseType = formats.Float32
			}
			if a.MultiHotReaderSet && !a.MultiHotReader && a.IsDenseFloat {
				// HugeCTR: "One-hot RawAsync Reader only supports int32 dense type".
				return train, eval, bad("async_param.is_dense_float", "the one-hot RawAsync reader (multi_hot_reader false) reads int32 dense values only")
			}
		}
		src.Shuffle = a.ShuffleFiles
	}
	switch rp.DenseAligned {
	case "", "None":
	case "Auto":
		if rp.Format != "RawAsync" {
			return train, eval, bad("dense.aligned", "only for format RawAsync")
		}
		src.AlignDense, src.FileDenseDim = true, in.DenseDim
	default:
		return train, eval, bad("dense.aligned", "%q is not Auto or None", rp.DenseAligned)
	}
	train, eval = src, src
	train.Paths = rp.Source
	if len(rp.Source) > 0 {
		train.Path = rp.Source[0]
	}
	train.NumSamples = rp.NumSamples
	eval.Path, eval.NumSamples, eval.Shuffle = rp.EvalSource, rp.EvalNumSamples, false
	eval.CacheBatches = rp.CacheEvalData
	return train, eval, nil
}

// Open opens a reader of src in the model's schema, in batches of the
// model's batch size: its sources one after another, the first NumSamples
// samples of them when NumSamples is set.
func (m *Model) Open(src Source) (formats.Reader, error) {
	if err := src.Validate(); err != nil {
		return nil, err
	}
	ps := src.paths()
	if len(ps) == 1 && src.NumSamples == 0 {
		return m.openPath(src, ps[0])
	}
	first, err := m.openPath(src, ps[0])
	if err != nil {
		return nil, err
	}
	return &chainReader{m: m, src: src, paths: ps, cur: first}, nil
}

// RawSchema returns the schema and layout a Raw or RawAsync source is read
// in for a model schema s (slot hotness from its nnz_per_slot). multi says
// that the model needs several keys in some slot (an nnz_per_slot above
// 1; ≤ v3.0 configs' max_nnz is a cap, not a count).
func (src *Source) RawSchema(s formats.Schema, multi bool) (formats.Schema, raw.Layout, error) {
	layout := raw.OneHot
	switch {
	case src.LayoutSet:
		layout = src.Layout
	case src.Format == "RawAsync" && multi:
		layout = raw.MultiHot
	}
	if layout == raw.OneHot && multi {
		at := "the model's nnz_per_slot"
		for i, sl := range s.Slots {
			if sl.MaxNNZ > 1 && multi {
				at = fmt.Sprintf("slot %d has nnz_per_slot %d", i, sl.MaxNNZ)
				break
			}
		}
		hint := "use format RawAsync (HugeCTR's multi-hot Raw reader) or --raw-layout multihot"
		if src.Format == "RawAsync" {
			hint = "set async_param.multi_hot_reader true or --raw-layout multihot"
		}
		return s, layout, fmt.Errorf("%s data is one-hot (one key per slot), but %s: %s", src.Format, at, hint)
	}
	for i := range s.Slots {
		s.Slots[i].Hotness = 1
		if layout == raw.MultiHot {
			s.Slots[i].Hotness = max(s.Slots[i].MaxNNZ, 1)
		}
		s.Slots[i].MaxNNZ = s.Slots[i].Hotness
	}
	s.LabelType, s.DenseType = formats.Int32, formats.Int32
	if src.FloatLabelDense {
		s.DenseType = formats.Float32
		if layout == raw.OneHot {
			s.LabelType = formats.Float32
		}
	}
	if src.LabelTypeSet {
		s.LabelType = src.LabelType
	}
	if src.DenseTypeSet {
		s.DenseType = src.DenseType
	}
	return s, layout, nil
}

func (m *Model) openPath(src Source, path string) (formats.Reader, error) {
	kt := formats.KeyU32
	if src.I64Keys {
		kt = formats.KeyI64
	}
	s := m.Schema(kt)
	if len(src.SlotSizeArray) > 0 {
		if len(src.SlotSizeArray) != len(s.Slots) {
			return nil, fmt.Errorf("slot_size_array has %d entries, the model %d slots", len(src.SlotSizeArray), len(s.Slots))
		}
		for i := range s.Slots {
			s.Slots[i].Size = src.SlotSizeArray[i]
		}
	}
	fo := formats.Options{BatchSize: m.batch, Repeat: src.Repeat, Workers: src.Workers,
		SlotSizeArray: src.SlotSizeArray, Shuffle: src.Shuffle, Seed: src.Seed}
	switch src.Format {
	case "Norm":
		o := norm.Options{Options: fo, KeyType: kt, SkipCorrupt: src.SkipCorrupt}
		if src.Check == "" || src.Check == "Sum" {
			o.Check = norm.CheckSum
		}
		return norm.OpenList(path, &s, o)
	case "Parquet":
		return parquet.OpenList(path, &s, parquet.Options{Options: fo, KeyType: kt})
	}
	multi := false
	for _, sp := range m.Graph.Input.Sparse {
		for _, n := range sp.NNZPerSlot {
			multi = multi || (n > 1 && sp.MaxFeatureNum == 0)
		}
	}
	s, layout, err := src.RawSchema(s, multi)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	o := raw.Options{Options: fo, Layout: layout}
	if src.AlignDense {
		s.DenseDim, o.AlignDense = src.FileDenseDim, true
	}
	r, err := raw.Open(path, &s, o)
	if err != nil {
		return nil, err
	}
	if src.NumSamples > r.NumSamples() && !src.Repeat {
		r.Close()
		return nil, fmt.Errorf("%s holds %d samples, fewer than num_samples %d", path, r.NumSamples(), src.NumSamples)
	}
	return r, nil
}

// chainReader reads several sources one after another and stops after
// left samples (when > 0). A source's last partial batch stays partial
// (HugeCTR starts each source anew).
type chainReader struct {
	m     *Model
	src   Source
	paths []string
	next  int
	cur   formats.Reader
	read  int64
}

func (c *chainReader) Schema() *formats.Schema { return c.cur.Schema() }

func (c *chainReader) Read(b *formats.Batch) (int, error) {
	for {
		if c.src.NumSamples > 0 && c.read >= c.src.NumSamples {
			b.SetLen(0)
			return 0, io.EOF
		}
		n, err := c.cur.Read(b)
		if c.src.NumSamples > 0 && c.read+int64(n) > c.src.NumSamples {
			n = int(c.src.NumSamples - c.read)
			b.SetLen(n)
		}
		c.read += int64(n)
		if !errors.Is(err, io.EOF) {
			return n, err
		}
		if c.next+1 >= len(c.paths) {
			if c.src.NumSamples > 0 && c.read < c.src.NumSamples {
				return n, fmt.Errorf("the data holds %d samples, fewer than num_samples %d", c.read, c.src.NumSamples)
			}
			return n, io.EOF
		}
		c.cur.Close()
		c.next++
		r, oerr := c.m.openPath(c.src, c.paths[c.next])
		if oerr != nil {
			c.cur = eofReader{c.cur.Schema()}
			return n, oerr
		}
		c.cur = r
		if n > 0 {
			return n, nil
		}
	}
}

func (c *chainReader) Close() error { return c.cur.Close() }

// eofReader stands in for a source that failed to open.
type eofReader struct{ s *formats.Schema }

func (e eofReader) Schema() *formats.Schema        { return e.s }
func (eofReader) Read(*formats.Batch) (int, error) { return 0, io.EOF }
func (eofReader) Close() error                     { return nil }
