package criteo

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestGolden dumps what the fixtures read as — hashed keys with buckets
// 1000+s, vocabulary ids with MinCount 1, stats and errors — and compares it
// with testdata/<fixture>.golden, so a change of parsing, hashing or id
// assignment shows up as a diff (regenerate with -update).
func TestGolden(t *testing.T) {
	for _, name := range []string{"small.tsv", "small.csv", "bad.tsv", "badheader.csv"} {
		t.Run(name, func(t *testing.T) {
			path := "testdata/" + name
			var out bytes.Buffer
			dump := func(title string, o Options) {
				fmt.Fprintf(&out, "## %s\n", title)
				o.BatchSize = 2
				r, err := Open([]string{path}, o)
				if err != nil {
					t.Fatal(err)
				}
				d, err := formatstest.ReadAll(r, 2, 0)
				r.Close()
				for i := 0; i < d.Len(); i++ {
					fmt.Fprintf(&out, "%d label=%g dense=%.6g keys=", i, d.Labels[i][0], d.Dense[i])
					for _, k := range d.Keys[i] {
						fmt.Fprintf(&out, "%d ", k[0])
					}
					out.WriteString("\n")
				}
				fmt.Fprintf(&out, "stats %+v\n", r.Stats())
				if err != nil {
					fmt.Fprintf(&out, "error: %s\n", strings.ReplaceAll(err.Error(), "\t", `\t`))
					if !formats.IsCorrupt(err) {
						t.Errorf("error not corrupt: %v", err)
					}
				}
			}
			dump("hash", Options{Buckets: buckets(DefaultNumCat, 1000)})
			dump("hash, skip bad", Options{Buckets: buckets(DefaultNumCat, 1000), Layout: Layout{SkipBad: true}})
			v, err := BuildVocab([]string{path}, VocabOptions{MinCount: 1, Layout: Layout{SkipBad: true}})
			if err == nil {
				fmt.Fprintf(&out, "## vocab sizes %v\n", v.SlotSizes())
				dump("vocab", Options{Vocab: v, Layout: Layout{SkipBad: true}})
			} else {
				fmt.Fprintf(&out, "## vocab error: %v\n", err)
			}
			golden := "testdata/" + name + ".golden"
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("output differs from %s:\n%s", golden, out.Bytes())
			}
		})
	}
}
