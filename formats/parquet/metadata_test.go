package parquet

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
)

func TestParseMetadata(t *testing.T) {
	m, err := ParseMetadata([]byte(`{"file_stats": [{"file_name": "a/b.parquet", "num_rows": 3}],
		"labels": [{"col_name": "label", "index": 0}],
		"conts": [{"col_name": "I2", "index": 2}, {"col_name": "I1", "index": 1}],
		"cats": [{"col_name": "C1", "index": 5}, {"col_name": "C0", "index": 3}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Metadata{FileStats: []FileStat{{"a/b.parquet", 3}}, Labels: []Column{{"label", 0}},
		Conts: []Column{{"I1", 1}, {"I2", 2}}, Cats: []Column{{"C0", 3}, {"C1", 5}}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v", m)
	}
	for _, bad := range []struct{ text, msg string }{
		{`{"cats": [{"col_name": "C1", "index": -1}]}`, "negative"},
		{`{"cats": [{"col_name": "C1", "index": 1}], "conts": [{"col_name": "I1", "index": 1}]}`, "already selected"},
		{`{"file_stats": [{"file_name": "x", "num_rows": -2}]}`, "negative"},
		{`{"file_stats": [{"file_name": "", "num_rows": 2}]}`, "empty file_name"},
		{`{"cats": 3}`, "cannot unmarshal"},
		{`{} {}`, "trailing"},
		{``, "EOF"},
	} {
		_, err := ParseMetadata([]byte(bad.text))
		var fe *formats.Error
		if !errors.Is(err, formats.ErrMetadata) || !errors.As(err, &fe) || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%s: got %v, want ErrMetadata mentioning %q", bad.text, err, bad.msg)
		}
	}
	// write, read back
	p := filepath.Join(t.TempDir(), MetadataName)
	if err := WriteMetadata(p, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMetadata(p)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	os.WriteFile(p, []byte(`{"cats": [{"col_name": "C1", "index": -1}]}`), 0o644)
	if _, err := ReadMetadata(p); !errors.Is(err, formats.ErrMetadata) || err.(*formats.Error).Path != p {
		t.Fatalf("bad file: %v", err)
	}
	if err := WriteMetadata(p, &Metadata{Cats: []Column{{"a", 1}, {"b", 1}}}); !errors.Is(err, formats.ErrMetadata) {
		t.Fatalf("writing bad metadata: %v", err)
	}
}

func TestMetadataFor(t *testing.T) {
	s := formats.NewSchema(2, 2, []int{1, 3}, nil, formats.KeyU32)
	m := MetadataFor(&s, []FileStat{{"part_0.parquet", 5}})
	want := &Metadata{FileStats: []FileStat{{"part_0.parquet", 5}},
		Labels: []Column{{"label", 0}, {"label1", 1}}, Conts: []Column{{"I1", 2}, {"I2", 3}}, Cats: []Column{{"C1", 4}, {"C2", 5}}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v", m)
	}
}

// FuzzParseMetadata: no panic; what parses re-marshals and re-parses to an
// equal Metadata.
func FuzzParseMetadata(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/" + MetadataName)
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"cats": [{"col_name": "C1", "index": 2}, {"col_name": "C0", "index": 1}]}`))
	f.Add([]byte(`{"file_stats": null, "labels": [], "conts": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMetadata(data)
		if err != nil {
			if !errors.Is(err, formats.ErrMetadata) {
				t.Fatalf("error %v is not ErrMetadata", err)
			}
			return
		}
		text, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseMetadata(text)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", text, err)
		}
		norm := func(m *Metadata) *Metadata {
			c := *m
			for _, p := range []*[]Column{&c.Labels, &c.Conts, &c.Cats} {
				if len(*p) == 0 {
					*p = nil
				}
			}
			if len(c.FileStats) == 0 {
				c.FileStats = nil
			}
			return &c
		}
		if !reflect.DeepEqual(norm(m), norm(m2)) {
			t.Fatalf("round trip changed metadata:\n%+v\n%+v", m, m2)
		}
	})
}
