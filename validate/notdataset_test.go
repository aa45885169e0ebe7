package validate

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats/norm"
)

// TestNotADataset: content that is no dataset never validates as clean (an
// empty file, /dev/urandom, NUL bytes named .tsv and random bytes passed as
// Raw data with exit 0; lists whose count line is "abc" or "-1" were read as
// Raw data). Each is an error saying what was seen.
func TestNotADataset(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 160*100) // a whole number of Criteo Raw samples
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty.bin", nil, "empty file"},
		{"nul.tsv", make([]byte, 100<<10), "named .tsv, but holds binary bytes"},
		{"nul.bin", make([]byte, 100<<10), "all zero"},
		{"random.bin", random, "label 0 is"},
		{"abc.txt", []byte("abc\nx.data\n"), `"abc" is not a file count`},
		{"neg.txt", []byte("-1\nx.data\n"), "file count -1 must be > 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name)
			if err := os.WriteFile(p, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := Run(p, dataset.Spec{}, Options{})
			if err == nil {
				t.Fatalf("Run = %s, want an error", rep.Summary())
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v, want it to say %q", err, c.want)
			}
			if _, err := dataset.Resolve(p, dataset.Spec{}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Resolve: %v, want it to say %q", err, c.want)
			}
		})
	}
	if _, err := os.Stat("/dev/urandom"); err == nil {
		_, err := Run("/dev/urandom", dataset.Spec{}, Options{})
		if !errors.Is(err, dataset.ErrNotDataset) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Run(/dev/urandom) = %v, want not a dataset: not a regular file", err)
		}
	}
	// Text forced to Raw is refused too.
	p := filepath.Join(dir, "list.txt")
	os.WriteFile(p, []byte("1\nx.data\n"), 0o644)
	if _, err := dataset.Resolve(p, dataset.Spec{Format: dataset.Raw}); !errors.Is(err, dataset.ErrNotDataset) {
		t.Errorf("Resolve(text, raw) = %v, want not a dataset", err)
	}
}

// TestZeroSamplesIsAProblem: a valid Norm file of 0 records is reported.
func TestZeroSamplesIsAProblem(t *testing.T) {
	p := filepath.Join(t.TempDir(), "zero.data")
	s := fixtureSchema()
	w, err := norm.Create(p, &s, norm.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(p, dataset.Spec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clean() || rep.Counts[KindEmpty] != 1 {
		t.Fatalf("report %s, want one %s problem", rep.Summary(), KindEmpty)
	}
}
