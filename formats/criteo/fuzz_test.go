package criteo

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"testing"
)

// FuzzParseLine parses arbitrary lines: no panic; a line that parses,
// re-rendered as TSV, parses to the same values.
func FuzzParseLine(f *testing.F) {
	for _, name := range []string{"testdata/small.tsv", "testdata/small.csv", "testdata/bad.tsv", "testdata/badheader.csv", samplePath} {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		csv := bytes.HasSuffix([]byte(name), []byte(".csv")) || name == samplePath
		for i, line := range bytes.Split(data, []byte{'\n'}) {
			if i >= 20 {
				break
			}
			f.Add(line, csv)
		}
	}
	f.Add([]byte("1e10\t-0\t+5\t2.6e2\t1e999\t-1e999\t.0\t0.\t00\t\t\t\t\t\tzzzzzzzz\tABCDEF01"+string(bytes.Repeat([]byte{'\t'}, 24))), false)
	f.Fuzz(func(t *testing.T, line []byte, csv bool) {
		sep := byte('\t')
		if csv {
			sep = ','
		}
		s := newSample()
		if _, err := ParseLine(&s, line, sep); err != nil {
			return
		}
		if math.IsNaN(float64(s.Label)) || math.IsInf(float64(s.Label), 0) {
			t.Fatalf("label %v accepted", s.Label)
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		fields := bytes.Split(line, []byte{sep})
		if len(fields) != 40 {
			t.Fatalf("%d fields accepted", len(fields))
		}
		out := strconv.AppendFloat(nil, float64(s.Label), 'g', -1, 32)
		for _, x := range s.Dense {
			out = append(out, '\t')
			out = strconv.AppendInt(out, int64(x), 10)
		}
		for j, v := range s.Cat {
			out = append(out, '\t')
			switch f := fields[14+j]; {
			case v == Missing:
				if len(f) != 0 {
					t.Fatalf("C%d %q is Missing", j+1, f)
				}
			case v < 1<<32:
				out = append(out, strconv.FormatUint(v|1<<32, 16)[1:]...) // 8 hex digits
			default:
				if bytes.ContainsAny(f, "\t\r\n") {
					return // cannot be rendered as a TSV field
				}
				out = append(out, f...)
			}
		}
		s2 := newSample()
		cl, err := ParseLine(&s2, out, '\t')
		if err != nil || cl != 0 {
			t.Fatalf("re-rendered %q: %v (clamped %d)", out, err, cl)
		}
		if math.Float32bits(s.Label) != math.Float32bits(s2.Label) {
			t.Fatalf("label %v → %v", s.Label, s2.Label)
		}
		for j := range s.Dense {
			if s.Dense[j] != s2.Dense[j] {
				t.Fatalf("I%d %d → %d", j+1, s.Dense[j], s2.Dense[j])
			}
		}
		for j := range s.Cat {
			if s.Cat[j] != s2.Cat[j] {
				t.Fatalf("C%d %x → %x", j+1, s.Cat[j], s2.Cat[j])
			}
		}
	})
}

// FuzzLoadVocab loads arbitrary vocabulary files: no panic, and a file that
// loads saves back to the same bytes.
func FuzzLoadVocab(f *testing.F) {
	dir := f.TempDir()
	seed := NewVocab([][]uint64{{1, 2, 3}, {}, {Missing - 1}}, 6)
	p := dir + "/seed.bin"
	if err := seed.Save(p); err != nil {
		f.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	f.Add(data)
	f.Add(data[:20])
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 8 && string(data[:8]) != vocabMagic {
			copy(data, vocabMagic) // spend the effort past the magic
		}
		if len(data) >= 4 {
			c := crc32c(data[:len(data)-4])
			data[len(data)-4], data[len(data)-3], data[len(data)-2], data[len(data)-1] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
		}
		q := t.TempDir() + "/v.bin"
		if err := os.WriteFile(q, data, 0o644); err != nil {
			t.Fatal(err)
		}
		v, err := LoadVocab(q)
		if err != nil {
			return
		}
		q2 := t.TempDir() + "/v2.bin"
		if err := v.Save(q2); err != nil {
			t.Fatal(err)
		}
		back, _ := os.ReadFile(q2)
		if !bytes.Equal(back, data) {
			t.Fatalf("save of a loaded vocabulary differs")
		}
	})
}
