// Package gpu is the CUDA implementation of tensor.Backend: every operation
// of the trainer runs on an NVIDIA GPU, launched asynchronously on one
// stream, with the errors of data-dependent kernels (a key outside its slot,
// a full hash table) recorded on the device and reported at the next
// synchronisation, as tensor's execution model specifies.
//
// Floating-point tensors are Float32 (Float64 is the CPU reference's type
// and is refused with ErrDType); integer tensors are Int32, Int64 and
// Uint32. GEMMs run through cuBLAS: on Float32 operands in the arithmetic
// Options.Math selects (FP32, TF32 or BF16 tensor cores), on Float16 and
// BFloat16 ones on the tensor cores in float32 (gemm.go); everything else is ctrkit's own
// kernels (kernels/*.cu, compiled by NVRTC for the device and cached on
// disk, see package cuda).
//
// A Backend is a stream: use it from one goroutine at a time. Its CUDA calls
// run on the device's own goroutine (cuda.Device.Do).
package gpu

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"unsafe"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// Options configure a GPU backend. The zero value uses device 0 in FP32.
type Options struct {
	// Device is the CUDA ordinal.
	Device int
	// Math is the arithmetic of GEMMs on Float32 operands (cuda.FP32,
	// TF32, BF16); GEMMs on half operands ignore it (gemm.go).
	Math cuda.Math
	// Debug synchronises after every operation, so a failing kernel is
	// named by the operation that launched it.
	Debug bool
	// Fused turns the fused InnerProduct kernels (tensor.FusedDense:
	// ReLU mask and bias-gradient epilogues, weight gradients on a side
	// stream) on; the environment variable CTRKIT_FUSED=1 (or true, on,
	// yes) sets it and CTRKIT_FUSED=0 clears it for every backend New and
	// NewOnDevice open. Off by
	// default: on the H200 (2026-12-01) the reference DLRM trained at
	// 5.83 M samples/s fused against 6.93 M unfused (docs/PERFORMANCE.md).
	Fused bool
	// HalfBgradEpilogue runs the fused weight gradient of half operands
	// (GemmBgrad: dW = xᵀ·dy into float32, with db) as one cuBLASLt GEMM
	// with the BGRADA epilogue on the side stream, as float32 ones run.
	// Off (the default), GemmBgrad runs it as the searched plain GEMM
	// (Gemm: cuBLAS's split-K kernels among the candidates) and ColSum on
	// the compute stream, the unfused path's kernels: on the H200
	// (2026-12-02, bf16 DLRM, batch 65536) the side-stream epilogue GEMMs
	// (k = 65536, few output tiles) kept the step waiting ≈ 4 ms at
	// JoinGrads. CTRKIT_HALF_BGRAD_EPILOGUE=1 (or 0) sets (clears) it for
	// every backend opened, for A/B runs. FusedStats counts the plain
	// ones in Plain.
	HalfBgradEpilogue bool
	// NoAlgorithmSearch turns the cuBLASLt algorithm search off (HugeCTR's
	// algorithm_search false): each GEMM descriptor then runs the
	// heuristic's first choice, and plain GEMMs cuBLAS's own. With the
	// search (the default) the first call of each descriptor times the
	// candidates and keeps the fastest (cuda.AlgoSearch; gemm.go).
	NoAlgorithmSearch bool
}

// Validate reports an invalid option.
func (o Options) Validate() error {
	if o.Device < 0 {
		return fmt.Errorf("GPU device %d < 0", o.Device)
	}
	if o.Math > cuda.BF16 {
		return fmt.Errorf("unknown GEMM math mode %d", o.Math)
	}
	return nil
}

