// DCN's cross layer (tensor.CrossOps, multicross.go): the elementwise part
// of one cross layer in one pass over its [B, d] operands. V = 4 moves
// vectors of 4 elements (d % 4 == 0 and every pointer aligned to 4
// elements: 16 bytes of float32, 8 of a half dtype, which the host checks),
// V = 1 single elements. Arithmetic follows the CPU reference
// (trainer/tensor/cpu cross.go) in float32; the bias gradient accumulates
// in double.
//
// The activations (y, x0, z, x; g, dz, dx0, gc) are float32 (mc_fwd4,
// mc_bwd4, …) or of any of DT_F32, DT_F16, DT_BF16, each its own (the
// _h kernels take a dtype code per activation); bias and db are float32.
// A half output is the float32 result rounded once; db sums the float32
// products g·x0, not the rounded dz. The float32 kernels pass DT_F32
// constants, so their code is that of a float-only kernel.

template <int V>
struct alignas(4 * V) mc_vec {
    float v[V];
};

// mc_hvec: V 16-bit elements, one 2V-byte load or store.
template <int V>
struct alignas(2 * V) mc_hvec {
    h16 v[V];
};

template <int V>
static __device__ __forceinline__ mc_vec<V> mc_load(const float* p, i64 i) {
    return reinterpret_cast<const mc_vec<V>*>(p)[i];
}

template <int V>
static __device__ __forceinline__ void mc_store(float* p, i64 i, const mc_vec<V>& x) {
    reinterpret_cast<mc_vec<V>*>(p)[i] = x;
}

// mc_ld / mc_st: vector i of an activation of dtype code dt (float32, or
// 16-bit widened to float / rounded from it).
template <int V>
static __device__ __forceinline__ mc_vec<V> mc_ld(const void* p, int dt, i64 i) {
    if (dt == DT_F32) return mc_load<V>((const float*)p, i);
    const mc_hvec<V> h = reinterpret_cast<const mc_hvec<V>*>(p)[i];
    mc_vec<V> r;
#pragma unroll
    for (int j = 0; j < V; j++) r.v[j] = dt == DT_F16 ? h2f(h.v[j]) : b2f(h.v[j]);
    return r;
}

template <int V>
static __device__ __forceinline__ void mc_st(void* p, int dt, i64 i, const mc_vec<V>& x) {
    if (dt == DT_F32) {
        mc_store<V>((float*)p, i, x);
        return;
    }
    mc_hvec<V> h;
#pragma unroll
    for (int j = 0; j < V; j++) h.v[j] = dt == DT_F16 ? f2h(x.v[j]) : f2b(x.v[j]);
    reinterpret_cast<mc_hvec<V>*>(p)[i] = h;
}

// mc_fwd: y = x0 ⊙ (z + bias) + x (v1 = 0; z [B, d]) or y[r,c] = x0[r,c]·z[r]
// + bias[c] + x[r,c] (v1 = 1; z [B]), over nv = B·d/V vectors of colsv =
// d/V per row; small: every vector index fits in 32 bits. ty, t0, tz, tx:
// the dtype codes of y, x0, z, x.
template <int V>
static __device__ __forceinline__ void mc_fwd(void* y, const void* __restrict__ x0, const void* __restrict__ z,
                                              const float* __restrict__ bias, const void* __restrict__ x, i64 nv,
                                              i64 colsv, int small, int v1, int ty, int t0, int tz, int tx) {
    FOR(i, nv) {
        const i64 r = small ? (i64)((u32)i / (u32)colsv) : i / colsv;
        const i64 c = i - r * colsv;
        const mc_vec<V> a = mc_ld<V>(x0, t0, i), xv = mc_ld<V>(x, tx, i), b = mc_load<V>(bias, c);
        mc_vec<V> o;
        if (v1) {
            const float s = ldv(z, tz, r);
#pragma unroll
            for (int j = 0; j < V; j++) o.v[j] = a.v[j] * s + b.v[j] + xv.v[j];
        } else {
            const mc_vec<V> zv = mc_ld<V>(z, tz, i);
#pragma unroll
            for (int j = 0; j < V; j++) o.v[j] = a.v[j] * (zv.v[j] + b.v[j]) + xv.v[j];
        }
        mc_st<V>(y, ty, i, o);
    }
}

