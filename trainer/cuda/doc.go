// Package cuda is ctrkit's one door to NVIDIA's libraries: the driver API
// (libcuda), NVRTC, cuBLAS and cuBLASLt, opened with dlopen at run time
// through purego, so ctrkit builds with CGO_ENABLED=0 and no CUDA toolkit,
// and the same binary runs on a machine without a GPU (Open returns
// ErrNoDriver, which tests turn into a skip).
//
// # Threads
//
// A CUDA context is current per OS thread. A Device owns one goroutine,
// locked to its OS thread with the device's primary context current, that
// runs every CUDA call: callers submit work with Do, which runs a function on
// that goroutine and waits for it. Functions documented "on the device
// goroutine" (the methods of Ctx) must only be called from inside Do.
// Everything else (Open, Do, Close, the pinned-memory Allocator) is safe from
// any goroutine.
//
// # Libraries
//
// Libraries are found by their standard sonames (libcuda.so.1,
// libnvrtc.so.13/.12, libcublas.so.13/.12, libcublasLt.so.13/.12) through
// the dynamic loader, then under /usr/local/cuda. The environment overrides
// the search: CTRKIT_CUDA_LIB_DIR names a directory searched first, and
// CTRKIT_LIBCUDA, CTRKIT_LIBNVRTC, CTRKIT_LIBCUBLAS, CTRKIT_LIBCUBLASLT name
// one library file each.
//
// # Errors
//
// Every CUresult, nvrtcResult and cublasStatus_t is checked; a failure is an
// *Error naming the call and the status (cuGetErrorName's name, e.g.
// CUDA_ERROR_OUT_OF_MEMORY).
//
// # Memory
//
// Device memory comes from cuMemAlloc through a caching allocator (freed
// blocks are kept per rounded size and reused; on out-of-memory the cache is
// released and the allocation retried). Pinned host memory comes from
// cuMemHostAlloc (portable) through the same kind of cache; PinnedAllocator
// adapts it to formats.Allocator so dataset readers decode straight into
// memory the GPU can copy from at full PCIe speed.
//
// # Kernels
//
// Kernels are CUDA C++ sources compiled by NVRTC for the device's compute
// capability (-arch=sm_XY, cubin) and cached on disk by a hash of source,
// options, architecture and NVRTC version (CTRKIT_KERNEL_CACHE, default
// $XDG_CACHE_HOME/ctrkit/kernels; "off" disables the cache).
package cuda
