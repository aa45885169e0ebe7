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