extern "C" __global__ void mc_fwd4(float* y, const float* __restrict__ x0, const float* __restrict__ z,
                                   const float* __restrict__ bias, const float* __restrict__ x, i64 nv, i64 colsv,
                                   int small, int v1) {
    mc_fwd<4>(y, x0, z, bias, x, nv, colsv, small, v1, DT_F32, DT_F32, DT_F32, DT_F32);
}

extern "C" __global__ void mc_fwd1(float* y, const float* __restrict__ x0, const float* __restrict__ z,
                                   const float* __restrict__ bias, const float* __restrict__ x, i64 nv, i64 colsv,
                                   int small, int v1) {
    mc_fwd<1>(y, x0, z, bias, x, nv, colsv, small, v1, DT_F32, DT_F32, DT_F32, DT_F32);
}

// mc_fwd4h / mc_fwd1h: mc_fwd4 / mc_fwd1 with activations of any dtype.
extern "C" __global__ void mc_fwd4h(void* y, const void* __restrict__ x0, const void* __restrict__ z,
                                    const float* __restrict__ bias, const void* __restrict__ x, i64 nv, i64 colsv,
                                    int small, int v1, int ty, int t0, int tz, int tx) {
    mc_fwd<4>(y, x0, z, bias, x, nv, colsv, small, v1, ty, t0, tz, tx);
}

extern "C" __global__ void mc_fwd1h(void* y, const void* __restrict__ x0, const void* __restrict__ z,
                                    const float* __restrict__ bias, const void* __restrict__ x, i64 nv, i64 colsv,
                                    int small, int v1, int ty, int t0, int tz, int tx) {
    mc_fwd<1>(y, x0, z, bias, x, nv, colsv, small, v1, ty, t0, tz, tx);
}

// mc_bwd: for g = dL/dy of the v2 forward,
//   dz = g ⊙ x0, dx0 = beta·dx0 + g ⊙ (z + bias) + res·g (dx0 non-null; not
//   read when beta = 0), gc = g (gc non-null),
// and the column sums of dz. A 256-thread block is 8 warps over 32 column
// vectors (lane tx owns vector column blockIdx.x·32 + tx, a warp reads 32
// consecutive vectors of one row) and the row chunk [y·rowsPer, min(rows,
// y·rowsPer + rowsPer)) of y = blockIdx.y, warp ty taking rows r0+ty,
// r0+ty+8, …. Each thread sums its column(s) in double, the 8 warps' sums
// are added in warp order through shared memory (sh: the kernel's 8·32·V
// doubles), and lane tx of warp 0 writes db (one chunk) or part[y·cols + c]
// (several: dense_reduce_final adds the chunks in order), so the result is
// deterministic. __launch_bounds__(256, 4) keeps 4 blocks resident per SM,
// the occupancy the host's grid (crossPlan: one wave) assumes. dt holds
// the dtype codes of dz, dx0, gc, g, x0, z in that order.
struct mc_dts {
    int dz, dx0, gc, g, x0, z;
};