// Backend is the CUDA tensor.Backend.
type Backend struct {
	dev  *cuda.Device
	own  bool // dev opened by New, closed by Close
	opts Options
	err  error
	op   string // the operation being issued (for errors)
	// batch holds the operations issued inside batched, run in one call
	// of the device goroutine; nil outside it.
	batch []graphOp
	s     cuda.Stream
	mods  []cuda.Module // one per kernel file (Units)
	fns   map[string]cuda.Func
	flag  cuda.Ptr // u64[4] device error record
	ws    cuda.Ptr // workspace for one operation's temporaries
	wsLen int
	host  []byte // pinned staging for Upload/Download
	sms   int
	side  *sideStream      // weight-gradient stream (fused.go); nil until used
	srch  *cuda.AlgoSearch // nil: no algorithm search (gemm.go)
	graph *graphState      // the training step's CUDA graph (graph.go); nil until used
	guard *guardState      // the overflow guard (guard.go); nil until used
	ltNo  map[ltSig]bool
	// fstats counts the fused InnerProduct calls (fused.go: FusedStats).
	fstats fusedCounts
}

var _ tensor.Backend = (*Backend)(nil)

// New opens device o.Device and compiles the kernels. The error wraps
// cuda.ErrNoDriver when there is no usable GPU.
func New(o Options) (*Backend, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	dev, err := cuda.Open(o.Device)
	if err != nil {
		return nil, err
	}
	be, err := NewOnDevice(dev, o)
	if err != nil {
		dev.Close()
		return nil, err
	}
	be.own = true
	return be, nil
}

// NewOnDevice makes a backend on an open device (which it does not close).
func NewOnDevice(dev *cuda.Device, o Options) (*Backend, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	switch strings.ToLower(os.Getenv("CTRKIT_FUSED")) {
	case "1", "true", "on", "yes":
		o.Fused = true
	case "0", "false", "off", "no":
		o.Fused = false
	}
	switch strings.ToLower(os.Getenv("CTRKIT_HALF_BGRAD_EPILOGUE")) {
	case "1", "true", "on", "yes":
		o.HalfBgradEpilogue = true
	case "0", "false", "off", "no":
		o.HalfBgradEpilogue = false
	}
	if err := interEnvCheck(); err != nil {
		return nil, err
	}
	units, err := Units()
	if err != nil {
		return nil, err
	}
	be := &Backend{dev: dev, opts: o, fns: map[string]cuda.Func{}, sms: dev.SMs}
	if !o.NoAlgorithmSearch {
		be.srch = &cuda.AlgoSearch{}
	}
	err = dev.Do(func(c *cuda.Ctx) error {
		var err error
		if be.s, err = c.NewStream(); err != nil {
			return err
		}
		if be.mods, err = c.CompileAll(units, 0); err != nil {
			return err
		}
		if be.flag, err = c.Malloc(32); err != nil {
			return err
		}
		return c.Memset8(be.flag, 0, 32, be.s)
	})
	if err != nil {
		return nil, fmt.Errorf("starting the CUDA backend on %s: %w", dev.Name, err)
	}
	return be, nil
}

// Units are the kernels' CUDA sources as NVRTC compiles them, one module
// per .cu file (in name order): common.cuh, then the file. The files are
// compiled at once (cuda.Ctx.CompileAll), so a fresh machine's first start
// takes the longest file's compile time, not their sum, and an edited file
// recompiles alone. Each file is self-contained after common.cuh
// (check_kernels.sh compiles them that way).
func Units() ([]cuda.Unit, error) {
	head, err := kernelFS.ReadFile("kernels/common.cuh")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(kernelFS, "kernels/*.cu")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var us []cuda.Unit
	for _, n := range names {
		s, err := kernelFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		base := path.Base(n)
		us = append(us, cuda.Unit{Name: base, Src: fmt.Sprintf("%s\n#line 1 \"%s\"\n%s", head, base, s)})
	}
	return us, nil
}

// Device is the backend's device.
func (be *Backend) Device() *cuda.Device { return be.dev }

// Stream is the backend's compute stream.
func (be *Backend) Stream() cuda.Stream { return be.s }

// Name returns "cuda:<ordinal>".
func (be *Backend) Name() string { return fmt.Sprintf("cuda:%d", be.dev.Ordinal) }

// Err returns the first error seen on the host (device-side errors appear
// after Sync or Download).
func (be *Backend) Err() error { return be.err }

