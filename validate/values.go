package validate

import (
	"math"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
)

// layout locates the fields of a sample in its file, for reports. recOff
// holds the byte offset of each sample of the batch (nil: unknown, every
// field offset is then -1).
type layout struct {
	recOff []int64
	frame  int64 // bytes before the payload: 4 for framed Norm, else 0
	ld, dd int64
	keyW   int64   // bytes per key on disk
	nnz    bool    // Norm: every slot starts with an int32 nnz
	cum    []int64 // Raw: cum[s] = keys of the slots before s
}

func (l *layout) label(i, j int) int64 {
	if l.recOff == nil {
		return -1
	}
	return l.recOff[i] + l.frame + 4*int64(j)
}

func (l *layout) dense(i, j int) int64 {
	if l.recOff == nil {
		return -1
	}
	return l.recOff[i] + l.frame + 4*(l.ld+int64(j))
}

// checkValues checks the samples of b, the first being record rec0 of file:
// labels and dense values finite, labels in [0, 1], keys in range of
// sizes (when given) and non-negative, nnz ≤ maxNNZ (when > 0; for formats
// whose decoder does not check it).
func (v *run) checkValues(file string, b *formats.Batch, rec0 int64, l *layout, sizes []int64, maxNNZ []int) {
	s := b.Schema
	ld, dd, S := s.LabelDim, s.DenseDim, len(s.Slots)
	r := v.rep
	if (sizes != nil && len(sizes) != S) || (maxNNZ != nil && len(maxNNZ) != S) {
		// The callers expand one value to every slot; a list of another
		// length is a caller's bug, never an index panic.
		r.add(KindIO, file, -1, -1, "internal: %d slot sizes and %d nnz limits for %d slots", len(sizes), len(maxNNZ), S)
		return
	}
	var first []int64 // each slot's first key: 0, or its offset for global keys
	if sizes != nil {
		first = make([]int64, S)
		if v.spec.Keys == dataset.KeysGlobal {
			for si := 1; si < S; si++ {
				first[si] = first[si-1] + sizes[si-1]
			}
		}
	}
	for i := 0; i < b.N; i++ {
		rec := rec0 + int64(i)
		for j := 0; j < ld; j++ {
			x := float64(b.Labels[i*ld+j])
			switch {
			case math.IsNaN(x) || math.IsInf(x, 0):
				r.add(KindNonFinite, file, l.label(i, j), rec, "label %d is %v", j, x)
			case x < 0 || x > 1:
				r.add(KindLabelRange, file, l.label(i, j), rec, "label %d is %v, outside [0, 1]", j, x)
			}
		}
		for j := 0; j < dd; j++ {
			x := float64(b.Dense[i*dd+j])
			if math.IsNaN(x) || math.IsInf(x, 0) {
				r.add(KindNonFinite, file, l.dense(i, j), rec, "dense %d is %v", j, x)
			}
		}
		if S == 0 || (sizes == nil && maxNNZ == nil && b.Keys32 != nil) {
			continue
		}
		// Field offsets: Norm walks the slots (nnz fields vary), Raw uses
		// the fixed key positions.
		var pos int64 = -1
		if l.recOff != nil {
			pos = l.recOff[i] + l.frame + 4*(l.ld+l.dd)
		}
		for si := 0; si < S; si++ {
			lo, hi := b.Row(i, si)
			n := hi - lo
			base := int64(-1)
			if pos >= 0 {
				if l.nnz {
					base = pos + 4
				} else {
					base = pos + l.keyW*l.cum[si]
				}
			}
			if maxNNZ != nil && maxNNZ[si] > 0 && n > maxNNZ[si] {
				o := int64(-1)
				if base >= 0 && l.nnz {
					o = base - 4
				}
				r.add(KindNNZ, file, o, rec, "slot %d: nnz %d, max %d (--nnz-array)", si, n, maxNNZ[si])
			}
			for k := lo; k < hi; k++ {
				key := b.Key(k)
				ko := int64(-1)
				if base >= 0 {
					ko = base + l.keyW*int64(k-lo)
				}
				switch {
				case key < 0:
					r.add(KindKeyRange, file, ko, rec, "slot %d key %d: negative key %d", si, k-lo, key)
				case sizes != nil && first[si] == 0 && key >= sizes[si]:
					r.add(KindKeyRange, file, ko, rec, "slot %d key %d: key %d ≥ slot size %d", si, k-lo, key, sizes[si])
				case sizes != nil && first[si] > 0 && (key < first[si] || key >= first[si]+sizes[si]):
					r.add(KindKeyRange, file, ko, rec, "slot %d key %d: key %d outside [%d, %d) (global keys: slot offset %d + slot size %d)",
						si, k-lo, key, first[si], first[si]+sizes[si], first[si], sizes[si])
				}
			}
			if pos >= 0 && l.nnz {
				pos += 4 + l.keyW*int64(n)
			}
		}
	}
}