template <int V>
static __device__ __forceinline__ void mc_bwd(void* dz, double* part, float* db, void* dx0, float beta, float res,
                                              void* gc, const void* __restrict__ g, const void* __restrict__ x0,
                                              const void* __restrict__ z, const float* __restrict__ bias, i64 rows,
                                              i64 colsv, i64 rowsPer, double* sh, mc_dts dt) {
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    const i64 cv = (i64)blockIdx.x * 32 + tx;
    const bool live = cv < colsv;
    const i64 r0 = (i64)blockIdx.y * rowsPer, r1 = min(rows, r0 + rowsPer);
    double acc[V];
#pragma unroll
    for (int j = 0; j < V; j++) acc[j] = 0;
    if (live) {
        const mc_vec<V> b = mc_load<V>(bias, cv);
#pragma unroll 2
        for (i64 r = r0 + ty; r < r1; r += 8) {
            const i64 i = r * colsv + cv;
            const mc_vec<V> gv = mc_ld<V>(g, dt.g, i), a = mc_ld<V>(x0, dt.x0, i);
            mc_vec<V> d;
#pragma unroll
            for (int j = 0; j < V; j++) {
                d.v[j] = gv.v[j] * a.v[j];
                acc[j] += (double)d.v[j];
            }
            mc_st<V>(dz, dt.dz, i, d);
            if (dx0) {
                const mc_vec<V> zv = mc_ld<V>(z, dt.z, i);
                mc_vec<V> w;
#pragma unroll
                for (int j = 0; j < V; j++) w.v[j] = gv.v[j] * (zv.v[j] + b.v[j]) + res * gv.v[j];
                if (beta != 0.f) {
                    const mc_vec<V> o = mc_ld<V>(dx0, dt.dx0, i);
#pragma unroll
                    for (int j = 0; j < V; j++) w.v[j] += beta * o.v[j];
                }
                mc_st<V>(dx0, dt.dx0, i, w);
            }
            if (gc) mc_st<V>(gc, dt.gc, i, gv);
        }
    }
#pragma unroll
    for (int j = 0; j < V; j++) sh[(ty * 32 + tx) * V + j] = acc[j];
    __syncthreads();
    if (ty == 0 && live) {
        const i64 cols = colsv * V;
#pragma unroll
        for (int j = 0; j < V; j++) {
            double s = 0;
            for (int k = 0; k < 8; k++) s += sh[(k * 32 + tx) * V + j];
            const i64 c = cv * V + j;
            if (gridDim.y == 1) db[c] = (float)s;
            else part[(i64)blockIdx.y * cols + c] = s;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256, 4)
    mc_bwd4(float* dz, double* part, float* db, float* dx0, float beta, float res, float* gc,
            const float* __restrict__ g, const float* __restrict__ x0, const float* __restrict__ z,
            const float* __restrict__ bias, i64 rows, i64 colsv, i64 rowsPer) {
    __shared__ double sh[8 * 32 * 4];
    mc_bwd<4>(dz, part, db, dx0, beta, res, gc, g, x0, z, bias, rows, colsv, rowsPer, sh,
              mc_dts{DT_F32, DT_F32, DT_F32, DT_F32, DT_F32, DT_F32});
}

extern "C" __global__ void __launch_bounds__(256, 4)
    mc_bwd1(float* dz, double* part, float* db, float* dx0, float beta, float res, float* gc,
            const float* __restrict__ g, const float* __restrict__ x0, const float* __restrict__ z,
            const float* __restrict__ bias, i64 rows, i64 colsv, i64 rowsPer) {
    __shared__ double sh[8 * 32];
    mc_bwd<1>(dz, part, db, dx0, beta, res, gc, g, x0, z, bias, rows, colsv, rowsPer, sh,
              mc_dts{DT_F32, DT_F32, DT_F32, DT_F32, DT_F32, DT_F32});
}

// mc_bwd4h / mc_bwd1h: mc_bwd4 / mc_bwd1 with activations of any dtype
// (tdz, tdx0, tgc, tg, t0, tz: the codes of dz, dx0, gc, g, x0, z).
extern "C" __global__ void __launch_bounds__(256, 4)
    mc_bwd4h(void* dz, double* part, float* db, void* dx0, float beta, float res, void* gc,
             const void* __restrict__ g, const void* __restrict__ x0, const void* __restrict__ z,
             const float* __restrict__ bias, i64 rows, i64 colsv, i64 rowsPer, int tdz, int tdx0, int tgc, int tg,
             int t0, int tz) {
    __shared__ double sh[8 * 32 * 4];
    mc_bwd<4>(dz, part, db, dx0, beta, res, gc, g, x0, z, bias, rows, colsv, rowsPer, sh,
              mc_dts{tdz, tdx0, tgc, tg, t0, tz});
}

extern "C" __global__ void __launch_bounds__(256, 4)
    mc_bwd1h(void* dz, double* part, float* db, void* dx0, float beta, float res, void* gc,
             const void* __restrict__ g, const void* __restrict__ x0, const void* __restrict__ z,
             const float* __restrict__ bias, i64 rows, i64 colsv, i64 rowsPer, int tdz, int tdx0, int tgc, int tg,
             int t0, int tz) {
    __shared__ double sh[8 * 32];
    mc_bwd<1>(dz, part, db, dx0, beta, res, gc, g, x0, z, bias, rows, colsv, rowsPer, sh,
              mc_dts{tdz, tdx0, tgc, tg, t0, tz});
}
