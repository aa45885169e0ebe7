package dataset

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/criteo"
	"github.com/ctrkit/ctrkit/formats/formatstest"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// criteoLines is a tiny Criteo log: label, 13 integers, 26 hex
// categoricals, empty fields missing.
func criteoLines(n int, sep string) string {
	var b strings.Builder
	for i := range n {
		f := []string{[]string{"0", "1"}[i%2]}
		for j := range 13 {
			if (i+j)%5 == 0 {
				f = append(f, "")
			} else {
				f = append(f, strings.Repeat("1", 1+j%3))
			}
		}
		for j := range 26 {
			if (i+j)%7 == 0 {
				f = append(f, "")
			} else {
				f = append(f, []string{"68fd1e64", "05db9164", "8cf07265"}[(i*j)%3])
			}
		}
		b.WriteString(strings.Join(f, sep) + "\n")
	}
	return b.String()
}

func criteoHeader(sep string) string {
	h := []string{"label"}
	for j := range 13 {
		h = append(h, "I"+strconv.Itoa(j+1))
	}
	for j := range 26 {
		h = append(h, "C"+strconv.Itoa(j+1))
	}
	return strings.Join(h, sep) + "\n"
}

// TestResolveDetects: every format and path kind is detected with the
// right schema and sample count.
func TestResolveDetects(t *testing.T) {
	dir := t.TempDir()
	oneHot := genKind(1, oneHotInt, 120, formats.KeyU32)
	multi := genKind(1, varNNZ, 90, formats.KeyI64)

	normDir := filepath.Join(dir, "norm")
	os.Mkdir(normDir, 0o755)
	normList := writeDirect(t, normDir, multi, Output{Format: Norm, Check: norm.CheckSum, KeyType: formats.KeyI64, SamplesPerFile: 40})
	pqDir := filepath.Join(dir, "pq")
	os.Mkdir(pqDir, 0o755)
	writeDirect(t, pqDir, oneHot, Output{Format: Parquet, KeyType: formats.KeyI64, SamplesPerFile: 50})
	// A Raw file of Criteo's shape.
	crit := formats.NewSchema(1, 13, make([]int, 26), nil, formats.KeyU32)
	for i := range crit.Slots {
		crit.Slots[i].MaxNNZ, crit.Slots[i].Hotness, crit.Slots[i].Size = 1, 1, 10
	}
	criteoRaw := &formatstest.Dataset{Schema: crit}
	for i := range 30 {
		criteoRaw.Labels = append(criteoRaw.Labels, []float32{float32(i % 2)})
		criteoRaw.Dense = append(criteoRaw.Dense, make([]float32, 13))
		keys := make([][]int64, 26)
		for s := range keys {
			keys[s] = []int64{int64((i + s) % 10)}
		}
		criteoRaw.Keys = append(criteoRaw.Keys, keys)
	}
	rawCriteoDir := filepath.Join(dir, "rawc")
	os.Mkdir(rawCriteoDir, 0o755)
	rawCriteo := writeDirect(t, rawCriteoDir, criteoRaw, Output{Format: Raw, KeyType: formats.KeyU32})
	rawOddDir := filepath.Join(dir, "rawo")
	os.Mkdir(rawOddDir, 0o755)
	rawOut := Output{Format: Raw, KeyType: formats.KeyU32, RawLayout: raw.OneHot, RawLayoutSet: true}
	rawOdd := writeDirect(t, rawOddDir, oneHot, rawOut)
	tsv := filepath.Join(dir, "day.tsv")
	os.WriteFile(tsv, []byte(criteoLines(25, "\t")), 0o644)
	csv := filepath.Join(dir, "day.csv")
	os.WriteFile(csv, []byte(criteoHeader(",")+criteoLines(25, ",")), 0o644)
	normFiles, _ := formats.ReadFileList(normList)
	criteoList := filepath.Join(dir, "criteo_list.txt")
	os.WriteFile(criteoList, []byte("2\nday.tsv\nday.tsv\n"), 0o644)

	buckets := make([]int64, 26)
	for i := range buckets {
		buckets[i] = 100
	}
	for _, tc := range []struct {
		name, path string
		spec       Spec
		format     Format // also what DetectFormat says
		files      int
		samples    int64
		shape      [3]int
		kt         formats.KeyType
		note       string
	}{
		{"norm list", normList, Spec{}, Norm, 3, 90, [3]int{multi.Schema.LabelDim, multi.Schema.DenseDim, len(multi.Schema.Slots)}, formats.KeyI64, "key type i64 (detected)"},
		{"norm dir", normDir, Spec{}, Norm, 3, 90, [3]int{multi.Schema.LabelDim, multi.Schema.DenseDim, len(multi.Schema.Slots)}, formats.KeyI64, "check mode sum (from the header)"},
		{"norm file", normFiles[1], Spec{}, Norm, 1, 40, [3]int{multi.Schema.LabelDim, multi.Schema.DenseDim, len(multi.Schema.Slots)}, formats.KeyI64, "format norm (detected)"},
		{"parquet dir", pqDir, Spec{}, Parquet, 3, 120, [3]int{oneHot.Schema.LabelDim, oneHot.Schema.DenseDim, len(oneHot.Schema.Slots)}, formats.KeyU32, "format parquet (from the first file of the list)"},
		{"parquet i64", pqDir, Spec{KeyType: formats.KeyI64, KeyTypeSet: true}, Parquet, 3, 120, [3]int{oneHot.Schema.LabelDim, oneHot.Schema.DenseDim, len(oneHot.Schema.Slots)}, formats.KeyI64, ""},
		{"parquet file", filepath.Join(pqDir, "part_1.parquet"), Spec{}, Parquet, 1, 50, [3]int{oneHot.Schema.LabelDim, oneHot.Schema.DenseDim, len(oneHot.Schema.Slots)}, formats.KeyU32, "format parquet (detected)"},
		{"raw criteo shape", rawCriteo, Spec{}, Raw, 1, 30, [3]int{1, 13, 26}, formats.KeyU32, "raw shape not given: assuming Criteo's label_dim 1, dense_dim 13, 26 slots"},
		{"raw with flags", rawOdd, readSpec(&oneHot.Schema, oneHotInt, rawOut), Raw, 1, 120, [3]int{oneHot.Schema.LabelDim, oneHot.Schema.DenseDim, len(oneHot.Schema.Slots)}, formats.KeyU32, ""},
		{"criteo tsv", tsv, Spec{SlotSizeArray: buckets}, CriteoTSV, 1, -1, [3]int{1, 13, 26}, formats.KeyU32, "format criteo-tsv (detected)"},
		{"criteo csv", csv, Spec{SlotSizeArray: buckets}, CriteoCSV, 1, -1, [3]int{1, 13, 26}, formats.KeyU32, "format criteo-csv (detected)"},
		{"criteo list", criteoList, Spec{SlotSizeArray: buckets[:1]}, CriteoTSV, 2, -1, [3]int{1, 13, 26}, formats.KeyU32, "format criteo-tsv (from the first file of the list)"},
		{"criteo forced", tsv, Spec{Format: CriteoTSV, SlotSizeArray: buckets, KeyType: formats.KeyI64, KeyTypeSet: true}, CriteoTSV, 1, -1, [3]int{1, 13, 26}, formats.KeyI64, ""},
	} {
		d, err := Resolve(tc.path, tc.spec)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if f, files, err := DetectFormat(tc.path, tc.spec.Format); f != tc.format || len(files) != tc.files || err != nil {
			t.Errorf("%s: DetectFormat = %s, %d files, %v", tc.name, f, len(files), err)
		}
		s := &d.Schema
		if d.Format != tc.format || len(d.Files) != tc.files || d.Samples != tc.samples ||
			[3]int{s.LabelDim, s.DenseDim, len(s.Slots)} != tc.shape || s.KeyType != tc.kt {
			t.Errorf("%s: format %s, %d files, %d samples, shape %d/%d/%d, %s keys; want %s, %d, %d, %v, %s",
				tc.name, d.Format, len(d.Files), d.Samples, s.LabelDim, s.DenseDim, len(s.Slots), s.KeyType,
				tc.format, tc.files, tc.samples, tc.shape, tc.kt)
		}
		if tc.note != "" && !strings.Contains(strings.Join(d.Notes, "\n"), tc.note) {
			t.Errorf("%s: notes %q lack %q", tc.name, d.Notes, tc.note)
		}
		if d.Bytes <= 0 {
			t.Errorf("%s: %d bytes", tc.name, d.Bytes)
		}
	}
}

