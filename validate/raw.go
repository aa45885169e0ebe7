package validate

import (
	"encoding/binary"
	"io"
	"os"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// rawSchema builds the Raw schema of the flags as dataset.Resolve does.
func (v *run) rawSchema() (formats.Schema, raw.Layout, error) {
	s, lay, note, err := dataset.RawSchema(v.spec)
	if note != "" {
		v.note("%s", note)
	}
	if err == nil {
		err = v.spec.ForSlots(len(s.Slots))
	}
	return s, lay, err
}

// rawBatch is the number of samples per Raw chunk.
const rawBatch = 4096

// raw validates a Raw file: its size, then every whole sample.
func (v *run) raw(path string) error {
	s, lay, err := v.rawSchema()
	if err != nil {
		return err
	}
	dec, err := raw.NewDecoder(&s, lay, nil)
	if err != nil {
		return err
	}
	ss := int64(dec.SampleSize())
	r := v.rep
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	n := size / ss
	if size%ss != 0 {
		r.add(KindSize, path, n*ss, n, "file size %d is not a multiple of the %d-byte sample (label %d, dense %d, %d slots, %s); the %d whole samples are checked, the last %d bytes are not",
			size, ss, s.LabelDim, s.DenseDim, len(s.Slots), lay, n, size%ss)
	}
	r.Checked++
	b, err := formats.NewBatch(&s, rawBatch, nil)
	if err != nil {
		return err
	}
	defer b.Free()
	l := &layout{ld: int64(s.LabelDim), dd: int64(s.DenseDim), keyW: 4, cum: make([]int64, len(s.Slots)+1)}
	if lay == raw.MultiHot {
		l.keyW = int64(s.KeyType.Size())
	}
	for i, sl := range s.Slots {
		h := int64(1)
		if lay == raw.MultiHot {
			h = int64(sl.Hotness)
		}
		l.cum[i+1] = l.cum[i] + h
	}
	var sizes []int64
	if len(v.spec.SlotSizeArray) > 0 {
		sizes = v.spec.SlotSizeArray
	}
	buf := make([]byte, min(int64(max(v.o.BufferSize, int(ss))), n*ss)/ss*ss)
	recOff := make([]int64, rawBatch)
	denseInt := s.DenseType == formats.Int32
	for rec := int64(0); rec < n; {
		k := min(int64(len(buf))/ss, n-rec)
		chunk := buf[:k*ss]
		if _, err := f.ReadAt(chunk, rec*ss); err != nil && err != io.EOF {
			r.add(KindIO, path, rec*ss, rec, "%v", err)
			return nil
		}
		v.progress(int64(len(chunk)))
		for lo := int64(0); lo < k; lo += rawBatch {
			m := min(rawBatch, k-lo)
			src := chunk[lo*ss : (lo+m)*ss]
			b.SetLen(0)
			first := rec + lo
			if err := dec.Decode(src, b, path, first, first*ss); err != nil {
				r.addErr(path, err, "")
				continue
			}
			for i := range recOff[:m] {
				recOff[i] = (first + int64(i)) * ss
			}
			l.recOff = recOff[:m]
			v.checkValues(path, b, first, l, sizes, nil)
			if denseInt {
				for i := int64(0); i < m; i++ {
					for j := 0; j < s.DenseDim; j++ {
						p := i*ss + 4*int64(s.LabelDim+j)
						if x := int32(binary.LittleEndian.Uint32(src[p:])); x < 0 {
							r.add(KindClamped, path, first*ss+p, first+i, "dense %d is %d (negative int32), read as ln(0+1) = 0", j, x)
						}
					}
				}
			}
			r.Samples += m
		}
		rec += k
	}
	if size%ss != 0 {
		v.progress(size % ss)
	}
	return nil
}
