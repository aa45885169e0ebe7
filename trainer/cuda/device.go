package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Device is one GPU with its primary context and the goroutine that owns it.
type Device struct {
	Ordinal  int
	Name     string
	Major    int // compute capability
	Minor    int
	SMs      int
	TotalMem int64
	Driver   int // cuDriverGetVersion, e.g. 13000

	mu    sync.Mutex // serialises Do: one request in flight
	work  chan func(*Ctx) error
	reply chan error
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// Ctx is the device goroutine's view of the device: every method makes CUDA
// calls and must run inside Device.Do.
type Ctx struct {
	Dev   *Device
	cuctx uintptr
	dev   int32

	// Kernel parameter staging: Go heap (never moved), reused per launch
	// (cuLaunchKernel copies the values before it returns).
	params []uint64
	pptrs  []uintptr
	scal   []float64 // host scalars handed to cuBLAS by pointer
	tape   *Tape     // recording the stream work (graph.go); nil when not

	dmem, hmem pool
	blasH      uintptr
	lt         *ltState
	funcs      map[string]Func
}

// DeviceCount is the number of GPUs the driver sees (ErrNoDriver when no
// driver loads).
func DeviceCount() (int, error) {
	if err := loadLibraries(); err != nil {
		return 0, err
	}
	var n int32
	if err := check("cuDeviceGetCount", call(drv.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	return int(n), nil
}

// Open starts device ordinal: loads the libraries, retains the primary
// context and starts the device goroutine. ErrNoDriver when there is no
// driver or no such device.
func Open(ordinal int) (*Device, error) {
	if err := loadLibraries(); err != nil {
		return nil, err
	}
	var n int32
	if err := check("cuDeviceGetCount", call(drv.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	if ordinal < 0 || ordinal >= int(n) {
		return nil, fmt.Errorf("%w: device %d requested, %d present", ErrNoDriver, ordinal, n)
	}
	d := &Device{
		Ordinal: ordinal,
		work:    make(chan func(*Ctx) error),
		reply:   make(chan error),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	started := make(chan error, 1)
	go d.loop(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Device) loop(started chan<- error) {
	runtime.LockOSThread()
	defer close(d.done)
	c, err := newCtx(d)
	started <- err
	if err != nil {
		return
	}
	for {
		select {
		case fn := <-d.work:
			d.reply <- run(c, fn)
		case <-d.quit:
			c.close()
			return
		}
	}
}

func newCtx(d *Device) (*Ctx, error) {
	c := &Ctx{Dev: d, params: make([]uint64, 64), pptrs: make([]uintptr, 64), scal: make([]float64, 4), funcs: map[string]Func{}}
	var dev int32
	if err := check("cuDeviceGet", call(drv.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(d.Ordinal))); err != nil {
		return nil, err
	}
	c.dev = dev
	if err := check("cuDevicePrimaryCtxRetain", call(drv.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&c.cuctx)), uintptr(dev))); err != nil {
		return nil, err
	}
	if err := check("cuCtxSetCurrent", call(drv.cuCtxSetCurrent, c.cuctx)); err != nil {
		return nil, err
	}
	name := make([]byte, 256)
	call(drv.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), 256, uintptr(dev))
	d.Name = gostr(uintptr(unsafe.Pointer(&name[0])))
	d.Major = c.attr(attrComputeCapabilityMajr)
	d.Minor = c.attr(attrComputeCapabilityMinr)
	d.SMs = c.attr(attrMultiprocessorCount)
	var total uint64
	call(drv.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(dev))
	d.TotalMem = int64(total)
	var v int32
	call(drv.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	d.Driver = int(v)
	c.dmem = pool{kind: "device", alloc: c.rawMalloc, release: c.rawFree}
	c.hmem = pool{kind: "pinned", alloc: c.rawHostAlloc, release: c.rawHostFree}
	if err := c.blasInit(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *Ctx) attr(a int) int {
	var v int32
	call(drv.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(c.dev))
	return int(v)
}

func (c *Ctx) close() {
	call(drv.cuCtxSynchronize)
	c.blasClose()
	c.dmem.drain()
	c.hmem.drain()
	call(drv.cuDevicePrimaryCtxRelease, uintptr(c.dev))
}

// Do runs fn on the device goroutine and returns its error. Calls from
// several goroutines are served one at a time.
func (d *Device) Do(fn func(c *Ctx) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.done:
		return ErrClosed
	default:
	}
	d.work <- fn
	return <-d.reply
}

// run calls fn, turning a panic into an error so the device goroutine
// survives a bug in submitted work.
func run(c *Ctx, fn func(*Ctx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cuda: panic on the device goroutine: %v", r)
		}
	}()
	return fn(c)
}

// Close waits for the device, frees every cached allocation, releases the
// context and stops the goroutine.
func (d *Device) Close() error {
	d.once.Do(func() {
		d.mu.Lock()
		close(d.quit)
		<-d.done
		d.mu.Unlock()
	})
	return nil
}

// Synchronize waits for all work on the context (cuCtxSynchronize).
func (c *Ctx) Synchronize() error {
	if c.tape != nil {
		if skip, err := c.tape.host("cuCtxSynchronize"); skip {
			return err
		}
	}
	return check("cuCtxSynchronize", call(drv.cuCtxSynchronize))
}

// MemInfo returns free and total device memory.
func (c *Ctx) MemInfo() (free, total int64, err error) {
	var f, t uint64
	err = check("cuMemGetInfo_v2", call(drv.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t))))
	return int64(f), int64(t), err
}
