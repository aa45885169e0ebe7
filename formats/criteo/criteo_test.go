package criteo

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

const samplePath = "../../../shared/data/criteo_sample.txt"

func buckets(n int, size int64) []int64 {
	b := make([]int64, n)
	for i := range b {
		b[i] = size + int64(i)
	}
	return b
}

func readAll(t *testing.T, paths []string, o Options) (*formatstest.Dataset, Stats) {
	t.Helper()
	r, err := Open(paths, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bs := o.BatchSize
	if bs == 0 {
		bs = formats.DefaultBatchSize
	}
	d, err := formatstest.ReadAll(r, bs, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d, r.Stats()
}

func newSample() Sample {
	return Sample{Dense: make([]int32, DefaultNumDense), Cat: make([]uint64, DefaultNumCat)}
}

func TestParseLine(t *testing.T) {
	data, err := os.ReadFile("testdata/small.tsv")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(data, []byte{'\n'})
	s := newSample()
	cl, err := ParseLine(&s, lines[0], '\t')
	if err != nil {
		t.Fatal(err)
	}
	if cl != 1 || s.Label != 0 {
		t.Errorf("clamped %d label %v", cl, s.Label)
	}
	wantDense := []int32{1, 0, 260, -1, math.MaxInt32, 0, 5, 0, 0, 0, 0, 0, 12}
	if !slices.Equal(s.Dense, wantDense) {
		t.Errorf("dense %v, want %v", s.Dense, wantDense)
	}
	if s.Cat[0] != 0x05db9164 || s.Cat[1] != Missing || s.Cat[2] != 0xabcdef01 || s.Cat[4] != Missing {
		t.Errorf("cats %x", s.Cat[:5])
	}
	if h := s.Cat[3]; h>>63 != 1 || h == Missing || h != CatValue([]byte("hello")) {
		t.Errorf("hashed cat %x", h)
	}
	if _, err := ParseLine(&s, lines[1], '\t'); err != nil || s.Label != 1 { // CRLF line
		t.Fatalf("crlf line: %v label %v", err, s.Label)
	}
	if _, err := ParseLine(&s, lines[2], '\t'); err != nil || s.Label != 1 || s.Dense[12] != 2 || s.Cat[25] != 1 {
		t.Fatalf("line 2: %v %+v", err, s)
	}
}

func TestParseLineErrors(t *testing.T) {
	s := newSample()
	empty := strings.Repeat("\t", 39)
	for _, c := range []struct {
		line     string
		sentinel error
		want     string
	}{
		{"1\t2\t3", formats.ErrSchema, "3 fields, want 40"},
		{"", formats.ErrSchema, "1 fields"},
		{"0" + empty + "\textra", formats.ErrSchema, "41 fields"},
		{"x" + empty, formats.ErrValue, `field 0 (label) "x"`},
		{"" + empty, formats.ErrValue, "(label)"},
		{"nan" + empty, formats.ErrValue, "(label)"},
		{"0\t1\tabc" + empty[2:], formats.ErrValue, `field 2 (I2) "abc"`},
		{"0\t2.5" + empty[1:], formats.ErrValue, `(I1) "2.5"`},
		{"0\tinf" + empty[1:], formats.ErrValue, `(I1)`},
		{"0\t0x10" + empty[1:], formats.ErrValue, `(I1)`},
		{"0\t" + strings.Repeat("9", 100) + "z" + empty[1:], formats.ErrValue, `…`},
	} {
		_, err := ParseLine(&s, []byte(c.line), '\t')
		if !errors.Is(err, c.sentinel) || !errors.Is(err, formats.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %v containing %q", c.line, err, c.sentinel, c.want)
		}
	}
	// Accepted spellings.
	for _, c := range []struct {
		f    string
		want int32
		cl   int
	}{
		{"260.0", 260, 0}, {"260.", 260, 0}, {"-1", -1, 0}, {"+7", 7, 0}, {"2.6e2", 260, 0},
		{"1e10", math.MaxInt32, 1}, {"-99999999999", math.MinInt32, 1}, {"1e999", math.MaxInt32, 1},
		{"2147483647", math.MaxInt32, 0}, {"-2147483648", math.MinInt32, 0}, {"", 0, 0},
	} {
		cl, err := ParseLine(&s, []byte("1.0\t"+c.f+empty[1:]), '\t')
		if err != nil || s.Dense[0] != c.want || cl != c.cl {
			t.Errorf("%q: %v %d clamped %d, want %d clamped %d", c.f, err, s.Dense[0], cl, c.want, c.cl)
		}
	}
}

func TestSmallFixtures(t *testing.T) {
	o := Options{Buckets: buckets(DefaultNumCat, 1000)}
	o.BatchSize = 2
	tsv, st := readAll(t, []string{"testdata/small.tsv"}, o)
	if tsv.Len() != 3 || st.Samples != 3 || st.Clamped != 1 || st.Skipped != 0 {
		t.Fatalf("tsv: %d samples, stats %+v", tsv.Len(), st)
	}
	csv, _ := readAll(t, []string{"testdata/small.csv"}, o)
	if d := formatstest.Diff(tsv, csv); d != "" {
		t.Fatalf("tsv vs csv: %s", d)
	}
	data, _ := os.ReadFile("testdata/small.csv")
	bom := t.TempDir() + "/bom.csv"
	os.WriteFile(bom, append([]byte("\xef\xbb\xbf"), data...), 0o644)
	if withBOM, _ := readAll(t, []string{bom}, o); formatstest.Diff(tsv, withBOM) != "" {
		t.Fatal("CSV with a byte-order mark differs")
	}
	o.Format = CSV
	if csv2, _ := readAll(t, []string{"testdata/small.csv"}, o); formatstest.Diff(tsv, csv2) != "" {
		t.Fatal("explicit CSV differs")
	}
	want := []int32{1, 0, 260, 0, math.MaxInt32, 0, 5, 0, 0, 0, 0, 0, 12}
	for j, x := range want {
		if got := tsv.Dense[0][j]; got != formats.DenseFromInt32(x) {
			t.Errorf("dense[%d] = %v, want ln(%v+1)", j, got, x)
		}
	}
	k := tsv.Keys[0]
	if k[0][0] != Hash(0x05db9164, 1000) || k[1][0] != 0 || k[3][0] != Hash(CatValue([]byte("hello")), 1003) {
		t.Errorf("keys %v", k[:4])
	}
	if tsv.Labels[1][0] != 1 || tsv.Labels[2][0] != 1 || tsv.Dense[1][0] != 0 {
		t.Errorf("sample 1/2: %v %v %v", tsv.Labels[1], tsv.Labels[2], tsv.Dense[1])
	}
	// TSV read as CSV: every line is one field.
	o.Format = CSV
	r, _ := Open([]string{"testdata/small.tsv"}, o)
	defer r.Close()
	b, _ := formats.NewBatch(r.Schema(), 2, nil)
	if _, err := r.Read(b); !errors.Is(err, formats.ErrSchema) {
		t.Fatalf("tsv as csv: %v", err)
	}
}

func TestBadLines(t *testing.T) {
	data, _ := os.ReadFile("testdata/bad.tsv")
	lines := bytes.SplitAfter(data, []byte{'\n'})
	o := Options{Buckets: buckets(DefaultNumCat, 10)}
	o.BatchSize = 10
	r, err := Open([]string{"testdata/bad.tsv"}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := formats.NewBatch(r.Schema(), 10, nil)
	if n, err := r.Read(b); n != 1 || err != nil {
		t.Fatalf("first read: %d %v, want the one good line", n, err)
	}
	_, err = r.Read(b)
	var fe *formats.Error
	if !errors.As(err, &fe) || !errors.Is(err, formats.ErrSchema) || !formats.IsCorrupt(err) {
		t.Fatalf("bad line: %v", err)
	}
	if fe.Format != "criteo" || fe.Path != "testdata/bad.tsv" || fe.Record != 1 || fe.Offset != int64(len(lines[0])) {
		t.Errorf("error location %+v, want record 1 offset %d", fe, len(lines[0]))
	}
	if !strings.Contains(err.Error(), `"1\t2\t3\t4\t5"`) {
		t.Errorf("message does not quote the line: %v", err)
	}
	if _, err2 := r.Read(b); err2 != err {
		t.Errorf("error not sticky: %v", err2)
	}

	o.SkipBad = true
	d, st := readAll(t, []string{"testdata/bad.tsv"}, o)
	if d.Len() != 3 || st.Skipped != 3 || st.Samples != 3 {
		t.Fatalf("SkipBad: %d samples, %+v", d.Len(), st)
	}
}

func TestHeader(t *testing.T) {
	o := Options{Buckets: buckets(DefaultNumCat, 10)}
	r, err := Open([]string{"testdata/badheader.csv"}, o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := formats.NewBatch(r.Schema(), formats.DefaultBatchSize, nil)
	_, err = r.Read(b)
	r.Close()
	var fe *formats.Error
	if !errors.As(err, &fe) || !errors.Is(err, formats.ErrSchema) || fe.Op != "header" || !strings.Contains(err.Error(), `"I6"`) {
		t.Fatalf("bad header: %v", err)
	}
	o.AnyHeader = true
	if d, _ := readAll(t, []string{"testdata/badheader.csv"}, o); d.Len() != 1 {
		t.Fatalf("AnyHeader: %d samples", d.Len())
	}
}

// refLine is a straightforward reference parse of a Criteo line.
func refLine(t *testing.T, line string, sep string) (label float64, dense []float32, cats []string) {
	f := strings.Split(line, sep)
	if len(f) != 40 {
		t.Fatalf("reference: %d fields", len(f))
	}
	label, _ = strconv.ParseFloat(f[0], 64)
	for _, x := range f[1:14] {
		v := 0.0
		if x != "" {
			v, _ = strconv.ParseFloat(x, 64)
		}
		dense = append(dense, float32(math.Log(math.Max(v, 0)+1)))
	}
	return label, dense, f[14:]
}

func TestCriteoSample(t *testing.T) {
	data, err := os.ReadFile(samplePath)
	if err != nil {
		t.Skipf("real Criteo sample absent: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")[1:]
	o := Options{Buckets: buckets(DefaultNumCat, 1<<20)}
	o.BatchSize = 64
	o.Workers = 2
	d, st := readAll(t, []string{samplePath}, o)
	if d.Len() != 200 || st.Samples != 200 || len(lines) != 200 {
		t.Fatalf("%d samples, %d lines", d.Len(), len(lines))
	}
	var ones int
	for i, l := range d.Labels {
		ones += int(l[0])
		label, dense, cats := refLine(t, lines[i], ",")
		if float64(l[0]) != label {
			t.Fatalf("row %d label %v, want %v", i, l[0], label)
		}
		for j := range dense {
			if math.Abs(float64(d.Dense[i][j]-dense[j])) > 1e-6 {
				t.Fatalf("row %d I%d = %v, want %v", i, j+1, d.Dense[i][j], dense[j])
			}
		}
		for s, c := range cats {
			want := int64(0)
			if c != "" {
				v, err := strconv.ParseUint(c, 16, 32)
				if err != nil {
					t.Fatalf("row %d C%d %q", i, s+1, c)
				}
				want = Hash(v, o.Buckets[s])
			}
			if d.Keys[i][s][0] != want {
				t.Fatalf("row %d C%d key %d, want %d", i, s+1, d.Keys[i][s][0], want)
			}
		}
	}
	if ones != 49 {
		t.Errorf("%d ones, want 49 (151 zeros)", ones)
	}
	// Spot checks of row 0: 0,,3,260.0,,17668.0,,,33.0,,,,0.0,,05db9164,...
	if d.Dense[0][0] != 0 || d.Dense[0][1] != formats.DenseFromInt32(3) || d.Dense[0][2] != formats.DenseFromInt32(260) ||
		d.Dense[0][4] != formats.DenseFromInt32(17668) || d.Dense[0][7] != formats.DenseFromInt32(33) {
		t.Errorf("row 0 dense %v", d.Dense[0])
	}
	if d.Keys[0][0][0] != Hash(0x05db9164, o.Buckets[0]) || d.Keys[0][18][0] != 0 || d.Keys[0][20][0] != Hash(0x0429f84b, o.Buckets[20]) {
		t.Errorf("row 0 keys %v", d.Keys[0])
	}
	// Row 1 has I2 = -1: clamped to 0 → ln(1) = 0.
	if d.Dense[1][1] != 0 {
		t.Errorf("row 1 I2 = %v", d.Dense[1][1])
	}

	// Vocabulary mode against a reference count.
	for _, minCount := range []int{1, 2, 6} {
		v, err := BuildVocab([]string{samplePath}, VocabOptions{MinCount: minCount, MemoryBudget: MinMemoryBudget, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]map[string]int, 26)
		for s := range counts {
			counts[s] = map[string]int{}
		}
		for _, l := range lines {
			_, _, cats := refLine(t, l, ",")
			for s, c := range cats {
				if c != "" {
					counts[s][c]++
				}
			}
		}
		vo := Options{Vocab: v}
		vo.BatchSize = 50
		vd, _ := readAll(t, []string{samplePath}, vo)
		for s := range counts {
			var freq []uint64
			for c, n := range counts[s] {
				if n >= minCount {
					x, _ := strconv.ParseUint(c, 16, 32)
					freq = append(freq, x)
				}
			}
			slices.Sort(freq)
			if !slices.Equal(freq, v.Values(s)) {
				t.Fatalf("min %d slot %d: vocab %v, want %v", minCount, s, v.Values(s), freq)
			}
			if v.SlotSizes()[s] != int64(2+len(freq)) {
				t.Fatalf("slot size %d", v.SlotSizes()[s])
			}
			for i, l := range lines {
				_, _, cats := refLine(t, l, ",")
				want := int64(IDMissing)
				if c := cats[s]; c != "" {
					x, _ := strconv.ParseUint(c, 16, 32)
					want = IDRare
					if j, ok := slices.BinarySearch(freq, x); ok {
						want = int64(2 + j)
					}
				}
				if vd.Keys[i][s][0] != want {
					t.Fatalf("min %d row %d C%d: id %d, want %d", minCount, i, s+1, vd.Keys[i][s][0], want)
				}
			}
		}
	}
}

func TestWorkersAndChunks(t *testing.T) {
	defer func(n int) { readerChunkSize = n }(readerChunkSize)
	readerChunkSize = 4096
	paths := genFiles(t, 3, genConfig{Lines: 700, Sep: '\t', Frequent: 20, PRare: 0.3, PMissing: 0.1})
	csvPaths := genFiles(t, 1, genConfig{Lines: 300, Sep: ',', Header: true, Frequent: 20, PRare: 0.3, PMissing: 0.1})
	paths = append(paths, csvPaths...)
	var ref *formatstest.Dataset
	for _, w := range []int{1, 2, 4} {
		for _, bs := range []int{1, 7, 1000} {
			o := Options{Buckets: buckets(DefaultNumCat, 5000)}
			o.Workers, o.BatchSize = w, bs
			d, st := readAll(t, paths, o)
			if d.Len() != 2400 || st.Samples != 2400 {
				t.Fatalf("workers %d batch %d: %d samples", w, bs, d.Len())
			}
			if ref == nil {
				ref = d
			} else if diff := formatstest.Diff(ref, d); diff != "" {
				t.Fatalf("workers %d batch %d: %s", w, bs, diff)
			}
		}
	}
	// i64 keys and slot offsets.
	o := Options{Buckets: buckets(DefaultNumCat, 5000), KeyType: formats.KeyI64}
	o.SlotSizeArray = o.Buckets
	o.BatchSize = 333
	d, _ := readAll(t, paths, o)
	if diff := formatstest.Diff(ref.WithOffsets(o.Buckets), d); diff != "" {
		t.Fatalf("i64 with offsets: %s", diff)
	}
	// A bad line deep in a later file, across chunk boundaries, with a header.
	data, _ := os.ReadFile(csvPaths[0])
	lines := bytes.SplitAfter(data, []byte{'\n'})
	bad := slices.Concat(slices.Concat(lines[:201]...), []byte("1,2,3\n"), slices.Concat(lines[201:]...))
	badPath := t.TempDir() + "/bad.csv"
	os.WriteFile(badPath, bad, 0o644)
	for _, w := range []int{1, 3} {
		ob := Options{Buckets: buckets(DefaultNumCat, 10)}
		ob.Workers, ob.BatchSize = w, 64
		r, _ := Open([]string{paths[0], badPath}, ob)
		d, err := formatstest.ReadAll(r, 64, 0)
		r.Close()
		var fe *formats.Error
		if !errors.As(err, &fe) || fe.Path != badPath || fe.Record != 200 || fe.Offset != int64(len(slices.Concat(lines[:201]...))) {
			t.Fatalf("workers %d: %v", w, err)
		}
		if d.Len() != 700+200 {
			t.Fatalf("workers %d: %d samples before the error, want 900", w, d.Len())
		}
	}
	// A line longer than a chunk is an error.
	readerChunkSize = 100
	ob := Options{Buckets: buckets(DefaultNumCat, 10)}
	r, _ := Open(paths[:1], ob)
	defer r.Close()
	b, _ := formats.NewBatch(r.Schema(), formats.DefaultBatchSize, nil)
	if _, err := r.Read(b); !errors.Is(err, formats.ErrSchema) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("long line: %v", err)
	}
}

func TestRepeat(t *testing.T) {
	o := Options{Buckets: buckets(DefaultNumCat, 10)}
	o.Repeat, o.BatchSize = true, 4
	r, err := Open([]string{"testdata/small.tsv", "testdata/small.csv"}, o)
	if err != nil {
		t.Fatal(err)
	}
	d, err := formatstest.ReadAll(r, 4, 20)
	r.Close()
	if err != nil || d.Len() != 20 {
		t.Fatalf("repeat: %d %v", d.Len(), err)
	}
	for i := 0; i < 20; i++ {
		if formatstest.Diff(&formatstest.Dataset{Labels: d.Labels[i : i+1], Dense: d.Dense[i : i+1], Keys: d.Keys[i : i+1]},
			&formatstest.Dataset{Labels: d.Labels[i%3 : i%3+1], Dense: d.Dense[i%3 : i%3+1], Keys: d.Keys[i%3 : i%3+1]}) != "" {
			t.Fatalf("sample %d is not sample %d of the cycle", i, i%3)
		}
	}
	empty := t.TempDir() + "/empty.tsv"
	os.WriteFile(empty, nil, 0o644)
	r, _ = Open([]string{empty}, o)
	b, _ := formats.NewBatch(r.Schema(), 4, nil)
	if _, err := r.Read(b); err == nil || err == io.EOF {
		t.Fatalf("repeating empty input: %v", err)
	}
	r.Close()
	o.Repeat = false
	r, _ = Open([]string{empty}, o)
	if _, err := r.Read(b); err != io.EOF {
		t.Fatalf("empty input: %v", err)
	}
	r.Close()
	if _, err := r.Read(b); err != ErrClosed {
		t.Fatalf("after close: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	var fe *formats.Error
	r, err := Open([]string{"testdata/nonexistent.tsv"}, Options{Buckets: buckets(26, 10)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := formats.NewBatch(r.Schema(), formats.DefaultBatchSize, nil)
	if _, err := r.Read(b); !errors.As(err, &fe) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	r.Close()
	for _, o := range []Options{
		{},
		{Buckets: buckets(26, 10), Vocab: NewVocab(make([][]uint64, 26), 6)},
		{Buckets: buckets(25, 10)},
		{Buckets: append(buckets(25, 10), 1)},
		{Buckets: buckets(26, 1<<33)},
		{Buckets: buckets(26, 10), Options: formats.Options{Shuffle: true}},
		{Buckets: buckets(26, 10), Options: formats.Options{SlotSizeArray: buckets(26, 5)}},
		{Buckets: buckets(26, 10), Layout: Layout{Format: 7}},
	} {
		if _, err := Open([]string{"testdata/small.tsv"}, o); err == nil {
			t.Errorf("Open accepted %+v", o)
		}
	}
	// Other widths.
	o := Options{Buckets: buckets(3, 10), Layout: Layout{NumDense: 2, NumCat: 3}}
	p := t.TempDir() + "/w.tsv"
	os.WriteFile(p, []byte("1\t5\t\tab\t\t00000010\n"), 0o644)
	d, _ := readAll(t, []string{p}, o)
	if d.Len() != 1 || len(d.Dense[0]) != 2 || len(d.Keys[0]) != 3 || d.Keys[0][1][0] != 0 {
		t.Fatalf("widths: %+v", d)
	}
}

func TestCloseStopsGoroutines(t *testing.T) {
	defer func(n int) { readerChunkSize = n }(readerChunkSize)
	readerChunkSize = 4096
	paths := genFiles(t, 1, genConfig{Lines: 2000, Sep: '\t', Frequent: 20, PRare: 0.3, PMissing: 0.1})
	before := runtime.NumGoroutine()
	for i := 0; i < 3; i++ {
		o := Options{Buckets: buckets(DefaultNumCat, 100)}
		o.Workers, o.BatchSize, o.Repeat = 4, 100, i == 2
		r, err := Open(paths, o)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := formats.NewBatch(r.Schema(), 100, nil)
		if _, err := r.Read(b); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}

func TestSlotSizeJSON(t *testing.T) {
	p := t.TempDir() + "/slot_size_array.json"
	want := []int64{1459, 583, 6373320}
	if err := WriteSlotSizeJSON(p, want); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if string(data) != `{"slot_size_array":[1459,583,6373320]}`+"\n" {
		t.Errorf("json %q", data)
	}
	got, err := ReadSlotSizeJSON(p)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("%v %v", got, err)
	}
	os.WriteFile(p, []byte(`{"slot_size_array":[3,0]}`), 0o644)
	if _, err := ReadSlotSizeJSON(p); !errors.Is(err, formats.ErrMetadata) {
		t.Errorf("zero size: %v", err)
	}
}

func TestParseFormat(t *testing.T) {
	for s, want := range map[string]Format{"criteo-tsv": TSV, "TSV": TSV, "criteo-csv": CSV, "csv": CSV, "": Auto, "criteo": Auto} {
		if f, err := ParseFormat(s); err != nil || f != want {
			t.Errorf("%q: %v %v", s, f, err)
		}
	}
	if _, err := ParseFormat("json"); err == nil {
		t.Error("json accepted")
	}
	_ = bufio.ScanLines
}

func TestReadAllocs(t *testing.T) {
	// One file large enough that no epoch boundary (file reopen) falls in
	// the measured reads; AllocsPerRun counts the pipeline's goroutines too.
	paths := genFiles(t, 1, genConfig{Lines: 40000, Sep: '\t', Frequent: 20, PRare: 0.3, PMissing: 0.1})
	o := Options{Buckets: buckets(DefaultNumCat, 1000)}
	o.BatchSize, o.Workers = 1000, 2
	r, err := Open(paths, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := formats.NewBatch(r.Schema(), 1000, nil)
	for range 10 { // warm up: the producer runs ahead through every chunk
		if _, err := r.Read(b); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := r.Read(b); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.2f allocations per Read of 1000 samples", allocs)
	if allocs >= 0.5 {
		t.Errorf("%.2f allocations per Read", allocs)
	}
}
