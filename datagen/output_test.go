package datagen

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// noSpace fails the first write to a file whose base name is name.
type noSpace struct{ *os.File }

func (f noSpace) Write(p []byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

func failOn(name string) atomicfile.OpenFunc {
	return func(p string) (atomicfile.OutFile, error) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil && (filepath.Base(p) == name || strings.HasPrefix(filepath.Base(p), "."+name+".tmp-")) {
			return noSpace{f}, nil
		}
		return f, err
	}
}

func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			m[p] = string(b)
		}
		return nil
	})
	return m
}

// TestGenerateFailureKeepsOld: when the disk fills up at any file of a run
// (a data file, a list, the metadata, gen_params.json), or the run is
// cancelled, the dataset of an earlier run stays exactly as it was and
// nothing of the new one remains; without Force an existing dataset is
// refused before anything is generated.
func TestGenerateFailureKeepsOld(t *testing.T) {
	for _, f := range []Format{Norm, Parquet, Raw} {
		dir := t.TempDir()
		p := smallParams(f, filepath.Join(dir, "data"))
		if _, err := GenerateTo(context.Background(), p, Output{}, nil); err != nil {
			t.Fatal(err)
		}
		before := tree(t, dir)
		p.Seed++
		if _, err := GenerateTo(context.Background(), p, Output{}, nil); !errors.Is(err, atomicfile.ErrExists) {
			t.Errorf("%s: second run without Force: %v, want ErrExists", f, err)
		}
		victims := []string{"gen_1.data", "file_list.txt", "file_list_test.txt", ParamsFile}
		switch f {
		case Parquet:
			victims = []string{"gen_1.parquet", "_metadata.json", "file_list.txt", ParamsFile}
		case Raw:
			victims = []string{"train_data.bin", "test_data.bin", filepath.Base(ParamsPath(p))}
		}
		for _, v := range victims {
			_, err := GenerateTo(context.Background(), p, Output{Force: true, Open: failOn(v)}, nil)
			if !errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), ".tmp-") {
				t.Errorf("%s, %s full: %v, want ENOSPC naming no temporary file", f, v, err)
			}
			if got := tree(t, dir); len(got) != len(before) {
				t.Errorf("%s, %s full: %d files, want the old %d", f, v, len(got), len(before))
			} else {
				for k, b := range before {
					if got[k] != b {
						t.Errorf("%s, %s full: %s changed", f, v, k)
					}
				}
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := GenerateTo(ctx, p, Output{Force: true}, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("%s cancelled: %v", f, err)
		}
		if got := tree(t, dir); len(got) != len(before) {
			t.Errorf("%s cancelled: %d files, want the old %d", f, len(got), len(before))
		}
	}
}
