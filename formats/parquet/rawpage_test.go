package parquet

import "testing"

// TestParsePageHeader round-trips V1 and V2 data page headers (with a
// statistics struct and a crc to skip; a V1 header's level encodings, which
// the streamed list path checks) and checks that every truncation of them
// is an error, not a panic.
func TestParsePageHeader(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		var w thriftWriter
		if v2 {
			w.i32(1, pageDataV2)
		} else {
			w.i32(1, pageData)
		}
		w.i32(2, 4096)
		w.i32(3, 1000)
		w.i32(4, -7) // crc
		if v2 {
			w.begin(8)
			w.i32(1, 512)
			w.i32(2, 0)
			w.i32(3, 512)
			w.i32(4, 0) // PLAIN
			w.i32(5, 0)
			w.i32(6, 0)
			w.boolean(7, false)
			w.begin(8)
			w.binary(1, "max")
			w.binary(2, "min")
			w.i64(3, 5)
			w.end()
			w.end()
		} else {
			w.begin(5)
			w.i32(1, 512)
			w.i32(2, 0)
			w.i32(3, 3) // definition_level_encoding RLE
			w.i32(4, 4) // repetition_level_encoding BIT_PACKED
			w.begin(5)
			w.binary(5, "12345678")
			w.end()
			w.end()
		}
		w.b = append(w.b, 0)
		h, n, err := parsePageHeader(append(w.b, 9, 9, 9))
		if err != nil || n != len(w.b) {
			t.Fatalf("v2=%v: n %d err %v, want %d", v2, n, err, len(w.b))
		}
		if h.usize != 4096 || h.csize != 1000 || h.nv != 512 || h.enc != 0 || !h.data || h.dataV2 != v2 || (v2 && h.compressed) || (!v2 && !h.compressed) ||
			(!v2 && (h.defEnc != 3 || h.repEnc != 4)) || (v2 && (h.defEnc != -1 || h.repEnc != -1)) {
			t.Fatalf("v2=%v: got %+v", v2, h)
		}
		for k := 0; k < len(w.b); k++ {
			if _, _, err := parsePageHeader(w.b[:k]); err == nil {
				t.Fatalf("v2=%v: truncated to %d of %d bytes: no error", v2, k, len(w.b))
			}
		}
	}
	// A dictionary page header.
	{
		var w thriftWriter
		w.i32(1, pageDictionary)
		w.i32(2, 800)
		w.i32(3, 300)
		w.begin(7)
		w.i32(1, 100)
		w.i32(2, 2) // PLAIN_DICTIONARY
		w.boolean(3, true)
		w.end()
		w.b = append(w.b, 0)
		h, n, err := parsePageHeader(w.b)
		if err != nil || n != len(w.b) || h.typ != pageDictionary || !h.dictHdr || h.data || h.nv != 100 || h.enc != 2 || h.usize != 800 || h.csize != 300 {
			t.Fatalf("dictionary page header: %+v, n %d, err %v", h, n, err)
		}
	}
	// Missing sizes.
	var w thriftWriter
	w.i32(1, pageData)
	w.b = append(w.b, 0)
	if _, _, err := parsePageHeader(w.b); err == nil {
		t.Fatal("header without sizes: no error")
	}
}

// FuzzParsePageHeader checks that no input panics.
func FuzzParsePageHeader(f *testing.F) {
	f.Add([]byte{0x15, 0x00, 0x15, 0x80, 0x40, 0x15, 0xd0, 0x0f, 0x2c, 0x15, 0x80, 0x08, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := parsePageHeader(b)
		if err == nil && (n > len(b) || n <= 0) {
			t.Fatalf("n %d of %d bytes, header %+v", n, len(b), h)
		}
	})
}
