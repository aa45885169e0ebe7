// nvptx_nn.h adds to nvptx_shim.h the CUDA built-ins nn.cu and multicross.cu
// use, for check_kernels.sh's clang NVPTX compile of those files (no kernel
// may use local memory). NVRTC on the GPU machine is the real compiler.
extern "C" __device__ float __nv_fmaf(float, float, float); extern "C" __device__ float __nv_expf(float);
extern "C" __device__ double __nv_exp(double); extern "C" __device__ double __nv_log(double); extern "C" __device__ double __nv_log1p(double);
extern "C" __device__ double __nv_fmin(double, double);
static __device__ __forceinline__ float fmaf(float a, float b, float c) { return __nv_fmaf(a, b, c); }
static __device__ __forceinline__ double exp(double a) { return __nv_exp(a); }
static __device__ __forceinline__ double log(double a) { return __nv_log(a); }
static __device__ __forceinline__ double log1p(double a) { return __nv_log1p(a); }
static __device__ __forceinline__ double fmin(double a, double b) { return __nv_fmin(a, b); }
static __device__ __forceinline__ int min(int a, int b) { return a < b ? a : b; }
static __device__ __forceinline__ int max(int a, int b) { return a > b ? a : b; }
static __device__ __forceinline__ long long max(long long a, long long b) { return a > b ? a : b; }
static __device__ __forceinline__ unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return __nvvm_atom_add_gen_ll((long long*)p, v); }
static __device__ __forceinline__ double __shfl_xor_sync(unsigned m, double v, int s, int w = 32) {
  long long x = __builtin_bit_cast(long long, v); int lo = (int)x, hi = (int)(x >> 32);
  lo = __nvvm_shfl_sync_bfly_i32(m, lo, s, ((32 - w) << 8) | 0x1f); hi = __nvvm_shfl_sync_bfly_i32(m, hi, s, ((32 - w) << 8) | 0x1f);
  return __builtin_bit_cast(double, ((long long)hi << 32) | (unsigned)lo); }
