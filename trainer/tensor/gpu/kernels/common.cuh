// Shared definitions for ctrkit's kernels. Every kernel is extern "C" so
// the Go side finds it by name; every kernel over n elements uses a
// grid-stride loop, so any grid size is correct.
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

#define FOR(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (i64)(n); i += (i64)blockDim.x * gridDim.x)

// Device-side error record, u64[4]: code, op, index, value. The first
// failing thread wins; the host reads it at the next synchronisation.
#define ERR_RANGE 1
#define ERR_FULL 2
__device__ __forceinline__ void report(u64* flag, u64 code, u64 op, i64 index, i64 value) {
    if (atomicCAS(flag, 0ull, code) == 0ull) {
        flag[1] = op;
        flag[2] = (u64)index;
        flag[3] = (u64)value;
    }
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// block_sum_d reduces v over the block (blockDim.x a multiple of 32, at most
// 1024); the result is valid in thread 0. sh must hold 32 doubles.
__device__ __forceinline__ double block_sum_d(double v, double* sh) {
    v = warp_sum_d(v);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x >> 5)) ? sh[lane] : 0.0;
    if (w == 0) v = warp_sum_d(v);
    return v;
}

// ---- Half precision (tensor.Float16, tensor.BFloat16) ----
// Storage is 16 bits an element; arithmetic is float32. Rounding is to
// nearest even (cvt.rn), NaN stays NaN, a Float16 beyond 65504 by half a
// step is ±Inf: tensor.F16Bits / BF16Bits on the host give the same bits.
// Operand dtype codes are tensor.DType values: DT_F32, DT_F16, DT_BF16.
// A kernel that takes any of the three takes the pointer as void* and its
// code as an int, and reads and writes through ldv/stv (the code is the
// same for every thread, so the switch costs no divergence); a kernel
// specialised per dtype uses the typed h2f/f2h/b2f/f2b.
#define DT_F32 1
#define DT_F16 6
#define DT_BF16 7
typedef unsigned short h16;

#if !defined(__CUDA_ARCH__)
// Host models of the conversions (hostcheck's simulations run the kernels
// on the CPU): the integer steps of tensor.F16Bits / F16Value / BF16Bits.
union host_fu { float f; u32 u; };
static inline float host_h2f(h16 h) {
    u32 sign = ((u32)(h & 0x8000u)) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    host_fu r;
    if (e == 0x1fu) r.u = sign | 0x7f800000u | (m << 13);
    else if (e == 0u) { r.f = (float)m * (1.0f / 16777216.0f); r.u |= sign; }
    else r.u = sign | ((e + 112u) << 23) | (m << 13);
    return r.f;
}
static inline h16 host_f2h(float f) {
    host_fu x; x.f = f;
    u32 sign = (x.u >> 16) & 0x8000u, a = x.u & 0x7fffffffu;
    if (a > 0x7f800000u) return (h16)(sign | 0x7e00u | ((a >> 13) & 0x1ffu));
    if (a >= 0x477ff000u) return (h16)(sign | 0x7c00u);
    if (a < 0x38800000u) { // subnormal: round a·2^24 to an integer, ties to even
        host_fu y; y.u = a;
        float v = y.f * 16777216.0f;
        u32 q = (u32)v; float rem = v - (float)q;
        if (rem > 0.5f || (rem == 0.5f && (q & 1u))) q++;
        return (h16)(sign | q);
    }
    u32 q = a >> 13, rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (h16)(sign | (q - (112u << 10)));
}
static inline h16 host_f2b(float f) {
    host_fu x; x.f = f;
    if ((x.u & 0x7fffffffu) > 0x7f800000u) return (h16)((x.u >> 16) | 0x40u);
    x.u += 0x7fffu + ((x.u >> 16) & 1u);
    return (h16)(x.u >> 16);
}
#endif

__device__ __forceinline__ float h2f(h16 h) {
#if defined(__CUDA_ARCH__)
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#else
    return host_h2f(h);
#endif
}
__device__ __forceinline__ h16 f2h(float f) {
#if defined(__CUDA_ARCH__)
    h16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    return host_f2h(f);
#endif
}
__device__ __forceinline__ float b2f(h16 b) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(((u32)b) << 16);
#else
    host_fu r; r.u = ((u32)b) << 16; return r.f;
#endif
}
__device__ __forceinline__ h16 f2b(float f) {
#if defined(__CUDA_ARCH__)
    h16 b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
    return b;
#else
    return host_f2b(f);
#endif
}

// ldv reads element i of an operand of dtype code dt as a float.
__device__ __forceinline__ float ldv(const void* p, int dt, i64 i) {
    if (dt == DT_F16) return h2f(((const h16*)p)[i]);
    if (dt == DT_BF16) return b2f(((const h16*)p)[i]);
    return ((const float*)p)[i];
}
// stv writes v, rounded to dtype code dt, to element i.
__device__ __forceinline__ void stv(void* p, int dt, i64 i, float v) {
    if (dt == DT_F16) ((h16*)p)[i] = f2h(v);
    else if (dt == DT_BF16) ((h16*)p)[i] = f2b(v);
    else ((float*)p)[i] = v;
}
// rndv rounds v to what dtype code dt stores (a half-precision operand's
// value seen as a float).
__device__ __forceinline__ float rndv(int dt, float v) {
    if (dt == DT_F16) return h2f(f2h(v));
    if (dt == DT_BF16) return b2f(f2b(v));
    return v;
}
// Typed access for kernels specialised per storage type T (float, or a
// 16-bit half_t / bf16_t): ld<T>(p, i) and st<T>(p, i, v).
struct half_t { h16 x; };
struct bf16_t { h16 x; };
__device__ __forceinline__ float ldt(const float* p, i64 i) { return p[i]; }
__device__ __forceinline__ float ldt(const half_t* p, i64 i) { return h2f(p[i].x); }
__device__ __forceinline__ float ldt(const bf16_t* p, i64 i) { return b2f(p[i].x); }
__device__ __forceinline__ void stt(float* p, i64 i, float v) { p[i] = v; }
__device__ __forceinline__ void stt(half_t* p, i64 i, float v) { p[i].x = f2h(v); }
__device__ __forceinline__ void stt(bf16_t* p, i64 i, float v) { p[i].x = f2b(v); }
