package cpu

import (
	"errors"
	"slices"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TestCrossOps: the fused cross-layer operations compute what
// tensor.CrossOps documents (hand-worked values, float64 and float32), and
// refuse bad shapes.
func TestCrossOps(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
		be := newBE(t)
		up := func(v []float64, shape ...int) tensor.Tensor {
			x := be.Alloc(dt, shape...)
			if dt == tensor.Float64 {
				be.Upload(x, v)
			} else {
				f := make([]float32, len(v))
				for i := range v {
					f[i] = float32(v[i])
				}
				be.Upload(x, f)
			}
			return x
		}
		get := func(x tensor.Tensor) []float64 {
			if dt == tensor.Float64 {
				return slices.Clone(data[float64](x))
			}
			var v []float64
			for _, f := range data[float32](x) {
				v = append(v, float64(f))
			}
			return v
		}
		x0, x := up([]float64{1, 2, 3, 4}, 2, 2), up([]float64{10, 20, 30, 40}, 2, 2)
		z, b := up([]float64{0.5, -1, 2, 0}, 2, 2), up([]float64{1, 2}, 2)
		y := be.Alloc(dt, 2, 2)
		// v2: x0 ⊙ (z + b) + x = [1·1.5+10, 2·1+20; 3·3+30, 4·2+40].
		be.CrossForward(y, x0, z, b, x)
		if got := get(y); !slices.Equal(got, []float64{11.5, 22, 39, 48}) {
			t.Fatalf("%v CrossForward %v", dt, got)
		}
		// v1: x0·s[r] + b + x with s = [2, −1].
		s := up([]float64{2, -1}, 2, 1)
		be.CrossForwardV1(y, x0, s, b, x)
		if got := get(y); !slices.Equal(got, []float64{13, 26, 28, 38}) {
			t.Fatalf("%v CrossForwardV1 %v", dt, got)
		}
		// Backward with g = [1, 2; −1, 0.5]: dz = g ⊙ x0 = [1, 4; −3, 2],
		// db = [−2, 6]; g ⊙ (z + b) = [1.5, 2; −3, 1].
		g := up([]float64{1, 2, -1, 0.5}, 2, 2)
		dz, db, gc := be.Alloc(dt, 2, 2), be.Alloc(dt, 2), be.Alloc(dt, 2, 2)
		dx0 := up([]float64{100, 100, 100, 100}, 2, 2)
		be.CrossBackward(dz, db, dx0, 0, 0, gc, g, x0, z, b) // beta 0: dx0 not read
		if !slices.Equal(get(dz), []float64{1, 4, -3, 2}) || !slices.Equal(get(db), []float64{-2, 6}) ||
			!slices.Equal(get(dx0), []float64{1.5, 2, -3, 1}) || !slices.Equal(get(gc), get(g)) {
			t.Fatalf("%v CrossBackward: dz %v db %v dx0 %v copy %v", dt, get(dz), get(db), get(dx0), get(gc))
		}
		// beta 1, res 1: dx0 += g ⊙ (z + b) + g; no dx0 or copy is fine.
		be.CrossBackward(dz, db, dx0, 1, 1, tensor.Tensor{}, g, x0, z, b)
		if got := get(dx0); !slices.Equal(got, []float64{4, 6, -7, 2.5}) {
			t.Fatalf("%v CrossBackward accumulate: dx0 %v", dt, got)
		}
		be.CrossBackward(dz, db, tensor.Tensor{}, 1, 1, tensor.Tensor{}, g, x0, z, b)
		if err := be.Err(); err != nil {
			t.Fatal(err)
		}
		for name, f := range map[string]func(){
			"z one per row":     func() { be.CrossForward(y, x0, s, b, x) },
			"s of 3 for 2 rows": func() { be.CrossForwardV1(y, x0, up([]float64{1, 2, 3}, 3), b, x) },
			"bias of 3":         func() { be.CrossForward(y, x0, z, up([]float64{1, 2, 3}, 3), x) },
			"x absent":          func() { be.CrossForward(y, x0, z, b, tensor.Tensor{}) },
			"dx0 short":         func() { be.CrossBackward(dz, db, s, 0, 0, tensor.Tensor{}, g, x0, z, b) },
			"db absent":         func() { be.CrossBackward(dz, tensor.Tensor{}, dx0, 0, 0, tensor.Tensor{}, g, x0, z, b) },
			"db of 3":           func() { be.CrossBackward(dz, up([]float64{1, 2, 3}, 3), dx0, 0, 0, tensor.Tensor{}, g, x0, z, b) },
		} {
			be.Reset()
			f()
			if err := be.Err(); !errors.Is(err, tensor.ErrShape) {
				t.Errorf("%v %s: %v, want ErrShape", dt, name, err)
			}
		}
		be.Reset()
	}
}
