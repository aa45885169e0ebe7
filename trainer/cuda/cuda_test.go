package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// openOrSkip opens device 0, skipping without a driver unless
// CTRKIT_REQUIRE_GPU is set (the GPU machine's runs).
func openOrSkip(t *testing.T) *Device {
	t.Helper()
	d, err := Open(0)
	if err != nil {
		if errors.Is(err, ErrNoDriver) && os.Getenv("CTRKIT_REQUIRE_GPU") == "" {
			t.Skipf("GPU test skipped: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestNoDriverIsClear(t *testing.T) {
	_, err := Open(1 << 20) // no machine has this device
	if err == nil {
		t.Fatal("device 1<<20 opened")
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("error %v does not wrap ErrNoDriver", err)
	}
}

func TestMemoryAndErrors(t *testing.T) {
	d := openOrSkip(t)
	t.Logf("%s sm_%d%d, %d SMs, driver %d", d.Name, d.Major, d.Minor, d.SMs, d.Driver)
	err := d.Do(func(c *Ctx) error {
		p, err := c.Malloc(1000)
		if err != nil {
			return err
		}
		if err := c.Memset32(p, 0x3f800000, 250, 0); err != nil {
			return err
		}
		h := make([]float32, 250)
		if err := c.DtoH(unsafe.Pointer(&h[0]), p, 1000, 0); err != nil {
			return err
		}
		if err := c.StreamSync(0); err != nil {
			return err
		}
		for i, v := range h {
			if v != 1 {
				t.Fatalf("h[%d] = %v", i, v)
			}
		}
		// The cache hands a freed block of the same size class back.
		if err := c.Free(p); err != nil {
			return err
		}
		q, err := c.Malloc(900)
		if err != nil {
			return err
		}
		if q != p {
			t.Errorf("cache miss: %#x after freeing %#x", q, p)
		}
		if err := c.Free(q); err != nil {
			return err
		}
		if err := c.Free(q); err == nil {
			t.Error("double free not reported")
		}
		// Out of memory is a named error, not a crash.
		_, err = c.Malloc(1 << 50)
		if !IsOutOfMemory(err) || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
			t.Errorf("huge allocation: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

const testKernels = `
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}`

func TestCompileLaunchGraph(t *testing.T) {
	d := openOrSkip(t)
	t.Setenv("CTRKIT_KERNEL_CACHE", t.TempDir())
	const n = 10000
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	y := make([]float32, n)
	err := d.Do(func(c *Ctx) error {
		m, err := c.Compile("test.cu", testKernels)
		if err != nil {
			return err
		}
		files, _ := filepath.Glob(filepath.Join(os.Getenv("CTRKIT_KERNEL_CACHE"), "*.cubin"))
		if len(files) != 1 {
			t.Errorf("kernel cache holds %v", files)
		}
		if _, err := c.Compile("test.cu", testKernels); err != nil { // from the cache
			return err
		}
		f, err := c.Func(m, "axpy")
		if err != nil {
			return err
		}
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		px, _ := c.Malloc(4 * n)
		py, _ := c.Malloc(4 * n)
		defer c.Free(px)
		defer c.Free(py)
		if err := c.HtoD(px, unsafe.Pointer(&x[0]), 4*n, s); err != nil {
			return err
		}
		if err := c.Memset32(py, 0, n, s); err != nil {
			return err
		}
		if err := c.Launch(f, D1((n+255)/256), D1(256), 0, s, py, px, float32(2), n); err != nil {
			return err
		}
		// Capture two launches into a graph and replay it three times:
		// y = 2x + 3·(x + 0.5x) = 6.5x.
		if err := c.BeginCapture(s); err != nil {
			return err
		}
		c.Launch(f, D1((n+255)/256), D1(256), 0, s, py, px, float32(1), n)
		c.Launch(f, D1((n+255)/256), D1(256), 0, s, py, px, float32(0.5), n)
		g, err := c.EndCapture(s)
		if err != nil {
			return err
		}
		defer c.DestroyGraph(g)
		for range 3 {
			if err := c.LaunchGraph(g, s); err != nil {
				return err
			}
		}
		if err := c.DtoH(unsafe.Pointer(&y[0]), py, 4*n, s); err != nil {
			return err
		}
		return c.StreamSync(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range y {
		if want := 6.5 * float32(i); y[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
}

func TestCompileErrorNamesTheLine(t *testing.T) {
	d := openOrSkip(t)
	t.Setenv("CTRKIT_KERNEL_CACHE", "off")
	err := d.Do(func(c *Ctx) error {
		_, err := c.Compile("broken.cu", "extern \"C\" __global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n")
		return err
	})
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Log, "undefined_name") || !strings.Contains(err.Error(), "broken.cu") {
		t.Fatalf("compile error %v", err)
	}
}

// TestCompileAll compiles several sources at once (NVRTC from several
// goroutines), each cached on its own, finds each kernel in its module,
// and reports the first broken source by name with nothing left loaded.
func TestCompileAll(t *testing.T) {
	d := openOrSkip(t)
	t.Setenv("CTRKIT_KERNEL_CACHE", t.TempDir())
	var units []Unit
	for i := range 8 {
		units = append(units, Unit{Name: fmt.Sprintf("k%d.cu", i),
			Src: fmt.Sprintf("extern \"C\" __global__ void k%d(float* y) { y[threadIdx.x] = %d.0f; }\n", i, i)})
	}
	err := d.Do(func(c *Ctx) error {
		mods, err := c.CompileAll(units, 4)
		if err != nil {
			return err
		}
		if len(mods) != len(units) {
			t.Fatalf("%d modules for %d units", len(mods), len(units))
		}
		files, _ := filepath.Glob(filepath.Join(os.Getenv("CTRKIT_KERNEL_CACHE"), "*.cubin"))
		if len(files) != len(units) {
			t.Errorf("kernel cache holds %d cubins, want %d", len(files), len(units))
		}
		for i, m := range mods {
			if _, err := c.Func(m, fmt.Sprintf("k%d", i)); err != nil {
				t.Errorf("k%d in its module: %v", i, err)
			}
			if _, err := c.Func(m, fmt.Sprintf("k%d", (i+1)%len(mods))); err == nil {
				t.Errorf("module %d holds k%d", i, (i+1)%len(mods))
			}
			c.Unload(m)
		}
		bad := append(append([]Unit(nil), units...), Unit{Name: "broken.cu", Src: "extern \"C\" __global__ void b(float* x) { x[0] = nope; }\n"})
		_, err = c.CompileAll(bad, 0)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), "broken.cu") || !strings.Contains(e.Log, "nope") {
			t.Errorf("a broken unit: %v, want its compile error by name", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPinnedAllocatorAndConcurrentDo(t *testing.T) {
	d := openOrSkip(t)
	a := PinnedAllocator{Dev: d}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() { // every goroutine reaches the context through Do
			defer wg.Done()
			b, err := a.Alloc(1<<20 + g)
			if err != nil {
				errs <- err
				return
			}
			defer a.Free(b)
			if uintptr(unsafe.Pointer(&b[0]))%64 != 0 {
				errs <- errors.New("pinned buffer not 64-byte aligned")
				return
			}
			for i := range b {
				b[i] = byte(g + i)
			}
			back := make([]byte, len(b))
			errs <- d.Do(func(c *Ctx) error {
				p, err := c.Malloc(len(b))
				if err != nil {
					return err
				}
				defer c.Free(p)
				if err := c.HtoD(p, unsafe.Pointer(&b[0]), len(b), 0); err != nil {
					return err
				}
				if err := c.DtoH(unsafe.Pointer(&back[0]), p, len(b), 0); err != nil {
					return err
				}
				if err := c.StreamSync(0); err != nil {
					return err
				}
				if string(back) != string(b) {
					return errors.New("pinned round trip differs")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