// TestResolveErrors: what cannot be resolved is a clear error.
func TestResolveErrors(t *testing.T) {
	dir := t.TempDir()
	ds := genKind(2, oneHotInt, 33, formats.KeyU32)
	normDir := filepath.Join(dir, "norm")
	os.Mkdir(normDir, 0o755)
	normList := writeDirect(t, normDir, ds, Output{Format: Norm, Check: norm.CheckSum, KeyType: formats.KeyU32})
	rawOut := Output{Format: Raw, KeyType: formats.KeyU32, RawLayout: raw.OneHot, RawLayoutSet: true, FloatLabelDense: true}
	rawPath := writeDirect(t, dir, ds, rawOut)
	tsv := filepath.Join(dir, "day.tsv")
	os.WriteFile(tsv, []byte(criteoLines(5, "\t")), 0o644)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	badList := filepath.Join(dir, "bad_list.txt")
	os.WriteFile(badList, []byte("2\nnorm/part_0.data\nnorm/missing.data\n"), 0o644)
	s := &ds.Schema

	for _, tc := range []struct {
		name, path string
		spec       Spec
		want       string
		is         error
	}{
		{"missing path", filepath.Join(dir, "nosuch"), Spec{}, "no such file", fs.ErrNotExist},
		{"dir without list", empty, Spec{}, "is a directory without _file_list.txt or file_list.txt", nil},
		{"list with missing file", badList, Spec{}, "missing.data", nil},
		{"norm dims", normList, Spec{LabelDim: s.LabelDim + 1}, "the flags say", nil},
		{"norm slot sizes", normList, Spec{SlotSizeArray: []int64{5, 6, 7, 8, 9, 10, 11}[:len(s.Slots)+1]}, "--slot-size-array has 3 values", nil},
		{"norm nnz", normList, Spec{NNZ: []int{1, 1, 1, 1, 1, 1, 1}[:len(s.Slots)+1]}, "--nnz-array has", nil},
		{"raw wrong shape", rawPath, Spec{Format: Raw}, "is not a multiple of the 160-byte sample", formats.ErrSize},
		{"raw nnz count", rawPath, Spec{Format: Raw, LabelDim: s.LabelDim, DenseDim: s.DenseDim, NumSlot: len(s.Slots), NNZ: []int{1, 1, 1, 1, 1, 1, 1}[:len(s.Slots)+1]}, "--nnz-array has", nil},
		{"criteo without mapping", tsv, Spec{}, "--slot-size-array (hash buckets per slot) or --vocab", nil},
	} {
		_, err := Resolve(tc.path, tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for f, n := range formatNames {
		if g, err := ParseFormat(strings.ToUpper(n)); err != nil || g != f {
			t.Errorf("ParseFormat(%q) = %v, %v", n, g, err)
		}
	}
	if f, err := ParseFormat(""); f != Auto || err != nil {
		t.Errorf("ParseFormat(\"\") = %v, %v", f, err)
	}
	if _, err := ParseFormat("csv"); err == nil {
		t.Error("ParseFormat(csv): no error")
	}
}

// criteoSample is the real Criteo excerpt shared by the project (200 rows
// with a header), or "" when this checkout lacks it.
func criteoSample(t *testing.T) string {
	p := filepath.Join("..", "..", "shared", "data", "criteo_sample.txt")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no %s", p)
	}
	return p
}

// TestConvertCriteo converts the real Criteo sample by hashing and by a
// vocabulary into every variant and compares what reads back with a direct
// read of the text.
func TestConvertCriteo(t *testing.T) {
	src := criteoSample(t)
	buckets := make([]int64, 26)
	for i := range buckets {
		buckets[i] = int64(50 + 37*i)
	}
	v, err := criteo.BuildVocab([]string{src}, criteo.VocabOptions{MinCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name string
		spec Spec
	}{
		{"hash", Spec{SlotSizeArray: buckets}},
		{"vocab", Spec{Vocab: v}},
	} {
		d, err := Resolve(src, m.spec)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if d.Format != CriteoCSV {
			t.Fatalf("%s: detected %s, want criteo-csv", m.name, d.Format)
		}
		co := criteo.Options{Layout: criteo.Layout{Format: criteo.CSV}, Buckets: m.spec.SlotSizeArray, Vocab: m.spec.Vocab}
		cr, err := criteo.Open([]string{src}, co)
		if err != nil {
			t.Fatal(err)
		}
		want, err := formatstest.ReadAll(cr, formats.DefaultBatchSize, 0)
		cr.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want.Len() != 200 {
			t.Fatalf("direct read: %d samples, want 200", want.Len())
		}
		sizes := d.Schema.SlotSizes()
		if m.spec.Vocab != nil && !slices.Equal(sizes, v.SlotSizes()) || m.spec.Vocab == nil && !slices.Equal(sizes, buckets) {
			t.Errorf("%s: schema slot sizes %v", m.name, sizes)
		}
		for _, to := range variants {
			if !to.holds(oneHotInt) {
				continue
			}
			dst := dstPath(t.TempDir(), to.out)
			st, err := Convert(context.Background(), d, dst, to.out, formats.Options{BatchSize: 64}, nil)
			if err != nil {
				t.Errorf("%s → %s: %v", m.name, to.name, err)
				continue
			}
			if st.Samples != 200 {
				t.Errorf("%s → %s: %d samples", m.name, to.name, st.Samples)
			}
			got := readBack(t, dst, readSpec(&d.Schema, oneHotInt, to.out))
			if diff := formatstest.Diff(want, got); diff != "" {
				t.Errorf("%s → %s: %s", m.name, to.name, diff)
			}
		}
	}
}
