package cuda

import (
	"errors"
	"strings"
	"testing"
	"unsafe"
)

// hostCtx is a Ctx for dry tapes: no driver is called.
func hostCtx() *Ctx {
	return &Ctx{params: make([]uint64, 64), pptrs: make([]uintptr, 64), scal: make([]float64, 4)}
}

// TestDryTapeFingerprints records the same calls twice (equal tapes), then
// with one argument changed (the tape names the call), without a driver.
func TestDryTapeFingerprints(t *testing.T) {
	c := hostCtx()
	rec := func(a float32, n int) *Tape {
		c.StartTape(true)
		c.SetTapeLabel("op1")
		if err := c.Launch(Func(7), D1(4), D1(256), 0, Stream(3), Ptr(0x1000), a, n); err != nil {
			t.Fatal(err)
		}
		c.SetTapeLabel("op2")
		if err := c.DtoD(Ptr(0x2000), Ptr(0x3000), 64, Stream(3)); err != nil {
			t.Fatal(err)
		}
		if err := c.Memset32(Ptr(0x2000), 0, 16, Stream(3)); err != nil {
			t.Fatal(err)
		}
		if err := c.Record(Event(9), Stream(3)); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(Stream(4), Event(9)); err != nil {
			t.Fatal(err)
		}
		if err := c.Gemm(Stream(3), TF32, false, true, 8, 8, 8, 1, Ptr(1), 8, Ptr(2), 8, 0, Ptr(3), 8); err != nil {
			t.Fatal(err)
		}
		return c.StopTape()
	}
	a, b := rec(1.5, 10), rec(1.5, 10)
	if len(a.Items) != 6 || a.Diff(b) != -1 {
		t.Fatalf("equal calls: %d items, diff at %d", len(a.Items), a.Diff(b))
	}
	if a.Items[0].Func != 7 || a.Items[0].Label != "op1" || a.Items[1].Label != "op2" {
		t.Errorf("items %+v", a.Items[:2])
	}
	if d := a.Diff(rec(2.5, 10)); d != 0 {
		t.Errorf("a changed float argument: diff at %d, want 0", d)
	}
	if d := a.Diff(rec(1.5, 11)); d != 0 {
		t.Errorf("a changed int argument: diff at %d, want 0", d)
	}
	short := rec(1.5, 10)
	short.Items = short.Items[:5]
	if d := a.Diff(short); d != 5 {
		t.Errorf("a missing call: diff at %d, want 5", d)
	}
	if c.tape != nil {
		t.Error("StopTape left the tape on")
	}
}

// TestDryTapeRefusesHostSync: a host synchronisation or host copy made
// while a dry tape records fails with ErrHostSync (it cannot be part of a
// graph) and is named in Unsafe.
func TestDryTapeRefusesHostSync(t *testing.T) {
	var buf [16]byte
	for name, call := range map[string]func(c *Ctx) error{
		"cuStreamSynchronize": func(c *Ctx) error { return c.StreamSync(Stream(3)) },
		"cuEventSynchronize":  func(c *Ctx) error { return c.EventSync(Event(1)) },
		"cuCtxSynchronize":    func(c *Ctx) error { return c.Synchronize() },
		"cuMemcpyDtoHAsync":   func(c *Ctx) error { return c.DtoH(unsafe.Pointer(&buf[0]), Ptr(8), 16, Stream(3)) },
		"cuMemcpyHtoDAsync":   func(c *Ctx) error { return c.HtoD(Ptr(8), unsafe.Pointer(&buf[0]), 16, Stream(3)) },
		"cuEventQuery":        func(c *Ctx) error { _, err := c.EventDone(Event(1)); return err },
	} {
		c := hostCtx()
		c.StartTape(true)
		c.SetTapeLabel("download")
		err := call(c)
		tp := c.StopTape()
		if !errors.Is(err, ErrHostSync) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v", name, err)
		}
		if tp.Unsafe != name+" (download)" {
			t.Errorf("%s: Unsafe %q", name, tp.Unsafe)
		}
	}
}

// TestGPUCaptureRefusesHostSync: a host synchronisation inside a stream
// capture fails loudly (the driver refuses it and the capture ends in an
// error), and a live tape names it; never a graph that silently lacks it.
func TestGPUCaptureRefusesHostSync(t *testing.T) {
	d := openOrSkip(t)
	err := d.Do(func(c *Ctx) error {
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		p, err := c.Malloc(64)
		if err != nil {
			return err
		}
		defer c.Free(p)
		if err := c.BeginCapture(s); err != nil {
			return err
		}
		c.StartTape(false)
		if err := c.Memset32(p, 1, 16, s); err != nil {
			t.Errorf("memset under capture: %v", err)
		}
		serr := c.StreamSync(s)
		tp := c.StopTape()
		g, eerr := c.EndCapture(s)
		if g != nil {
			c.DestroyGraph(g)
		}
		if serr == nil && eerr == nil {
			t.Error("a stream synchronisation inside a capture went through and the capture succeeded")
		}
		if tp.Unsafe != "cuStreamSynchronize" {
			t.Errorf("tape Unsafe %q", tp.Unsafe)
		}
		t.Logf("sync under capture: %v; end capture: %v", serr, eerr)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
