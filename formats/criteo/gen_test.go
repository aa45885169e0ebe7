package criteo

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// genConfig shapes generated Criteo-like text.
type genConfig struct {
	Lines    int
	Sep      byte
	Header   bool
	Frequent int     // values per slot in the frequent pool
	PRare    float64 // probability of a random (mostly unique) value
	PMissing float64
}

// genText writes Criteo-like text: labels 0/1, integer columns as ints,
// float renderings, negatives or missing, categorical 8-hex values drawn from
// a small pool (frequent), at random (rare) or missing, plus an occasional
// non-hex string.
func genText(path string, seed uint64, c genConfig) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	rng := rand.New(rand.NewPCG(seed, 7))
	if c.Header {
		w.WriteString("label")
		for i := 1; i <= DefaultNumDense; i++ {
			fmt.Fprintf(w, "%cI%d", c.Sep, i)
		}
		for i := 1; i <= DefaultNumCat; i++ {
			fmt.Fprintf(w, "%cC%d", c.Sep, i)
		}
		w.WriteByte('\n')
	}
	var line []byte
	for n := 0; n < c.Lines; n++ {
		line = strconv.AppendInt(line[:0], int64(rng.IntN(2)), 10)
		for i := 0; i < DefaultNumDense; i++ {
			line = append(line, c.Sep)
			switch r := rng.IntN(10); {
			case r < 2: // missing
			case r < 3:
				line = strconv.AppendInt(line, -int64(rng.IntN(3)), 10)
			case r < 5:
				line = strconv.AppendInt(line, int64(rng.IntN(100000)), 10)
				line = append(line, ".0"...)
			default:
				line = strconv.AppendInt(line, int64(rng.IntN(1000)), 10)
			}
		}
		for s := 0; s < DefaultNumCat; s++ {
			line = append(line, c.Sep)
			r := rng.Float64()
			switch {
			case r < c.PMissing:
			case r < c.PMissing+c.PRare:
				line = fmt.Appendf(line, "%08x", rng.Uint32())
			case r < c.PMissing+c.PRare+0.01:
				line = fmt.Appendf(line, "s%d", rng.IntN(50))
			default:
				line = fmt.Appendf(line, "%08x", uint32(s)<<24|uint32(rng.IntN(c.Frequent)))
			}
		}
		line = append(line, '\n')
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func genFiles(t testing.TB, nfiles int, c genConfig) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i := 0; i < nfiles; i++ {
		p := filepath.Join(dir, fmt.Sprintf("part%d.txt", i))
		if err := genText(p, uint64(i+1), c); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}
