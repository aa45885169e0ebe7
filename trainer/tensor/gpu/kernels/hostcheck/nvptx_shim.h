// nvptx_shim.h declares the CUDA built-ins embed.cu, optim.cu and dense.cu use for
// clang's CUDA front end without the CUDA SDK (-nocudainc): check_kernels.sh
// compiles those files to PTX with it, when clang is installed, and fails on
// local memory (a register array indexed at run time, a spill). NVRTC on the
// GPU machine is the real compiler.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#include <__clang_cuda_builtin_vars.h>
extern "C" __device__ float __nv_sqrtf(float); extern "C" __device__ float __nv_fabsf(float);
extern "C" __device__ float __nv_fmaxf(float, float); extern "C" __device__ double __nv_pow(double, double);
extern "C" __device__ double __nv_sqrt(double); extern "C" __device__ double __nv_fabs(double);
static __device__ __forceinline__ float sqrtf(float x) { return __nv_sqrtf(x); }
static __device__ __forceinline__ float fabsf(float x) { return __nv_fabsf(x); }
static __device__ __forceinline__ float fmaxf(float a, float b) { return __nv_fmaxf(a, b); }
static __device__ __forceinline__ double pow(double a, double b) { return __nv_pow(a, b); }
static __device__ __forceinline__ double sqrt(double a) { return __nv_sqrt(a); }
static __device__ __forceinline__ double fabs(double a) { return __nv_fabs(a); }
static __device__ __forceinline__ void __syncwarp(unsigned m = 0xffffffffu) { __nvvm_bar_warp_sync(m); }
static __device__ __forceinline__ int __shfl_sync(unsigned m, int v, int s, int w = 32) { return __nvvm_shfl_sync_idx_i32(m, v, s, ((32 - w) << 8) | 0x1f); }
static __device__ __forceinline__ float __shfl_xor_sync(unsigned m, float v, int s, int w = 32) { return __nvvm_shfl_sync_bfly_f32(m, v, s, ((32 - w) << 8) | 0x1f); }
static __device__ __forceinline__ float __shfl_down_sync(unsigned m, float v, int s, int w = 32) { return __nvvm_shfl_sync_down_f32(m, v, s, ((32 - w) << 8)); }
static __device__ __forceinline__ double __shfl_down_sync(unsigned m, double v, int s, int w = 32) {
  long long x = __builtin_bit_cast(long long, v); int lo = (int)x, hi = (int)(x >> 32);
  lo = __nvvm_shfl_sync_down_i32(m, lo, s, ((32 - w) << 8)); hi = __nvvm_shfl_sync_down_i32(m, hi, s, ((32 - w) << 8));
  return __builtin_bit_cast(double, ((long long)hi << 32) | (unsigned)lo); }
static __device__ __forceinline__ unsigned atomicAdd(unsigned* p, unsigned v) { return __nvvm_atom_add_gen_i((int*)p, (int)v); }
static __device__ __forceinline__ int atomicMin(int* p, int v) { return __nvvm_atom_min_gen_i(p, v); }
static __device__ __forceinline__ unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) { return __nvvm_atom_cas_gen_ll((long long*)p, c, v); }
static __device__ __forceinline__ unsigned __float_as_uint(float f) { return __builtin_bit_cast(unsigned, f); }
static __device__ __forceinline__ float __uint_as_float(unsigned u) { return __builtin_bit_cast(float, u); }
// dense.cu's.
extern "C" __device__ float __nv_expf(float); extern "C" __device__ float __nv_expm1f(float);
extern "C" __device__ unsigned __nv_umulhi(unsigned, unsigned);
static __device__ __forceinline__ float expf(float x) { return __nv_expf(x); }
static __device__ __forceinline__ float expm1f(float x) { return __nv_expm1f(x); }
static __device__ __forceinline__ unsigned __umulhi(unsigned a, unsigned b) { return __nv_umulhi(a, b); }
static __device__ __forceinline__ long long min(long long a, long long b) { return a < b ? a : b; }
