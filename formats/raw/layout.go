package raw

import (
	"fmt"

	"github.com/ctrkit/ctrkit/formats"
)

// Layout selects the Raw sample layout.
type Layout int

const (
	// OneHot is HugeCTR's Raw layout: one 4-byte key per slot.
	OneHot Layout = iota
	// MultiHot is HugeCTR v25's multi-hot RawAsync layout: a fixed number
	// of keys of the key type per slot.
	MultiHot
)

// String returns "onehot" or "multihot".
func (l Layout) String() string {
	switch l {
	case OneHot:
		return "onehot"
	case MultiHot:
		return "multihot"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// ParseLayout accepts "onehot" and "multihot" (also "one-hot"/"multi-hot").
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "onehot", "one-hot":
		return OneHot, nil
	case "multihot", "multi-hot":
		return MultiHot, nil
	}
	return 0, fmt.Errorf("unknown layout %q (want onehot or multihot)", s)
}

// SampleSize returns the size in bytes of one sample of schema s in layout l,
// or an error when s cannot be stored in l: a one-hot slot must hold exactly
// one key (Hotness 1, or Hotness 0 with MaxNNZ ≤ 1); a multi-hot slot must
// have Hotness > 0.
func SampleSize(s *formats.Schema, l Layout) (int, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	if s.LabelDim > maxSampleSize/8 || s.DenseDim > maxSampleSize/8 || len(s.Slots) > maxSampleSize/8 {
		return 0, fmt.Errorf("sample size above %d bytes", maxSampleSize)
	}
	n := 4 * (s.LabelDim + s.DenseDim)
	switch l {
	case OneHot:
		for i, sl := range s.Slots {
			if sl.Hotness > 1 || sl.MaxNNZ > 1 {
				return 0, fmt.Errorf("one-hot layout: slot %d has hotness %d, max nnz %d (want 1)", i, sl.Hotness, sl.MaxNNZ)
			}
		}
		n += 4 * len(s.Slots)
	case MultiHot:
		for i, sl := range s.Slots {
			if sl.Hotness <= 0 {
				return 0, fmt.Errorf("multi-hot layout: slot %d has no fixed hotness", i)
			}
			if sl.Hotness > maxSampleSize {
				return 0, fmt.Errorf("multi-hot layout: slot %d hotness %d too large", i, sl.Hotness)
			}
			n += s.KeyType.Size() * sl.Hotness
			if n > maxSampleSize {
				return 0, fmt.Errorf("sample size above %d bytes", maxSampleSize)
			}
		}
	default:
		return 0, fmt.Errorf("invalid layout %d", int(l))
	}
	if n == 0 {
		return 0, fmt.Errorf("empty sample")
	}
	return n, nil
}

// keysPerSample returns the number of keys of one sample (SampleSize must
// have accepted s and l).
func keysPerSample(s *formats.Schema, l Layout) int {
	if l == OneHot {
		return len(s.Slots)
	}
	k := 0
	for _, sl := range s.Slots {
		k += sl.Hotness
	}
	return k
}

// countSamples returns the samples of ss bytes in a file of size bytes (both
// readers): a size that is not a multiple of ss is an ErrSize error, and so
// is an empty file in repeat mode.
func countSamples(path string, size, ss int64, l Layout, repeat bool) (int64, error) {
	n := size / ss
	if size < 0 || n*ss != size {
		return 0, formats.Errorf("raw", path, n*ss, n, formats.ErrSize,
			"file size %d is not a multiple of the %d-byte %s sample", size, ss, l)
	}
	if n == 0 && repeat {
		return 0, formats.Errorf("raw", path, 0, -1, formats.ErrSize, "empty file cannot be repeated")
	}
	return n, nil
}
