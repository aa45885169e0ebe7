package formats

import (
	"fmt"
	"strings"
)

// KeyType is the in-memory and on-disk width of categorical keys. HugeCTR
// calls them "i32" (unsigned 32-bit, the default) and "i64" (signed 64-bit).
type KeyType uint8

const (
	// KeyU32 is HugeCTR's i32 key type: unsigned 32-bit (the default).
	KeyU32 KeyType = iota
	// KeyI64 is HugeCTR's i64 key type: signed 64-bit (i64_input_key).
	KeyI64
)

// Size returns the width of one key in bytes.
func (k KeyType) Size() int {
	if k == KeyI64 {
		return 8
	}
	return 4
}

// Max returns the largest key value the type holds.
func (k KeyType) Max() uint64 {
	if k == KeyI64 {
		return 1<<63 - 1
	}
	return 1<<32 - 1
}

func (k KeyType) String() string {
	if k == KeyI64 {
		return "i64"
	}
	return "i32"
}

// ParseKeyType accepts "i32"/"u32"/"uint32" and "i64"/"int64".
func ParseKeyType(s string) (KeyType, error) {
	switch strings.ToLower(s) {
	case "i32", "u32", "uint32", "":
		return KeyU32, nil
	case "i64", "int64", "long long":
		return KeyI64, nil
	}
	return 0, fmt.Errorf("unknown key type %q (want i32 or i64)", s)
}

// ValueType is the on-disk type of Raw label and dense values.
type ValueType uint8

const (
	// Float32 values are stored as IEEE float32 and read as is.
	Float32 ValueType = iota
	// Int32 values are stored as signed int32. Labels read as float(x);
	// dense values read as ln(max(x,0)+1) (SPEC §3.1).
	Int32
)

func (v ValueType) String() string {
	if v == Int32 {
		return "int32"
	}
	return "float32"
}

// ParseValueType accepts "float32"/"float" and "int32"/"int".
func ParseValueType(s string) (ValueType, error) {
	switch strings.ToLower(s) {
	case "float32", "float", "f32":
		return Float32, nil
	case "int32", "int", "i32":
		return Int32, nil
	}
	return 0, fmt.Errorf("unknown value type %q (want int32 or float32)", s)
}

// Slot describes one categorical input.
type Slot struct {
	// Name is the column name (Parquet) or a display name.
	Name string
	// MaxNNZ bounds the number of keys per sample (Norm, Parquet multi-hot);
	// 0 means unbounded. Readers report nnz above it as corruption.
	MaxNNZ int
	// Hotness is the fixed number of keys per sample of the Raw multi-hot
	// layout and of one-hot columns (1). 0 means variable.
	Hotness int
	// Size is the slot's vocabulary size (slot_size_array entry); 0 means
	// unknown. With Options.SlotOffsets, keys must be < Size.
	Size int64
}

// Schema is the shape of a CTR dataset.
type Schema struct {
	LabelDim int
	DenseDim int
	Slots    []Slot
	KeyType  KeyType
	// LabelType and DenseType are the on-disk value types of the Raw format;
	// Norm and Parquet always store float32 and ignore them.
	LabelType ValueType
	DenseType ValueType
}

// NumSlots returns len(s.Slots).
func (s *Schema) NumSlots() int { return len(s.Slots) }

// MaxKeysPerSample returns Σ max(MaxNNZ, Hotness) over the slots, or -1 when
// some slot is unbounded.
func (s *Schema) MaxKeysPerSample() int {
	n := 0
	for _, sl := range s.Slots {
		k := sl.MaxNNZ
		if sl.Hotness > k {
			k = sl.Hotness
		}
		if k <= 0 {
			return -1
		}
		n += k
	}
	return n
}

// SlotSizes returns the Size of every slot.
func (s *Schema) SlotSizes() []int64 {
	out := make([]int64, len(s.Slots))
	for i, sl := range s.Slots {
		out[i] = sl.Size
	}
	return out
}

// Validate reports a schema no format can hold.
func (s *Schema) Validate() error {
	if s.LabelDim < 0 || s.DenseDim < 0 {
		return fmt.Errorf("negative label_dim %d or dense_dim %d", s.LabelDim, s.DenseDim)
	}
	if s.LabelDim > MaxDim || s.DenseDim > MaxDim || len(s.Slots) > MaxDim {
		return fmt.Errorf("label_dim %d, dense_dim %d or %d slots above %d", s.LabelDim, s.DenseDim, len(s.Slots), MaxDim)
	}
	if s.LabelDim+s.DenseDim+len(s.Slots) == 0 {
		return fmt.Errorf("empty schema (no label, dense or slot)")
	}
	if s.KeyType > KeyI64 {
		return fmt.Errorf("invalid key type %d", s.KeyType)
	}
	for i, sl := range s.Slots {
		if sl.MaxNNZ < 0 || sl.Hotness < 0 || sl.Size < 0 {
			return fmt.Errorf("slot %d: negative max nnz, hotness or size", i)
		}
		if sl.Size > 0 && uint64(sl.Size) > s.KeyType.Max()+1 {
			return fmt.Errorf("slot %d: size %d does not fit key type %s", i, sl.Size, s.KeyType)
		}
	}
	return nil
}

// Clone returns a deep copy.
func (s Schema) Clone() Schema {
	s.Slots = append([]Slot(nil), s.Slots...)
	return s
}

// MaxDim bounds label_dim, dense_dim and the slot count of a schema, and
// so every such count read from a header, a footer or a flag before it is
// allocated: 2^20, far above any CTR model (HugeCTR's Criteo: 1, 13, 26).
const MaxDim = 1 << 20

// NewSchema builds a schema with n unnamed slots C1..Cn of the given max nnz
// (1 when nnz is nil) and sizes (0 when nil).
func NewSchema(labelDim, denseDim int, nnz []int, sizes []int64, kt KeyType) Schema {
	n := len(nnz)
	if len(sizes) > n {
		n = len(sizes)
	}
	s := Schema{LabelDim: labelDim, DenseDim: denseDim, KeyType: kt, Slots: make([]Slot, n)}
	for i := range s.Slots {
		s.Slots[i].Name = fmt.Sprintf("C%d", i+1)
		s.Slots[i].MaxNNZ = 1
		if i < len(nnz) {
			s.Slots[i].MaxNNZ = nnz[i]
		}
		if i < len(sizes) {
			s.Slots[i].Size = sizes[i]
		}
	}
	return s
}
