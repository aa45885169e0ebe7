package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// genSmall is a quick gen command line writing to source.
func genSmall(format, source string, extra ...string) []string {
	return append([]string{"gen", "--format", format, "--num-slot", "2", "--dense-dim", "1", "--slot-size-array", "50,50",
		"--num-files", "1", "--eval-num-files", "1", "--num-samples-per-file", "100", "--num-samples", "100", "--eval-num-samples", "50",
		"--seed", "1", "--source", source}, extra...)
}

// TestGenEvalBesideSource: with --source alone the eval set goes beside it,
// not over data/ (another dataset's files), and a second run over a dataset
// is refused without --force (exit 2), leaving it as it was.
func TestGenEvalBesideSource(t *testing.T) {
	t.Chdir(t.TempDir())
	if out, code := ctrkitArgs(t, genSmall("norm", "data/file_list.txt")...); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	before, _ := os.ReadFile("data/file_list_test.txt")
	for _, f := range []string{"criteo", "raw"} {
		src := filepath.Join(f, "file_list.txt")
		if f == "raw" {
			src = filepath.Join(f, "train.bin")
		}
		if out, code := ctrkitArgs(t, genSmall(f, src)...); code != 0 {
			t.Fatalf("gen %s: exit %d\n%s", f, code, out)
		}
		eval := map[string]string{"criteo": "criteo/file_list_test.txt", "raw": "raw/test_data.bin"}[f]
		if _, err := os.Stat(eval); err != nil {
			t.Errorf("gen %s --source %s: no eval set at %s: %v", f, src, eval, err)
		}
	}
	if after, _ := os.ReadFile("data/file_list_test.txt"); string(after) != string(before) {
		t.Error("a later gen overwrote data/file_list_test.txt")
	}
	out, code := ctrkitArgs(t, genSmall("parquet", "data/file_list.txt")...)
	if code != 2 || !strings.Contains(out, "--force") {
		t.Errorf("gen over a dataset: exit %d, want 2 and a hint at --force\n%s", code, out)
	}
	if after, _ := os.ReadFile("data/file_list_test.txt"); string(after) != string(before) {
		t.Error("a refused gen changed data/")
	}
	if out, code := ctrkitArgs(t, genSmall("parquet", "data/file_list.txt", "--force")...); code != 0 {
		t.Errorf("gen --force: exit %d\n%s", code, out)
	}
	if _, err := os.Stat("data/train/gen_0.data"); err == nil {
		t.Error("gen --force left the old dataset's data file data/train/gen_0.data")
	}
}

// TestConvertRefusals: a FIFO input is refused by name (it would block
// forever), a Raw output that is a directory is refused before converting,
// an output below a file is an error (never a panic), and an existing
// output needs --force.
func TestConvertRefusals(t *testing.T) {
	t.Chdir(t.TempDir())
	if out, code := ctrkitArgs(t, genSmall("norm", "data/file_list.txt")...); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	if err := syscall.Mkfifo("fifo", 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	out, code := ctrkitArgs(t, "convert", "fifo", "x.bin", "--to", "raw")
	if code == 0 || !strings.Contains(out, "fifo is a FIFO") {
		t.Errorf("FIFO input: exit %d\n%s", code, out)
	}
	os.WriteFile("list.txt", []byte("1\nfifo\n"), 0o644)
	out, code = ctrkitArgs(t, "convert", "list.txt", "x.bin", "--to", "raw")
	if code == 0 || !strings.Contains(out, "FIFO") {
		t.Errorf("FIFO in a file list: exit %d\n%s", code, out)
	}
	os.Mkdir("rawdir", 0o755)
	out, code = ctrkitArgs(t, "convert", "data/file_list.txt", "rawdir", "--to", "raw", "--nnz-array", "1")
	if code == 0 || !strings.Contains(out, "rawdir is a directory") || strings.Contains(out, "converted") {
		t.Errorf("Raw output a directory: exit %d\n%s", code, out)
	}
	os.WriteFile("afile", nil, 0o644)
	for _, to := range []string{"norm", "parquet", "raw"} {
		out, code = ctrkitArgs(t, "convert", "data/file_list.txt", "afile/sub", "--to", to, "--nnz-array", "1")
		if code == 0 || strings.Contains(out, "panic") || !strings.Contains(out, "afile/sub") {
			t.Errorf("output below a file (%s): exit %d\n%s", to, code, out)
		}
	}
	if out, code = ctrkitArgs(t, "convert", "data/file_list.txt", "n", "--to", "norm"); code != 0 {
		t.Fatalf("convert: exit %d\n%s", code, out)
	}
	out, code = ctrkitArgs(t, "convert", "data/file_list.txt", "n", "--to", "norm")
	if code != 2 || !strings.Contains(out, "n holds a dataset") || !strings.Contains(out, "--force") {
		t.Errorf("convert over a dataset: exit %d\n%s", code, out)
	}
	out, code = ctrkitArgs(t, "convert", "n/file_list.txt", "n", "--to", "parquet", "--force")
	if code == 0 || !strings.Contains(out, "holds the input") {
		t.Errorf("convert over its own input: exit %d\n%s", code, out)
	}
	if out, code = ctrkitArgs(t, "convert", "data/file_list.txt", "n", "--to", "norm", "--force", "--samples-per-file", "30"); code != 0 {
		t.Errorf("convert --force: exit %d\n%s", code, out)
	}
}

// TestCancelledCommands runs the long commands with a context already
// cancelled (as SIGINT leaves it): each stops with an "interrupted" error
// and no output is left behind.
func TestCancelledCommands(t *testing.T) {
	t.Chdir(t.TempDir())
	if out, code := ctrkitArgs(t, genSmall("parquet", "data/file_list.txt")...); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"convert", "data/file_list.txt", "out", "--to", "norm"},
		{"convert", "data/file_list.txt", "out.bin", "--to", "raw", "--nnz-array", "1"},
		{"gen", "--format", "norm", "--num-files", "1", "--num-samples-per-file", "10", "--source", "g/file_list.txt"},
		{"validate", "data/file_list.txt"},
		{"inspect", "data/file_list.txt"},
		{"keyset", "data/file_list.txt", "--out", "k.keyset"},
		{"bench", "read", "data/file_list.txt", "--epochs", "1"},
	} {
		var buf bytes.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &buf, &buf
		err := app.RunContext(ctx, permuteArgs(app, append([]string{"ctrkit"}, args...)))
		if err == nil || !strings.HasPrefix(err.Error(), "interrupted") {
			t.Errorf("%s with a cancelled context: %v, want interrupted\n%s", strings.Join(args, " "), err, buf.String())
		}
	}
	for _, p := range []string{"out", "out.bin", "g", "k.keyset"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
	if tmp := temps("."); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}
