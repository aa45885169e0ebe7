package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
)

// keysetBytes encodes keys as a keyset file of key type kt.
func keysetBytes(kt formats.KeyType, keys ...int64) []byte {
	var b []byte
	for _, k := range keys {
		if kt == formats.KeyI64 {
			b = binary.LittleEndian.AppendUint64(b, uint64(k))
		} else {
			b = binary.LittleEndian.AppendUint32(b, uint32(k))
		}
	}
	return b
}

func seq(lo, hi int64) []int64 {
	var s []int64
	for k := lo; k <= hi; k++ {
		s = append(s, k)
	}
	return s
}

// TestKeysetCommand writes keysets of Norm lists (both key types), a Raw
// file and a Parquet dataset, one per list and one per file, and compares
// the bytes with the keys the fixtures hold and the output with a golden
// transcript.
func TestKeysetCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	// a.data: slot 0 keys i%7, slot 1 keys i%5 for i < 40; b.data: i < 3.
	writeNormFixture(t, "a.data", 40, norm.CheckSum, formats.KeyU32)
	writeNormFixture(t, "b.data", 3, norm.CheckSum, formats.KeyU32)
	writeNormFixture(t, "c.data", 40, norm.CheckNone, formats.KeyI64)
	os.WriteFile("list.txt", []byte("2\na.data\nb.data\n"), 0o644)
	os.WriteFile("list64.txt", []byte("1\nc.data\n"), 0o644)
	got := transcript(t, 0,
		[]string{"keyset", "list.txt", "--out", "list.keyset", "--slot-size-array", "7,5"},
		[]string{"keyset", "list.txt", "--out", "plain.keyset"},
		[]string{"keyset", "list.txt", "--out", "per", "--per-file", "--slot-size-array", "7,5"},
		[]string{"keyset", "list64.txt", "--out", "c.keyset", "--slot-size-array", "7,5"},
		[]string{"convert", "list.txt", "a.bin", "--to", "raw", "--nnz-array", "1", "--out-float-label-dense"},
		[]string{"keyset", "a.bin", "--out", "raw.keyset", "--label-dim", "1", "--dense-dim", "1", "--num-slot", "2",
			"--float-label-dense", "--slot-size-array", "7,5"},
		[]string{"convert", "list.txt", "pq", "--to", "parquet", "--nnz-array", "1", "--samples-per-file", "40"},
		[]string{"keyset", "pq", "--out", "pqper", "--per-file", "--slot-size-array", "7,5", "--i64-input-key"},
	)
	goldenConvert(t, "keyset.golden", []byte(got))

	all := seq(0, 11) // slot 0: 0..6, slot 1: 7 + 0..4
	for _, c := range []struct {
		path string
		want []byte
	}{
		{"list.keyset", keysetBytes(formats.KeyU32, all...)},
		{"plain.keyset", keysetBytes(formats.KeyU32, seq(0, 6)...)},
		{"per/a.data.keyset", keysetBytes(formats.KeyU32, all...)},
		{"per/b.data.keyset", keysetBytes(formats.KeyU32, 0, 1, 2, 7, 8, 9)},
		{"c.keyset", keysetBytes(formats.KeyI64, all...)},
		{"raw.keyset", keysetBytes(formats.KeyU32, all...)},
		{"pqper/part_0.parquet.keyset", keysetBytes(formats.KeyI64, all...)},
		{"pqper/part_1.parquet.keyset", keysetBytes(formats.KeyI64, 0, 1, 2, 7, 8, 9)},
	} {
		b, err := os.ReadFile(c.path)
		if err != nil {
			t.Error(err)
			continue
		}
		if !bytes.Equal(b, c.want) {
			t.Errorf("%s: % x\nwant % x", c.path, b, c.want)
		}
	}
	// The bytes of one keyset of each key type, as golden files too.
	for _, p := range []string{"list.keyset", "c.keyset"} {
		b, _ := os.ReadFile(p)
		goldenConvert(t, filepath.Base(p)+".golden", b)
	}
}

// TestKeysetRefused: missing or bad parameters exit 2 naming what is wrong;
// a key outside its slot's size fails (exit 1) with the file and record,
// and leaves no keyset.
func TestKeysetRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	writeNormFixture(t, "a.data", 40, norm.CheckSum, formats.KeyU32)
	os.WriteFile("day.tsv", []byte("1\t5\t\t68fd1e64\n0\t\t7\t\n"), 0o644)
	os.WriteFile("twice.txt", []byte("2\na.data\na.data\n"), 0o644)
	got := transcript(t, 2,
		[]string{"keyset", "a.data"},
		[]string{"keyset", "--out", "x.keyset"},
		[]string{"keyset", "nosuch.txt", "--out", "x.keyset"},
		[]string{"keyset", "a.data", "--out", "x.keyset", "--slot-size-array", "7,5,3"},
		[]string{"keyset", "a.data", "b.data", "--out", "x.keyset"},
		[]string{"keyset", "twice.txt", "--out", "x.keyset", "--per-file"},
		[]string{"keyset", "day.tsv", "--out", "x.keyset", "--slot-size-array", "9", "--num-slot", "1", "--dense-dim", "2"},
	)
	got += transcript(t, 1,
		[]string{"keyset", "a.data", "--out", "x.keyset", "--slot-size-array", "7,4"},
	)
	goldenConvert(t, "keyset_refused.golden", []byte(got))
	if _, err := os.Stat("x.keyset"); err == nil {
		t.Error("a failed keyset left x.keyset")
	}
}
