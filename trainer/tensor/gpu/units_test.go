package gpu

import (
	"io/fs"
	"strings"
	"testing"
)

// TestUnits: one compile unit per kernel file, each common.cuh then the
// file under its own #line name, so a compile error names the file and its
// line, and every kernel file is in exactly one unit.
func TestUnits(t *testing.T) {
	us, err := Units()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := fs.Glob(kernelFS, "kernels/*.cu")
	if len(us) != len(files) || len(us) < 10 {
		t.Fatalf("%d units for %d kernel files", len(us), len(files))
	}
	head, _ := kernelFS.ReadFile("kernels/common.cuh")
	seen := map[string]bool{}
	for _, u := range us {
		body, err := kernelFS.ReadFile("kernels/" + u.Name)
		if err != nil || seen[u.Name] {
			t.Fatalf("unit %q: %v (seen before: %v)", u.Name, err, seen[u.Name])
		}
		seen[u.Name] = true
		if !strings.HasPrefix(u.Src, string(head)) || !strings.HasSuffix(u.Src, "#line 1 \""+u.Name+"\"\n"+string(body)) {
			t.Errorf("unit %s is not common.cuh, #line, the file", u.Name)
		}
	}
}
