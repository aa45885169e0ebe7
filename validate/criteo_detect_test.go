package validate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/dataset"
)

// criteoCSV writes n rows of Criteo CSV text with its header line.
func criteoCSV(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("label")
	for i := 1; i <= 13; i++ {
		fmt.Fprintf(&b, ",I%d", i)
	}
	for i := 1; i <= 26; i++ {
		fmt.Fprintf(&b, ",C%d", i)
	}
	b.WriteString("\n")
	for r := range n {
		fmt.Fprintf(&b, "%d", r%2)
		for i := range 13 {
			if (r+i)%5 == 0 {
				b.WriteString(",")
			} else {
				fmt.Fprintf(&b, ",%d.0", r*i)
			}
		}
		for i := range 26 {
			fmt.Fprintf(&b, ",%08x", uint32(r*31+i*7919))
		}
		b.WriteString("\n")
	}
	p := filepath.Join(t.TempDir(), "sample.txt")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCriteoTextNeverRaw: Criteo text without --slot-size-array or --vocab
// is refused with the flag to give (it was validated as Raw with hundreds
// of bogus problems), and one --slot-size-array value means every slot
// (it panicked with an index out of range).
func TestCriteoTextNeverRaw(t *testing.T) {
	p := criteoCSV(t, 50)
	if _, err := Run(p, dataset.Spec{}, Options{}); err == nil || !strings.Contains(err.Error(), "--slot-size-array") {
		t.Errorf("Criteo text without hash buckets: %v, want an error naming --slot-size-array", err)
	}
	rep, err := Run(p, dataset.Spec{SlotSizeArray: []int64{1000}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 0 || rep.Samples != 50 || rep.Format != dataset.CriteoCSV.String() {
		t.Errorf("Criteo text with one slot size: %d problems, %d samples, format %s: %+v", rep.Total, rep.Samples, rep.Format, rep.Problems)
	}
	if _, err := Run(p, dataset.Spec{SlotSizeArray: []int64{1000, 5}}, Options{}); err == nil {
		t.Errorf("two slot sizes for 26 slots: no error")
	}
}