// Reset clears the sticky error and the device error record (for tests).
func (be *Backend) Reset() {
	be.err = nil
	be.dev.Do(func(c *cuda.Ctx) error { return c.Memset8(be.flag, 0, 32, be.s) })
}

// Close waits for the stream and releases the backend (and the device when
// New opened it).
func (be *Backend) Close() error {
	err := be.Sync()
	be.dev.Do(func(c *cuda.Ctx) error {
		if be.host != nil {
			c.HostFree(be.host)
		}
		be.closeSide(c)
		be.closeGraph(c)
		be.closeGuard(c)
		return c.DestroyStream(be.s)
	})
	if be.own {
		be.dev.Close()
	}
	return err
}

func (be *Backend) fail(op string, err error, format string, args ...any) {
	if be.err == nil {
		be.err = tensor.Errorf(op, err, format, args...)
	}
}

// do runs fn on the device goroutine unless an error is pending; a CUDA
// failure becomes the sticky error, attributed to op.
func (be *Backend) do(op string, fn func(c *cuda.Ctx) error) {
	if be.err != nil {
		return
	}
	if be.deferring() { // graph.go
		be.graph.ops = append(be.graph.ops, graphOp{op, fn})
		return
	}
	if be.batch != nil {
		be.batch = append(be.batch, graphOp{op, fn})
		return
	}
	be.issue([]graphOp{{op, fn}})
}

// issue runs ops in order in one call of the device goroutine, each under
// its name (be.op; with Debug, the stream synchronised after each); the
// first failure stops them and becomes the sticky error, attributed to the
// failing operation.
func (be *Backend) issue(ops []graphOp) {
	var failed string
	err := be.dev.Do(func(c *cuda.Ctx) error {
		for _, o := range ops {
			be.op = o.op
			err := o.fn(c)
			if err == nil && be.opts.Debug {
				err = c.StreamSync(be.s)
			}
			if err != nil {
				failed = o.op
				return err
			}
		}
		return nil
	})
	if err != nil && be.err == nil {
		if failed == "" { // the device goroutine refused the call
			failed = ops[0].op
		}
		be.op = failed
		be.err = &tensor.OpError{Op: failed, Detail: err.Error(), Err: deviceErr(err)}
	}
}

// batched issues the operations f makes through do in one call of the
// device goroutine, in order, rather than one call each: each call is a
// round trip to the goroutine that owns the CUDA context (tens of
// microseconds on a loaded host), which a per-batch sequence of small
// operations (the input pipeline's Commit: a wait, copies, the input
// split, an event) otherwise pays several times a step. f must not wait
// for the operations' results (no Download, no backend error check): they
// run after it returns. Inside a graph step, or nested, f runs as it is.
func (be *Backend) batched(f func()) {
	if be.deferring() || be.batch != nil {
		f()
		return
	}
	be.batch = make([]graphOp, 0, 8)
	f()
	ops := be.batch
	be.batch = nil
	if be.err == nil && len(ops) > 0 {
		be.issue(ops)
	}
}

func deviceErr(err error) error {
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrClosed) {
		return tensor.ErrNoDevice
	}
	return fmt.Errorf("%w: %v", tensor.ErrNoDevice, err)
}

// Sync waits for the stream and returns Err, turning a device-side error
// record into an error.
func (be *Backend) Sync() error {
	be.graphBreak("Sync")
	be.JoinGrads()
	if be.err != nil {
		return be.err
	}
	var rec [4]uint64
	err := be.dev.Do(func(c *cuda.Ctx) error {
		if err := c.StreamSync(be.s); err != nil {
			return err
		}
		return be.readFlag(c, &rec)
	})
	if err != nil {
		be.fail("sync", tensor.ErrNoDevice, "%v", err)
		return be.err
	}
	be.flagError(rec)
	return be.err
}

