package parquet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// dcnv2Hotness is the MLPerf DLRM-DCNv2 multi-hot shape's keys per slot.
var dcnv2Hotness = []int{3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1}

// slotMajor makes rows of slot-major list keys: slot si's row r holds
// hot[si] keys, or 0 to hot[si] when vary.
func slotMajor(rng *rand.Rand, rows int, hot []int, vary bool) ([][]int64, [][]int32) {
	keys, off := make([][]int64, len(hot)), make([][]int32, len(hot))
	for si, h := range hot {
		off[si] = make([]int32, rows+1)
		for r := 0; r < rows; r++ {
			n := h
			if vary {
				n = rng.IntN(h + 1)
			}
			for range n {
				keys[si] = append(keys[si], rng.Int64N(1<<40))
			}
			off[si][r+1] = int32(len(keys[si]))
		}
	}
	return keys, off
}

// transposeRef is transpose written plainly: row by row, slot by slot.
func transposeRef(keys [][]int64, off [][]int32, lo, hi, nk int) ([]int64, []int32) {
	var dst []int64
	var o []int32
	for row := lo; row < hi; row++ {
		for si := range keys {
			dst = append(dst, keys[si][off[si][row]:off[si][row+1]]...)
			o = append(o, int32(nk+len(dst)))
		}
	}
	return dst, o
}

// TestTranspose checks transpose against transposeRef: fixed and varying
// hotness (empty rows included), whole pieces and row ranges, one and
// several workers, key positions not starting at 0.
func TestTranspose(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, vary := range []bool{false, true} {
		keys, off := slotMajor(rng, 20000, dcnv2Hotness, vary)
		for _, c := range []struct{ lo, hi, nk, workers int }{
			{0, 20000, 0, 1}, {0, 20000, 0, 4}, {17, 19999, 5, 3}, {100, 101, 0, 8}, {0, 0, 0, 2}, {5, 12005, 7, 16},
		} {
			want, wantO := transposeRef(keys, off, c.lo, c.hi, c.nk)
			dst := make([]int64, len(want)+3)
			o := make([]int32, len(wantO))
			transpose(dst, keys, off, c.lo, c.hi, c.nk, o, c.workers)
			if !slices.Equal(dst[:len(want)], want) || !slices.Equal(o, wantO) {
				t.Fatalf("vary %v, %+v: keys or offsets differ from the reference", vary, c)
			}
		}
	}
}

// BenchmarkTranspose is the consumer's copy of a 65536-row multi-hot
// piece (the DCNv2 shape, 214 int64 keys a row) into a batch.
func BenchmarkTranspose(b *testing.B) {
	const rows = 65536
	keys, off := slotMajor(rand.New(rand.NewPCG(1, 2)), rows, dcnv2Hotness, false)
	n := int(off[0][rows])
	for si := 1; si < len(keys); si++ {
		n += int(off[si][rows])
	}
	dst := make([]int64, n)
	o := make([]int32, rows*len(keys))
	for _, w := range []int{1, 2, 8} {
		b.Run(fmt.Sprintf("workers-%d", w), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			b.ReportAllocs()
			for b.Loop() {
				transpose(dst, keys, off, 0, rows, 0, o, w)
			}
		})
	}
}
