package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// library is one dlopen'ed shared object.
type library struct {
	name   string // soname that loaded, or the override path
	handle uintptr
}

// load opens the first of names that the loader finds: the env override,
// then CTRKIT_CUDA_LIB_DIR, then the loader's search path, then the CUDA
// toolkit's default directories.
func load(env string, names ...string) (*library, error) {
	var tried []string
	try := func(p string) *library {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			tried = append(tried, p)
			return nil
		}
		return &library{name: p, handle: h}
	}
	if p := os.Getenv(env); p != "" {
		if l := try(p); l != nil {
			return l, nil
		}
		return nil, fmt.Errorf("%s=%s does not load", env, p)
	}
	var dirs []string
	if d := os.Getenv("CTRKIT_CUDA_LIB_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		for _, n := range names {
			if l := try(filepath.Join(d, n)); l != nil {
				return l, nil
			}
		}
	}
	for _, n := range names {
		if l := try(n); l != nil {
			return l, nil
		}
	}
	for _, d := range []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu"} {
		for _, n := range names {
			if l := try(filepath.Join(d, n)); l != nil {
				return l, nil
			}
		}
	}
	return nil, fmt.Errorf("none of %v loads", tried)
}

// sym resolves the first present name among alternatives (versioned
// driver entry points such as cuMemAlloc_v2 before cuMemAlloc).
func (l *library) sym(names ...string) (uintptr, error) {
	for _, n := range names {
		if p, err := purego.Dlsym(l.handle, n); err == nil && p != 0 {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%s: no symbol %v", l.name, names)
}

// bind fills each *uintptr in syms with the address of its symbol.
func (l *library) bind(syms map[*uintptr][]string) error {
	for p, names := range syms {
		a, err := l.sym(names...)
		if err != nil {
			return err
		}
		*p = a
	}
	return nil
}

// call invokes a C function with integer/pointer arguments. Like
// purego.SyscallN it forces objects whose addresses are passed as uintptr
// onto the heap, so a stack move cannot leave C writing to a stale address.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) int {
	r, _, _ := purego.SyscallN(fn, args...)
	return int(int32(r))
}

// cstr returns a NUL-terminated copy of s on the heap.
func cstr(s string) []byte { return append([]byte(s), 0) }

// gostr reads a NUL-terminated C string.
func gostr(p uintptr) string {
	if p == 0 {
		return ""
	}
	var b []byte
	for i := uintptr(0); ; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(nil), p+i)) //nolint:govet // C memory
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// The libraries, loaded once per process.
var (
	libOnce sync.Once
	libErr  error
	drv     driverAPI
	rtc     nvrtcAPI
	blas    cublasAPI
	blasLt  cublasLtAPI
)

func loadLibraries() error {
	libOnce.Do(func() {
		l, err := load("CTRKIT_LIBCUDA", "libcuda.so.1", "libcuda.so")
		if err != nil {
			libErr = fmt.Errorf("%w: libcuda: %v", ErrNoDriver, err)
			return
		}
		if err := drv.bind(l); err != nil {
			libErr = fmt.Errorf("%w: %v", ErrNoDriver, err)
			return
		}
		if r := call(drv.cuInit, 0); r != 0 {
			libErr = fmt.Errorf("%w: cuInit: %s (%d)", ErrNoDriver, drv.errName(r), r)
			return
		}
		if l, err = load("CTRKIT_LIBNVRTC", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"); err != nil {
			libErr = fmt.Errorf("cuda: NVRTC: %v", err)
			return
		}
		if libErr = rtc.bind(l); libErr != nil {
			return
		}
		if l, err = load("CTRKIT_LIBCUBLAS", "libcublas.so.13", "libcublas.so.12", "libcublas.so"); err != nil {
			libErr = fmt.Errorf("cuda: cuBLAS: %v", err)
			return
		}
		if libErr = blas.bind(l); libErr != nil {
			return
		}
		if l, err = load("CTRKIT_LIBCUBLASLT", "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"); err != nil {
			libErr = fmt.Errorf("cuda: cuBLASLt: %v", err)
			return
		}
		libErr = blasLt.bind(l)
	})
	return libErr
}
