package datagen

import (
	"bufio"
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
)

// inv32 returns the multiplicative inverse of odd a modulo 2^32.
func inv32(a uint32) uint32 {
	x := a
	for range 5 {
		x *= 2 - a*x
	}
	return x
}

// criteoUnhash inverts CriteoHash.
func criteoUnhash(s int, h uint32) int64 {
	h ^= h >> 16
	h *= inv32(0x846ca68b)
	h ^= h>>15 ^ h>>30
	h *= inv32(0x7feb352d)
	h ^= h >> 16
	return int64(h ^ uint32(s)*0x9e3779b9)
}

func TestCriteoHashBijective(t *testing.T) {
	for s := range 30 {
		for _, k := range []int64{0, 1, 2, 999, 1 << 31, 1<<32 - 1} {
			if got := criteoUnhash(s, CriteoHash(s, k)); got != k {
				t.Fatalf("slot %d key %d: unhash %d", s, k, got)
			}
		}
	}
}

func TestCriteoText(t *testing.T) {
	dir := t.TempDir()
	p := smallParams(Criteo, dir)
	p.DenseDim, p.NumSlot = 13, 26
	p.SlotSizeArray = make([]int64, 26)
	for i := range p.SlotSizeArray {
		p.SlotSizeArray[i] = int64(1 + i*i*100)
	}
	p.NumFiles, p.EvalNumFiles, p.NumSamplesPerFile = 1, 1, 10000
	res, err := Generate(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Files[0].Path, filepath.Join("train", "gen_0.txt")) {
		t.Errorf("file name %s", res.Files[0].Path)
	}
	files, err := formats.ReadFileList(p.Source)
	if err != nil || len(files) != 1 {
		t.Fatalf("file list: %v %v", files, err)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines, fields, empty, pos int
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 40 {
			t.Fatalf("line %d: %d fields, want 40", lines+1, len(cols))
		}
		switch cols[0] {
		case "1":
			pos++
		case "0":
		default:
			t.Fatalf("line %d: label %q", lines+1, cols[0])
		}
		for j, c := range cols[1:] {
			fields++
			if c == "" {
				empty++
				continue
			}
			if j < 13 {
				x, err := strconv.Atoi(c)
				if err != nil || x < 0 || x >= intDenseLevels {
					t.Fatalf("line %d: dense %q", lines+1, c)
				}
				continue
			}
			s := j - 13
			h, err := strconv.ParseUint(c, 16, 32)
			if err != nil || len(c) != 8 {
				t.Fatalf("line %d: categorical %q", lines+1, c)
			}
			if k := criteoUnhash(s, uint32(h)); k < 0 || k >= p.SlotSizeArray[s] {
				t.Fatalf("line %d slot %d: key %d outside [0, %d)", lines+1, s, k, p.SlotSizeArray[s])
			}
		}
		lines++
	}
	if lines != 10000 {
		t.Fatalf("%d lines, want 10000", lines)
	}
	rate := float64(empty) / float64(fields)
	if math.Abs(rate-p.MissingRate) > 0.01 {
		t.Errorf("missing rate %.4f, want %.2f", rate, p.MissingRate)
	}
	ctr := float64(pos) / float64(lines)
	if math.Abs(ctr-TargetCTR) > 0.04 {
		t.Errorf("CTR %.3f", ctr)
	}
	t.Logf("missing %.4f, CTR %.3f, planted AUC %.4f", rate, ctr, res.PlantedAUC)
}
