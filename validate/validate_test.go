package validate

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// The fixtures: label 1, dense 2, 2 one-hot slots, nfix samples. Sample i
// has label i%2, dense (0.25, 0.5), keys (i%7, i%5). Norm records are
// 4·3 + 2·(4+4) = 28 bytes unframed, 33 framed; headers 64 and 69.
const (
	nfix      = 50
	recNone   = 28
	recSum    = 33
	slotSizes = "7,5"
)

func fixtureSchema() formats.Schema {
	return formats.NewSchema(1, 2, []int{1, 1}, nil, formats.KeyU32)
}

func fixtureBatch(t testing.TB, s *formats.Schema) *formats.Batch {
	b, err := formats.NewBatch(s, nfix, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < nfix; i++ {
		if err := b.AppendSample([]float32{float32(i % 2)}, []float32{0.25, 0.5}, [][]int64{{int64(i % 7)}, {int64(i % 5)}}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func writeNorm(t testing.TB, path string, m norm.CheckMode) {
	s := fixtureSchema()
	w, err := norm.Create(path, &s, norm.WriterOptions{Check: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(fixtureBatch(t, &s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// patch applies f to the bytes of path.
func patch(t testing.TB, path string, f func([]byte) []byte) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func check(t testing.TB, path string, sp dataset.Spec) *Report {
	rep, err := Run(path, sp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// want checks that rep holds exactly the problems listed (kind, file,
// offset, record), in order.
func want(t *testing.T, rep *Report, ps ...Problem) {
	t.Helper()
	var sb strings.Builder
	rep.WriteText(&sb)
	if len(rep.Problems) != len(ps) {
		t.Fatalf("got %d problems, want %d:\n%s", len(rep.Problems), len(ps), sb.String())
	}
	for i, p := range ps {
		g := rep.Problems[i]
		if g.Kind != p.Kind || g.File != p.File || g.Offset != p.Offset || g.Record != p.Record {
			t.Errorf("problem %d: got %s, want kind %s file %s offset %d record %d", i, g, p.Kind, p.File, p.Offset, p.Record)
		}
		if p.Message != "" && !strings.Contains(g.Message, p.Message) {
			t.Errorf("problem %d: message %q lacks %q", i, g.Message, p.Message)
		}
	}
}

func sizes() []int64 { return []int64{7, 5} }

func TestNormClean(t *testing.T) {
	dir := t.TempDir()
	for _, m := range []norm.CheckMode{norm.CheckNone, norm.CheckSum} {
		p := filepath.Join(dir, m.String()+".data")
		writeNorm(t, p, m)
		rep := check(t, p, dataset.Spec{SlotSizeArray: sizes()})
		want(t, rep)
		if rep.Samples != nfix || rep.Checked != 1 || !rep.Clean() {
			t.Errorf("%s: samples %d checked %d clean %v", m, rep.Samples, rep.Checked, rep.Clean())
		}
	}
}

func TestNormHeader(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.data")
	writeNorm(t, p, norm.CheckNone)
	patch(t, p, func(b []byte) []byte { binary.LittleEndian.PutUint64(b[24:], 3); return b }) // dense_dim
	rep := check(t, p, dataset.Spec{Format: dataset.Norm, LabelDim: 1, DenseDim: 2, NumSlot: 2})
	want(t, rep, Problem{Kind: KindHeader, File: p, Offset: 0, Record: -1, Message: "dense_dim = 3, schema has 2"})
	if rep.Checked != 0 {
		t.Errorf("a file with a bad header was checked")
	}
}

func TestNormChecksum(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.data")
	writeNorm(t, p, norm.CheckSum)
	// Corrupt a dense byte of records 3 and 10; both are reported and
	// skipped, the others checked.
	patch(t, p, func(b []byte) []byte {
		b[69+3*recSum+4+5] ^= 0x40
		b[69+10*recSum+4+5] ^= 0x01
		return b
	})
	rep := check(t, p, dataset.Spec{})
	want(t, rep,
		Problem{Kind: KindChecksum, File: p, Offset: 69 + 3*recSum, Record: 3, Message: "record skipped"},
		Problem{Kind: KindChecksum, File: p, Offset: 69 + 10*recSum, Record: 10})
	if rep.Samples != nfix-2 {
		t.Errorf("samples checked %d, want %d", rep.Samples, nfix-2)
	}
}

func TestNormTruncated(t *testing.T) {
	for _, m := range []norm.CheckMode{norm.CheckNone, norm.CheckSum} {
		p := filepath.Join(t.TempDir(), "a.data")
		writeNorm(t, p, m)
		hl, rl := 64, recNone
		if m == norm.CheckSum {
			hl, rl = 69, recSum
		}
		patch(t, p, func(b []byte) []byte { return b[:hl+20*rl+7] })
		rep := check(t, p, dataset.Spec{Format: dataset.Norm, Check: m, CheckSet: true})
		want(t, rep, Problem{Kind: KindTruncated, File: p, Offset: int64(hl + 20*rl), Record: 20})
		if rep.Samples != 20 {
			t.Errorf("%s: samples %d, want 20", m, rep.Samples)
		}
	}
}

func TestNormNNZ(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.data")
	writeNorm(t, p, norm.CheckNone)
	// Record 5, slot 1 nnz (payload offset 12 + 8) = −3.
	off := 64 + 5*recNone + 20
	patch(t, p, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], uint32(0xfffffffd)); return b })
	rep := check(t, p, dataset.Spec{})
	want(t, rep, Problem{Kind: KindNNZ, File: p, Offset: int64(off), Record: 5, Message: "no length prefix to resynchronise"})

	// Framed: nnz 2 above --nnz-array 1 is reported and the record skipped.
	p2 := filepath.Join(t.TempDir(), "b.data")
	writeNorm(t, p2, norm.CheckSum)
	rep = check(t, p2, dataset.Spec{NNZ: []int{1, 1}})
	want(t, rep)
	patch(t, p2, func(b []byte) []byte {
		// Rewrite record 4 with slot 0 nnz 2 (two keys), dropping slot 1's
		// key so the length stays 28, and fix its check byte.
		r := b[69+4*recSum:]
		binary.LittleEndian.PutUint32(r[4+12:], 2)
		binary.LittleEndian.PutUint32(r[4+20:], 1)
		binary.LittleEndian.PutUint32(r[4+24:], 0)
		var sum byte
		for _, c := range r[4 : 4+28] {
			sum += c
		}
		r[32] = sum
		return b
	})
	// slot 1 now has nnz 0 ... the record is: nnz0=2 keys(k,1), nnz1=0
	rep = check(t, p2, dataset.Spec{NNZ: []int{1, 1}})
	want(t, rep, Problem{Kind: KindNNZ, File: p2, Offset: 69 + 4*recSum + 4 + 12, Record: 4, Message: "record skipped"})
	if rep.Samples != nfix-1 {
		t.Errorf("samples %d, want %d", rep.Samples, nfix-1)
	}
}

func TestNormKeyRange(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.data")
	writeNorm(t, p, norm.CheckSum)
	rep := check(t, p, dataset.Spec{SlotSizeArray: []int64{7, 4}}) // keys i%5 = 4 are out of slot 1
	var ps []Problem
	for i := 0; i < nfix; i++ {
		if i%5 == 4 {
			ps = append(ps, Problem{Kind: KindKeyRange, File: p, Offset: int64(69 + i*recSum + 4 + 12 + 8 + 4), Record: int64(i), Message: "≥ slot size 4"})
		}
	}
	want(t, rep, ps...)
}

func TestNormValues(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.data")
	writeNorm(t, p, norm.CheckNone)
	nan, inf := math.Float32bits(float32(math.NaN())), math.Float32bits(float32(math.Inf(1)))
	patch(t, p, func(b []byte) []byte {
		binary.LittleEndian.PutUint32(b[64+2*recNone:], nan)                 // label of record 2
		binary.LittleEndian.PutUint32(b[64+7*recNone+8:], inf)               // dense 1 of record 7
		binary.LittleEndian.PutUint32(b[64+9*recNone:], math.Float32bits(2)) // label 2 in record 9
		return b
	})
	rep := check(t, p, dataset.Spec{})
	want(t, rep,
		Problem{Kind: KindNonFinite, File: p, Offset: 64 + 2*recNone, Record: 2, Message: "label 0"},
		Problem{Kind: KindNonFinite, File: p, Offset: 64 + 7*recNone + 8, Record: 7, Message: "dense 1"},
		Problem{Kind: KindLabelRange, File: p, Offset: 64 + 9*recNone, Record: 9, Message: "outside [0, 1]"})
}

func TestMissingFiles(t *testing.T) {
	dir := t.TempDir()
	writeNorm(t, filepath.Join(dir, "a.data"), norm.CheckSum)
	writeNorm(t, filepath.Join(dir, "c.data"), norm.CheckSum)
	list := filepath.Join(dir, "list.txt")
	os.WriteFile(list, []byte("4\na.data\nb.data\nc.data\nd.data\n"), 0o644)
	rep := check(t, list, dataset.Spec{})
	want(t, rep,
		Problem{Kind: KindMissingFile, File: list, Offset: -1, Record: 3, Message: `"b.data"`},
		Problem{Kind: KindMissingFile, File: list, Offset: -1, Record: 5, Message: `"d.data"`})
	if rep.Checked != 2 || rep.Files != 4 || rep.Samples != 2*nfix {
		t.Errorf("checked %d of %d files, %d samples", rep.Checked, rep.Files, rep.Samples)
	}
}

func writeRaw(t testing.TB, path string) formats.Schema {
	s := fixtureSchema()
	for i := range s.Slots {
		s.Slots[i].Hotness = 1
	}
	s.LabelType, s.DenseType = formats.Int32, formats.Int32
	w, err := raw.Create(path, &s, raw.OneHot)
	if err != nil {
		t.Fatal(err)
	}
	b := fixtureBatch(t, &s)
	for i := range b.Dense {
		b.Dense[i] = float32(math.Log(float64(i%3) + 1))
	}
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRaw(t *testing.T) {
	const ss = 20 // 5 int32 columns
	p := filepath.Join(t.TempDir(), "a.bin")
	writeRaw(t, p)
	sp := dataset.Spec{Format: dataset.Raw, LabelDim: 1, DenseDim: 2, NumSlot: 2, SlotSizeArray: sizes()}
	want(t, check(t, p, sp))
	patch(t, p, func(b []byte) []byte {
		binary.LittleEndian.PutUint32(b[3*ss+4:], uint32(0xffffffff)) // dense 0 of sample 3 = −1
		binary.LittleEndian.PutUint32(b[8*ss:], 1065353216)           // float 1.0 stored as int
		binary.LittleEndian.PutUint32(b[11*ss+16:], 9)                // slot 1 key 9 ≥ 5
		return append(b, 1, 2, 3)                                     // size not a multiple
	})
	rep := check(t, p, sp)
	want(t, rep,
		Problem{Kind: KindSize, File: p, Offset: nfix * ss, Record: nfix, Message: "not a multiple"},
		Problem{Kind: KindLabelRange, File: p, Offset: 8 * ss, Record: 8, Message: "1.065353216e+09"},
		Problem{Kind: KindKeyRange, File: p, Offset: 11*ss + 16, Record: 11, Message: "key 9 ≥ slot size 5"},
		Problem{Kind: KindClamped, File: p, Offset: 3*ss + 4, Record: 3, Message: "dense 0 is -1"})
	if rep.Samples != nfix {
		t.Errorf("samples %d", rep.Samples)
	}
}

func TestParquetMetadata(t *testing.T) {
	dir := t.TempDir()
	s := fixtureSchema()
	w, err := parquet.NewDatasetWriter(dir, &s, parquet.DatasetOptions{RowsPerFile: 25})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(fixtureBatch(t, &s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(dir, parquet.FileListName)
	sp := dataset.Spec{SlotSizeArray: sizes()}
	rep := check(t, list, sp)
	want(t, rep)
	if rep.Samples != nfix || rep.Checked != 2 {
		t.Fatalf("samples %d checked %d", rep.Samples, rep.Checked)
	}
	files := w.Files()
	mp := filepath.Join(dir, parquet.MetadataName)
	patch(t, mp, func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"num_rows": 25`, `"num_rows": 24`, 1))
	})
	rep = check(t, list, sp)
	want(t, rep, Problem{Kind: KindMetadata, File: files[0], Offset: -1, Record: -1, Message: "footer holds 25 rows"})
	if rep.Checked != 1 || rep.Samples != 25 {
		t.Errorf("checked %d samples %d, want the second file checked", rep.Checked, rep.Samples)
	}
}

func TestCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.data")
	writeNorm(t, p, norm.CheckSum)
	rep, err := Run(p, dataset.Spec{SlotSizeArray: []int64{1, 1}}, Options{MaxPerKind: 3})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	for i := 0; i < nfix; i++ {
		n += int64(min(i%7, 1) + min(i%5, 1))
	}
	if len(rep.Problems) != 3 || rep.Counts[KindKeyRange] != n || len(rep.Omitted) != 1 || rep.Omitted[0].Count != n-3 {
		t.Errorf("listed %d, counted %d (want %d), omitted %+v", len(rep.Problems), rep.Counts[KindKeyRange], n, rep.Omitted)
	}
}