func (be *Backend) readFlag(c *cuda.Ctx, rec *[4]uint64) error {
	h, err := be.staging(c, 32)
	if err != nil {
		return err
	}
	if err := c.DtoH(unsafe.Pointer(&h[0]), be.flag, 32, be.s); err != nil {
		return err
	}
	if err := c.StreamSync(be.s); err != nil {
		return err
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&rec[0])), 32), h[:32])
	return nil
}

// Device-side error codes and the operations that report them (the op
// argument of report() in common.cuh).
const (
	errRange = 1
	errFull  = 2
)

// Operation codes for the device error record.
const (
	opSlotRows = iota + 1
	opHashLookup
	opSoftmaxCE
	opEmbedding
	opSparseUpdate
	opRecordSlots
	opMaskKeys
	opInitHashRows
)

var opNames = map[uint64]string{
	opSlotRows: "SlotRows", opHashLookup: "HashLookup", opSoftmaxCE: "SoftmaxCE",
	opEmbedding: "EmbeddingBag", opSparseUpdate: "SparseUpdate", opRecordSlots: "RecordSlots",
	opMaskKeys: "MaskKeys", opInitHashRows: "InitHashRows",
}

func (be *Backend) flagError(rec [4]uint64) {
	if rec[0] == 0 {
		return
	}
	op := opNames[rec[1]]
	switch rec[0] {
	case errRange:
		be.fail(op, tensor.ErrRange, "index %d: value %d out of range", int64(rec[2]), int64(rec[3]))
	case errFull:
		be.fail(op, tensor.ErrTableFull, "key %d does not fit: %d rows", int64(rec[2]), int64(rec[3]))
	default:
		be.fail(op, tensor.ErrNoDevice, "device error record %v", rec)
	}
}

// staging returns at least n bytes of pinned host memory owned by the
// backend (for Upload, Download and the error record).
func (be *Backend) staging(c *cuda.Ctx, n int) ([]byte, error) {
	if len(be.host) >= n {
		return be.host, nil
	}
	if be.host != nil {
		if err := c.StreamSync(be.s); err != nil {
			return nil, err
		}
		c.HostFree(be.host)
		be.host = nil
	}
	h, err := c.HostAlloc(max(n, 1<<20))
	if err != nil {
		return nil, err
	}
	be.host = h
	return h, nil
}

// workspace returns at least n bytes of device memory for one operation's
// temporaries; the next operation may reuse it (stream order makes that
// safe).
func (be *Backend) workspace(c *cuda.Ctx, n int) (cuda.Ptr, error) {
	if n <= be.wsLen {
		return be.ws, nil
	}
	if be.ws != 0 {
		c.Free(be.ws)
	}
	n = max(n, 2*be.wsLen, 1<<20)
	p, err := c.Malloc(n)
	if err != nil {
		be.ws, be.wsLen = 0, 0
		return 0, err
	}
	be.ws, be.wsLen = p, n
	return p, nil
}

// fn returns a kernel of the module by name.
func (be *Backend) fn(c *cuda.Ctx, name string) (cuda.Func, error) {
	if f, ok := be.fns[name]; ok {
		return f, nil
	}
	var f cuda.Func
	var err error
	for _, m := range be.mods {
		if f, err = c.Func(m, name); err == nil {
			break
		}
	}
	if err != nil || len(be.mods) == 0 {
		return 0, fmt.Errorf("kernel %s: in none of the %d kernel modules: %w", name, len(be.mods), err)
	}
	be.fns[name] = f
	return f, nil
}

// launch1 runs kernel name over n elements with 256-thread blocks and a
// grid-stride loop (at most 32 blocks per SM).
func (be *Backend) launch1(c *cuda.Ctx, name string, n int, args ...any) error {
	blocks := min((n+255)/256, be.sms*32)
	return be.launch(c, name, cuda.D1(max(blocks, 1)), cuda.D1(256), 0, args...)
}

// launch runs kernel name with an explicit shape.
func (be *Backend) launch(c *cuda.Ctx, name string, grid, block cuda.Dim3, shmem int, args ...any) error {
	f, err := be.fn(c, name)
	if err != nil {
		return err
	}
	if err := c.Launch(f, grid, block, shmem, be.s, args...); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
