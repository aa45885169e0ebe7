package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
)

// underMemoryLimit runs ctrkit args in a child process limited to 4 GiB of
// address space (ulimit -v 4194304), returning its output and exit status.
func underMemoryLimit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to set the limit")
	}
	cmd := exec.Command("sh", append([]string{"-c", `ulimit -v 4194304 && exec "$0" "$@"`, os.Args[0]}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1", "GOMAXPROCS=2")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestHostileInputsUnderMemoryLimit: the hostile inputs of issue 15 each end
// in a clean error (exit 1 or 2, a message saying what to change) or a
// bounded run within 4 GiB of address space — never an out-of-memory crash:
// a footer declaring 2^31-1 schema children, a Norm header whose dense_dim
// makes batches of 256 GiB, --num-slot 2147483647, and a file list naming
// one file 10^6 times.
func TestHostileInputsUnderMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes; -short")
	}
	dir := t.TempDir()
	footer := filepath.Join("..", "..", "formats", "parquet", "testdata", "hostile_children", parquet.FileListName)

	// A valid Norm file of one sample of dense_dim 2^20 (4 MiB).
	wide := filepath.Join(dir, "wide.data")
	s := formats.NewSchema(1, 1<<20, []int{1}, nil, formats.KeyU32)
	w, err := norm.Create(wide, &s, norm.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := formats.NewBatch(&s, 1, nil)
	if err := b.AppendSample([]float32{1}, make([]float32, 1<<20), [][]int64{{3}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	rawFile := filepath.Join(dir, "x.bin")
	if err := os.WriteFile(rawFile, make([]byte, 160), 0o644); err != nil {
		t.Fatal(err)
	}

	// A list naming a small Parquet file 10^6 times.
	ps := formats.NewSchema(1, 2, []int{1, 1}, nil, formats.KeyU32)
	pdir := filepath.Join(dir, "pq")
	os.Mkdir(pdir, 0o755)
	pw, err := parquet.Create(filepath.Join(pdir, "part_0.parquet"), &ps, parquet.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := formats.NewBatch(&ps, 100, nil)
	for i := 0; i < 100; i++ {
		pb.AppendSample([]float32{float32(i % 2)}, []float32{1, 2}, [][]int64{{int64(i)}, {int64(i % 3)}})
	}
	if err := pw.Write(pb); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := parquet.WriteMetadata(filepath.Join(pdir, parquet.MetadataName), parquet.MetadataFor(&ps, []parquet.FileStat{{FileName: "part_0.parquet", NumRows: 100}})); err != nil {
		t.Fatal(err)
	}
	const entries = 1000000
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d\n", entries)
	for i := 0; i < entries; i++ {
		sb.WriteString("part_0.parquet\n")
	}
	list := filepath.Join(pdir, "big_list.txt")
	if err := os.WriteFile(list, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		args []string
		code int    // 0: a bounded run; else the exit status
		want string // in the output
	}{
		{"footer", []string{"bench", "read", footer}, 2, "declares 2147483647 children"},
		{"footer-validate", []string{"validate", footer}, 1, "declares 2147483647 children"},
		{"norm-header-bench", []string{"bench", "read", wide}, 1, "--batchsize"},
		{"norm-header-convert", []string{"convert", wide, filepath.Join(dir, "out"), "--to", "parquet"}, 1, "--batchsize"},
		{"num-slot", []string{"validate", "--num-slot", "2147483647", rawFile}, 2, "--num-slot 2147483647"},
		{"million-entry-list", []string{"bench", "read", list, "--duration", "1s", "--batchsize", "1024"}, 0, "samples"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := underMemoryLimit(t, c.args...)
			if strings.Contains(out, "fatal error") || strings.Contains(out, "panic") || strings.Contains(out, "out of memory") {
				t.Fatalf("ctrkit %s crashed under 4 GiB:\n%s", strings.Join(c.args, " "), clipOut(out))
			}
			if (c.code == 0) != (code == 0) || (c.code != 0 && code != 1 && code != 2) || !strings.Contains(out, c.want) {
				t.Fatalf("ctrkit %s: exit %d, want %d, output saying %q:\n%s", strings.Join(c.args, " "), code, c.code, c.want, clipOut(out))
			}
		})
	}
}

func clipOut(s string) string {
	if len(s) > 3000 {
		return s[:1500] + "\n…\n" + s[len(s)-1500:]
	}
	return s
}
