package input

import (
	"fmt"
	"os"
	"runtime"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// Source is where a model's data comes from: HugeCTR's DataReaderParams
// for one of source / eval_source. Open reads it through package dataset.
type Source struct {
	// Format is dataset.Norm, dataset.Raw or dataset.Parquet.
	Format dataset.Format
	// Async, for Raw, is HugeCTR's RawAsync reader with its AsyncParam:
	// the O_DIRECT engine (raw.OpenAsync). Raw read by RawAsync is
	// multi-hot when some slot has more than one key (nnz_per_slot).
	Async *asyncio.Params
	// Path is a file list (Norm, Parquet) or a data file (Raw).
	Path string
	// Paths, when it has more than one entry, are sources read one after
	// another as one pass (HugeCTR's list of training sources: an epoch
	// covers every one in order); Path is then Paths[0].
	Paths []string
	// Check is Norm's framing.
	Check norm.CheckMode
	// SkipCorrupt skips Norm records with a bad check byte.
	SkipCorrupt bool
	// SlotSizeArray is the data's slot_size_array (SPEC §3.3): the device
	// adds its prefix sums to the keys of inputs of hash embeddings (the
	// keys of one-hot embeddings stay slot-local) and checks each key
	// against its slot's size. Empty: keys are used as stored.
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
	// CacheBatches > 0 keeps the first CacheBatches evaluation batches
	// after the first evaluation (HugeCTR cache_eval_data).
	CacheBatches int
	I64Keys      bool
	Workers      int
	Repeat       bool
	Shuffle      bool
	Seed         uint64
}

// FormatName is the format as HugeCTR's configs name it: Norm, Raw,
// Parquet or RawAsync.
func (s *Source) FormatName() string {
	switch s.Format {
	case dataset.Norm:
		return "Norm"
	case dataset.Raw:
		if s.Async != nil {
			return "RawAsync"
		}
		return "Raw"
	case dataset.Parquet:
		return "Parquet"
	}
	return s.Format.String()
}

// ParseFormat reads a format as HugeCTR's configs name it (Norm, Raw,
// Parquet, RawAsync) or as the command line does (norm, raw, parquet,
// raw-async, rawasync): the format and whether RawAsync reads it.
func ParseFormat(name string) (f dataset.Format, async bool, err error) {
	switch name {
	case "Norm", "norm":
		return dataset.Norm, false, nil
	case "Raw", "raw":
		return dataset.Raw, false, nil
	case "Parquet", "parquet":
		return dataset.Parquet, false, nil
	case "RawAsync", "rawasync", "raw-async":
		return dataset.Raw, true, nil
	}
	return 0, false, fmt.Errorf("data format %q (want Norm, Raw, Parquet or RawAsync)", name)
}

// ParseCheck reads Norm's check as HugeCTR's configs name it: Sum (also
// "") or None.
func ParseCheck(name string) (norm.CheckMode, error) {
	switch name {
	case "", "Sum":
		return norm.CheckSum, nil
	case "None":
		return norm.CheckNone, nil
	}
	return 0, fmt.Errorf("check %q is not Sum or None", name)
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
	case dataset.Norm, dataset.Raw, dataset.Parquet:
	default:
		return fmt.Errorf("data format %s (want Norm, Raw, Parquet or RawAsync)", s.Format)
	}
	if s.Async != nil && s.Format != dataset.Raw {
		return fmt.Errorf("the RawAsync reader reads Raw data, not %s", s.Format)
	}
	for _, p := range s.paths() {
		if p == "" {
			return fmt.Errorf("no %s data path", s.FormatName())
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s data: %w", s.FormatName(), err)
		}
	}
	if s.NumSamples < 0 || s.CacheBatches < 0 {
		return fmt.Errorf("negative num_samples %d or cache_eval_data %d", s.NumSamples, s.CacheBatches)
	}
	return nil
}

// SlotOffsets returns the per-slot key offsets of SlotSizeArray (SPEC
// §3.3), or nil.
func (s *Source) SlotOffsets() []int64 { return formats.SlotOffsets(s.SlotSizeArray) }

