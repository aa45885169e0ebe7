package model

import (
	"fmt"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// Source is where a model's data comes from: HugeCTR's DataReaderParams
// for one of source / eval_source.
type Source struct {
	// Format is Norm, Raw (one-hot), Parquet or RawAsync (multi-hot when
	// some slot has more than one key, one key per slot of nnz_per_slot).
	Format string
	// Path is a file list (Norm, Parquet) or a data file (Raw).
	Path string
	// Check is Norm's framing: "Sum" or "None".
	Check string
	// SlotSizeArray adds slot offsets to keys (SPEC §3.3); empty: none.
	SlotSizeArray []int64
	// FloatLabelDense: Raw labels and dense values are float32 (else int32).
	FloatLabelDense bool
	I64Keys         bool
	Workers         int
	Repeat          bool
	Shuffle         bool
	Seed            uint64
}

// Validate reports an unusable source.
func (s *Source) Validate() error {
	switch s.Format {
	case "Norm", "Raw", "RawAsync", "Parquet":
	default:
		return fmt.Errorf("ctrkit/trainer/model: data format %q (want Norm, Raw, Parquet or RawAsync)", s.Format)
	}
	if s.Path == "" {
		return fmt.Errorf("ctrkit/trainer/model: no %s data path", s.Format)
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

// Open opens a reader of src in the model's schema, in batches of the
// model's batch size.
func (m *Model) Open(src Source) (formats.Reader, error) {
	if err := src.Validate(); err != nil {
		return nil, err
	}
	kt := formats.KeyU32
	if src.I64Keys {
		kt = formats.KeyI64
	}
	s := m.Schema(kt)
	if len(src.SlotSizeArray) > 0 {
		if len(src.SlotSizeArray) != len(s.Slots) {
			return nil, fmt.Errorf("ctrkit/trainer/model: slot_size_array has %d entries, the model %d slots", len(src.SlotSizeArray), len(s.Slots))
		}
		for i := range s.Slots {
			s.Slots[i].Size = src.SlotSizeArray[i]
		}
	}
	fo := formats.Options{BatchSize: m.batch, Repeat: src.Repeat, Workers: src.Workers,
		SlotSizeArray: src.SlotSizeArray, Shuffle: src.Shuffle, Seed: src.Seed}
	switch src.Format {
	case "Norm":
		o := norm.Options{Options: fo, KeyType: kt}
		if src.Check == "" || src.Check == "Sum" {
			o.Check = norm.CheckSum
		}
		return norm.OpenList(src.Path, &s, o)
	case "Parquet":
		return parquet.OpenList(src.Path, &s, parquet.Options{Options: fo, KeyType: kt})
	}
	// Raw is HugeCTR's one-hot layout whatever nnz_per_slot declares;
	// RawAsync is multi-hot when some slot holds several keys.
	o := raw.Options{Options: fo, Layout: raw.OneHot}
	s.LabelType, s.DenseType = formats.Int32, formats.Int32
	if src.FloatLabelDense {
		s.LabelType, s.DenseType = formats.Float32, formats.Float32
	}
	for i := range s.Slots {
		s.Slots[i].Hotness = 1
		if src.Format != "RawAsync" {
			s.Slots[i].MaxNNZ = 1
		} else {
			s.Slots[i].Hotness = max(s.Slots[i].MaxNNZ, 1)
		}
		if s.Slots[i].Hotness > 1 {
			o.Layout = raw.MultiHot
		}
	}
	return raw.Open(src.Path, &s, o)
}
