// Dense operations: bias, activations, elementwise arithmetic, row and
// column reductions, column-block copies, regularizer sums and dropout
// (dense.go). Elementwise kernels map one thread to one element with a
// grid-stride loop (FOR); reductions accumulate in double like the CPU
// reference. Activation codes are tensor.Activation: 0 Identity, 1 ReLU,
// 2 Sigmoid, 3 ELU.

// dense_div is a / b, in 32-bit arithmetic when the host says every index
// of the launch fits in 32 bits (small), as 64-bit division is slow.
static __device__ __forceinline__ i64 dense_div(i64 a, i64 b, int small) {
    return small ? (i64)((u32)a / (u32)b) : a / b;
}

static __device__ __forceinline__ float dense_act(int a, float alpha, float v) {
    switch (a) {
    case 1: return v > 0.f ? v : 0.f;
    case 2:
        if (v >= 0.f) return 1.f / (1.f + expf(-v));
        else {
            float e = expf(v);
            return e / (1.f + e);
        }
    case 3: return v > 0.f ? v : alpha * expm1f(v);
    }
    return v;
}

// dense_bias_act: y[i] = act(x[i] + bias[i mod cols]); y may alias x.
extern "C" __global__ void dense_bias_act(float* y, const float* x, const float* __restrict__ bias, int a,
                                          float alpha, i64 n, i64 cols, int small) {
    FOR(i, n) {
        i64 c = i - dense_div(i, cols, small) * cols;
        y[i] = dense_act(a, alpha, x[i] + bias[c]);
    }
}

// dense_act_fwd: y = act(x); y may alias x.
extern "C" __global__ void dense_act_fwd(float* y, const float* x, int a, float alpha, i64 n) {
    FOR(i, n) y[i] = dense_act(a, alpha, x[i]);
}

// dense_act_grad: dx = dy·act'(x), from y for ReLU/Sigmoid and x for ELU
// (the other pointer may be null); dx may alias dy.
extern "C" __global__ void dense_act_grad(float* dx, const float* dy, const float* x, const float* y, int a,
                                          float alpha, i64 n) {
    FOR(i, n) {
        float g = dy[i];
        switch (a) {
        case 1:
            if (y[i] <= 0.f) g = 0.f;
            break;
        case 2: {
            float s = y[i];
            g *= s * (1.f - s);
            break;
        }
        case 3: {
            float v = x[i];
            if (v <= 0.f) g *= alpha * expf(v);
            break;
        }
        }
        dx[i] = g;
    }
}

// dense_axpby: d = a·x + b·y, or a·x when y is null; d may alias x or y.
extern "C" __global__ void dense_axpby(float* d, float a, const float* x, float b, const float* y, i64 n) {
    if (y == 0) {
        FOR(i, n) d[i] = a * x[i];
        return;
    }
    FOR(i, n) d[i] = a * x[i] + b * y[i];
}

// dense_mul: d = beta·d + x⊙y (d is not read when beta = 0).
extern "C" __global__ void dense_mul(float* d, float beta, const float* x, const float* y, i64 n) {
    FOR(i, n) {
        float v = x[i] * y[i];
        if (beta != 0.f) v += beta * d[i];
        d[i] = v;
    }
}

// dense_row_scale: d[i] = beta·d[i] + x[i]·s[i / cols].
extern "C" __global__ void dense_row_scale(float* d, float beta, const float* x, const float* __restrict__ s,
                                           i64 n, i64 cols, int small) {
    FOR(i, n) {
        float v = x[i] * s[dense_div(i, cols, small)];
        if (beta != 0.f) v += beta * d[i];
        d[i] = v;
    }
}

// dense_row_dot: d[r] = Σ_c x[r,c]·y[r,c]. One warp per row (grid-stride
// over rows), lanes stride the columns, double accumulation.
extern "C" __global__ void dense_row_dot(float* d, const float* __restrict__ x, const float* __restrict__ y,
                                         i64 rows, i64 cols) {
    const int lane = threadIdx.x & 31;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 r = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows; r += warps) {
        const float* xr = x + r * cols;
        const float* yr = y + r * cols;
        double s = 0;
        for (i64 c = lane; c < cols; c += 32) s += (double)xr[c] * (double)yr[c];
        s = warp_sum_d(s);
        if (lane == 0) d[r] = (float)s;
    }
}

