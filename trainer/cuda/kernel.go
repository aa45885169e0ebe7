package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// nvrtcAPI holds NVRTC's entry points.
type nvrtcAPI struct {
	nvrtcVersion, nvrtcCreateProgram, nvrtcCompileProgram, nvrtcDestroyProgram   uintptr
	nvrtcGetProgramLogSize, nvrtcGetProgramLog, nvrtcGetCUBINSize, nvrtcGetCUBIN uintptr
	nvrtcGetErrorString                                                          uintptr
	major, minor                                                                 int32
}

func (r *nvrtcAPI) bind(l *library) error {
	err := l.bind(map[*uintptr][]string{
		&r.nvrtcVersion:           {"nvrtcVersion"},
		&r.nvrtcCreateProgram:     {"nvrtcCreateProgram"},
		&r.nvrtcCompileProgram:    {"nvrtcCompileProgram"},
		&r.nvrtcDestroyProgram:    {"nvrtcDestroyProgram"},
		&r.nvrtcGetProgramLogSize: {"nvrtcGetProgramLogSize"},
		&r.nvrtcGetProgramLog:     {"nvrtcGetProgramLog"},
		&r.nvrtcGetCUBINSize:      {"nvrtcGetCUBINSize"},
		&r.nvrtcGetCUBIN:          {"nvrtcGetCUBIN"},
		&r.nvrtcGetErrorString:    {"nvrtcGetErrorString"},
	})
	if err != nil {
		return err
	}
	call(r.nvrtcVersion, uintptr(unsafe.Pointer(&r.major)), uintptr(unsafe.Pointer(&r.minor)))
	return nil
}

func rtcCheck(name string, res int) error {
	if res == 0 {
		return nil
	}
	r, _, _ := purego.SyscallN(rtc.nvrtcGetErrorString, uintptr(res))
	return &Error{Call: name, Code: res, Name: gostr(r)}
}

// Arch is the -arch option for this device, e.g. "sm_90".
func (d *Device) Arch() string { return fmt.Sprintf("sm_%d%d", d.Major, d.Minor) }

// cacheDir is where compiled kernels are kept, "" when caching is off.
func cacheDir() string {
	if d := os.Getenv("CTRKIT_KERNEL_CACHE"); d != "" {
		if d == "off" {
			return ""
		}
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "ctrkit", "kernels")
}

// Compile compiles CUDA C++ source for this device with NVRTC (or takes the
// cubin from the disk cache) and loads it as a module. name labels the
// source in compile errors.
func (c *Ctx) Compile(name, src string, opts ...string) (Module, error) {
	cubin, err := c.cubin(name, src, opts)
	if err != nil {
		return 0, err
	}
	var m uintptr
	if err := check("cuModuleLoadData", call(drv.cuModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&cubin[0])))); err != nil {
		return 0, fmt.Errorf("loading kernels %s: %w", name, err)
	}
	return Module(m), nil
}

// Unit is one CUDA C++ source of CompileAll: Name labels it in compile
// errors.
type Unit struct{ Name, Src string }

// CompileAll compiles units with NVRTC at once, on up to jobs goroutines
// (NVRTC compiles distinct programs concurrently; jobs ≤ 0: GOMAXPROCS,
// CTRKIT_NVRTC_JOBS overrides), each through the disk cache on its own
// (editing one source recompiles only it), then loads them as modules in
// order. The first error (in the units' order) is returned, with the
// modules loaded so far unloaded.
func (c *Ctx) CompileAll(units []Unit, jobs int, opts ...string) ([]Module, error) {
	if v, err := strconv.Atoi(os.Getenv("CTRKIT_NVRTC_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	cubins := make([][]byte, len(units))
	errs := make([]error, len(units))
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i, u := range units {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cubins[i], errs[i] = c.cubin(u.Name, u.Src, opts)
		}()
	}
	wg.Wait()
	mods := make([]Module, 0, len(units))
	for i, u := range units {
		err := errs[i]
		if err == nil {
			var m uintptr
			if err = check("cuModuleLoadData", call(drv.cuModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&cubins[i][0])))); err == nil {
				mods = append(mods, Module(m))
				continue
			}
			err = fmt.Errorf("loading kernels %s: %w", u.Name, err)
		}
		for _, m := range mods {
			c.Unload(m)
		}
		return nil, err
	}
	return mods, nil
}

// Unload unloads a module.
func (c *Ctx) Unload(m Module) error {
	return check("cuModuleUnload", call(drv.cuModuleUnload, uintptr(m)))
}

// Module is a loaded CUmodule.
type Module uintptr

// Func looks a kernel up by its (extern "C") name.
func (c *Ctx) Func(m Module, name string) (Func, error) {
	var f uintptr
	n := cstr(name)
	if err := check("cuModuleGetFunction", call(drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&n[0])))); err != nil {
		return 0, fmt.Errorf("kernel %s: %w", name, err)
	}
	return Func(f), nil
}

