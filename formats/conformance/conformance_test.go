package conformance

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// codec writes a dataset in one format and opens a reader over it.
type codec struct {
	name string
	// holds reports whether the format can hold the schema.
	holds func(s formats.Schema) bool
	// prepare adapts the schema to the format's encoding (Raw value types).
	prepare func(s *formats.Schema)
	write   func(dir string, s *formats.Schema, d *formatstest.Dataset) (string, error)
	open    func(path string, s *formats.Schema, o formats.Options) (formats.Reader, error)
}

func allHotness(s formats.Schema, one bool) bool {
	for _, sl := range s.Slots {
		if sl.Hotness == 0 || (one && sl.Hotness != 1) {
			return false
		}
	}
	return true
}

func codecs() []codec {
	var cs []codec
	for _, m := range []norm.CheckMode{norm.CheckNone, norm.CheckSum} {
		cs = append(cs, codec{
			name:    "norm-" + m.String(),
			holds:   func(formats.Schema) bool { return true },
			prepare: func(*formats.Schema) {},
			write: func(dir string, s *formats.Schema, d *formatstest.Dataset) (string, error) {
				list := filepath.Join(dir, "file_list.txt")
				w, err := norm.CreateList(list, s, norm.ListOptions{WriterOptions: norm.WriterOptions{Check: m}, SamplesPerFile: 97})
				if err != nil {
					return "", err
				}
				return list, d.WriteAll(w, 64)
			},
			open: func(p string, s *formats.Schema, o formats.Options) (formats.Reader, error) {
				return norm.OpenList(p, s, norm.Options{Options: o, Check: m})
			},
		})
	}
	for _, l := range []raw.Layout{raw.OneHot, raw.MultiHot} {
		for _, vt := range []formats.ValueType{formats.Float32, formats.Int32} {
			cs = append(cs, codec{
				name:    fmt.Sprintf("raw-%s-%s", l, vt),
				holds:   func(s formats.Schema) bool { return allHotness(s, l == raw.OneHot) },
				prepare: func(s *formats.Schema) { s.LabelType, s.DenseType = vt, vt },
				write: func(dir string, s *formats.Schema, d *formatstest.Dataset) (string, error) {
					p := filepath.Join(dir, "data.raw")
					w, err := raw.Create(p, s, l)
					if err != nil {
						return "", err
					}
					return p, d.WriteAll(w, 64)
				},
				open: func(p string, s *formats.Schema, o formats.Options) (formats.Reader, error) {
					return raw.Open(p, s, raw.Options{Options: o, Layout: l})
				},
			})
		}
	}
	for _, comp := range []string{"snappy", "none", "zstd"} {
		cs = append(cs, codec{
			name:    "parquet-" + comp,
			holds:   func(formats.Schema) bool { return true },
			prepare: func(*formats.Schema) {},
			write: func(dir string, s *formats.Schema, d *formatstest.Dataset) (string, error) {
				w, err := parquet.NewDatasetWriter(dir, s, parquet.DatasetOptions{
					WriterOptions: parquet.WriterOptions{Compression: comp, RowGroupSize: 37}, RowsPerFile: 101})
				if err != nil {
					return "", err
				}
				return filepath.Join(dir, parquet.FileListName), d.WriteAll(w, 64)
			},
			open: func(p string, s *formats.Schema, o formats.Options) (formats.Reader, error) {
				return parquet.OpenList(p, s, parquet.Options{Options: o})
			},
		})
	}
	return cs
}

// TestConformance writes seeded random datasets in every format that can
// hold them and requires every reader to return identical samples, with and
// without slot offsets, in any batch size and worker count.
func TestConformance(t *testing.T) {
	shapes := []struct {
		name string
		rs   formatstest.RandomSchema
		v    formatstest.Values
	}{
		{"onehot-i32", formatstest.RandomSchema{MaxLabel: 2, MaxDense: 5, MaxSlots: 6, OneHot: true, KeyType: formats.KeyU32}, formatstest.IntegerValued},
		{"onehot-i64", formatstest.RandomSchema{MaxLabel: 1, MaxDense: 3, MaxSlots: 4, OneHot: true, KeyType: formats.KeyI64}, formatstest.IntegerValued},
		{"fixed-hotness-i32", formatstest.RandomSchema{MaxLabel: 2, MaxDense: 4, MaxSlots: 5, MaxNNZ: 4, FixedHotness: true, KeyType: formats.KeyU32}, formatstest.IntegerValued},
		{"fixed-hotness-i64", formatstest.RandomSchema{MaxLabel: 1, MaxDense: 2, MaxSlots: 3, MaxNNZ: 3, FixedHotness: true, KeyType: formats.KeyI64}, formatstest.IntegerValued},
		{"variable-nnz-i32", formatstest.RandomSchema{MaxLabel: 3, MaxDense: 6, MaxSlots: 5, MaxNNZ: 4, KeyType: formats.KeyU32}, formatstest.AnyFloat},
		{"variable-nnz-i64", formatstest.RandomSchema{MaxLabel: 1, MaxDense: 0, MaxSlots: 3, MaxNNZ: 5, KeyType: formats.KeyI64}, formatstest.AnyFloat},
	}
	for seed := uint64(1); seed <= 3; seed++ {
		for _, sh := range shapes {
			rng := rand.New(rand.NewPCG(seed, 99))
			base := formatstest.NewSchema(rng, sh.rs)
			for i, sl := range base.Slots {
				if sl.Hotness == 0 && sl.MaxNNZ == 1 {
					// A variable slot of max nnz 1 is a scalar Parquet column,
					// which cannot hold nnz 0: make it a list.
					base.Slots[i].MaxNNZ = 2
				}
			}
			want := formatstest.NewDataset(rng, base, 150+rng.IntN(200), 0, sh.v)
			for _, c := range codecs() {
				if !c.holds(base) {
					continue
				}
				if sh.v == formatstest.AnyFloat && c.name[:3] == "raw" {
					continue // Raw int32 cannot hold arbitrary floats; AnyFloat sets are variable-nnz anyway
				}
				t.Run(fmt.Sprintf("%s/seed%d/%s", sh.name, seed, c.name), func(t *testing.T) {
					s := base.Clone()
					c.prepare(&s)
					path, err := c.write(t.TempDir(), &s, want)
					if err != nil {
						t.Fatalf("write: %v", err)
					}
					for _, tc := range []struct {
						batch, workers int
						offsets        bool
					}{{1, 1, false}, {64, 4, false}, {1000, 2, true}} {
						o := formats.Options{BatchSize: tc.batch, Workers: tc.workers}
						exp := want
						if tc.offsets {
							o.SlotSizeArray = s.SlotSizes()
							exp = want.WithOffsets(o.SlotSizeArray)
						}
						r, err := c.open(path, &s, o)
						if err != nil {
							t.Fatalf("open: %v", err)
						}
						got, err := formatstest.ReadAll(r, tc.batch, 0)
						r.Close()
						if err != nil {
							t.Fatalf("batch %d workers %d: %v", tc.batch, tc.workers, err)
						}
						if d := formatstest.Diff(exp, got); d != "" {
							t.Fatalf("batch %d workers %d offsets %v: %s", tc.batch, tc.workers, tc.offsets, d)
						}
					}
				})
			}
		}
	}
}