// dense_reduce_part sums src seen as [outer, n, inner] over k. A block of
// 256 threads is G groups × TY k-lanes × TX columns (TX = 2^txLog,
// TY = 2^tyLog, G·TY·TX = 256; thread t = (g·TY + ty)·TX + tx). A group owns
// one tile, (o, columns [ct·TX, ct·TX+TX)), tiles grid-strided over
// blockIdx.x, and the k-chunk [y·nPer, min(n, y·nPer+nPer)) of y =
// blockIdx.y. Lane ty sums k = k0+ty, k0+ty+TY, … of its column in double
// (a warp reads 32/TX consecutive rows of TX columns), then the TY lanes are
// tree-reduced in shared memory. With one chunk (gridDim.y = 1) lane 0
// writes dst = scale·Σ + beta·dst; otherwise it stores the raw partial at
// part[y·outer·inner + o·inner + c] for dense_reduce_final.
// dense_reduce_body is dense_reduce_part for src of dtype code TS (a
// template argument, so the k loop's loads stay plain and unrolled) and
// dst of td; sh is the kernel's 256 doubles of shared memory.
template <int TS>
static __device__ __forceinline__ void dense_reduce_body(double* sh, void* dst, int td, const void* __restrict__ src,
                                                         double* part, i64 outer, i64 n, i64 inner, int txLog,
                                                         int tyLog, i64 nPer, double scale, double beta) {
    const int TX = 1 << txLog, TY = 1 << tyLog, G = 256 >> (txLog + tyLog);
    const int t = threadIdx.x;
    const int tx = t & (TX - 1), ty = (t >> txLog) & (TY - 1), g = t >> (txLog + tyLog);
    const i64 colTiles = (inner + TX - 1) >> txLog;
    const i64 tiles = outer * colTiles;
    const i64 k0 = (i64)blockIdx.y * nPer, k1 = min(n, k0 + nPer);
    // base is uniform over the block, so every thread meets the barriers.
    for (i64 base = (i64)blockIdx.x * G; base < tiles; base += (i64)gridDim.x * G) {
        const i64 tile = base + g;
        bool live = tile < tiles;
        i64 o = 0, c = 0;
        if (live) {
            o = tile / colTiles;
            c = (tile - o * colTiles) * TX + tx;
            live = c < inner;
        }
        double acc = 0;
        if (live) {
            const i64 s = o * n * inner + c;
#pragma unroll 4
            for (i64 k = k0 + ty; k < k1; k += TY) acc += (double)ldv(src, TS, s + k * inner);
        }
        sh[t] = acc;
        __syncthreads();
        for (int h = TY >> 1; h > 0; h >>= 1) {
            if (ty < h) sh[t] += sh[t + (h << txLog)];
            __syncthreads();
        }
        if (live && ty == 0) {
            const double v = sh[t];
            const i64 j = o * inner + c;
            if (gridDim.y == 1) {
                double w = scale * v;
                if (beta != 0.0) w += beta * (double)ldv(dst, td, j);
                stv(dst, td, j, (float)w);
            } else {
                part[(i64)blockIdx.y * outer * inner + j] = v;
            }
        }
        __syncthreads(); // sh is rewritten by the next tile
    }
}

extern "C" __global__ void __launch_bounds__(256)
    dense_reduce_part(float* dst, const float* __restrict__ src, double* part, i64 outer, i64 n, i64 inner,
                      int txLog, int tyLog, i64 nPer, double scale, double beta) {
    __shared__ double sh[256];
    dense_reduce_body<DT_F32>(sh, dst, DT_F32, src, part, outer, n, inner, txLog, tyLog, nPer, scale, beta);
}

