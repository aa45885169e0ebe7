package norm

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

var update = flag.Bool("update", false, "regenerate testdata/ fixtures")

// tinySchema: 1 label, 2 dense, 2 slots of at most 2 keys, sizes 10 and 20.
func tinySchema(kt formats.KeyType) formats.Schema {
	return formats.NewSchema(1, 2, []int{2, 2}, []int64{10, 20}, kt)
}

// tinyData holds 3 samples. Payloads (i32): 32, 24, 28 bytes; framed
// records at 69, 106, 135 (end 168); unframed at 64, 96, 120 (end 148).
func tinyData(kt formats.KeyType) *formatstest.Dataset {
	return &formatstest.Dataset{
		Schema: tinySchema(kt),
		Labels: [][]float32{{1}, {0}, {1}},
		Dense:  [][]float32{{0.5, 2}, {-1, 0.25}, {3, 4}},
		Keys:   [][][]int64{{{7}, {3, 5}}, {{}, {19}}, {{9, 1}, {}}},
	}
}

// criteoData is one Criteo-shaped sample: 1 label, 13 dense, 26 one-hot slots.
func criteoData() *formatstest.Dataset {
	s := formats.NewSchema(1, 13, make26(1), nil, formats.KeyU32)
	d := &formatstest.Dataset{Schema: s, Labels: [][]float32{{1}}}
	den := make([]float32, 13)
	keys := make([][]int64, 26)
	for i := range den {
		den[i] = float32(i) / 4
	}
	for i := range keys {
		keys[i] = []int64{int64(1000*i + 1)}
	}
	d.Dense, d.Keys = [][]float32{den}, [][][]int64{keys}
	return d
}

func make26(v int) []int {
	n := make([]int, 26)
	for i := range n {
		n[i] = v
	}
	return n
}

func encode(t testing.TB, d *formatstest.Dataset, m CheckMode) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.data")
	w, err := Create(path, &d.Schema, WriterOptions{Check: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteAll(w, 2); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// patch returns a copy of data with the bytes at off replaced, then the
// check byte of the framed record [rec, rec+4+len+1) recomputed when
// rec ≥ 0.
func patch(data []byte, off int, b []byte, rec int) []byte {
	out := append([]byte(nil), data...)
	copy(out[off:], b)
	if rec >= 0 {
		l := int(binary.LittleEndian.Uint32(out[rec:]))
		out[rec+4+l] = checksum(out[rec+4 : rec+4+l])
	}
	return out
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// fixtures builds every file of testdata/ (the -update generator).
func fixtures(t testing.TB) map[string][]byte {
	tinySum := encode(t, tinyData(formats.KeyU32), CheckSum)
	tinyNone := encode(t, tinyData(formats.KeyU32), CheckNone)
	f := map[string][]byte{
		"tiny_i32_sum.data":    tinySum,
		"tiny_i32_none.data":   tinyNone,
		"tiny_i64_sum.data":    encode(t, tinyData(formats.KeyI64), CheckSum),
		"tiny_i64_none.data":   encode(t, tinyData(formats.KeyI64), CheckNone),
		"criteo_i32_sum.data":  encode(t, criteoData(), CheckSum),
		"criteo_i32_none.data": encode(t, criteoData(), CheckNone),

		// Record 1 (at 106, payload 24 B) with its check byte (at 134) flipped.
		"corrupt/bad_checksum.data": patch(tinySum, 134, []byte{tinySum[134] ^ 0xff}, -1),
		// Cut inside record 2 (at 135 framed, 120 unframed).
		"corrupt/truncated_sum.data":  tinySum[:150],
		"corrupt/truncated_none.data": tinyNone[:130],
		// Header fields changed, header check byte recomputed.
		"corrupt/header_slot_num.data":   patch(tinySum, 4+32, le64(3), 0),
		"corrupt/header_label_dim.data":  patch(tinySum, 4+16, le64(2), 0),
		"corrupt/header_dense_dim.data":  patch(tinySum, 4+24, le64(1), 0),
		"corrupt/header_count.data":      patch(tinySum, 4+8, le64(1000), 0),
		"corrupt/header_count_none.data": patch(tinyNone, 8, le64(4), -1),
		// Record 1, slot 1 key (at 130) 19 → 25 ≥ slot size 20.
		"corrupt/key_range.data": patch(tinySum, 130, le32(25), 106),
		// Record 0, slot 1 nnz (at 93) 2 → 3 > max 2.
		"corrupt/nnz_max.data": patch(tinySum, 93, le32(3), 69),
		// Record 2, slot 0 nnz (at 120+12 unframed) 2 → -1.
		"corrupt/nnz_negative.data": patch(tinyNone, 132, le32(0xffffffff), -1),

		// Three bytes after the last record.
		"corrupt/trailing.data": append(append([]byte(nil), tinySum...), 1, 2, 3),

		"corrupt/list_missing.txt":   []byte("2\n../tiny_i32_sum.data\nno_such_file.data\n"),
		"corrupt/list_bad_count.txt": []byte("3\n../tiny_i32_sum.data\n"),
	}
	return f
}

func TestGolden(t *testing.T) {
	for name, data := range fixtures(t) {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestGolden -update)", err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s differs from the generator's output:\nfile:\n%s\ngenerator:\n%s", name, hex.Dump(got), hex.Dump(data))
		}
	}
}

