package hostmem

import (
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