// dense_reduce_part_h is dense_reduce_part for operands of any dtype code
// (a half src is summed in double as float32's; dst is rounded once).
extern "C" __global__ void __launch_bounds__(256)
    dense_reduce_part_h(void* dst, int td, const void* __restrict__ src, int ts, double* part, i64 outer, i64 n,
                        i64 inner, int txLog, int tyLog, i64 nPer, double scale, double beta) {
    __shared__ double sh[256];
    if (ts == DT_F16) dense_reduce_body<DT_F16>(sh, dst, td, src, part, outer, n, inner, txLog, tyLog, nPer, scale, beta);
    else if (ts == DT_BF16)
        dense_reduce_body<DT_BF16>(sh, dst, td, src, part, outer, n, inner, txLog, tyLog, nPer, scale, beta);
    else dense_reduce_body<DT_F32>(sh, dst, td, src, part, outer, n, inner, txLog, tyLog, nPer, scale, beta);
}

static __device__ __forceinline__ void dense_reduce_final_body(void* dst, int td, const double* __restrict__ part,
                                                               i64 m, int chunks, double scale, double beta) {
    FOR(j, m) {
        double a = 0;
        for (int y = 0; y < chunks; y++) a += part[(i64)y * m + j];
        double w = scale * a;
        if (beta != 0.0) w += beta * (double)ldv(dst, td, j);
        stv(dst, td, j, (float)w);
    }
}

// dense_reduce_final: dst[j] = scale·Σ_y part[y·m + j] + beta·dst[j], the
// chunks summed in order (deterministic); one thread per output.
extern "C" __global__ void dense_reduce_final(float* dst, const double* __restrict__ part, i64 m, int chunks,
                                              double scale, double beta) {
    dense_reduce_final_body(dst, DT_F32, part, m, chunks, scale, beta);
}

// dense_reduce_final_h is dense_reduce_final for a dst of dtype code td.
extern "C" __global__ void dense_reduce_final_h(void* dst, int td, const double* __restrict__ part, i64 m,
                                                int chunks, double scale, double beta) {
    dense_reduce_final_body(dst, td, part, m, chunks, scale, beta);
}

// dense_broadcast: dst[o,k,i] = beta·dst[o,k,i] + scale·src[o,i] over the
// flat index e of dst ([outer, n, inner]).
extern "C" __global__ void dense_broadcast(float* dst, float beta, const float* __restrict__ src, i64 total,
                                           i64 n, i64 inner, float scale, int small) {
    const i64 ni = n * inner;
    FOR(e, total) {
        i64 o = dense_div(e, ni, small);
        i64 i = e - dense_div(e, inner, small) * inner;
        float w = scale * src[o * inner + i];
        if (beta != 0.f) w += beta * dst[e];
        dst[e] = w;
    }
}

// dense_copy_cols: dst[r·dn + j] = beta·dst[r·dn + j] + src[r·sn + j] for
// j < width (dst, src already offset to their first column); one thread
// per element of the rows × width block.
extern "C" __global__ void dense_copy_cols(float* dst, i64 dn, const float* __restrict__ src, i64 sn, i64 width,
                                           i64 total, float beta, int small) {
    FOR(e, total) {
        i64 r = dense_div(e, width, small), j = e - r * width;
        float v = src[r * sn + j];
        float* d = dst + r * dn + j;
        *d = beta == 0.f ? v : beta * *d + v;
    }
}

// dense_sum_part: part[block] = Σ x² (absval = 0) or Σ |x| over the block's
// grid-stride share of x, in double.
extern "C" __global__ void __launch_bounds__(256)
    dense_sum_part(double* part, const float* __restrict__ x, i64 n, int absval) {
    __shared__ double sh[32];
    double a = 0;
    FOR(i, n) {
        double v = (double)x[i];
        a += absval ? fabs(v) : v * v;
    }
    a = block_sum_d(a, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = a;
}

// dense_sum_final (one block): out[0] = out[0] + scale·Σ part, in double.
extern "C" __global__ void __launch_bounds__(256)
    dense_sum_final(float* out, const double* __restrict__ part, int parts, double scale) {
    __shared__ double sh[32];
    double a = 0;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) a += part[i];
    a = block_sum_d(a, sh);
    if (threadIdx.x == 0) out[0] = (float)((double)out[0] + scale * a);
}

// dense_sign_axpy: d += a·sign(x) (NaN and zero add nothing).
extern "C" __global__ void dense_sign_axpy(float* d, float a, const float* __restrict__ x, i64 n) {
    FOR(i, n) {
        float v = x[i];
        if (v > 0.f) d[i] += a;
        else if (v < 0.f) d[i] -= a;
    }
}

