package datagen

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// Format is the output format of a generation run.
type Format int

const (
	// Norm is HugeCTR's Norm format (SPEC §2): train/gen_<k>.data files and
	// a file list.
	Norm Format = iota
	// Parquet is the NVTabular layout (SPEC §4): train/gen_<k>.parquet,
	// _metadata.json and a file list.
	Parquet
	// Raw is HugeCTR's Raw format (SPEC §3): exactly two files, Source and
	// EvalSource.
	Raw
	// Criteo is Criteo-style text: tab-separated label, DenseDim integers
	// and NumSlot 8-hex-digit categoricals per line, train/gen_<k>.txt files
	// and a file list (not a HugeCTR format).
	Criteo
)

var formatNames = []string{"norm", "parquet", "raw", "criteo"}

// String returns "norm", "parquet", "raw" or "criteo".
func (f Format) String() string {
	if f >= 0 && int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat accepts the names String returns, case-insensitively.
func ParseFormat(s string) (Format, error) {
	for i, n := range formatNames {
		if strings.EqualFold(s, n) {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("unknown format %q (want norm, parquet, raw or criteo)", s)
}

// DistType is HugeCTR's Distribution_t: how keys are drawn.
type DistType int

const (
	// DistPowerLaw draws keys by the inverse-CDF formula of SPEC §5.
	DistPowerLaw DistType = iota
	// DistUniform draws keys uniformly in the slot's range.
	DistUniform
)

// String returns "powerlaw" or "uniform".
func (d DistType) String() string {
	if d == DistUniform {
		return "uniform"
	}
	return "powerlaw"
}

// ParseDistType accepts "powerlaw" and "uniform".
func ParseDistType(s string) (DistType, error) {
	switch strings.ToLower(s) {
	case "powerlaw", "power-law", "power_law":
		return DistPowerLaw, nil
	case "uniform":
		return DistUniform, nil
	}
	return 0, fmt.Errorf("unknown distribution %q (want powerlaw or uniform)", s)
}

// PowerLawType is HugeCTR's PowerLaw_t: a preset exponent, or Specific
// (Params.Alpha).
type PowerLawType int

const (
	// Specific uses Params.Alpha (HugeCTR's default).
	Specific PowerLawType = iota
	// Long is α = 0.9.
	Long
	// Medium is α = 1.1.
	Medium
	// Short is α = 1.3.
	Short
)

var powerLawNames = []string{"specific", "long", "medium", "short"}

// String returns "specific", "long", "medium" or "short".
func (t PowerLawType) String() string {
	if t >= 0 && int(t) < len(powerLawNames) {
		return powerLawNames[t]
	}
	return fmt.Sprintf("PowerLawType(%d)", int(t))
}

// ParsePowerLawType accepts the names String returns.
func ParsePowerLawType(s string) (PowerLawType, error) {
	for i, n := range powerLawNames {
		if strings.EqualFold(s, n) {
			return PowerLawType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown power-law type %q (want long, medium, short or specific)", s)
}

// LabelMode says how labels are made.
type LabelMode int

const (
	// Planted draws 0/1 labels from a hidden logistic model over the
	// sample's keys and dense values (the default; see the package doc).
	Planted LabelMode = iota
	// UniformLabels reproduces HugeCTR's values: uniform floats in [0, 1)
	// for Norm and Parquet, label = i mod 2 and dense j = j for Raw.
	UniformLabels
)

// String returns "planted" or "uniform".
func (m LabelMode) String() string {
	if m == UniformLabels {
		return "uniform"
	}
	return "planted"
}

// ParseLabelMode accepts "planted" and "uniform".
func ParseLabelMode(s string) (LabelMode, error) {
	switch strings.ToLower(s) {
	case "planted":
		return Planted, nil
	case "uniform":
		return UniformLabels, nil
	}
	return 0, fmt.Errorf("unknown label mode %q (want planted or uniform)", s)
}

// ParseRawLayout parses a --raw-layout value: "auto" or "" (set is
// false: the nnz_array decides), or a raw.ParseLayout name.
func ParseRawLayout(s string) (l raw.Layout, set bool, err error) {
	switch strings.ToLower(s) {
	case "auto", "":
		return raw.OneHot, false, nil
	}
	if l, err = raw.ParseLayout(strings.ToLower(s)); err != nil {
		return 0, false, fmt.Errorf("unknown raw layout %q (want auto, onehot or multihot)", s)
	}
	return l, true, nil
}

// Params are HugeCTR's DataGeneratorParams (SPEC §5) plus ctrkit's
// additions. Field names follow HugeCTR's parameters; DefaultParams gives
// HugeCTR's defaults. JSON tags are the HugeCTR parameter names.
type Params struct {
	Format        Format  `json:"-"`
	LabelDim      int     `json:"label_dim"`
	DenseDim      int     `json:"dense_dim"`
	NumSlot       int     `json:"num_slot"`
	I64InputKey   bool    `json:"i64_input_key"`
	Source        string  `json:"source"`
	EvalSource    string  `json:"eval_source"`
	SlotSizeArray []int64 `json:"slot_size_array"`
	// NNZArray holds the max nnz per slot; empty means 1 for every slot.
	NNZArray []int `json:"nnz_array"`
	// CheckType is the Norm files' record framing (HugeCTR's Check_t);
	// DefaultParams sets norm.CheckSum, HugeCTR's default. One enum
	// serves datagen, norm, dataset and cmd: norm.CheckMode, whose values
	// are the Norm header's error_check.
	CheckType    norm.CheckMode `json:"-"`
	DistType     DistType       `json:"-"`
	PowerLawType PowerLawType   `json:"-"`
	// Alpha is the exponent when PowerLawType is Specific (> 0, ≠ 1).
	Alpha float64 `json:"alpha"`
	// NumFiles, EvalNumFiles and NumSamplesPerFile size the Norm, Parquet
	// and Criteo outputs.
	NumFiles          int `json:"num_files"`
	EvalNumFiles      int `json:"eval_num_files"`
	NumSamplesPerFile int `json:"num_samples_per_file"`
	// NumSamples and EvalNumSamples size the two Raw files.
	NumSamples     int64 `json:"num_samples"`
	EvalNumSamples int64 `json:"eval_num_samples"`
	// FloatLabelDense stores Raw labels and dense values as float32
	// instead of int32.
	FloatLabelDense bool `json:"float_label_dense"`

	// Seed is the master seed; every file's stream is derived from it.
	Seed      uint64    `json:"seed"`
	LabelMode LabelMode `json:"-"`
	// Threads bounds the goroutines generating and writing (0: GOMAXPROCS).
	// It never changes the output.
	Threads int `json:"-"`
	// RawLayout is the Raw sample layout when RawLayoutSet; otherwise
	// EffectiveRawLayout picks raw.MultiHot when some nnz_array entry is
	// above 1, else raw.OneHot (the same enum and Set pattern as
	// dataset.Spec).
	RawLayout    raw.Layout `json:"-"`
	RawLayoutSet bool       `json:"-"`
	// MissingRate is the probability that a Criteo text field (dense or
	// categorical) is empty.
	MissingRate float64 `json:"missing_rate"`
	// ParquetWriter is the Parquet files' encoding (compression, row group
	// size, cat column type, dictionary pages; the zero value: snappy
	// PLAIN pages of 128Ki-row groups, int64 cats; `ctrkit gen` sets
	// Dictionary unless --dictionary=false). Files is ignored: the
	// generator commits its files as a unit.
	ParquetWriter parquet.WriterOptions `json:"-"`
}

// HugeCTR's DataGeneratorParams defaults (SPEC §5).
const (
	DefaultAlpha             = 1.2
	DefaultNumFiles          = 128
	DefaultEvalNumFiles      = 32
	DefaultNumSamplesPerFile = 40960
	DefaultNumSamples        = 5242880
	DefaultEvalNumSamples    = 1310720
	// DefaultMissingRate is the rate of empty Criteo text fields.
	DefaultMissingRate = 0.1
)

// DefaultParams returns HugeCTR's defaults for the parameters that have one
// (check type Sum, power law Specific with α 1.2, 128 files of 40960
// samples, 32 eval files, 5242880/1310720 Raw samples, nnz 1) and the
// Criteo shape for the ones HugeCTR requires: Norm, 1 label, 13 dense, 26
// slots of 10000 keys, i32 keys, data/file_list.txt and
// data/file_list_test.txt; planted labels.
func DefaultParams() Params {
	sizes := make([]int64, 26)
	for i := range sizes {
		sizes[i] = 10000
	}
	return Params{
		Format: Norm, LabelDim: 1, DenseDim: 13, NumSlot: 26,
		Source: "data/file_list.txt", EvalSource: "data/file_list_test.txt",
		SlotSizeArray: sizes, CheckType: norm.CheckSum, DistType: DistPowerLaw,
		PowerLawType: Specific, Alpha: DefaultAlpha,
		NumFiles: DefaultNumFiles, EvalNumFiles: DefaultEvalNumFiles,
		NumSamplesPerFile: DefaultNumSamplesPerFile,
		NumSamples:        DefaultNumSamples, EvalNumSamples: DefaultEvalNumSamples,
		MissingRate: DefaultMissingRate,
	}
}

// EffectiveAlpha returns the exponent of the power law: the preset's, or
// Alpha for Specific.
func (p *Params) EffectiveAlpha() float64 {
	switch p.PowerLawType {
	case Long:
		return AlphaLong
	case Medium:
		return AlphaMedium
	case Short:
		return AlphaShort
	}
	return p.Alpha
}

// NNZ returns the max nnz of slot s (1 when NNZArray is empty).
func (p *Params) NNZ(s int) int {
	if len(p.NNZArray) == 0 {
		return 1
	}
	return p.NNZArray[s]
}

func (p *Params) multiHot() bool {
	for s := 0; s < p.NumSlot; s++ {
		if p.NNZ(s) > 1 {
			return true
		}
	}
	return false
}

// EffectiveRawLayout returns RawLayout, or when it is not set the layout
// the nnz_array needs.
func (p *Params) EffectiveRawLayout() raw.Layout {
	if !p.RawLayoutSet {
		if p.multiHot() {
			return raw.MultiHot
		}
		return raw.OneHot
	}
	return p.RawLayout
}

// EffectiveCheckType returns CheckType, except norm.CheckNone for Raw
// (HugeCTR forces it).
func (p *Params) EffectiveCheckType() norm.CheckMode {
	if p.Format == Raw {
		return norm.CheckNone
	}
	return p.CheckType
}

// threads returns Threads or GOMAXPROCS.
func (p *Params) threads() int {
	if p.Threads > 0 {
		return p.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// maxNNZ bounds an nnz_array entry (and so the keys one sample can hold).
const maxNNZ = 1 << 16

// Validate reports the first invalid parameter as a *ParamError. It checks
// everything Generate needs, so a run it accepts writes no partial output
// because of its parameters.
func (p *Params) Validate() error {
	if p.Format < Norm || p.Format > Criteo {
		return perr("format", "invalid format %d", int(p.Format))
	}
	if p.ParquetWriter != (parquet.WriterOptions{Files: p.ParquetWriter.Files}) {
		if p.Format != Parquet {
			return perr("parquet_writer", "Parquet encoding options given for %s output", p.Format)
		}
		if err := p.ParquetWriter.Validate(); err != nil {
			return perr("parquet_writer", "%v", err)
		}
	}
	if p.LabelDim < 0 || p.LabelDim > 1<<12 {
		return perr("label_dim", "%d must be in [0, 4096]", p.LabelDim)
	}
	if p.DenseDim < 0 || p.DenseDim > 1<<16 {
		return perr("dense_dim", "%d must be in [0, 65536]", p.DenseDim)
	}
	if p.NumSlot <= 0 || p.NumSlot > 1<<16 {
		return perr("num_slot", "%d must be in [1, 65536]", p.NumSlot)
	}
	if p.LabelMode == Planted && p.LabelDim < 1 {
		return perr("label_dim", "planted labels need label_dim ≥ 1")
	}
	if p.Format == Criteo && p.LabelDim != 1 {
		return perr("label_dim", "criteo text has exactly one label, got %d", p.LabelDim)
	}
	if len(p.SlotSizeArray) != p.NumSlot {
		return perr("slot_size_array", "has %d entries, num_slot is %d", len(p.SlotSizeArray), p.NumSlot)
	}
	keyMax := uint64(math.MaxUint32)
	if p.I64InputKey {
		keyMax = math.MaxInt64
	}
	if p.Format == Raw && p.EffectiveRawLayout() == raw.OneHot || p.Format == Criteo {
		keyMax = math.MaxUint32 // 4-byte keys on disk, or 8 hex digits
	}
	var total uint64
	for i, n := range p.SlotSizeArray {
		if n <= 0 {
			return perr("slot_size_array", "entry %d is %d; slot sizes must be > 0", i, n)
		}
		if uint64(n)-1 > keyMax {
			return perr("slot_size_array", "entry %d is %d; keys must fit %d", i, n, keyMax)
		}
		total += uint64(n)
		if total < uint64(n) || (p.Format == Norm && total-1 > keyMax) {
			return perr("slot_size_array", "sums to more keys than the key type holds (Norm keys are globally offset); use --i64-input-key")
		}
	}
	if len(p.NNZArray) != 0 && len(p.NNZArray) != p.NumSlot {
		return perr("nnz_array", "has %d entries, num_slot is %d", len(p.NNZArray), p.NumSlot)
	}
	for i, n := range p.NNZArray {
		if n < 1 || n > maxNNZ {
			return perr("nnz_array", "entry %d is %d; must be in [1, %d]", i, n, maxNNZ)
		}
	}
	if p.CheckType != norm.CheckSum && p.CheckType != norm.CheckNone {
		return perr("check_type", "invalid check type %d", int(p.CheckType))
	}
	if p.DistType != DistPowerLaw && p.DistType != DistUniform {
		return perr("dist_type", "invalid distribution %d", int(p.DistType))
	}
	if p.PowerLawType < Specific || p.PowerLawType > Short {
		return perr("power_law_type", "invalid power-law type %d", int(p.PowerLawType))
	}
	if p.DistType == DistPowerLaw && p.PowerLawType == Specific {
		if !(p.Alpha > 0) || p.Alpha == 1 || math.IsInf(p.Alpha, 0) {
			return perr("alpha", "%v must be > 0 and ≠ 1", p.Alpha)
		}
	}
	if p.LabelMode != Planted && p.LabelMode != UniformLabels {
		return perr("label_mode", "invalid label mode %d", int(p.LabelMode))
	}
	if p.RawLayoutSet && p.RawLayout != raw.OneHot && p.RawLayout != raw.MultiHot {
		return perr("raw_layout", "invalid raw layout %d", int(p.RawLayout))
	}
	if p.Format == Raw && p.RawLayoutSet && p.RawLayout == raw.OneHot && p.multiHot() {
		return perr("nnz_array", "Raw one-hot layout holds one key per slot; nnz_array has entries above 1 (use --raw-layout multihot)")
	}
	if p.Format == Criteo && p.multiHot() {
		return perr("nnz_array", "criteo text holds one categorical per slot; nnz_array has entries above 1")
	}
	if p.Threads < 0 {
		return perr("threads", "%d must be ≥ 0", p.Threads)
	}
	if !(p.MissingRate >= 0 && p.MissingRate < 1) {
		return perr("missing_rate", "%v must be in [0, 1)", p.MissingRate)
	}
	if p.Source == "" {
		return perr("source", "must not be empty")
	}
	if p.EvalSource == "" {
		return perr("eval_source", "must not be empty")
	}
	if filepath.Clean(p.Source) == filepath.Clean(p.EvalSource) {
		return perr("eval_source", "is the same path as source")
	}
	if p.Format == Raw {
		if p.NumSamples < 1 || p.NumSamples > 1<<40 {
			return perr("num_samples", "%d must be in [1, 2^40]", p.NumSamples)
		}
		if p.EvalNumSamples < 1 || p.EvalNumSamples > 1<<40 {
			return perr("eval_num_samples", "%d must be in [1, 2^40]", p.EvalNumSamples)
		}
		return nil
	}
	if p.NumFiles < 1 || p.NumFiles > 1<<20 {
		return perr("num_files", "%d must be in [1, 2^20]", p.NumFiles)
	}
	if p.EvalNumFiles < 1 || p.EvalNumFiles > 1<<20 {
		return perr("eval_num_files", "%d must be in [1, 2^20]", p.EvalNumFiles)
	}
	if p.NumSamplesPerFile < 1 || p.NumSamplesPerFile > 1<<31-1 {
		return perr("num_samples_per_file", "%d must be in [1, 2^31)", p.NumSamplesPerFile)
	}
	return nil
}

// OutputFile is one data file of a run.
type OutputFile struct {
	Path    string
	Eval    bool
	Index   int // k in gen_<k>, or 0 for Raw
	Samples int64
}

// Plan returns the data files a run writes, train files first, and the
// file lists and metadata it writes beside them (Norm, Parquet, Criteo):
//
//	Norm     dir(Source)/train/gen_<k>.data,    dir(EvalSource)/val/gen_<k>.data
//	Parquet  dir(Source)/train/gen_<k>.parquet, dir(EvalSource)/val/gen_<k>.parquet
//	         + _metadata.json in train/ and val/
//	Criteo   dir(Source)/train/gen_<k>.txt,     dir(EvalSource)/val/gen_<k>.txt
//	Raw      Source and EvalSource
//
// File lists are written at Source and EvalSource. p must be valid.
func (p *Params) Plan() []OutputFile {
	if p.Format == Raw {
		return []OutputFile{
			{Path: p.Source, Samples: p.NumSamples},
			{Path: p.EvalSource, Eval: true, Samples: p.EvalNumSamples},
		}
	}
	ext := map[Format]string{Norm: ".data", Parquet: ".parquet", Criteo: ".txt"}[p.Format]
	var out []OutputFile
	add := func(dir string, n int, eval bool) {
		for k := 0; k < n; k++ {
			out = append(out, OutputFile{
				Path: filepath.Join(dir, fmt.Sprintf("gen_%d%s", k, ext)), Eval: eval,
				Index: k, Samples: int64(p.NumSamplesPerFile),
			})
		}
	}
	add(filepath.Join(filepath.Dir(p.Source), "train"), p.NumFiles, false)
	add(filepath.Join(filepath.Dir(p.EvalSource), "val"), p.EvalNumFiles, true)
	return out
}

// formatSeed prints a seed as the decimal the --seed flag takes.
func formatSeed(s uint64) string { return strconv.FormatUint(s, 10) }
