package gpu

import (
	"unsafe"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The overflow guard (tensor.OverflowGuard) of fp16 loss scaling.
//
// The guard owns 16 bytes of device memory: the step's flag (int32 at 0)
// and the count of skipped steps (uint64 at 8). A guarded step is
//
//	GuardBegin      memset the flag to 0; arm
//	GuardCheck(t)…  guard_check: flag = 1 when t holds Inf or NaN
//	updates         DenseUpdate, SparseUpdate, LazyFlush: their kernels get
//	                the flag's address as `skip` and change nothing when
//	                it is 1 (kernels/optim.cu optim_skipped)
//	GuardEnd        guard_end: count += flag; disarm
//
// all of it stream work with fixed addresses and arguments, so the step may
// be captured into a CUDA graph and replayed (graph.go): an armed step's
// launches hash equal from step to step. Disarmed, the updates get a null
// skip and run as without a guard. Only GuardSkipped reads the device (it
// synchronises).
//
// A skipped step leaves weights, moments and LazyGlobal's last steps as
// they were; the host's step count goes on, so a LazyGlobal row's next
// catch-up takes the skipped step as one without a gradient. A skipped
// SparseUpdate still checks its count and rows (ErrRange at the next Sync,
// as an applied one would).

var _ tensor.OverflowGuard = (*Backend)(nil)

// guardState is the guard's device words and whether a step is armed.
type guardState struct {
	mem   cuda.Ptr // int32 flag, 4 bytes pad, uint64 count
	armed bool
}

const (
	guardFlag  = 0 // byte offsets in guardState.mem
	guardCount = 8
	guardBytes = 16
)

// guardInit allocates and zeroes the guard's words the first time.
func (be *Backend) guardInit() bool {
	if be.guard != nil {
		return true
	}
	var mem cuda.Ptr
	err := be.dev.Do(func(c *cuda.Ctx) error {
		var err error
		if mem, err = c.Malloc(guardBytes); err != nil {
			return err
		}
		// Queued on the compute stream now, before any work the step
		// defers (graph.go), so it precedes every use.
		return c.Memset8(mem, 0, guardBytes, be.s)
	})
	if err != nil {
		be.fail("guard_begin", tensor.ErrNoDevice, "allocating the overflow guard: %v", err)
		return false
	}
	be.guard = &guardState{mem: mem}
	return true
}

// guardSkip is the skip argument of the update kernels: the flag's address
// while a step is armed, else 0.
func (be *Backend) guardSkip() cuda.Ptr {
	if be.guard == nil || !be.guard.armed {
		return 0
	}
	return be.guard.mem.Add(guardFlag)
}

// GuardBegin implements tensor.OverflowGuard: it clears the flag and arms
// the guard (a second GuardBegin starts the step again).
func (be *Backend) GuardBegin() {
	const op = "guard_begin"
	if be.err != nil || !be.guardInit() {
		return
	}
	flag := be.guard.mem.Add(guardFlag)
	be.guard.armed = true
	be.do(op, func(c *cuda.Ctx) error { return c.Memset32(flag, 0, 1, be.s) })
}

// GuardCheck implements tensor.OverflowGuard: guard_check over t (Float32,
// Float16 or BFloat16; other dtypes fail with ErrDType). It joins the
// fused path's side stream first (JoinGrads), so t may be a weight
// gradient computed there. A check outside GuardBegin…GuardEnd raises the
// flag only until the next GuardBegin clears it.
func (be *Backend) GuardCheck(t tensor.Tensor) {
	const op = "guard_check"
	if !be.halves(op, t) || t.Len() == 0 || !be.guardInit() {
		return
	}
	be.JoinGrads()
	n, code, flag := t.Len(), dt(t), be.guard.mem.Add(guardFlag)
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "guard_check", (n*t.DType.Size()+15)/16, Ptr(t), code, int64(n), flag)
	})
}

// GuardFlag is the step's flag as an Int32 [1] tensor (0 clear, 1
// raised), owned by the guard (never Free it): with several GPUs, an
// all-reduce of it with Max between the checks and the updates makes every
// rank skip a step that overflowed on any (each rank's flag is its own
// otherwise). Call GuardBegin first; the zero tensor after an error.
func (be *Backend) GuardFlag() tensor.Tensor {
	if be.err != nil || !be.guardInit() {
		return tensor.Tensor{}
	}
	return tensor.Tensor{DType: tensor.Int32, Shape: []int{1}, Buf: &store{be: be, p: be.guard.mem.Add(guardFlag), n: 1}}
}

// GuardEnd implements tensor.OverflowGuard: it counts the step when the
// flag is raised and disarms; a no-op when no step is armed.
func (be *Backend) GuardEnd() {
	const op = "guard_end"
	if be.guard == nil || !be.guard.armed {
		return
	}
	be.guard.armed = false
	flag, count := be.guard.mem.Add(guardFlag), be.guard.mem.Add(guardCount)
	be.do(op, func(c *cuda.Ctx) error { return be.launch(c, "guard_end", cuda.D1(1), cuda.D1(1), 0, flag, count) })
}

// GuardSkipped implements tensor.OverflowGuard: the steps skipped since the
// backend was made. It synchronises as Sync does (inside a graph step it
// ends the graph) and returns Sync's error when there is one.
func (be *Backend) GuardSkipped() (int64, error) {
	be.graphBreak("GuardSkipped")
	if err := be.Sync(); err != nil || be.guard == nil {
		return 0, err
	}
	var n uint64
	err := be.dev.Do(func(c *cuda.Ctx) error {
		h, err := be.staging(c, 8)
		if err != nil {
			return err
		}
		if err := c.DtoH(unsafe.Pointer(&h[0]), be.guard.mem.Add(guardCount), 8, be.s); err != nil {
			return err
		}
		if err := c.StreamSync(be.s); err != nil {
			return err
		}
		n = *(*uint64)(unsafe.Pointer(&h[0]))
		return nil
	})
	if err != nil {
		be.fail("guard_skipped", tensor.ErrNoDevice, "%v", err)
		return 0, be.err
	}
	return int64(n), nil
}

// closeGuard frees the guard's words (on the device goroutine).
func (be *Backend) closeGuard(c *cuda.Ctx) {
	if be.guard != nil {
		c.Free(be.guard.mem)
		be.guard = nil
	}
}