func (c *Ctx) cubin(name, src string, opts []string) ([]byte, error) {
	all := append([]string{"-arch=" + c.Dev.Arch(), "-std=c++17", "-default-device"}, opts...)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00nvrtc %d.%d\x00", src, strings.Join(all, "\x00"), rtc.major, rtc.minor)
	key := hex.EncodeToString(h.Sum(nil))[:32] + "-" + c.Dev.Arch() + ".cubin"
	dir := cacheDir()
	if dir != "" {
		if b, err := os.ReadFile(filepath.Join(dir, key)); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	var prog uintptr
	csrc, cname := cstr(src), cstr(name)
	if err := rtcCheck("nvrtcCreateProgram", call(rtc.nvrtcCreateProgram, uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(&csrc[0])), uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0)); err != nil {
		return nil, err
	}
	defer call(rtc.nvrtcDestroyProgram, uintptr(unsafe.Pointer(&prog)))
	cargs := make([][]byte, len(all))
	ptrs := make([]uintptr, len(all))
	for i, o := range all {
		cargs[i] = cstr(o)
		ptrs[i] = uintptr(unsafe.Pointer(&cargs[i][0]))
	}
	res := call(rtc.nvrtcCompileProgram, prog, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0])))
	if res != 0 {
		err := rtcCheck("nvrtcCompileProgram", res).(*Error)
		var n uintptr
		call(rtc.nvrtcGetProgramLogSize, prog, uintptr(unsafe.Pointer(&n)))
		if n > 1 {
			log := make([]byte, n)
			call(rtc.nvrtcGetProgramLog, prog, uintptr(unsafe.Pointer(&log[0])))
			err.Log = strings.TrimRight(string(log), "\x00\n")
		}
		err.Call += " " + name
		return nil, err
	}
	var n uintptr
	if err := rtcCheck("nvrtcGetCUBINSize", call(rtc.nvrtcGetCUBINSize, prog, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if err := rtcCheck("nvrtcGetCUBIN", call(rtc.nvrtcGetCUBIN, prog, uintptr(unsafe.Pointer(&b[0])))); err != nil {
		return nil, err
	}
	if dir != "" && os.MkdirAll(dir, 0o755) == nil {
		tmp := filepath.Join(dir, key+fmt.Sprintf(".tmp%d", os.Getpid()))
		if os.WriteFile(tmp, b, 0o644) == nil {
			os.Rename(tmp, filepath.Join(dir, key))
		}
	}
	return b, nil
}

// Launch queues kernel f on stream s. Arguments are passed by value in
// order: Ptr, uintptr, int, int32, int64, uint32, uint64, float32, float64
// (int is passed as a C int, 32 bits).
func (c *Ctx) Launch(f Func, grid, block Dim3, shmem int, s Stream, args ...any) error {
	if len(args) > len(c.params) {
		return fmt.Errorf("cuda: launch with %d arguments (max %d)", len(args), len(c.params))
	}
	for i, a := range args {
		var v uint64
		switch x := a.(type) {
		case Ptr:
			v = uint64(x)
		case uintptr:
			v = uint64(x)
		case int:
			v = uint64(uint32(int32(x)))
		case int32:
			v = uint64(uint32(x))
		case int64:
			v = uint64(x)
		case uint32:
			v = uint64(x)
		case uint64:
			v = x
		case float32:
			v = uint64(math.Float32bits(x))
		case float64:
			v = math.Float64bits(x)
		default:
			return fmt.Errorf("cuda: launch argument %d of type %T", i, a)
		}
		c.params[i] = v
		c.pptrs[i] = uintptr(unsafe.Pointer(&c.params[i]))
	}
	grid = grid.norm()
	block = block.norm()
	if c.tape != nil && c.tape.noteLaunch(f, grid, block, shmem, s, c.params[:len(args)]) {
		return nil
	}
	var pp uintptr
	if len(args) > 0 {
		pp = uintptr(unsafe.Pointer(&c.pptrs[0]))
	}
	return check("cuLaunchKernel", call(drv.cuLaunchKernel, uintptr(f),
		uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z),
		uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
		uintptr(shmem), uintptr(s), pp, 0))
}

func (d Dim3) norm() Dim3 {
	return Dim3{max(d.X, 1), max(d.Y, 1), max(d.Z, 1)}
}

// SetMaxDynamicShared lets f use up to n bytes of dynamic shared memory
// (above the 48 KiB default).
func (c *Ctx) SetMaxDynamicShared(f Func, n int) error {
	const attrMaxDynamicShared = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	return check("cuFuncSetAttribute", call(drv.cuFuncSetAttribute, uintptr(f), attrMaxDynamicShared, uintptr(n)))
}

// Graph is an instantiated CUDA graph (CUgraphExec).
type Graph struct{ g, exec uintptr }

// BeginCapture starts capturing the work queued on s into a graph
// (thread-local capture mode).
func (c *Ctx) BeginCapture(s Stream) error {
	return check("cuStreamBeginCapture", call(drv.cuStreamBeginCapture, uintptr(s), 1))
}

// EndCapture ends the capture on s and instantiates the graph.
func (c *Ctx) EndCapture(s Stream) (*Graph, error) {
	g := &Graph{}
	if err := check("cuStreamEndCapture", call(drv.cuStreamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g.g)))); err != nil {
		return nil, err
	}
	if err := check("cuGraphInstantiateWithFlags", call(drv.cuGraphInstantiate, uintptr(unsafe.Pointer(&g.exec)), g.g, 0)); err != nil {
		call(drv.cuGraphDestroy, g.g)
		return nil, err
	}
	return g, nil
}

// LaunchGraph queues g on s.
func (c *Ctx) LaunchGraph(g *Graph, s Stream) error {
	return check("cuGraphLaunch", call(drv.cuGraphLaunch, g.exec, uintptr(s)))
}

// DestroyGraph frees g.
func (c *Ctx) DestroyGraph(g *Graph) {
	call(drv.cuGraphExecDestroy, g.exec)
	call(drv.cuGraphDestroy, g.g)
}