// ReaderSources maps a JSON config's data section onto the training and
// evaluation sources, refusing by name what ctrkit cannot honour. name is
// the config file (for errors).
func ReaderSources(rp *graph.ReaderParams, in *graph.Input, i64 bool, name string) (train, eval Source, err error) {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%s: layers[0].%s: %s", name, key, fmt.Sprintf(format, args...))
	}
	f, async, err := ParseFormat(rp.Format)
	if err != nil {
		return train, eval, bad("format", "%v", err)
	}
	src := Source{Format: f, SlotSizeArray: rp.SlotSizeArray,
		FloatLabelDense: rp.FloatLabelDense, I64Keys: i64, Workers: rp.NumWorkers}
	if src.Check, err = ParseCheck(rp.Check); err != nil {
		return train, eval, bad("check", "%v", err)
	}
	if async {
		src.Async = &asyncio.Params{}
	}
	isRaw := f == dataset.Raw
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
		if !async {
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
		src.Async = &asyncio.Params{NumThreads: a.NumThreads, NumBatchesPerThread: a.NumBatchesPerThread,
			IOBlockSize: a.IOBlockSize, IODepth: a.IODepth, IOAlignment: a.IOAlignment, Shuffle: a.ShuffleFiles}
		p := src.Async.WithDefaults()
		if err := p.Validate(); err != nil {
			return train, eval, bad("async_param", "%v", err)
		}
		src.Shuffle = a.ShuffleFiles
	}
	switch rp.DenseAligned {
	case "", "None":
	case "Auto":
		if !async {
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
	if eval.Async != nil {
		a := *eval.Async
		a.Shuffle = false // HugeCTR shuffles the training reader only
		eval.Async = &a
	}
	eval.CacheBatches = rp.CacheEvalData
	return train, eval, nil
}

// Schema is the dataset schema of a graph's input in: its label and
// dense widths and one slot per sparse-input slot (MaxNNZ from
// nnz_per_slot; Hotness 1 for fixed-length one-hot slots), keys of type
// kt.
func Schema(in *graph.Input, kt formats.KeyType) formats.Schema {
	var nnz []int
	for _, s := range in.Sparse {
		nnz = append(nnz, s.NNZPerSlot...)
	}
	label := 0
	for _, d := range in.LabelDims {
		label += d
	}
	return formats.NewSchema(label, in.DenseDim, nnz, nil, kt)
}

// Open opens a reader of src in the schema of a graph's input in, in
// batches of batch samples: its sources one after another, the first
// NumSamples samples of them when NumSamples is set. Its keys are as
// stored (slot-local for Raw and Parquet): the Feeder adds slot offsets.
// Readers that lend their batches decode into memory from alloc (the
// Feeder's HostAlloc: pinned memory on the GPU; nil: Go heap).
func Open(src Source, in *graph.Input, batch int, alloc formats.Allocator) (formats.Reader, error) {
	if err := src.Validate(); err != nil {
		return nil, err
	}
	ds, err := src.Sources(in)
	if err != nil {
		return nil, err
	}
	return dataset.OpenSources(ds, formats.Options{BatchSize: batch, Repeat: src.Repeat, Workers: ReaderWorkers(src.Workers, runtime.GOMAXPROCS(0)),
		Shuffle: src.Shuffle, Seed: src.Seed, Alloc: alloc})
}

// ReaderWorkers is the decoding workers of a training reader: workers when
// set (a config's num_workers, --num-workers), else three quarters of the
// cores, at least one. The rest are the training loop's: its goroutine
// launching the step, the Feeder's staging and uploads, the prefetcher and
// the runtime. A reader on every core starves them: on the H200's 16 cores
// (2026-12-02) bf16 DLRM from a 1 M-row Parquet dataset lost 9.1% of its
// resident rate through the pipeline with 16 workers, 2.3% with 12 and
// 1.7% with 8, while `bench read`, alone, is fastest on every core.
func ReaderWorkers(workers, cores int) int {
	if workers > 0 {
		return workers
	}
	return dataset.ReaderShare(cores)
}

// Sources is src as package dataset opens it for a graph's input in: the
// one mapping from a training source (and so from a config's data
// section) to the dataset's spec and the model's schema.
func (src *Source) Sources(in *graph.Input) (dataset.Sources, error) {
	kt := formats.KeyU32
	if src.I64Keys {
		kt = formats.KeyI64
	}
	s := Schema(in, kt)
	if len(src.SlotSizeArray) > 0 {
		if len(src.SlotSizeArray) != len(s.Slots) {
			return dataset.Sources{}, fmt.Errorf("slot_size_array has %d entries, the model %d slots", len(src.SlotSizeArray), len(s.Slots))
		}
		for i := range s.Slots {
			s.Slots[i].Size = src.SlotSizeArray[i]
		}
	}
	ds := dataset.Sources{Paths: src.paths(), NumSamples: src.NumSamples,
		Spec: dataset.Spec{Format: src.Format, KeyType: kt, KeyTypeSet: true, Check: src.Check, CheckSet: true, SkipCorrupt: src.SkipCorrupt}}
	if src.Format != dataset.Raw {
		ds.Schema = s
		return ds, nil
	}
	multi := false
	for _, sp := range in.Sparse {
		for _, n := range sp.NNZPerSlot {
			multi = multi || (n > 1 && sp.MaxFeatureNum == 0)
		}
	}
	ms := s
	s, layout, err := src.RawSchema(s, multi)
	if err != nil {
		return ds, fmt.Errorf("%s: %w", ds.Paths[0], err)
	}
	if layout == raw.OneHot && multi {
		if err := src.checkOneHotFiles(ms, s, ds.Paths); err != nil {
			return ds, err
		}
	}
	ds.Spec.RawLayout, ds.Spec.RawLayoutSet = layout, true
	if src.AlignDense {
		s.DenseDim = src.FileDenseDim
		ds.AlignDense = true
	}
	if src.Async != nil {
		a := *src.Async
		if src.AlignDense {
			a.AlignedType = asyncio.AlignAuto
		}
		ds.Async, ds.AlignDense = &a, false
	}
	ds.Schema = s
	return ds, nil
}

// RawSchema returns the schema and layout a Raw or RawAsync source is read
// in for a model schema s (slot hotness from its nnz_per_slot). multi says
// that the model needs several keys in some slot (an nnz_per_slot above
// 1; ≤ v3.0 configs' max_nnz is a cap, not a count). A one-hot layout
// reads one key per slot whatever nnz_per_slot says, as HugeCTR's Raw
// reader does (v23.09 data_reader_worker_raw.cpp: the sample is slot_num
// int32 keys after label and dense, one key pushed per slot); Sources
// checks the files for multi-hot data then (checkOneHotFiles).
func (src *Source) RawSchema(s formats.Schema, multi bool) (formats.Schema, raw.Layout, error) {
	layout := raw.OneHot
	switch {
	case src.LayoutSet:
		layout = src.Layout
	case src.Async != nil && multi:
		layout = raw.MultiHot
	}
	return src.rawSchema(s, layout)
}

// rawSchema is RawSchema in a given layout.
func (src *Source) rawSchema(s formats.Schema, layout raw.Layout) (formats.Schema, raw.Layout, error) {
	nnz := make([]int, len(s.Slots))
	for i := range s.Slots {
		nnz[i] = 1
		if layout == raw.MultiHot {
			nnz[i] = max(s.Slots[i].MaxNNZ, 1)
		}
	}
	var sizes []int64
	for _, sl := range s.Slots {
		if sl.Size > 0 {
			sizes = append(sizes, sl.Size)
		}
	}
	if len(sizes) != len(s.Slots) {
		sizes = nil
	}
	rs, _, _, err := dataset.RawSchema(dataset.Spec{LabelDim: s.LabelDim, DenseDim: s.DenseDim, NumSlot: len(s.Slots),
		KeyType: s.KeyType, NNZ: nnz, SlotSizeArray: sizes, FloatLabelDense: src.FloatLabelDense,
		RawLayout: layout, RawLayoutSet: true, LabelType: src.LabelType, LabelTypeSet: src.LabelTypeSet,
		DenseType: src.DenseType, DenseTypeSet: src.DenseTypeSet})
	if err != nil {
		return s, layout, err
	}
	return rs, layout, nil
}

// checkOneHotFiles reports Raw files read one-hot (one key per slot, as
// HugeCTR's Raw reader reads them whatever nnz_per_slot says) for a model
// ms with several keys in some slot when they hold the multi-hot samples of
// ms instead (HugeCTR's RawAsync multi_hot_reader layout): a size that
// is not a whole number of one-hot samples but is of multi-hot ones, or,
// with num_samples and no explicit layout, exactly num_samples multi-hot
// samples. one is the one-hot sample schema. A file that cannot be
// stat'ed is left to the reader.
func (src *Source) checkOneHotFiles(ms, one formats.Schema, paths []string) error {
	ss1, err := raw.SampleSize(&one, raw.OneHot)
	if err != nil {
		return err
	}
	multi, _, err := src.rawSchema(ms, raw.MultiHot)
	if err != nil {
		return nil // no multi-hot reading of ms: nothing to point to
	}
	ssm, err := raw.SampleSize(&multi, raw.MultiHot)
	if err != nil || ssm == ss1 {
		return nil
	}
	at := ""
	for i, sl := range ms.Slots {
		if sl.MaxNNZ > 1 {
			at = fmt.Sprintf("slot %d has nnz_per_slot %d", i, sl.MaxNNZ)
			break
		}
	}
	hint := "use format RawAsync (HugeCTR's multi-hot Raw reader) or --raw-layout multihot"
	if src.Async != nil {
		hint = "set async_param.multi_hot_reader true or --raw-layout multihot"
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		n, a, b := fi.Size(), int64(ss1), int64(ssm)
		switch {
		case n%a != 0 && n%b == 0:
			return fmt.Errorf("%s: %d bytes are not a whole number of %d-byte one-hot samples but are %d multi-hot samples of %d bytes (%s): "+
				"%s data is read one-hot, one key per slot whatever nnz_per_slot says (as HugeCTR's Raw reader does); %s",
				p, n, a, n/b, b, at, src.FormatName(), hint)
		case !src.LayoutSet && src.NumSamples > 0 && n%b == 0 && n/b == src.NumSamples: // b > a: a multi-hot sample holds more keys
			return fmt.Errorf("%s: %d bytes are exactly num_samples %d multi-hot samples of %d bytes (%s), not one-hot ones of %d bytes: "+
				"%s data is read one-hot, one key per slot whatever nnz_per_slot says (as HugeCTR's Raw reader does); %s (--raw-layout onehot reads it one-hot)",
				p, n, src.NumSamples, b, at, a, src.FormatName(), hint)
		}
	}
	return nil
}
