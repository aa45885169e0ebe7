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
// is auto). GEMM arithmetic follows the solver's precision
// (graph.Solver.Precision): IEEE FP32, or TF32 tensor cores with
// enable_tf32_compute. In fp16 and bf16 the dense network's GEMMs run on
// half operands (their dtype picks the tensor cores, float32
// accumulation) and the float32 GEMMs that remain (layers outside the
// half region) use TF32. The CPU trains fp32 and tf32 (as fp32) only: fp16
// and bf16 on it are an error naming the flags. A line saying what was
// chosen goes to log. Close the backend with CloseBackend.
func OpenBackend(device string, s graph.Solver, log io.Writer) (tensor.Backend, error) {
	if log == nil {
		log = io.Discard
	}
	if device == "" {
		device = DeviceAuto
	}
	prec := s.Precision()
	if device == DeviceCPU {
		if prec.Half() {
			return nil, errCPUHalf(prec)
		}
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
	math := GEMMMath(prec)
	be, err := gpu.New(gpu.Options{Device: ord, Math: math, NoAlgorithmSearch: s.NoAlgorithmSearch})
	if err != nil {
		if device == DeviceAuto && errors.Is(err, cuda.ErrNoDriver) {
			if prec.Half() {
				return nil, fmt.Errorf("%w (%v)", errCPUHalf(prec), err)
			}
			fmt.Fprintf(log, "device: no CUDA driver found: training on the CPU (--device gpu says why)\n")
			return cpu.New(cpu.Options{})
		}
		return nil, err
	}
	d := be.Device()
	fmt.Fprintf(log, "device: %s (%s, sm_%d%d, %d SMs, %.0f GiB), %s\n", be.Name(), d.Name, d.Major, d.Minor, d.SMs, float64(d.TotalMem)/(1<<30), precisionText(prec, math))
	return be, nil
}

// CloseBackend releases a backend from OpenBackend (a no-op on the CPU).
func CloseBackend(be tensor.Backend) error {
	if c, ok := be.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// GEMMMath is the GPU's Options.Math for precision p: TF32 for tf32, and
// for the float32 GEMMs left in an fp16 or bf16 model; FP32 for fp32.
// (Half GEMMs take their tensor cores from their operands' dtype.)
func GEMMMath(p graph.Precision) cuda.Math {
	if p == graph.FP32 {
		return cuda.FP32
	}
	return cuda.TF32
}

func precisionText(p graph.Precision, m cuda.Math) string {
	if p.Half() {
		return fmt.Sprintf("training in %s (half activations and GEMM operands, float32 master weights; float32 GEMMs in %s)", p, m)
	}
	return fmt.Sprintf("GEMMs in %s", m)
}