// dense_philox is tensor.Philox4x32: Philox-4x32-10 of counter (c0, c1, 0,
// 0) under key (k0, k1).
static __device__ __forceinline__ void dense_philox(u32 c0, u32 c1, u32 k0, u32 k1, u32 w[4]) {
    u32 c2 = 0, c3 = 0;
#pragma unroll
    for (int r = 0; r < 10; r++) {
        const u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    w[0] = c0;
    w[1] = c1;
    w[2] = c2;
    w[3] = c3;
}

struct alignas(16) dense_f4 {
    float v[4];
};

// dense_dropout: y[i] = x[i]·scale if PhiloxUniform(seed, counter, i) ≥
// rate, else 0. One thread per Philox block of 4 elements (block b takes
// counter + b; element 4b+e takes word e, top 24 bits · 2⁻²⁴), with one
// 16-byte load and store when the block is whole and both pointers are
// 16-byte aligned; y may alias x.
// A CUDA graph step passes the counter in *dync instead (gpu/graph.go).
extern "C" __global__ void dense_dropout(float* y, const float* x, i64 n, float rate, float scale, u64 seed,
                                         u64 counter, const u64* dync) {
    if (dync) counter = *dync;
    const i64 blocks = (n + 3) >> 2;
    const bool vec = (((u64)x | (u64)y) & 15) == 0;
    FOR(b, blocks) {
        const u64 c = counter + (u64)b;
        u32 w[4];
        dense_philox((u32)c, (u32)(c >> 32), (u32)seed, (u32)(seed >> 32), w);
        const i64 i = b * 4;
        if (vec && i + 4 <= n) {
            dense_f4 in = *(const dense_f4*)(x + i), out;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float u = (float)(w[e] >> 8) * (1.0f / 16777216.0f);
                out.v[e] = u >= rate ? in.v[e] * scale : 0.f;
            }
            *(dense_f4*)(y + i) = out;
            continue;
        }
        for (int e = 0; e < 4 && i + e < n; e++) {
            const float u = (float)(w[e] >> 8) * (1.0f / 16777216.0f);
            y[i + e] = u >= rate ? x[i + e] * scale : 0.f;
        }
    }
}

// ---- Half-precision operands (tensor.Float16, tensor.BFloat16) ----
// The _h kernels are the float32 kernels above for operands of any dtype
// code (common.cuh's DT_*), each operand its own: dense.go launches them
// when an operand is half and the float32 kernels otherwise. Arithmetic is
// float32 as in the float32 kernels; a half output is the float32 result
// rounded once. The elementwise ones give a thread a group of G
// consecutive elements: G = 8 when every operand is half and 16-byte
// aligned (one 16-byte load or store per operand), else G = 2 with one
// 4-byte load per half operand (8 bytes per float32 one) when every
// operand is aligned to two of its elements; a misaligned operand, and the
// elements of a last partial group, go one at a time.

struct alignas(8) dense_f2 {
    float a, b;
};
// dense_h8 is 8 half elements as four 32-bit words (so that the load is
// one 16-byte vector; element k is the low or high half of word k/2).
struct alignas(16) dense_h8 {
    u32 w[4];
};

// dense_al reports whether p (null included) is aligned to k elements of
// dtype code dt.
static __device__ __forceinline__ bool dense_al(const void* p, int dt, int k) {
    return ((u64)p & (u64)(k * (dt == DT_F32 ? 4 : 2) - 1)) == 0;
}

// dense_h8ok reports whether p (null included) is half and 16-byte aligned:
// the G = 8 groups.
static __device__ __forceinline__ bool dense_h8ok(const void* p, int dt) {
    return p == 0 || (dt != DT_F32 && ((u64)p & 15) == 0);
}

static __device__ __forceinline__ float dense_hv(int dt, u32 h) {
    return dt == DT_F16 ? h2f((h16)h) : b2f((h16)h);
}

static __device__ __forceinline__ u32 dense_vh(int dt, float v) {
    return (u32)(dt == DT_F16 ? f2h(v) : f2b(v));
}

