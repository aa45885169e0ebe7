package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrHostSync is returned by a host synchronisation or a copy to or from
// host memory made while a Tape records dry (such work cannot be part of a
// CUDA graph).
var ErrHostSync = errors.New("a host synchronisation or host copy inside a recorded graph step")

// A Tape fingerprints the stream work a Ctx queues: every kernel launch,
// device copy, memset, event record and wait and cuBLAS call appends one
// Item with a hash of everything the driver is given (function, grid,
// block, shared memory, stream, argument values). Two tapes with equal
// items queue the same work, so a graph captured while one was recorded
// replays exactly what the other's calls would have run.
//
// A dry tape (StartTape(true)) records without calling the driver: the
// stream work is hashed and skipped, and host synchronisations and host
// copies fail with ErrHostSync. A live tape records and calls the driver;
// it notes host synchronisations and host copies in Unsafe (a graph
// captured then would read host memory at replay time or has failed).
type Tape struct {
	Items  []TapeItem
	Unsafe string // the first host-side call recorded, "" if none
	dry    bool
	label  string
}

// TapeItem is one recorded call: Label (the caller's, SetTapeLabel), the
// driver call, the kernel (0 for other calls) and the hash of its
// arguments.
type TapeItem struct {
	Label string
	Call  string
	Func  Func
	Hash  uint64
}

// StartTape starts recording on c (replacing any tape); dry skips the
// driver calls.
func (c *Ctx) StartTape(dry bool) { c.tape = &Tape{dry: dry} }

// StopTape stops recording and returns the tape (nil when none).
func (c *Ctx) StopTape() *Tape {
	t := c.tape
	c.tape = nil
	return t
}

// SetTapeLabel labels the items recorded next (e.g. the operation that
// issues them); a no-op without a tape.
func (c *Ctx) SetTapeLabel(s string) {
	if c.tape != nil {
		c.tape.label = s
	}
}

// Diff returns the index of the first item where t and u differ, −1 when
// they are equal (the same length and items).
func (t *Tape) Diff(u *Tape) int {
	n := min(len(t.Items), len(u.Items))
	for i := 0; i < n; i++ {
		a, b := t.Items[i], u.Items[i]
		if a.Call != b.Call || a.Func != b.Func || a.Hash != b.Hash {
			return i
		}
	}
	if len(t.Items) != len(u.Items) {
		return n
	}
	return -1
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvWord(h, w uint64) uint64 {
	for i := 0; i < 8; i++ {
		h ^= w & 0xff
		h *= fnvPrime
		w >>= 8
	}
	return h
}

// tapeWords records call with argument words ws; it reports whether the
// driver call is to be skipped (a dry tape).
func (t *Tape) note(call string, f Func, ws ...uint64) bool {
	h := uint64(fnvOffset)
	for _, w := range ws {
		h = fnvWord(h, w)
	}
	t.Items = append(t.Items, TapeItem{Label: t.label, Call: call, Func: f, Hash: h})
	return t.dry
}

// host notes a host synchronisation or host copy: a dry tape fails it, a
// live one remembers it in Unsafe and lets it run.
func (t *Tape) host(call string) (skip bool, err error) {
	if t.Unsafe == "" {
		t.Unsafe = call
		if t.label != "" {
			t.Unsafe = fmt.Sprintf("%s (%s)", call, t.label)
		}
	}
	if t.dry {
		return true, fmt.Errorf("%s: %w", call, ErrHostSync)
	}
	return false, nil
}

// tapeArgs records call with arguments of the kinds cuBLAS calls take.
func (c *Ctx) tapeArgs(call string, args ...any) bool {
	ws := make([]uint64, 0, len(args)+4)
	for _, a := range args {
		switch x := a.(type) {
		case bool:
			v := uint64(0)
			if x {
				v = 1
			}
			ws = append(ws, v)
		case int:
			ws = append(ws, uint64(x))
		case int64:
			ws = append(ws, uint64(x))
		case uint64:
			ws = append(ws, x)
		case float32:
			ws = append(ws, uint64(math.Float32bits(x)))
		case Ptr:
			ws = append(ws, uint64(x))
		case Stream:
			ws = append(ws, uint64(x))
		case Math:
			ws = append(ws, uint64(x))
		case Types:
			ws = append(ws, uint64(uint32(x.AB))<<32|uint64(uint32(x.C)))
		case LtArgs:
			ws = append(ws, uint64(x.Epilogue), uint64(x.Bias), uint64(x.Aux), uint64(x.AuxLD), uint64(x.Workspace),
				uint64(uint32(x.Types.AB))<<32|uint64(uint32(x.Types.C)), uint64(uint32(x.BiasType)))
		default: // not among the calls' types today: hash its printed value
			h := uint64(fnvOffset)
			for _, b := range []byte(fmt.Sprintf("%T %v", x, x)) {
				h = (h ^ uint64(b)) * fnvPrime
			}
			ws = append(ws, h)
		}
	}
	return c.tape.note(call, 0, ws...)
}

// noteLaunch records a kernel launch with its marshalled parameters.
func (t *Tape) noteLaunch(f Func, grid, block Dim3, shmem int, s Stream, params []uint64) bool {
	h := uint64(fnvOffset)
	for _, w := range [...]uint64{uint64(grid.X), uint64(grid.Y), uint64(grid.Z), uint64(block.X), uint64(block.Y), uint64(block.Z), uint64(shmem), uint64(s), uint64(len(params))} {
		h = fnvWord(h, w)
	}
	for _, w := range params {
		h = fnvWord(h, w)
	}
	t.Items = append(t.Items, TapeItem{Label: t.label, Call: "cuLaunchKernel", Func: f, Hash: h})
	return t.dry
}

// algoWord is a hash of a cuBLASLt algorithm (the first 64 bytes of its
// heuristic result): a recorded matmul whose plan's algorithm changed (a
// search after the capture) no longer matches the captured call.
func algoWord(a *[ltResultSize]byte) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i+8 <= 64 && i+8 <= len(a); i += 8 {
		h = fnvWord(h, binary.LittleEndian.Uint64(a[i:]))
	}
	return h
}