// TestGoldenLayout asserts the fixtures' bytes against SPEC §2.
func TestGoldenLayout(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	sum := read("tiny_i32_sum.data")
	if !bytes.HasPrefix(sum, []byte{0x40, 0, 0, 0}) {
		t.Fatalf("checksum file starts % x, want 40 00 00 00", sum[:4])
	}
	h, n, err := ParseHeader(sum, CheckSum)
	if err != nil || n != 69 || h != (Header{ErrorCheck: 1, NumRecords: 3, LabelDim: 1, DenseDim: 2, SlotNum: 2}) {
		t.Fatalf("header %+v, %d bytes, %v", h, n, err)
	}
	if want := byte(1 + 3 + 1 + 2 + 2); sum[68] != want {
		t.Fatalf("header check byte %#x, want %#x", sum[68], want)
	}
	// First sample at byte 69: length 32, label 1.0.
	if l := binary.LittleEndian.Uint32(sum[69:]); l != 32 {
		t.Fatalf("first record length %d, want 32", l)
	}
	if !bytes.Equal(sum[73:77], []byte{0, 0, 0x80, 0x3f}) {
		t.Fatalf("first label % x, want 00 00 80 3f", sum[73:77])
	}
	if len(sum) != 69+37+29+33 {
		t.Fatalf("tiny sum file %d bytes, want 168", len(sum))
	}
	none := read("tiny_i32_none.data")
	if len(none) != 64+32+24+28 || binary.LittleEndian.Uint64(none) != 0 {
		t.Fatalf("tiny unframed file: %d bytes, error_check %d", len(none), binary.LittleEndian.Uint64(none))
	}
	if n := len(read("tiny_i64_sum.data")); n != 168+4*6 { // 6 keys, 4 more bytes each
		t.Fatalf("tiny i64 sum file %d bytes, want %d", n, 168+24)
	}
	// Criteo i32: 264 B payload, 269 B framed.
	if n := len(read("criteo_i32_sum.data")); n != 69+269 {
		t.Fatalf("criteo i32 framed file %d bytes, want 69+269", n)
	}
	if n := len(read("criteo_i32_none.data")); n != 64+264 {
		t.Fatalf("criteo i32 unframed file %d bytes, want 64+264", n)
	}
	// Every fixture reads back to its dataset.
	for _, c := range []struct {
		name string
		d    *formatstest.Dataset
		m    CheckMode
	}{
		{"tiny_i32_sum.data", tinyData(formats.KeyU32), CheckSum},
		{"tiny_i32_none.data", tinyData(formats.KeyU32), CheckNone},
		{"tiny_i64_sum.data", tinyData(formats.KeyI64), CheckSum},
		{"tiny_i64_none.data", tinyData(formats.KeyI64), CheckNone},
		{"criteo_i32_sum.data", criteoData(), CheckSum},
	} {
		o := Options{Check: c.m}
		o.BatchSize = 2
		r, err := Open(filepath.Join("testdata", c.name), &c.d.Schema, o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := formatstest.ReadAll(r, 2, 0)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if diff := formatstest.Diff(c.d, got); diff != "" {
			t.Fatalf("%s: %s", c.name, diff)
		}
	}
}

// TestHandBuilt checks the writer and reader against a file built by hand
// from SPEC §2: 1 label, 2 dense, 2 slots, one sample, checksum framing.
func TestHandBuilt(t *testing.T) {
	const file = "" +
		"40000000" + // header frame length 64
		"0100000000000000" + // error_check 1
		"0100000000000000" + // number_of_records 1
		"0100000000000000" + // label_dim 1
		"0200000000000000" + // dense_dim 2
		"0200000000000000" + // slot_num 2
		"000000000000000000000000000000000000000000000000" + // reserved
		"07" + // 1+1+1+2+2
		"20000000" + // record length 32
		"0000803f" + // label 1.0
		"0000003f" + "00000040" + // dense 0.5, 2.0
		"01000000" + "07000000" + // slot 0: nnz 1, key 7
		"02000000" + "03000000" + "02010000" + // slot 1: nnz 2, keys 3, 0x102
		"4e" // 0x80+0x3f + 0x3f + 0x40 + 1+7 + 2+3+2+1 = 0x14e
	want, err := hex.DecodeString(file)
	if err != nil {
		t.Fatal(err)
	}
	s := formats.NewSchema(1, 2, []int{2, 2}, nil, formats.KeyU32)
	d := &formatstest.Dataset{Schema: s, Labels: [][]float32{{1}}, Dense: [][]float32{{0.5, 2}}, Keys: [][][]int64{{{7}, {3, 0x102}}}}
	if got := encode(t, d, CheckSum); !bytes.Equal(got, want) {
		t.Fatalf("writer output:\n%s\nwant:\n%s", hex.Dump(got), hex.Dump(want))
	}
	path := filepath.Join(t.TempDir(), "hand.data")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, &s, Options{Check: CheckSum})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := formatstest.ReadAll(r, formats.DefaultBatchSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := formatstest.Diff(d, got); diff != "" {
		t.Fatal(diff)
	}
}

// TestCorrupt reads every corrupt fixture and checks the typed error.
func TestCorrupt(t *testing.T) {
	tiny := tinySchema(formats.KeyU32)
	cases := []struct {
		file     string
		check    CheckMode
		slotSize bool
		sentinel error
		offset   int64
		record   int64
		op       string // substring of Op
	}{
		{"bad_checksum.data", CheckSum, false, formats.ErrChecksum, 106, 1, "check byte"},
		{"truncated_sum.data", CheckSum, false, io.ErrUnexpectedEOF, 135, 2, "record"},
		{"truncated_none.data", CheckNone, false, io.ErrUnexpectedEOF, 120, 2, "record"},
		{"header_slot_num.data", CheckSum, false, formats.ErrHeader, 0, -1, "slot_num"},
		{"header_label_dim.data", CheckSum, false, formats.ErrHeader, 0, -1, "label_dim"},
		{"header_dense_dim.data", CheckSum, false, formats.ErrHeader, 0, -1, "dense_dim"},
		{"header_count.data", CheckSum, false, formats.ErrHeader, 0, -1, "number_of_records"},
		{"header_count_none.data", CheckNone, false, io.ErrUnexpectedEOF, 148, 3, "record"},
		{"key_range.data", CheckSum, true, formats.ErrKeyRange, 130, 1, "slot 1 key 0"},
		{"nnz_max.data", CheckSum, false, formats.ErrNNZ, 93, 0, "slot 1 nnz"},
		{"nnz_negative.data", CheckNone, false, formats.ErrNNZ, 132, 2, "slot 0 nnz"},
		{"trailing.data", CheckSum, false, formats.ErrSize, 168, 3, ""},
		// The wrong framing for the file.
		{"../tiny_i32_none.data", CheckSum, false, formats.ErrHeader, 0, -1, ""},
		{"../tiny_i32_sum.data", CheckNone, false, formats.ErrHeader, 0, -1, ""},
	}
	for _, c := range cases {
		for _, workers := range []int{1, 3} {
			path := filepath.Join("testdata", "corrupt", c.file)
			o := Options{Check: c.check}
			o.BatchSize, o.Workers = 2, workers
			if c.slotSize {
				o.SlotSizeArray = tiny.SlotSizes()
			}
			var err error
			r, err := Open(path, &tiny, o)
			if err == nil {
				r.minRun, r.piece = 1, 16 // parallel decoding and reads
				_, err = formatstest.ReadAll(r, 2, 0)
				if err2 := r.Close(); err2 != nil {
					t.Fatal(err2)
				}
			}
			var fe *formats.Error
			if !errors.Is(err, c.sentinel) || !errors.As(err, &fe) {
				t.Fatalf("%s: error %v, want %v as *formats.Error", c.file, err, c.sentinel)
			}
			if fe.Path != path || fe.Offset != c.offset || fe.Record != c.record || !strings.Contains(fe.Op, c.op) || fe.Format != "norm" {
				t.Fatalf("%s: error %+v (%v), want path %s offset %d record %d op %q", c.file, fe, err, path, c.offset, c.record, c.op)
			}
			if c.sentinel != io.ErrUnexpectedEOF && !errors.Is(err, formats.ErrCorrupt) {
				t.Fatalf("%s: %v does not match ErrCorrupt", c.file, err)
			}
		}
	}
}

func TestSkipCorrupt(t *testing.T) {
	tiny := tinySchema(formats.KeyU32)
	for _, workers := range []int{1, 2} {
		o := Options{Check: CheckSum, SkipCorrupt: true}
		o.Workers = workers
		r, err := Open(filepath.Join("testdata", "corrupt", "bad_checksum.data"), &tiny, o)
		if err != nil {
			t.Fatal(err)
		}
		r.minRun = 1
		got, err := formatstest.ReadAll(r, formats.DefaultBatchSize, 0)
		if err != nil {
			t.Fatal(err)
		}
		d := tinyData(formats.KeyU32)
		want := &formatstest.Dataset{Schema: tiny, Labels: [][]float32{d.Labels[0], d.Labels[2]}, Dense: [][]float32{d.Dense[0], d.Dense[2]}, Keys: [][][]int64{d.Keys[0], d.Keys[2]}}
		if diff := formatstest.Diff(want, got); diff != "" || r.Skipped() != 1 {
			t.Fatalf("skipped %d, diff %s", r.Skipped(), diff)
		}
		r.Close()
	}
}

func TestCorruptFileLists(t *testing.T) {
	tiny := tinySchema(formats.KeyU32)
	list := filepath.Join("testdata", "corrupt", "list_missing.txt")
	_, err := OpenList(list, &tiny, Options{Check: CheckSum})
	var fe *formats.Error
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &fe) || fe.Path != list || fe.Record != 3 || fe.Format != "filelist" {
		t.Fatalf("missing file: %v (%+v)", err, fe)
	}
	if !strings.Contains(err.Error(), "no_such_file.data") {
		t.Fatalf("missing file error does not name the file: %v", err)
	}
	list = filepath.Join("testdata", "corrupt", "list_bad_count.txt")
	_, err = OpenList(list, &tiny, Options{Check: CheckSum})
	if !errors.Is(err, formats.ErrMetadata) || !errors.As(err, &fe) || fe.Path != list || fe.Record != 3 || fe.Offset != -1 {
		t.Fatalf("bad count: %v (%+v)", err, fe)
	}
}