// dense_ldg reads elements i … i+G−1 of p into v: vector loads when vec
// and the group lies below n (G = 8: p is half), else one by one (0 past
// n).
template <int G>
static __device__ __forceinline__ void dense_ldg(const void* p, int dt, i64 i, i64 n, bool vec, float* v) {
    if (vec && i + G <= n) {
        if (G == 8) {
            const dense_h8 w = ((const dense_h8*)p)[i >> 3];
#pragma unroll
            for (int k = 0; k < G; k++) v[k] = dense_hv(dt, (w.w[k >> 1] >> (16 * (k & 1))) & 0xffffu);
        } else if (dt == DT_F32) {
#pragma unroll
            for (int k = 0; k < G; k += 2) {
                const dense_f2 w = ((const dense_f2*)p)[(i + k) >> 1];
                v[k] = w.a;
                v[k + 1] = w.b;
            }
        } else {
#pragma unroll
            for (int k = 0; k < G; k += 2) {
                const u32 w = ((const u32*)p)[(i + k) >> 1];
                v[k] = dense_hv(dt, w & 0xffffu);
                v[k + 1] = dense_hv(dt, w >> 16);
            }
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < G; k++) v[k] = i + k < n ? ldv(p, dt, i + k) : 0.f;
}

// dense_stg writes v[0…G−1] (those below n) as dense_ldg reads them.
template <int G>
static __device__ __forceinline__ void dense_stg(void* p, int dt, i64 i, i64 n, bool vec, const float* v) {
    if (vec && i + G <= n) {
        if (G == 8) {
            dense_h8 w;
#pragma unroll
            for (int k = 0; k < G; k += 2) w.w[k >> 1] = dense_vh(dt, v[k]) | (dense_vh(dt, v[k + 1]) << 16);
            ((dense_h8*)p)[i >> 3] = w;
        } else if (dt == DT_F32) {
#pragma unroll
            for (int k = 0; k < G; k += 2) {
                dense_f2 w;
                w.a = v[k];
                w.b = v[k + 1];
                ((dense_f2*)p)[(i + k) >> 1] = w;
            }
        } else {
#pragma unroll
            for (int k = 0; k < G; k += 2) ((u32*)p)[(i + k) >> 1] = dense_vh(dt, v[k]) | (dense_vh(dt, v[k + 1]) << 16);
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < G; k++)
        if (i + k < n) stv(p, dt, i + k, v[k]);
}

// DENSE_GROUPS runs body (a template function of G taking vec last) with
// G = 8 when every listed operand is dense_h8ok, else G = 2 with vec = the
// pair alignment al2.
#define DENSE_GROUPS(h8, al2, body, ...)                                                                               \
    do {                                                                                                               \
        if (h8) body<8>(__VA_ARGS__, true);                                                                            \
        else body<2>(__VA_ARGS__, al2);                                                                                \
    } while (0)

// dense_bias_act_h: y[i] = act(x[i] + bias[i mod cols]), bias float32; y
// may alias x.
template <int G>
static __device__ __forceinline__ void dense_bias_act_g(void* y, int ty, const void* x, int tx,
                                                        const float* __restrict__ bias, int a, float alpha, i64 n,
                                                        i64 cols, int small, bool vec) {
    FOR(j, (n + G - 1) / G) {
        const i64 i = j * G;
        float v[G];
        dense_ldg<G>(x, tx, i, n, vec, v);
        i64 c = i - dense_div(i, cols, small) * cols;
#pragma unroll
        for (int k = 0; k < G; k++) {
            v[k] = dense_act(a, alpha, v[k] + bias[c]);
            if (++c == cols) c = 0;
        }
        dense_stg<G>(y, ty, i, n, vec, v);
    }
}
extern "C" __global__ void dense_bias_act_h(void* y, int ty, const void* x, int tx, const float* __restrict__ bias,
                                            int a, float alpha, i64 n, i64 cols, int small) {
    DENSE_GROUPS(dense_h8ok(y, ty) && dense_h8ok(x, tx), dense_al(y, ty, 2) && dense_al(x, tx, 2), dense_bias_act_g,
                 y, ty, x, tx, bias, a, alpha, n, cols, small);
}

// dense_act_fwd_h: y = act(x); y may alias x.
template <int G>
static __device__ __forceinline__ void dense_act_fwd_g(void* y, int ty, const void* x, int tx, int a, float alpha,
                                                       i64 n, bool vec) {
    FOR(j, (n + G - 1) / G) {
        const i64 i = j * G;
        float v[G];
        dense_ldg<G>(x, tx, i, n, vec, v);
#pragma unroll
        for (int k = 0; k < G; k++) v[k] = dense_act(a, alpha, v[k]);
        dense_stg<G>(y, ty, i, n, vec, v);
    }
}
extern "C" __global__ void dense_act_fwd_h(void* y, int ty, const void* x, int tx, int a, float alpha, i64 n) {
    DENSE_GROUPS(dense_h8ok(y, ty) && dense_h8ok(x, tx), dense_al(y, ty, 2) && dense_al(x, tx, 2), dense_act_fwd_g, y,
                 ty, x, tx, a, alpha, n);
}

// dense_dact is dy·act'(·) as dense_act_grad computes it, from y (ReLU,
// Sigmoid) or x (ELU).
static __device__ __forceinline__ float dense_dact(int a, float alpha, float g, float xv, float yv) {
    switch (a) {
    case 1: return yv <= 0.f ? 0.f : g;
    case 2: return g * (yv * (1.f - yv));
    case 3: return xv <= 0.f ? g * (alpha * expf(xv)) : g;
    }
    return g;
}

// dense_act_grad_h: dx = dy·act'(x), reading y for ReLU/Sigmoid and x for
// ELU (the other may be null, and is not read); dx may alias dy.
template <int G>
static __device__ __forceinline__ void dense_act_grad_g(void* dx, int tdx, const void* dy, int tdy, const void* x,
                                                        int tx, const void* y, int ty, int a, float alpha, i64 n,
                                                        bool vec) {
    const bool needX = a == 3, needY = a == 1 || a == 2;
    FOR(j, (n + G - 1) / G) {
        const i64 i = j * G;
        float g[G], xv[G], yv[G];
        dense_ldg<G>(dy, tdy, i, n, vec, g);
#pragma unroll
        for (int k = 0; k < G; k++) xv[k] = yv[k] = 0.f;
        if (needX) dense_ldg<G>(x, tx, i, n, vec, xv);
        if (needY) dense_ldg<G>(y, ty, i, n, vec, yv);
#pragma unroll
        for (int k = 0; k < G; k++) g[k] = dense_dact(a, alpha, g[k], xv[k], yv[k]);
        dense_stg<G>(dx, tdx, i, n, vec, g);
    }
}
extern "C" __global__ void dense_act_grad_h(void* dx, int tdx, const void* dy, int tdy, const void* x, int tx,
                                            const void* y, int ty, int a, float alpha, i64 n) {
    const bool needX = a == 3, needY = a == 1 || a == 2;
    const void* xo = needX ? x : 0;
    const void* yo = needY ? y : 0;
    DENSE_GROUPS(dense_h8ok(dx, tdx) && dense_h8ok(dy, tdy) && dense_h8ok(xo, tx) && dense_h8ok(yo, ty),
                 dense_al(dx, tdx, 2) && dense_al(dy, tdy, 2) && dense_al(xo, tx, 2) && dense_al(yo, ty, 2),
                 dense_act_grad_g, dx, tdx, dy, tdy, x, tx, y, ty, a, alpha, n);
}

// dense_axpby_h: d = a·x + b·y, or a·x when y is null; d may alias x or y.
template <int G>
static __device__ __forceinline__ void dense_axpby_g(void* d, int td, float a, const void* x, int tx, float b,
                                                     const void* y, int ty, i64 n, bool vec) {
    FOR(j, (n + G - 1) / G) {
        const i64 i = j * G;
        float xv[G], yv[G];
        dense_ldg<G>(x, tx, i, n, vec, xv);
        if (y == 0) {
#pragma unroll
            for (int k = 0; k < G; k++) xv[k] = a * xv[k];
        } else {
            dense_ldg<G>(y, ty, i, n, vec, yv);
#pragma unroll
            for (int k = 0; k < G; k++) xv[k] = a * xv[k] + b * yv[k];
        }
        dense_stg<G>(d, td, i, n, vec, xv);
    }
}
extern "C" __global__ void dense_axpby_h(void* d, int td, float a, const void* x, int tx, float b, const void* y,
                                         int ty, i64 n) {
    DENSE_GROUPS(dense_h8ok(d, td) && dense_h8ok(x, tx) && dense_h8ok(y, ty),
                 dense_al(d, td, 2) && dense_al(x, tx, 2) && dense_al(y, ty, 2), dense_axpby_g, d, td, a, x, tx, b, y,
                 ty, n);
}

// dense_mul_h: d = beta·d + x⊙y (d is not read when beta = 0).
template <int G>
static __device__ __forceinline__ void dense_mul_g(void* d, int td, float beta, const void* x, int tx, const void* y,
                                                   int ty, i64 n, bool vec) {
    FOR(j, (n + G - 1) / G) {
        const i64 i = j * G;
        float xv[G], yv[G];
        dense_ldg<G>(x, tx, i, n, vec, xv);
        dense_ldg<G>(y, ty, i, n, vec, yv);
#pragma unroll
        for (int k = 0; k < G; k++) xv[k] = xv[k] * yv[k];
        if (beta != 0.f) {
            dense_ldg<G>(d, td, i, n, vec, yv);
#pragma unroll
            for (int k = 0; k < G; k++) xv[k] += beta * yv[k];
        }
        dense_stg<G>(d, td, i, n, vec, xv);
    }
}
extern "C" __global__ void dense_mul_h(void* d, int td, float beta, const void* x, int tx, const void* y, int ty,
                                       i64 n) {
    DENSE_GROUPS(dense_h8ok(d, td) && dense_h8ok(x, tx) && dense_h8ok(y, ty),
                 dense_al(d, td, 2) && dense_al(x, tx, 2) && dense_al(y, ty, 2), dense_mul_g, d, td, beta, x, tx, y, ty,
                 n);
}

// dense_row_scale_h: d[i] = beta·d[i] + x[i]·s[i / cols] (s of any dtype,
// read one element at a time).
template <int G>
static __device__ __forceinline__ void dense_row_scale_g(void* d, int td, float beta, const void* x, int tx,
                                                         const void* __restrict__ s, int ts, i64 n, i64 cols,
                                                         int small, bool vec) {
    FOR(j, (n + G - 1) / G) {
        const i64 i = j * G;
        float xv[G], dv[G];
        dense_ldg<G>(x, tx, i, n, vec, xv);
        i64 r = dense_div(i, cols, small), c = i - r * cols;
#pragma unroll
        for (int k = 0; k < G; k++) {
            xv[k] = i + k < n ? xv[k] * ldv(s, ts, r) : 0.f;
            if (++c == cols) c = 0, r++;
        }
        if (beta != 0.f) {
            dense_ldg<G>(d, td, i, n, vec, dv);
#pragma unroll
            for (int k = 0; k < G; k++) xv[k] += beta * dv[k];
        }
        dense_stg<G>(d, td, i, n, vec, xv);
    }
}
extern "C" __global__ void dense_row_scale_h(void* d, int td, float beta, const void* x, int tx,
                                             const void* __restrict__ s, int ts, i64 n, i64 cols, int small) {
    DENSE_GROUPS(dense_h8ok(d, td) && dense_h8ok(x, tx), dense_al(d, td, 2) && dense_al(x, tx, 2), dense_row_scale_g, d,
                 td, beta, x, tx, s, ts, n, cols, small);
}

// dense_row_dot_h is dense_row_dot for operands of any dtype code.
extern "C" __global__ void dense_row_dot_h(void* d, int td, const void* __restrict__ x, int tx,
                                           const void* __restrict__ y, int ty, i64 rows, i64 cols) {
    const int lane = threadIdx.x & 31;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 r = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows; r += warps) {
        double s = 0;
        for (i64 c = lane; c < cols; c += 32) s += (double)ldv(x, tx, r * cols + c) * (double)ldv(y, ty, r * cols + c);
        s = warp_sum_d(s);
        if (lane == 0) stv(d, td, r, (float)s);
    }
}

// dense_broadcast_h is dense_broadcast for operands of any dtype code.
extern "C" __global__ void dense_broadcast_h(void* dst, int td, float beta, const void* __restrict__ src, int ts,
                                             i64 total, i64 n, i64 inner, float scale, int small) {
    const i64 ni = n * inner;
    FOR(e, total) {
        i64 o = dense_div(e, ni, small);
        i64 i = e - dense_div(e, inner, small) * inner;
        float w = scale * ldv(src, ts, o * inner + i);
        if (beta != 0.f) w += beta * ldv(dst, td, e);
        stv(dst, td, e, w);
    }
}

// dense_copy_cols_h is dense_copy_cols for operands of any dtype code (dst
// and src already offset to their first column, which need not be
// aligned); with beta = 0 and one dtype the 16-bit values are copied
// as they are, 8 at a time (16 bytes) when both blocks start 16-byte
// aligned and the widths are multiples of 8 (Concat of 16-wide slots).
extern "C" __global__ void dense_copy_cols_h(void* dst, int td, i64 dn, const void* __restrict__ src, int ts, i64 sn,
                                             i64 width, i64 total, float beta, int small) {
    const bool raw = beta == 0.f && td == ts && td != DT_F32;
    if (raw && (((u64)dst | (u64)src) & 15) == 0 && ((dn | sn | width) & 7) == 0) {
        const i64 w8 = width >> 3;
        FOR(e, total >> 3) {
            i64 r = dense_div(e, w8, small), j = e - r * w8;
            ((dense_f4*)dst)[(r * dn >> 3) + j] = ((const dense_f4*)src)[(r * sn >> 3) + j];
        }
        return;
    }
    FOR(e, total) {
        i64 r = dense_div(e, width, small), j = e - r * width;
        if (raw) {
            ((h16*)dst)[r * dn + j] = ((const h16*)src)[r * sn + j];
            continue;
        }
        float v = ldv(src, ts, r * sn + j);
        if (beta != 0.f) v += beta * ldv(dst, td, r * dn + j);
        stv(dst, td, r * dn + j, v);
    }
}

struct alignas(8) dense_h4 {
    h16 v[4];
};

// dense_dropout_h is dense_dropout for operands of any dtype code: the
// same Philox blocks, so the same mask for a seed and counter whatever the
// dtypes; one 8-byte (half) or 16-byte (float32) load and store per
// operand when the block is whole and both are aligned to 4 elements.
extern "C" __global__ void dense_dropout_h(void* y, int ty, const void* x, int tx, i64 n, float rate, float scale,
                                           u64 seed, u64 counter, const u64* dync) {
    if (dync) counter = *dync;
    const i64 blocks = (n + 3) >> 2;
    const bool vec = dense_al(x, tx, 4) && dense_al(y, ty, 4);
    FOR(b, blocks) {
        const u64 c = counter + (u64)b;
        u32 w[4];
        dense_philox((u32)c, (u32)(c >> 32), (u32)seed, (u32)(seed >> 32), w);
        const i64 i = b * 4;
        float in[4], out[4];
        const bool whole = vec && i + 4 <= n;
        if (whole && tx == DT_F32) {
            const dense_f4 v = *(const dense_f4*)((const float*)x + i);
#pragma unroll
            for (int e = 0; e < 4; e++) in[e] = v.v[e];
        } else if (whole) {
            const dense_h4 v = *(const dense_h4*)((const h16*)x + i);
#pragma unroll
            for (int e = 0; e < 4; e++) in[e] = dense_hv(tx, v.v[e]);
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++) in[e] = i + e < n ? ldv(x, tx, i + e) : 0.f;
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float u = (float)(w[e] >> 8) * (1.0f / 16777216.0f);
            out[e] = u >= rate ? in[e] * scale : 0.f;
        }
        if (whole && ty == DT_F32) {
            dense_f4 v;
#pragma unroll
            for (int e = 0; e < 4; e++) v.v[e] = out[e];
            *(dense_f4*)((float*)y + i) = v;
        } else if (whole) {
            dense_h4 v;
#pragma unroll
            for (int e = 0; e < 4; e++) v.v[e] = (h16)dense_vh(ty, out[e]);
            *(dense_h4*)((h16*)y + i) = v;
        } else {
            for (int e = 0; e < 4 && i + e < n; e++) stv(y, ty, i + e, out[e]);
        }
    }
}
