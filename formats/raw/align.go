package raw

import (
	"fmt"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/formats"
)

// AlignedDenseDim returns the in-memory dense width of HugeCTR's
// aligned_type Auto: dim rounded up to a multiple of 8 (13 → 16, 0 → 0).
func AlignedDenseDim(dim int) int { return (dim + 7) &^ 7 }

// SetDenseStride makes the decoder write stride ≥ DenseDim dense floats per
// sample: the file's DenseDim values, then stride − DenseDim zeros. This is
// HugeCTR's aligned_type Auto with stride = AlignedDenseDim(DenseDim); the
// file layout (SampleSize) is unchanged. Batches decoded into must then be
// made for MemSchema. The stride is part of the decoder's configuration, so
// Clone keeps it.
func (d *Decoder) SetDenseStride(stride int) error {
	if stride < d.ddim || stride > maxSampleSize/8 {
		return fmt.Errorf("dense stride %d below the dense width %d or too large", stride, d.ddim)
	}
	d.dstride = stride
	return nil
}

// DenseStride returns the dense floats per sample in memory.
func (d *Decoder) DenseStride() int { return d.dstride }

// MemSchema returns a copy of the decoder's schema with DenseDim set to the
// in-memory dense stride: the schema of the batches Decode fills.
func (d *Decoder) MemSchema() *formats.Schema {
	s := d.schema.Clone()
	s.DenseDim = d.dstride
	return &s
}

// alignDecoder applies aligned_type a to dec and returns the schema batches
// are decoded in.
func alignDecoder(dec *Decoder, a asyncio.AlignedType) (*formats.Schema, error) {
	switch a {
	case asyncio.AlignNone:
	case asyncio.AlignAuto:
		if err := dec.SetDenseStride(AlignedDenseDim(dec.ddim)); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("invalid aligned type %d", int(a))
	}
	return dec.MemSchema(), nil
}

// memSchema applies Options.AlignDense to dec and returns the schema batches
// are decoded in.
func memSchema(dec *Decoder, alignDense bool) (*formats.Schema, error) {
	if alignDense {
		return alignDecoder(dec, asyncio.AlignAuto)
	}
	return alignDecoder(dec, asyncio.AlignNone)
}
