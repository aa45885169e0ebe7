package model

import (
	"errors"
	"fmt"
	"io"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// Devices accepted by OpenBackend.
const (
	DeviceAuto = "auto" // the GPU when a CUDA driver loads, else the CPU
	DeviceGPU  = "gpu"  // GPU 0; "gpu:N" for device N
	DeviceCPU  = "cpu"
)

// OpenBackend returns the backend for device (auto, gpu, gpu:N, cpu; ""
// is auto). GEMM arithmetic follows the solver: TF32 when
// enable_tf32_compute, BF16 tensor cores when use_mixed_precision. A line
// saying what was chosen goes to log. Close the backend with CloseBackend.
func OpenBackend(device string, s graph.Solver, log io.Writer) (tensor.Backend, error) {
	if log == nil {
		log = io.Discard
	}
	if device == "" {
		device = DeviceAuto
	}
	if device == DeviceCPU {
		return cpu.New(cpu.Options{})
	}
	ord := 0
	switch {
	case device == DeviceAuto || device == DeviceGPU:
	default:
		if _, err := fmt.Sscanf(device, "gpu:%d", &ord); err != nil {
			return nil, fmt.Errorf("device %q: want auto, cpu, gpu or gpu:N", device)
		}
	}
	math := cuda.FP32
	switch {
	case s.UseMixedPrecision:
		math = cuda.BF16
	case s.EnableTF32:
		math = cuda.TF32
	}
	be, err := gpu.New(gpu.Options{Device: ord, Math: math, NoAlgorithmSearch: s.NoAlgorithmSearch})
	if err != nil {
		if device == DeviceAuto && errors.Is(err, cuda.ErrNoDriver) {
			fmt.Fprintf(log, "device: no CUDA driver found: training on the CPU (--device gpu says why)\n")
			return cpu.New(cpu.Options{})
		}
		return nil, err
	}
	d := be.Device()
	fmt.Fprintf(log, "device: %s (%s, sm_%d%d, %d SMs, %.0f GiB), GEMMs in %s\n", be.Name(), d.Name, d.Major, d.Minor, d.SMs, float64(d.TotalMem)/(1<<30), math)
	return be, nil
}

// CloseBackend releases a backend from OpenBackend (a no-op on the CPU).
func CloseBackend(be tensor.Backend) error {
	if c, ok := be.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
