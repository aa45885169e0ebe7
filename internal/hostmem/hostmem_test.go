package hostmem

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unsafe"
)

func TestAlignedAlloc(t *testing.T) {
	for _, c := range []struct{ n, align int }{{0, 64}, {100, 64}, {4096, 4096}, {HugePage - 1, 512}, {HugePage, 512}, {5*HugePage + 3, 4096}} {
		b := AlignedAlloc(c.n, c.align)
		if len(b) != c.n || cap(b) != c.n {
			t.Fatalf("%+v: len %d cap %d", c, len(b), cap(b))
		}
		want := c.align
		if c.n >= HugePage {
			want = HugePage
		}
		if c.n > 0 && uintptr(unsafe.Pointer(&b[0]))%uintptr(want) != 0 {
			t.Fatalf("%+v: not %d-aligned", c, want)
		}
		for i := range b { // writable end to end
			b[i] = byte(i)
		}
	}
}

func TestMulSize(t *testing.T) {
	if MulSize(1<<40, 1<<30) != -1 || MulSize(3, 4) != 12 || MulSize(-1, 2) != -1 || MulSize() != 1 {
		t.Error("MulSize")
	}
}

// TestCheckAlloc: a size above half of what is available is an ErrMemory
// naming the size and what to lower; a small one passes.
func TestCheckAlloc(t *testing.T) {
	err := CheckAlloc("the batch", 1<<62, "the batch size (--batchsize)")
	if !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "4.0 EiB") {
		t.Fatalf("CheckAlloc(4 EiB) = %v", err)
	}
	if err := CheckAlloc("x", -1, ""); !errors.Is(err, ErrMemory) {
		t.Fatalf("CheckAlloc(-1) = %v", err)
	}
	if err := CheckAlloc("x", 4096, ""); err != nil {
		t.Fatal(err)
	}
	if FormatBytes(100) != "100 B" || FormatBytes(512<<10) != "512.0 KiB" {
		t.Error(FormatBytes(100), FormatBytes(512<<10))
	}
}

func TestStreamCopy(t *testing.T) {
	src := make([]byte, 5000)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	buf := make([]byte, 5100)
	for _, n := range []int{0, 1, 63, 255, 256, 257, 1000, 4096, 4999, 5000} {
		for _, off := range []int{0, 1, 7, 15, 16, 33} {
			for i := range buf {
				buf[i] = 0xee
			}
			dst := buf[off : off+n]
			if got := StreamCopy(dst, src[off%5:]); got != min(n, len(src)-off%5) {
				t.Fatalf("n %d off %d: copied %d", n, off, got)
			}
			want := src[off%5 : off%5+min(n, len(src)-off%5)]
			if !bytes.Equal(dst[:len(want)], want) {
				t.Fatalf("n %d off %d: bytes differ", n, off)
			}
			for i := 0; i < off; i++ {
				if buf[i] != 0xee {
					t.Fatalf("n %d off %d: byte %d before dst written", n, off, i)
				}
			}
			for i := off + len(want); i < len(buf); i++ {
				if buf[i] != 0xee {
					t.Fatalf("n %d off %d: byte %d after the copy written", n, off, i)
				}
			}
		}
	}
}
