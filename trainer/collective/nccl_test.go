package collective

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// gpuBackends opens n GPU backends (devices 0..n-1), skipping without a
// driver (CTRKIT_REQUIRE_GPU=1 makes that a failure) or with fewer GPUs.
func gpuBackends(t *testing.T, n int) []*gpu.Backend {
	t.Helper()
	var bes []*gpu.Backend
	for d := range n {
		be, err := gpu.New(gpu.Options{Device: d})
		if err != nil {
			for _, b := range bes {
				b.Close()
			}
			if errors.Is(err, cuda.ErrNoDriver) && os.Getenv("CTRKIT_REQUIRE_GPU") == "" {
				t.Skipf("GPU test skipped: %v", err)
			}
			if d > 0 {
				t.Skipf("needs %d GPUs: device %d: %v", n, d, err)
			}
			t.Fatal(err)
		}
		bes = append(bes, be)
	}
	t.Cleanup(func() {
		for _, b := range bes {
			b.Close()
		}
	})
	return bes
}

func ncclComms(t *testing.T, g *Group, bes []*gpu.Backend) []Comm {
	t.Helper()
	comms, err := NewNCCL(g, bes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range comms {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return comms
}

// TestNCCLWorldOne runs every collective through real NCCL calls on a
// world of one GPU, checked like the host implementation.
func TestNCCLWorldOne(t *testing.T) {
	bes := gpuBackends(t, 1)
	v, err := cuda.NCCLVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NCCL %s", v)
	g, err := NewLocalGroup(1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	testCollectives(t, ncclComms(t, g, bes))
}

// TestNCCLJoinOneProcess goes through the rendezvous path (Join with the
// NCCL id as payload) with one process.
func TestNCCLJoinOneProcess(t *testing.T) {
	bes := gpuBackends(t, 1)
	g, err := Join(context.Background(), Launch{Size: 1}, 1, JoinOptions{Payload: NCCLPayload})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Payload) != 128 {
		t.Fatalf("payload of %d bytes, want the 128-byte NCCL id", len(g.Payload))
	}
	comms := ncclComms(t, g, bes)
	bw, err := Measure(comms, MeasureOps, []int64{1 << 20}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bw {
		t.Logf("%-14s %8d B  %.3g s  alg %.1f GB/s", b.Op, b.Bytes, b.Seconds, b.AlgGBps)
	}
}

// TestNCCLTwoGPUs: two ranks of one process, one GPU each (needs 2 GPUs).
func TestNCCLTwoGPUs(t *testing.T) {
	bes := gpuBackends(t, 2)
	g, err := NewLocalGroup(2, Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	testCollectives(t, ncclComms(t, g, bes))
}

func TestNCCLRefusesSharedGPU(t *testing.T) {
	bes := gpuBackends(t, 1)
	g, _ := NewLocalGroup(2, Options{})
	if _, err := NewNCCL(g, []*gpu.Backend{bes[0], bes[0]}); err == nil {
		t.Fatal("two ranks on one GPU accepted")
	}
	_ = tensor.Float32
}
