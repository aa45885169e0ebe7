// nn kernels (cpu/nn.go is the reference): DLRM dot interaction, FM
// order-2, batch norm, softmax, BCE and softmax cross-entropy. Losses are
// reduced in double: block partials, then nn_loss_final in one block
// (deterministic, no atomics, no host sync).

// nn_f4: 16-byte aligned quad for vector shared-memory loads.
struct alignas(16) nn_f4 {
    float x, y, z, w;
};

// Dynamic shared memory of the interaction kernels (16-byte aligned). The
// host syntax check (hostcheck/shim.h) cannot express extern __shared__.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
extern __shared__ nn_f4 nn_smem[];
#else
__shared__ nn_f4 nn_smem[1];
#endif

#define NN_OP_SOFTMAX_CE 3 // opSoftmaxCE in backend.go

// nn_tri decodes t = tj(tj+1)/2 + ti (0 ≤ ti ≤ tj), the column-major
// enumeration of an upper triangle including the diagonal.
static __device__ __forceinline__ void nn_tri(int t, int* ti, int* tj) {
    int j = (int)((sqrtf(8.f * (float)t + 1.f) - 1.f) * 0.5f);
    while (j > 0 && j * (j + 1) / 2 > t) j--;
    while ((j + 1) * (j + 2) / 2 <= t) j++;
    *tj = j;
    *ti = t - j * (j + 1) / 2;
}

// ---- Interaction (SPEC §8) ----
// F = [x0; e_1..e_n] (N = n+1 vectors of d); out row = x0, then dot(F_i,
// F_j) for i < j at column d + j(j-1)/2 + i, then a zero pad (W columns).
//
// Every interaction kernel is a template on the storage type T of all its
// operands (float, or the 16-bit half_t / bf16_t of tensor.Float16 /
// BFloat16), stamped as extern "C" kernels: the float32 name, then _f16
// and _bf16 (nn.go's interKernel). Arithmetic and the staging in shared
// memory are float32 whatever T is; a half output is the float32 result
// rounded once; x0's passthrough is exact in every T.

// ---- Interaction storage ----
// nn_ld4 reads quad q (elements 4q..4q+3) of a T array as floats: one
// 16-byte load for float, one 8-byte load for a 16-bit T (the quad's
// address a multiple of 8, which nn.go checks). nn_st4 writes one, each
// element rounded to T.
struct alignas(8) nn_h4 {
    h16 x, y, z, w;
};
static __device__ __forceinline__ float nn_hf(const half_t*, h16 v) { return h2f(v); }
static __device__ __forceinline__ float nn_hf(const bf16_t*, h16 v) { return b2f(v); }
static __device__ __forceinline__ h16 nn_fh(const half_t*, float v) { return f2h(v); }
static __device__ __forceinline__ h16 nn_fh(const bf16_t*, float v) { return f2b(v); }
// nn_q4f widens a loaded quad of T (the pointer only picks the type).
static __device__ __forceinline__ nn_f4 nn_q4f(const float*, nn_f4 v) { return v; }
template <class T>
static __device__ __forceinline__ nn_f4 nn_q4f(const T* p, nn_h4 h) {
    return nn_f4{nn_hf(p, h.x), nn_hf(p, h.y), nn_hf(p, h.z), nn_hf(p, h.w)};
}
static __device__ __forceinline__ nn_f4 nn_ld4(const float* p, i64 q) { return ((const nn_f4*)p)[q]; }
template <class T>
static __device__ __forceinline__ nn_f4 nn_ld4(const T* p, i64 q) {
    return nn_q4f(p, ((const nn_h4*)p)[q]);
}
// nn_q4<T>::type is the quad of T as stored (nn_q4f widens it).
template <class T>
struct nn_q4 {
    typedef nn_h4 type;
};
template <>
struct nn_q4<float> {
    typedef nn_f4 type;
};
static __device__ __forceinline__ void nn_st4(float* p, i64 q, nn_f4 v) {
    ((nn_f4*)p)[q] = nn_f4{v.x, v.y, v.z, v.w}; // component-wise: one 16-byte store, not two 8-byte ones
}
template <class T>
static __device__ __forceinline__ void nn_st4(T* p, i64 q, nn_f4 v) {
    ((nn_h4*)p)[q] = nn_h4{nn_fh(p, v.x), nn_fh(p, v.y), nn_fh(p, v.z), nn_fh(p, v.w)};
}

// NN_STAMP stamps the three extern "C" kernels of template fn: name (float),
// name_f16 and name_bf16. LB is NN_NOLB or an NN_LB_* __launch_bounds__,
// PARAMS names an NN_PARAMS_* list (the parameters, of T), ARGS the call's
// arguments.
#define NN_STAMP1(name, fn, T, LB, PARAMS, ARGS) \
    extern "C" __global__ void LB name PARAMS { fn<T> ARGS; }
#define NN_STAMP(name, fn, LB, PARAMS, ARGS)                        \
    NN_STAMP1(name, fn, float, LB, NN_PARAMS_##PARAMS(float), ARGS)  \
    NN_STAMP1(name##_f16, fn, half_t, LB, NN_PARAMS_##PARAMS(half_t), ARGS) \
    NN_STAMP1(name##_bf16, fn, bf16_t, LB, NN_PARAMS_##PARAMS(bf16_t), ARGS)
// The parameter lists: the forward's (out, x0, emb, B, n, d), the
// backward's (dx0, demb, dOut, x0, emb, B, n, d), and the global kernels'
// with total in place of B.
#define NN_PARAMS_FWD(T) (T* __restrict__ out, const T* __restrict__ x0, const T* __restrict__ emb, int B, int n, int d)
#define NN_PARAMS_BWD(T)                                                                                         \
    (T* __restrict__ dx0, T* __restrict__ demb, const T* __restrict__ dOut, const T* __restrict__ x0,           \
     const T* __restrict__ emb, int B, int n, int d)
#define NN_PARAMS_FWDG(T) (T* __restrict__ out, const T* __restrict__ x0, const T* __restrict__ emb, int n, int d, i64 total)
#define NN_PARAMS_BWDG(T)                                                                                        \
    (T* __restrict__ dx0, T* __restrict__ demb, const T* __restrict__ dOut, const T* __restrict__ x0,           \
     const T* __restrict__ emb, int n, int d, i64 total)
// NN_STAMPH stamps only the half kernels (name_f16, name_bf16) of a
// template with no float32 instantiation (the native half mma kernels).
#define NN_STAMPH(name, fn, LB, PARAMS, ARGS)                               \
    NN_STAMP1(name##_f16, fn, half_t, LB, NN_PARAMS_##PARAMS(half_t), ARGS) \
    NN_STAMP1(name##_bf16, fn, bf16_t, LB, NN_PARAMS_##PARAMS(bf16_t), ARGS)
#define NN_NOLB
#define NN_LB_FWD_TC __launch_bounds__(256, 3)
#define NN_LB_BWD_TC __launch_bounds__(256, 2)
#define NN_LB_FWD_HM __launch_bounds__(256, 2)
#define NN_LB_FWD_HM64 __launch_bounds__(256, 3)
#define NN_LB_BWD_HM __launch_bounds__(256, 2)
// ---- end of interaction storage ----

// interaction_fwd: one block per sample (grid-stride over samples). The
// sample's F goes to shared memory with an odd row stride ds = d|1, so the
// rows read at one column fall in distinct banks. Thread t owns 2×2 tiles of
// the Gram matrix (rows 2ti, 2ti+1 × cols 2tj, 2tj+1, ti ≤ tj, tiles
// enumerated by nn_tri) and writes the tile's pairs i < j into a staged
// output row o[W], which the block then stores coalesced.
// Shared: F [N·ds] then o [W] floats.
template <class T>
static __device__ __forceinline__ void nn_fwd(T* __restrict__ out, const T* __restrict__ x0, const T* __restrict__ emb,
                                              int B, int n, int d) {
    float* F = (float*)nn_smem;
    const int N = n + 1, ds = d | 1, W = d + n * (n + 1) / 2 + 1;
    float* o = F + N * ds;
    const int T2 = (N + 1) / 2, tiles = T2 * (T2 + 1) / 2;
    for (int s = blockIdx.x; s < B; s += gridDim.x) {
        const i64 xs = (i64)s * d, es = (i64)s * n * d;
        for (int e = threadIdx.x; e < N * d; e += blockDim.x) {
            int v = e / d, c = e - v * d;
            F[v * ds + c] = v == 0 ? ldt(x0, xs + c) : ldt(emb, es + e - d);
        }
        __syncthreads();
        for (int t = threadIdx.x; t < tiles; t += blockDim.x) {
            int ti, tj;
            nn_tri(t, &ti, &tj);
            int i0 = 2 * ti, j0 = 2 * tj;
            int i1 = min(i0 + 1, N - 1), j1 = min(j0 + 1, N - 1); // clamped reads; results dropped
            const float *a0 = F + i0 * ds, *a1 = F + i1 * ds, *b0 = F + j0 * ds, *b1 = F + j1 * ds;
            float s00 = 0.f, s01 = 0.f, s10 = 0.f, s11 = 0.f;
            for (int c = 0; c < d; c++) {
                float p0 = a0[c], p1 = a1[c], q0 = b0[c], q1 = b1[c];
                s00 += p0 * q0;
                s01 += p0 * q1;
                s10 += p1 * q0;
                s11 += p1 * q1;
            }
            bool jok = j0 + 1 < N; // column j0+1 exists
            if (ti < tj) {         // off-diagonal tile: every row < every column
                o[d + j0 * (j0 - 1) / 2 + i0] = s00;
                o[d + j0 * (j0 - 1) / 2 + i0 + 1] = s10;
                if (jok) {
                    o[d + (j0 + 1) * j0 / 2 + i0] = s01;
                    o[d + (j0 + 1) * j0 / 2 + i0 + 1] = s11;
                }
            } else if (jok) { // diagonal tile: only the pair (2t, 2t+1)
                o[d + (j0 + 1) * j0 / 2 + i0] = s01;
            }
        }
        for (int c = threadIdx.x; c < d; c += blockDim.x) o[c] = F[c];
        if (threadIdx.x == 0) o[W - 1] = 0.f;
        __syncthreads();
        const i64 os = (i64)s * W;
        for (int k = threadIdx.x; k < W; k += blockDim.x) stt(out, os + k, o[k]);
        // The next sample's F writes need no barrier: F's last readers ran
        // before the barrier above; o is rewritten only after the next one.
    }
}
NN_STAMP(interaction_fwd, nn_fwd, NN_NOLB, FWD, (out, x0, emb, B, n, d))

// interaction_bwd: one block per sample. dF_v = Σ_u G(u,v)·F_u with G the
// symmetric N×N matrix of the pair gradients (zero diagonal), plus dOut[:d]
// for v = 0. Shared: G [N][N4] (N4 = N rounded up to 4, zero padded) then F
// [N][d]. Thread item (vg, c) computes v = 4vg..4vg+3 at column c, streaming
// u: F[u][c] (consecutive c, conflict-free) and G[u][4vg..4vg+3] (one
// broadcast 16-byte load); writes to dx0 / demb are coalesced along c.
template <class T>
static __device__ __forceinline__ void nn_bwd(T* __restrict__ dx0, T* __restrict__ demb, const T* __restrict__ dOut,
                                              const T* __restrict__ x0, const T* __restrict__ emb, int B, int n,
                                              int d) {
    const int N = n + 1, N4 = (N + 3) & ~3, W = d + n * (n + 1) / 2 + 1, VG = N4 / 4;
    const int P = n * (n + 1) / 2;
    float* G = (float*)nn_smem;
    float* F = G + N * N4;
    for (int s = blockIdx.x; s < B; s += gridDim.x) {
        const i64 xs = (i64)s * d, es = (i64)s * n * d, go = (i64)s * W;
        for (int e = threadIdx.x; e < N * d; e += blockDim.x) F[e] = e < d ? ldt(x0, xs + e) : ldt(emb, es + e - d);
        for (int e = threadIdx.x; e < N * N4; e += blockDim.x) {
            int u = e / N4, v = e - u * N4;
            if (v >= N || v == u) G[e] = 0.f;
        }
        for (int q = threadIdx.x; q < P; q += blockDim.x) {
            int i, jm;
            nn_tri(q, &i, &jm); // q = j(j-1)/2 + i with j = jm+1
            float g = ldt(dOut, go + d + q);
            G[i * N4 + jm + 1] = g;
            G[(jm + 1) * N4 + i] = g;
        }
        __syncthreads();
        for (int it = threadIdx.x; it < VG * d; it += blockDim.x) {
            int vg = it / d, c = it - vg * d;
            float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
            const nn_f4* gq = (const nn_f4*)G + vg;
            for (int u = 0; u < N; u++) {
                float f = F[u * d + c];
                nn_f4 g = gq[u * VG];
                a0 += g.x * f;
                a1 += g.y * f;
                a2 += g.z * f;
                a3 += g.w * f;
            }
            int v = 4 * vg;
            const i64 de = es + c;
            if (v == 0) stt(dx0, xs + c, ldt(dOut, go + c) + a0);
            else stt(demb, de + (i64)(v - 1) * d, a0);
            if (v + 1 < N) stt(demb, de + (i64)v * d, a1);
            if (v + 2 < N) stt(demb, de + (i64)(v + 1) * d, a2);
            if (v + 3 < N) stt(demb, de + (i64)(v + 2) * d, a3);
        }
        __syncthreads(); // F and G are rewritten for the next sample
    }
}
NN_STAMP(interaction_bwd, nn_bwd, NN_NOLB, BWD, (dx0, demb, dOut, x0, emb, B, n, d))

// interaction_fwd4 / interaction_bwd4: the same with one warp per sample
// (blockDim.x/32 samples per block, each warp its own slice of shared
// memory, __syncwarp only), for d a multiple of 4 and quad-aligned operands
// (16 bytes for float, 8 for a 16-bit T). Chosen by nn.go; the kernels
// above stay the fallback.
//
// Forward: F's N rows, padded with zero rows to 4T (T = ⌈N/4⌉), are stored
// as T groups of 4 rows, each group 4·d4+1 float4s (d4 = d/4): the odd
// group stride puts the rows 4ti+k read by lanes of different ti in
// distinct banks. Lane t owns the 4×4 tile (ti, tj), ti ≤ tj (nn_tri),
// reads float4s of its 8 rows (8 loads per 64 FMAs), and writes the pairs
// i < j < N into the staged row o, stored coalesced.
// Shared per warp: F [T·(4·d4+1)] float4s, then o [⌈W/4⌉] float4s.
#define NN_BATCH 8 // global loads a lane issues before storing them to shared memory

template <class T>
static __device__ __forceinline__ void nn_fwd4(T* __restrict__ out, const T* __restrict__ x0,
                                               const T* __restrict__ emb, int B, int n, int d) {
    const int N = n + 1, d4 = d >> 2, W = d + n * (n + 1) / 2 + 1;
    const int T4 = (N + 3) >> 2, tiles = T4 * (T4 + 1) / 2, rs = 4 * d4 + 1;
    const int lane = threadIdx.x & 31, wpb = blockDim.x >> 5;
    const int per = T4 * rs + ((W + 3) >> 2);
    nn_f4* F = nn_smem + (threadIdx.x >> 5) * per;
    float* o = (float*)(F + T4 * rs);
    const int FQ = 4 * T4 * d4; // quads of F, zero rows included
    for (i64 s = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); s < B; s += (i64)gridDim.x * wpb) {
        // NN_BATCH loads a lane in flight before their shared stores (a
        // load-store loop would wait out each load's latency in turn).
        for (int e0 = 0; e0 < FQ; e0 += 32 * NN_BATCH) {
            nn_f4 v[NN_BATCH];
#pragma unroll
            for (int k = 0; k < NN_BATCH; k++) {
                const int e = e0 + 32 * k + lane, r = e / d4, c = e - r * d4;
                v[k] = nn_f4{0.f, 0.f, 0.f, 0.f};
                if (e < FQ && r < N) v[k] = r == 0 ? nn_ld4(x0, s * d4 + c) : nn_ld4(emb, (s * n + r - 1) * d4 + c);
            }
#pragma unroll
            for (int k = 0; k < NN_BATCH; k++) {
                const int e = e0 + 32 * k + lane, r = e / d4, c = e - r * d4;
                if (e < FQ) F[(r >> 2) * rs + (r & 3) * d4 + c] = v[k];
            }
        }
        __syncwarp();
        for (int t = lane; t < tiles; t += 32) {
            int ti, tj;
            nn_tri(t, &ti, &tj);
            const nn_f4* A = F + ti * rs;
            const nn_f4* Q = F + tj * rs;
            float acc[4][4];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = 0.f;
            for (int c = 0; c < d4; c++) {
                nn_f4 a[4], q[4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    a[k] = A[k * d4 + c];
                    q[k] = Q[k * d4 + c];
                }
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        float r = acc[i][j];
                        r = fmaf(a[i].x, q[j].x, r);
                        r = fmaf(a[i].y, q[j].y, r);
                        r = fmaf(a[i].z, q[j].z, r);
                        r = fmaf(a[i].w, q[j].w, r);
                        acc[i][j] = r;
                    }
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int gi = 4 * ti + i, gj = 4 * tj + j;
                    if (gi < gj && gj < N) o[d + gj * (gj - 1) / 2 + gi] = acc[i][j];
                }
        }
        for (int c = lane; c < d; c += 32) o[c] = ((const float*)F)[c]; // row 0 = x0
        if (lane == 0) o[W - 1] = 0.f;
        __syncwarp();
        const i64 os = s * W;
        for (int k = lane; k < W; k += 32) stt(out, os + k, o[k]);
        __syncwarp(); // F and o are rewritten for the next sample
    }
}
NN_STAMP(interaction_fwd4, nn_fwd4, NN_NOLB, FWD, (out, x0, emb, B, n, d))

// interaction_bwd4: dF_v = Σ_u G(u,v)·F_u as interaction_bwd, one warp per
// sample. Item (vg, c) computes the float4 at column 4c of rows
// v = 4vg..4vg+3: per u one float4 of F (lanes on consecutive c,
// conflict-free) and one of G (broadcast), 16 FMAs.
// Shared per warp: G [N][N4] floats (N4 = 4·⌈N/4⌉), then F [N][d].
template <class T>
static __device__ __forceinline__ void nn_bwd4(T* __restrict__ dx0, T* __restrict__ demb, const T* __restrict__ dOut,
                                               const T* __restrict__ x0, const T* __restrict__ emb, int B, int n,
                                               int d) {
    const int N = n + 1, d4 = d >> 2, W = d + n * (n + 1) / 2 + 1;
    const int VG = (N + 3) >> 2, N4 = 4 * VG, P = n * (n + 1) / 2;
    const int lane = threadIdx.x & 31, wpb = blockDim.x >> 5;
    const int per = N * VG + N * d4;
    nn_f4* G4 = nn_smem + (threadIdx.x >> 5) * per;
    float* G = (float*)G4;
    nn_f4* F = G4 + N * VG;
    for (i64 s = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); s < B; s += (i64)gridDim.x * wpb) {
        const i64 go = s * W;
        // Loads in batches of NN_BATCH a lane, as in interaction_fwd4.
        for (int e0 = 0; e0 < N * d4; e0 += 32 * NN_BATCH) {
            nn_f4 v[NN_BATCH];
#pragma unroll
            for (int k = 0; k < NN_BATCH; k++) {
                const int e = e0 + 32 * k + lane;
                v[k] = nn_f4{0.f, 0.f, 0.f, 0.f};
                if (e < N * d4) v[k] = e < d4 ? nn_ld4(x0, s * d4 + e) : nn_ld4(emb, s * n * d4 + e - d4);
            }
#pragma unroll
            for (int k = 0; k < NN_BATCH; k++)
                if (e0 + 32 * k + lane < N * d4) F[e0 + 32 * k + lane] = v[k];
        }
        for (int e = lane; e < N * N4; e += 32) {
            int u = e / N4, v = e - u * N4;
            if (v >= N || v == u) G[e] = 0.f;
        }
        for (int q0 = 0; q0 < P; q0 += 32 * NN_BATCH) {
            float gv[NN_BATCH];
#pragma unroll
            for (int k = 0; k < NN_BATCH; k++) gv[k] = q0 + 32 * k + lane < P ? ldt(dOut, go + d + q0 + 32 * k + lane) : 0.f;
#pragma unroll
            for (int k = 0; k < NN_BATCH; k++) {
                const int q = q0 + 32 * k + lane;
                if (q < P) {
                    int i, jm;
                    nn_tri(q, &i, &jm); // q = j(j-1)/2 + i with j = jm+1
                    G[i * N4 + jm + 1] = gv[k];
                    G[(jm + 1) * N4 + i] = gv[k];
                }
            }
        }
        __syncwarp();
        for (int it = lane; it < VG * d4; it += 32) {
            int vg = it / d4, c = it - vg * d4;
            nn_f4 acc[4];
#pragma unroll
            for (int k = 0; k < 4; k++) acc[k] = nn_f4{0.f, 0.f, 0.f, 0.f};
            for (int u = 0; u < N; u++) {
                nn_f4 f = F[u * d4 + c], g = G4[u * VG + vg];
                float gk[4] = {g.x, g.y, g.z, g.w};
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    acc[k].x = fmaf(gk[k], f.x, acc[k].x);
                    acc[k].y = fmaf(gk[k], f.y, acc[k].y);
                    acc[k].z = fmaf(gk[k], f.z, acc[k].z);
                    acc[k].w = fmaf(gk[k], f.w, acc[k].w);
                }
            }
#pragma unroll
            for (int k = 0; k < 4; k++) {
                int v = 4 * vg + k;
                if (v >= N) break;
                nn_f4 r = acc[k];
                if (v == 0) {
                    r.x += ldt(dOut, go + 4 * c);
                    r.y += ldt(dOut, go + 4 * c + 1);
                    r.z += ldt(dOut, go + 4 * c + 2);
                    r.w += ldt(dOut, go + 4 * c + 3);
                    nn_st4(dx0, s * d4 + c, r);
                } else {
                    nn_st4(demb, (s * n + v - 1) * d4 + c, r);
                }
            }
        }
        __syncwarp(); // F and G are rewritten for the next sample
    }
}
NN_STAMP(interaction_bwd4, nn_bwd4, NN_NOLB, BWD, (dx0, demb, dOut, x0, emb, B, n, d))

// interaction_fwd_g / interaction_bwd_g: the same from global memory, one
// thread per output element, for shapes whose F does not fit in shared
// memory. total = B·W (forward) or B·N·d (backward).
template <class T>
static __device__ __forceinline__ void nn_fwd_g(T* __restrict__ out, const T* __restrict__ x0,
                                                const T* __restrict__ emb, int n, int d, i64 total) {
    const int W = d + n * (n + 1) / 2 + 1;
    FOR(e, total) {
        i64 s = e / W;
        int k = (int)(e - s * W);
        float r;
        if (k < d) {
            r = ldt(x0, s * d + k);
        } else if (k == W - 1) {
            r = 0.f;
        } else {
            int i, jm;
            nn_tri(k - d, &i, &jm);
            const i64 fi = i == 0 ? s * d : (s * n + i - 1) * d;
            const T* pi = i == 0 ? x0 : emb;
            const i64 fj = (s * n + jm) * d;
            r = 0.f;
            for (int c = 0; c < d; c++) r += ldt(pi, fi + c) * ldt(emb, fj + c);
        }
        stt(out, e, r);
    }
}
NN_STAMP(interaction_fwd_g, nn_fwd_g, NN_NOLB, FWDG, (out, x0, emb, n, d, total))

template <class T>
static __device__ __forceinline__ void nn_bwd_g(T* __restrict__ dx0, T* __restrict__ demb, const T* __restrict__ dOut,
                                                const T* __restrict__ x0, const T* __restrict__ emb, int n, int d,
                                                i64 total) {
    const int N = n + 1, W = d + n * (n + 1) / 2 + 1;
    FOR(e, total) {
        i64 s = e / ((i64)N * d);
        int r = (int)(e - s * N * d), v = r / d, c = r - v * d;
        const i64 go = s * W;
        float acc = v == 0 ? ldt(dOut, go + c) : 0.f;
        for (int u = 0; u < N; u++) {
            if (u == v) continue;
            int a = min(u, v), b = max(u, v);
            float f = u == 0 ? ldt(x0, s * d + c) : ldt(emb, (s * n + u - 1) * d + c);
            acc += ldt(dOut, go + d + b * (b - 1) / 2 + a) * f;
        }
        if (v == 0) stt(dx0, s * d + c, acc);
        else stt(demb, (s * n + v - 1) * d + c, acc);
    }
}
NN_STAMP(interaction_bwd_g, nn_bwd_g, NN_NOLB, BWDG, (dx0, demb, dOut, x0, emb, n, d, total))

// ---- Interaction on tensor cores (TF32) ----
// nn_tf32 rounds to TF32 (round to nearest, ties away: cvt.rna) and
// nn_mma_tf32 is one warp-wide mma.sync m16n8k8 (A 16×8 row-major, B 8×8
// column-major, C += A·B in fp32), with the PTX ISA's fragments: lane
// (g, t) = (lane/4, lane%4) holds a0..a3 = A[g][t], A[g+8][t], A[g][t+4],
// A[g+8][t+4]; b0, b1 = B[t][g], B[t+4][g]; c0..c3 = C[g][2t], C[g][2t+1],
// C[g+8][2t], C[g+8][2t+1]. Only for compute capability 8.0 and later
// (nn.go never launches these kernels elsewhere); the host syntax check
// sees the empty fallbacks, the host simulation (hostcheck/
// interaction_sim.cpp) its own warp-wide emulation.
static __device__ __forceinline__ unsigned nn_tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
#else
    return __float_as_uint(x);
#endif
}

static __device__ __forceinline__ void nn_mma_tf32(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                                   unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    (void)c, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;
#endif
}

// interaction_fwd_tc / interaction_bwd_tc: the interaction as TF32 mma.sync
// GEMMs, one warp per sample (grid-stride over samples, blockDim.x/32 warps
// a block), for N = n+1 ≤ 32 vectors, d a multiple of 4 and quad-aligned
// inputs; chosen by nn.go for float operands when the backend's Math is
// TF32 or BF16, and for half operands (_f16, _bf16) in every math mode: a
// float16 or bfloat16 value is exact in TF32 (10 mantissa bits, 8 exponent
// bits), so on half operands the TF32 mma computes the products exactly,
// as fp16/bf16 mma.sync with float32 accumulation would, and the kernels
// read the half operands straight from global memory (half the bytes).
// F is padded with zero rows to 32. Neither kernel stages F in shared
// memory: a dot product may sum its d terms in any order, so the k index of
// each mma is a permutation of F's columns chosen so that every lane's
// fragments are whole float4s of F read straight from global memory
// (coalesced: 8 rows × 64 B or 4 rows × 128 B a warp-wide load), each
// element of F read once per sample. The next item's loads are issued
// before the current item's stores, so they overlap.

// nn_frow: quad c4 of row r of sample s's F (x0 for r = 0, else embedding r-1).
// Rows are selected as quad pointers (nn_q4: nn_f4 for float, nn_h4 for a
// 16-bit T), then one quad loaded: for float the code of a float4 kernel.
template <class T>
static __device__ __forceinline__ nn_f4 nn_frow(const T* x0, const T* emb, i64 s, int r, int n, int d4, int c4) {
    typedef typename nn_q4<T>::type Q;
    const Q* row = r == 0 ? (const Q*)x0 + s * d4 : (const Q*)emb + (s * n + r - 1) * d4;
    return nn_q4f(x0, row[c4]);
}

// Forward: Z = F·Fᵀ, the strict lower triangle into the output row.
// Lane (g, t) holds rows g, g+8, g+16, g+24 of F (R[.][r4] = row g+8·r4) at
// columns 16p+4t..16p+4t+3 for each 16-column step p, which are the A
// fragment of both 16-row m-tiles and the B fragment of all four 8-column
// n-tiles for two k-steps of 8: k-step 2p takes the quad's x (k = t) and y
// (k = t+4), k-step 2p+1 its z and w. The six tiles on or below the
// diagonal (m-tile 0 × n-tiles 0-1, m-tile 1 × n-tiles 0-3) accumulate in
// acc; tiles that hold no pair of an N < 32 sample are skipped. A stage is
// two steps (8 float4 loads a lane in flight). The row is staged in shared
// memory (x0 exact, not rounded, from the lanes holding row 0; pairs from
// the accumulators; the zero pad) and stored coalesced, as float4s when W
// is a multiple of 4.
// Shared per warp: o [⌈W/4⌉] float4s.
template <class T>
static __device__ __forceinline__ void nn_fwd_tc_load(nn_f4 (&R)[2][4], const T* x4, const T* e4, i64 s,
                                                      int st, int g, int t, int N, int n, int d4) {
#pragma unroll
    for (int kp = 0; kp < 2; kp++) {
        int c4 = 4 * (2 * st + kp) + t; // quad column
#pragma unroll
        for (int r4 = 0; r4 < 4; r4++) {
            int r = g + 8 * r4;
            nn_f4 v = {0.f, 0.f, 0.f, 0.f};
            if (r < N && c4 < d4) v = nn_frow(x4, e4, s, r, n, d4, c4);
            R[kp][r4] = v;
        }
    }
}

template <class T>
static __device__ __forceinline__ void nn_fwd_tc(T* __restrict__ out, const T* __restrict__ x0,
                                                 const T* __restrict__ emb, int B, int n, int d) {
    const int N = n + 1, d4 = d >> 2, W = d + n * (n + 1) / 2 + 1, W4 = (W + 3) >> 2;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wpb = blockDim.x >> 5;
    const int P = (d + 15) >> 4, NST = (P + 1) >> 1; // 16-column steps, stages of two
    const bool t01 = N > 8, t1 = N > 16, t13 = N > 24; // tiles (0,1), (1,0..2), (1,3) hold pairs
    float* o = (float*)(nn_smem + (threadIdx.x >> 5) * W4);
    const T* x4 = x0;
    const T* e4 = emb;
    const bool vec = (W & 3) == 0 && ((u64)out & (4 * sizeof(T) - 1)) == 0;
    const i64 nw = (i64)gridDim.x * wpb;
    i64 s = (i64)blockIdx.x * wpb + (threadIdx.x >> 5);
    int st = 0;
    nn_f4 R[2][4];
    float acc[6][4];
#pragma unroll
    for (int k = 0; k < 6; k++) acc[k][0] = acc[k][1] = acc[k][2] = acc[k][3] = 0.f;
    if (s < B) nn_fwd_tc_load(R, x4, e4, s, 0, g, t, N, n, d4);
    while (s < B) {
#pragma unroll
        for (int kp = 0; kp < 2; kp++) {
            const int p = 2 * st + kp;
            if (p >= P) continue; // warp-uniform
            if (g == 0 && 4 * p + t < d4) *(nn_f4*)(o + 16 * p + 4 * t) = R[kp][0]; // x0, exact
            unsigned u[4][4];
#pragma unroll
            for (int r4 = 0; r4 < 4; r4++) {
                u[r4][0] = nn_tf32(R[kp][r4].x);
                u[r4][1] = nn_tf32(R[kp][r4].y);
                u[r4][2] = nn_tf32(R[kp][r4].z);
                u[r4][3] = nn_tf32(R[kp][r4].w);
            }
#pragma unroll
            for (int ks = 0; ks < 2; ks++) {
                const int x = 2 * ks, y = 2 * ks + 1; // k = t, k = t+4
                nn_mma_tf32(acc[0], u[0][x], u[1][x], u[0][y], u[1][y], u[0][x], u[0][y]);
                if (t01) nn_mma_tf32(acc[1], u[0][x], u[1][x], u[0][y], u[1][y], u[1][x], u[1][y]);
                if (t1) {
                    nn_mma_tf32(acc[2], u[2][x], u[3][x], u[2][y], u[3][y], u[0][x], u[0][y]);
                    nn_mma_tf32(acc[3], u[2][x], u[3][x], u[2][y], u[3][y], u[1][x], u[1][y]);
                    nn_mma_tf32(acc[4], u[2][x], u[3][x], u[2][y], u[3][y], u[2][x], u[2][y]);
                    if (t13) nn_mma_tf32(acc[5], u[2][x], u[3][x], u[2][y], u[3][y], u[3][x], u[3][y]);
                }
            }
        }
        // The next item (this sample's next stage, or the next sample's
        // first): its loads fly while this sample's row is stored.
        i64 ns = s;
        int nst = st + 1;
        if (nst == NST) ns += nw, nst = 0;
        if (ns < B) nn_fwd_tc_load(R, x4, e4, ns, nst, g, t, N, n, d4);
        if (nst == 0) {
#pragma unroll
            for (int k = 0; k < 6; k++) {
                const int mi = k < 2 ? 0 : 1, ni = k < 2 ? k : k - 2;
#pragma unroll
                for (int h = 0; h < 4; h++) {
                    const int r = 16 * mi + g + 8 * (h >> 1), c = 8 * ni + 2 * t + (h & 1);
                    if (c < r && r < N) o[d + r * (r - 1) / 2 + c] = acc[k][h];
                    acc[k][h] = 0.f;
                }
            }
            if (lane == 0) o[W - 1] = 0.f;
            __syncwarp();
            if (vec) {
                for (int k = lane; k < W4; k += 32) nn_st4(out, s * W4 + k, ((const nn_f4*)o)[k]);
            } else {
                for (int k = lane; k < W; k += 32) stt(out, s * W + k, o[k]);
            }
            __syncwarp(); // o is rewritten for the next sample
        }
        s = ns;
        st = nst;
    }
}
NN_STAMP(interaction_fwd_tc, nn_fwd_tc, NN_LB_FWD_TC, FWD, (out, x0, emb, B, n, d))

// Backward: dF = S·F with S the symmetric N×N matrix of the pair gradients
// (zero diagonal), computed transposed, dFᵀ = Fᵀ·S (m = column c of F, n =
// vector v, k = vector u), 32 columns of F a chunk; dx0 = dF_0 + dOut[:d].
// Lane (g, t) reads the quads X[ks] = F[8ks+t][32q+4g..+3] and Y[ks] =
// F[8ks+t+4][same] of chunk q: m-tile 0's A fragment is their x, y (rows g,
// g+8 of the tile are columns 32q+4g, +1), m-tile 1's their z, w (columns
// +2, +3). The accumulators of vector v = 8nt+2t+i then hold the four
// columns 32q+4g..+3 of dF_v: one float4 store (4 rows × 128 B a warp-wide
// store). S's B fragments (S[8ks+t][8nt+g], S[8ks+t+4][8nt+g], TF32) are
// gathered once per sample from the pair gradients staged in shared memory;
// the next sample's pair gradients are loaded (coalesced, into gp) with its
// first chunk, after the last chunk's mma, and dOut[:d]'s quad for dx0 with
// each chunk.
// Shared per warp: the P = n(n+1)/2 pair gradients, rounded up to 4 floats.
template <class T>
static __device__ __forceinline__ void nn_bwd_tc_load(nn_f4 (&X)[4], nn_f4 (&Y)[4], const T* x4, const T* e4,
                                                      i64 s, int q, int g, int t, int N, int n, int d4) {
    const int c4 = 8 * q + g;
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
        const int u = 8 * ks + t;
        nn_f4 a = {0.f, 0.f, 0.f, 0.f}, b = a;
        if (c4 < d4) {
            if (u < N) a = nn_frow(x4, e4, s, u, n, d4, c4);
            if (u + 4 < N) b = nn_frow(x4, e4, s, u + 4, n, d4, c4);
        }
        X[ks] = a;
        Y[ks] = b;
    }
}

// nn_bwd_tc_x0: the dOut[:d] quad (scalar loads: W need not be a multiple
// of 4) that lanes t = 0 add to dF_0 at chunk q, loaded with the chunk.
template <class T>
static __device__ __forceinline__ void nn_bwd_tc_x0(float (&gx)[4], const T* dOut, i64 s, int q, int g, int t,
                                                    int W, int d4) {
    const int c4 = 8 * q + g;
    gx[0] = gx[1] = gx[2] = gx[3] = 0.f;
    if (t == 0 && c4 < d4) {
        const i64 go = s * W + 4 * c4;
        gx[0] = ldt(dOut, go);
        gx[1] = ldt(dOut, go + 1);
        gx[2] = ldt(dOut, go + 2);
        gx[3] = ldt(dOut, go + 3);
    }
}

// nn_sym: S[u][v] from the staged pair gradients.
static __device__ __forceinline__ float nn_sym(const float* sm, int u, int v, int N) {
    if (u == v || u >= N || v >= N) return 0.f;
    const int a = max(u, v), b = min(u, v);
    return sm[a * (a - 1) / 2 + b];
}

template <class T>
static __device__ __forceinline__ void nn_bwd_tc(T* __restrict__ dx0, T* __restrict__ demb, const T* __restrict__ dOut,
                                                 const T* __restrict__ x0, const T* __restrict__ emb, int B, int n,
                                                 int d) {
    const int N = n + 1, d4 = d >> 2, P = n * (n + 1) / 2, W = d + P + 1;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wpb = blockDim.x >> 5;
    const int Q = (d + 31) >> 5, KS = (N + 7) >> 3; // chunks; k-steps and n-tiles holding vectors
    float* sm = (float*)nn_smem + (threadIdx.x >> 5) * ((P + 3) & ~3);
    const T* x4 = x0;
    const T* e4 = emb;
    const i64 nw = (i64)gridDim.x * wpb;
    i64 s = (i64)blockIdx.x * wpb + (threadIdx.x >> 5);
    int q = 0;
    nn_f4 X[4], Y[4];
    float gp[16]; // pair gradients d+lane+32i of the next sample's dOut row (P ≤ 496)
    float gx[4];  // dOut[4c4..4c4+3] of the item, x0's passthrough (lanes t = 0 hold v = 0)
    unsigned Sb[4][4][2];
    if (s < B) {
        nn_bwd_tc_load(X, Y, x4, e4, s, 0, g, t, N, n, d4);
        nn_bwd_tc_x0(gx, dOut, s, 0, g, t, W, d4);
#pragma unroll
        for (int i = 0; i < 16; i++) gp[i] = lane + 32 * i < P ? ldt(dOut, s * W + d + lane + 32 * i) : 0.f;
    }
    while (s < B) {
        if (q == 0) { // S of sample s
#pragma unroll
            for (int i = 0; i < 16; i++)
                if (lane + 32 * i < P) sm[lane + 32 * i] = gp[i];
            __syncwarp();
#pragma unroll
            for (int ks = 0; ks < 4; ks++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    Sb[ks][nt][0] = nn_tf32(nn_sym(sm, 8 * ks + t, 8 * nt + g, N));
                    Sb[ks][nt][1] = nn_tf32(nn_sym(sm, 8 * ks + t + 4, 8 * nt + g, N));
                }
            __syncwarp(); // sm is rewritten for the next sample
        }
        float acc[2][4][4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int h = 0; h < 4; h++) acc[0][nt][h] = acc[1][nt][h] = 0.f;
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            if (ks < KS) { // warp-uniform: rows 8ks.. past N are all padding
                const unsigned p0 = nn_tf32(X[ks].x), p1 = nn_tf32(X[ks].y), p2 = nn_tf32(Y[ks].x), p3 = nn_tf32(Y[ks].y);
                const unsigned r0 = nn_tf32(X[ks].z), r1 = nn_tf32(X[ks].w), r2 = nn_tf32(Y[ks].z), r3 = nn_tf32(Y[ks].w);
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    if (nt < KS) {
                        nn_mma_tf32(acc[0][nt], p0, p1, p2, p3, Sb[ks][nt][0], Sb[ks][nt][1]);
                        nn_mma_tf32(acc[1][nt], r0, r1, r2, r3, Sb[ks][nt][0], Sb[ks][nt][1]);
                    }
                }
            }
        }
        i64 ns = s;
        int nq = q + 1;
        if (nq == Q) ns += nw, nq = 0;
        const float gx0 = gx[0], gx1 = gx[1], gx2 = gx[2], gx3 = gx[3];
        if (ns < B) {
            nn_bwd_tc_load(X, Y, x4, e4, ns, nq, g, t, N, n, d4);
            nn_bwd_tc_x0(gx, dOut, ns, nq, g, t, W, d4);
            if (nq == 0) {
#pragma unroll
                for (int i = 0; i < 16; i++) gp[i] = lane + 32 * i < P ? ldt(dOut, ns * W + d + lane + 32 * i) : 0.f;
            }
        }
        const int c4 = 8 * q + g;
        if (c4 < d4) {
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const int v = 8 * nt + 2 * t + i;
                    nn_f4 r = {acc[0][nt][i], acc[0][nt][2 + i], acc[1][nt][i], acc[1][nt][2 + i]};
                    if (v == 0) {
                        r.x += gx0;
                        r.y += gx1;
                        r.z += gx2;
                        r.w += gx3;
                        nn_st4(dx0, s * d4 + c4, r);
                    } else if (v < N) {
                        nn_st4(demb, (s * n + v - 1) * d4 + c4, r);
                    }
                }
        }
        s = ns;
        q = nq;
    }
}
NN_STAMP(interaction_bwd_tc, nn_bwd_tc, NN_LB_BWD_TC, BWD, (dx0, demb, dOut, x0, emb, B, n, d))

// ---- Interaction on tensor cores (native half mma) ----
// nn_mma16 is one warp-wide mma.sync m16n8k16 on 16-bit operands of T
// (half_t: .f16, bf16_t: .bf16; the pointer only picks the type) with
// float32 accumulation (A 16×16 row-major, B 16×8 column-major, C += A·B),
// with the PTX ISA's fragments: each register holds two adjacent k (the
// lower k in the low 16 bits); lane (g, t) = (lane/4, lane%4) holds
// a0..a3 = A[g][2t,2t+1], A[g+8][2t,2t+1], A[g][2t+8,2t+9],
// A[g+8][2t+8,2t+9]; b0, b1 = B[2t,2t+1][g], B[2t+8,2t+9][g]; c0..c3 as
// m16n8k8's (C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]). Compute
// capability 8.0 and later (nn.go never launches these kernels elsewhere);
// the host syntax check sees the empty fallbacks, the host simulation
// (hostcheck/interaction_sim.cpp) its own warp-wide emulation.
static __device__ __forceinline__ void nn_mma16(const half_t*, float (&c)[4], unsigned a0, unsigned a1, unsigned a2,
                                                unsigned a3, unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    (void)c, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;
#endif
}
static __device__ __forceinline__ void nn_mma16(const bf16_t*, float (&c)[4], unsigned a0, unsigned a1, unsigned a2,
                                                unsigned a3, unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    (void)c, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1;
#endif
}

// interaction_fwd_hmma / interaction_bwd_hmma (_f16 and _bf16 only): the
// interaction of half operands as native half mma.sync m16n8k16 GEMMs with
// float32 accumulation, one warp per sample (grid-stride over samples,
// blockDim.x/32 warps a block), for N = n+1 ≤ 32 vectors, d a multiple of
// 8 and 16-byte aligned x0, emb (dx0, demb); nn.go's interHMMA picks them
// for Float16 and BFloat16 operands, the TF32 kernels above (which widen
// half to TF32 m16n8k8 and read 8-byte quads) for the half shapes they do
// not take. The products of two half values are exact in float32 and the
// sums float32, as in the TF32 kernels on half operands; the backward's
// pair gradients are dOut's values, already of T, so S needs no rounding:
// the results equal the TF32 kernels' up to the order of the float32 sums.
//
// Why: the TF32 kernels on half operands are latency-bound, not
// bandwidth-bound. A warp holds one item's loads in flight while it waits,
// and their lanes load 8-byte quads where the float32 kernels load
// 16-byte float4s: at the same occupancy half the bytes are in flight,
// so a sample takes the float32 kernel's time although it has half the
// bytes (H200, DLRM's shape: 0.275 / 0.72 ms forward / backward against
// float32's 0.26 / 0.55). By Little's law a bound of ~3.5 TB/s with ~1 µs
// of loaded latency needs ≥ ~26 KB in flight an SM; the float32 TF32
// backward reaches it with 16 warps × 32 lanes × 128 B = 64 KB. Here every
// lane's load is 16 bytes (8 halves: the fragment words go to mma.sync as
// loaded, no widening, no cvt), the forward holds a whole 128-column item
// (16 loads = 64 registers, 256 B a lane; ~27/32 of them real rows, the
// rest padding never loaded) and the backward a 64-column chunk (8 loads,
// 128 B a lane), both at __launch_bounds__(256, 2) (≤ 128 registers: 16
// warps an SM, ~110 KB / ~55 KB in flight), and the m16n8k16 mma does
// the 16 columns of two m16n8k8 in one instruction (half the mma count),
// so the instruction count a sample falls by more than half.

// nn_u4: 16 bytes of a 16-bit T (8 elements), as loaded and stored.
struct alignas(16) nn_u4 {
    unsigned x, y, z, w;
};
// nn_cp16 copies 16 bytes component-wise (one 16-byte load and one
// 16-byte store; a struct copy may be split into narrower ones).
static __device__ __forceinline__ void nn_cp16(nn_u4* dst, const nn_u4* src) {
    const unsigned x = src->x, y = src->y, z = src->z, w = src->w;
    *dst = nn_u4{x, y, z, w};
}
// nn_wd: word i (elements 2i, 2i+1) of an nn_u4 (i a constant after unrolling).
static __device__ __forceinline__ unsigned nn_wd(const nn_u4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
// nn_lo / nn_hi pair the low / high elements of two words: (lo a, lo b),
// (hi a, hi b), the lower element in the low 16 bits (one PRMT each).
static __device__ __forceinline__ unsigned nn_lo(unsigned a, unsigned b) { return (a & 0xffffu) | (b << 16); }
static __device__ __forceinline__ unsigned nn_hi(unsigned a, unsigned b) { return (a >> 16) | (b & 0xffff0000u); }
// nn_pk packs two floats rounded to T, lo in the low 16 bits.
template <class T>
static __device__ __forceinline__ unsigned nn_pk(const T* p, float lo, float hi) {
    return (unsigned)nn_fh(p, lo) | ((unsigned)nn_fh(p, hi) << 16);
}
// nn_hrow: the 16-byte group c8 (elements 8c8..8c8+7) of row r of sample
// s's F (x0 for r = 0, else embedding r-1), raw T bits.
template <class T>
static __device__ __forceinline__ nn_u4 nn_hrow(const T* x0, const T* emb, i64 s, int r, int n, int d8, int c8) {
    const nn_u4* row = r == 0 ? (const nn_u4*)x0 + s * d8 : (const nn_u4*)emb + (s * n + r - 1) * d8;
    return row[c8];
}

// Forward: Z = F·Fᵀ, the strict lower triangle into the output row. An
// item is 32L columns of a sample (L loads a row; interaction_fwd_hmma: L =
// 4, 128 columns, d = 128 one item, larger d several, accumulating, at
// __launch_bounds__(256, 2); interaction_fwd_hmma64: L = 2, 64 columns, 32
// registers of F, at (256, 3), the float32 TF32 forward's bytes in flight
// a lane, for A/B). Lane (g, t) loads rows g, g+8, g+16, g+24 of F
// (R[r4][l] = row g+8·r4) at the 16-byte groups 32(L·st+l)+8t..+7, l <
// L: words x, y of a group are the A fragment's
// k = 2t,2t+1 and 2t+8,2t+9 of one 16-column k-step, words z, w those of
// the next (the k index of each step a permutation of F's columns, the
// same in A and B), which are at once the A fragment of both 16-row m-tiles
// (rows g, g+8 and g+16, g+24) and the B fragment of all four 8-row
// n-tiles (row 8j+g). The six tiles on or below the diagonal (m-tile 0 ×
// n-tiles 0-1, m-tile 1 × n-tiles 0-3) accumulate in acc, skipping tiles
// that hold no pair of an N < 32 sample and groups past d. The next item's
// loads are issued right after the last mma, before the row's stores. The
// row is staged in shared memory as T (x0 raw, exact, from the lanes
// holding row 0; pairs rounded once; the zero pad) and stored coalesced:
// 16-byte groups when W is a multiple of 8 and out 16-byte aligned, else
// 8-byte quads (W a multiple of 4, out 8-byte aligned), else elements.
// Shared per warp: ⌈W/8⌉ 16-byte groups.
template <class T, int L>
static __device__ __forceinline__ void nn_fwd_hmma_load(nn_u4 (&R)[4][L], const T* x0, const T* emb, i64 s, int st,
                                                        int g, int t, int N, int n, int d8) {
#pragma unroll
    for (int l = 0; l < L; l++) {
        const int c8 = 4 * (L * st + l) + t;
#pragma unroll
        for (int r4 = 0; r4 < 4; r4++) {
            const int r = g + 8 * r4;
            nn_u4 v = {0u, 0u, 0u, 0u};
            if (r < N && c8 < d8) v = nn_hrow(x0, emb, s, r, n, d8, c8);
            R[r4][l] = v;
        }
    }
}

template <class T, int L>
static __device__ __forceinline__ void nn_fwd_hmma(T* __restrict__ out, const T* __restrict__ x0,
                                                   const T* __restrict__ emb, int B, int n, int d) {
    const int N = n + 1, d8 = d >> 3, W = d + n * (n + 1) / 2 + 1, W8 = (W + 7) >> 3;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wpb = blockDim.x >> 5;
    const int G32 = (d + 31) >> 5, NST = (G32 + L - 1) / L; // 32-column groups; items a sample
    const bool t01 = N > 8, t1 = N > 16, t13 = N > 24; // tiles (0,1), (1,0..2), (1,3) hold pairs
    h16* o = (h16*)(nn_smem + (threadIdx.x >> 5) * W8);
    const int vec = (W & 7) == 0 && ((u64)out & 15) == 0 ? 8 : (W & 3) == 0 && ((u64)out & 7) == 0 ? 4 : 1;
    const i64 nw = (i64)gridDim.x * wpb;
    i64 s = (i64)blockIdx.x * wpb + (threadIdx.x >> 5);
    int st = 0;
    nn_u4 R[4][L];
    float acc[6][4];
#pragma unroll
    for (int k = 0; k < 6; k++) acc[k][0] = acc[k][1] = acc[k][2] = acc[k][3] = 0.f;
    if (s < B) nn_fwd_hmma_load<T, L>(R, x0, emb, s, 0, g, t, N, n, d8);
    while (s < B) {
#pragma unroll
        for (int l = 0; l < L; l++) {
            const int gi = L * st + l; // 32-column group
            if (gi >= G32) continue;         // warp-uniform
            if (g == 0 && 4 * gi + t < d8) ((nn_u4*)o)[4 * gi + t] = R[0][l]; // x0, exact
            __syncwarp(); // mma.sync.aligned: the warp converged after the divergent store
#pragma unroll
            for (int h = 0; h < 2; h++) {
                unsigned a[4][2];
#pragma unroll
                for (int r4 = 0; r4 < 4; r4++) {
                    a[r4][0] = nn_wd(R[r4][l], 2 * h);
                    a[r4][1] = nn_wd(R[r4][l], 2 * h + 1);
                }
                nn_mma16(x0, acc[0], a[0][0], a[1][0], a[0][1], a[1][1], a[0][0], a[0][1]);
                if (t01) nn_mma16(x0, acc[1], a[0][0], a[1][0], a[0][1], a[1][1], a[1][0], a[1][1]);
                if (t1) {
                    nn_mma16(x0, acc[2], a[2][0], a[3][0], a[2][1], a[3][1], a[0][0], a[0][1]);
                    nn_mma16(x0, acc[3], a[2][0], a[3][0], a[2][1], a[3][1], a[1][0], a[1][1]);
                    nn_mma16(x0, acc[4], a[2][0], a[3][0], a[2][1], a[3][1], a[2][0], a[2][1]);
                    if (t13) nn_mma16(x0, acc[5], a[2][0], a[3][0], a[2][1], a[3][1], a[3][0], a[3][1]);
                }
            }
        }
        // The next item (this sample's next 32L columns, or the next
        // sample's first): its loads fly while this sample's row is stored.
        i64 ns = s;
        int nst = st + 1;
        if (nst == NST) ns += nw, nst = 0;
        if (ns < B) nn_fwd_hmma_load<T, L>(R, x0, emb, ns, nst, g, t, N, n, d8);
        if (nst == 0) {
#pragma unroll
            for (int k = 0; k < 6; k++) {
                const int mi = k < 2 ? 0 : 1, ni = k < 2 ? k : k - 2;
#pragma unroll
                for (int h = 0; h < 4; h++) {
                    const int r = 16 * mi + g + 8 * (h >> 1), c = 8 * ni + 2 * t + (h & 1);
                    if (c < r && r < N) o[d + r * (r - 1) / 2 + c] = nn_fh(out, acc[k][h]);
                    acc[k][h] = 0.f;
                }
            }
            if (lane == 0) o[W - 1] = 0;
            __syncwarp();
            if (vec == 8) {
                for (int k = lane; k < W8; k += 32) nn_cp16((nn_u4*)out + s * W8 + k, (const nn_u4*)o + k);
            } else if (vec == 4) {
                for (int k = lane; k < (W >> 2); k += 32) ((nn_h4*)out)[s * (W >> 2) + k] = ((const nn_h4*)o)[k];
            } else {
                for (int k = lane; k < W; k += 32) ((h16*)out)[s * W + k] = o[k];
            }
            __syncwarp(); // o is rewritten for the next sample
        }
        s = ns;
        st = nst;
    }
}
template <class T>
static __device__ __forceinline__ void nn_fwd_hmma128(T* __restrict__ out, const T* __restrict__ x0,
                                                      const T* __restrict__ emb, int B, int n, int d) {
    nn_fwd_hmma<T, 4>(out, x0, emb, B, n, d);
}
template <class T>
static __device__ __forceinline__ void nn_fwd_hmma64(T* __restrict__ out, const T* __restrict__ x0,
                                                     const T* __restrict__ emb, int B, int n, int d) {
    nn_fwd_hmma<T, 2>(out, x0, emb, B, n, d);
}
NN_STAMPH(interaction_fwd_hmma, nn_fwd_hmma128, NN_LB_FWD_HM, FWD, (out, x0, emb, B, n, d))
NN_STAMPH(interaction_fwd_hmma64, nn_fwd_hmma64, NN_LB_FWD_HM64, FWD, (out, x0, emb, B, n, d))

// Backward: dF = S·F with S the symmetric N×N matrix of the pair gradients
// (zero diagonal), computed transposed, dFᵀ = Fᵀ·S (m = column c of F, n =
// vector v, k = vector u), 64 columns of F a chunk (an item); dx0 = dF_0 +
// dOut[:d]. In each 16-vector k-step ks, k = 2t, 2t+1, 2t+8, 2t+9 are the
// vectors u = 16ks+4t+j, j = 0..3, and lane (g, t) loads those four rows at
// the chunk's 16-byte group g (columns 64q+8g..+7): X[ks][j] (8 loads, 128
// B a lane; a warp-wide load is 4 rows × 128 B). M-tile mt's rows g and
// g+8 are columns 8g+2mt and 8g+2mt+1, so its A fragment is word mt of the
// four rows, paired across rows (nn_lo / nn_hi: a0 = (X0, X1) low halves,
// a1 their high halves, a2, a3 the same of X2, X3), and the accumulators
// of vector v = 8nt+2t+i hold, over the four m-tiles, the eight columns
// 64q+8g..+7 of dF_v: one 16-byte store. S's B fragments (S[u][v] and
// S[u+1][v] in a word, v = 8nt+g) are gathered once per sample from the
// pair gradients staged in shared memory as T (exact: dOut's own values).
// To keep the accumulators at 32 registers the n-tiles go in two passes
// (0-1, then 2-3 when N > 16), each of all four m-tiles; the next item's
// loads are issued right after the last pass's mma, so they fly while its
// rows are stored, and dOut's part of the next item (its x0 gradient
// group, and at a new sample its pair gradients: 16-byte groups when W is
// a multiple of 8 and dOut 16-byte aligned, else elements) after them.
// Shared per warp: the P = n(n+1)/2 pair gradients, ⌈P/8⌉ 16-byte groups.
template <class T>
static __device__ __forceinline__ void nn_bwd_hmma_load(nn_u4 (&X)[2][4], const T* x0, const T* emb, i64 s, int q,
                                                        int g, int t, int N, int n, int d8) {
    const int c8 = 8 * q + g;
#pragma unroll
    for (int ks = 0; ks < 2; ks++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int u = 16 * ks + 4 * t + j;
            nn_u4 v = {0u, 0u, 0u, 0u};
            if (u < N && c8 < d8) v = nn_hrow(x0, emb, s, u, n, d8, c8);
            X[ks][j] = v;
        }
}

// nn_bwd_hmma_x0: the dOut[:d] group (raw T) that lanes t = 0 add to dF_0
// at chunk q.
template <class T>
static __device__ __forceinline__ nn_u4 nn_bwd_hmma_x0(const T* dOut, i64 s, int q, int g, int t, int W, int d8,
                                                       bool vec) {
    const int c8 = 8 * q + g;
    nn_u4 r = {0u, 0u, 0u, 0u};
    if (t == 0 && c8 < d8) {
        const i64 go = s * W + 8 * c8;
        if (vec) {
            r = ((const nn_u4*)dOut)[go >> 3];
        } else {
            const h16* p = (const h16*)dOut + go;
            r.x = (unsigned)p[0] | ((unsigned)p[1] << 16);
            r.y = (unsigned)p[2] | ((unsigned)p[3] << 16);
            r.z = (unsigned)p[4] | ((unsigned)p[5] << 16);
            r.w = (unsigned)p[6] | ((unsigned)p[7] << 16);
        }
    }
    return r;
}

// nn_bwd_hmma_gp loads sample s's pair gradients (raw T) into gp: with vec
// the 16-byte groups lane and lane+32 of dOut[d:] (P8 = ⌈P/8⌉ ≤ 62 groups,
// within the row: W and d are multiples of 8), else elements lane+32i, i =
// 0..15 (P ≤ 496), two a word. nn_bwd_hmma_gs stages them in sm.
template <class T>
static __device__ __forceinline__ void nn_bwd_hmma_gp(unsigned (&gp)[8], const T* dOut, i64 s, int lane, int W,
                                                      int d, int P, bool vec) {
    const h16* row = (const h16*)dOut + s * W + d;
    if (vec) {
        const int P8 = (P + 7) >> 3;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            nn_u4 v = {0u, 0u, 0u, 0u};
            if (lane + 32 * i < P8) v = ((const nn_u4*)row)[lane + 32 * i];
            gp[4 * i] = v.x, gp[4 * i + 1] = v.y, gp[4 * i + 2] = v.z, gp[4 * i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int e0 = lane + 64 * i, e1 = e0 + 32;
            gp[i] = (e0 < P ? (unsigned)row[e0] : 0u) | ((e1 < P ? (unsigned)row[e1] : 0u) << 16);
        }
    }
}
static __device__ __forceinline__ void nn_bwd_hmma_gs(h16* sm, const unsigned (&gp)[8], int lane, int P, bool vec) {
    if (vec) {
        const int P8 = (P + 7) >> 3;
#pragma unroll
        for (int i = 0; i < 2; i++)
            if (lane + 32 * i < P8) ((nn_u4*)sm)[lane + 32 * i] = nn_u4{gp[4 * i], gp[4 * i + 1], gp[4 * i + 2], gp[4 * i + 3]};
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int e0 = lane + 64 * i, e1 = e0 + 32;
            if (e0 < P) sm[e0] = (h16)(gp[i] & 0xffffu);
            if (e1 < P) sm[e1] = (h16)(gp[i] >> 16);
        }
    }
}

// nn_hsym: S[u][v] (raw T) from the staged pair gradients.
static __device__ __forceinline__ unsigned nn_hsym(const h16* sm, int u, int v, int N) {
    if (u == v || u >= N || v >= N) return 0u;
    const int a = max(u, v), b = min(u, v);
    return sm[a * (a - 1) / 2 + b];
}

template <class T>
static __device__ __forceinline__ void nn_bwd_hmma(T* __restrict__ dx0, T* __restrict__ demb,
                                                   const T* __restrict__ dOut, const T* __restrict__ x0,
                                                   const T* __restrict__ emb, int B, int n, int d) {
    const int N = n + 1, d8 = d >> 3, P = n * (n + 1) / 2, W = d + P + 1, P8 = (P + 7) >> 3;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wpb = blockDim.x >> 5;
    const int Q = (d + 63) >> 6, KS = (N + 15) >> 4, NT = (N + 7) >> 3; // chunks; k-steps, n-tiles holding vectors
    h16* sm = (h16*)(nn_smem + (threadIdx.x >> 5) * P8);
    const bool vec = (W & 7) == 0 && ((u64)dOut & 15) == 0;
    const i64 nw = (i64)gridDim.x * wpb;
    i64 s = (i64)blockIdx.x * wpb + (threadIdx.x >> 5);
    int q = 0;
    nn_u4 X[2][4];
    nn_u4 gx;          // dOut[8c8..8c8+7] of the item, x0's passthrough (lanes t = 0 hold v = 0)
    unsigned gp[8];    // the next sample's pair gradients
    unsigned Sb[2][4][2];
    if (s < B) {
        nn_bwd_hmma_load(X, x0, emb, s, 0, g, t, N, n, d8);
        gx = nn_bwd_hmma_x0(dOut, s, 0, g, t, W, d8, vec);
        nn_bwd_hmma_gp(gp, dOut, s, lane, W, d, P, vec);
    }
    while (s < B) {
        if (q == 0) { // S of sample s
            nn_bwd_hmma_gs(sm, gp, lane, P, vec);
            __syncwarp();
#pragma unroll
            for (int ks = 0; ks < 2; ks++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    const int u = 16 * ks + 4 * t, v = 8 * nt + g;
                    Sb[ks][nt][0] = nn_hsym(sm, u, v, N) | (nn_hsym(sm, u + 1, v, N) << 16);
                    Sb[ks][nt][1] = nn_hsym(sm, u + 2, v, N) | (nn_hsym(sm, u + 3, v, N) << 16);
                }
            __syncwarp(); // sm is rewritten for the next sample
        }
        i64 ns = s;
        int nq = q + 1;
        if (nq == Q) ns += nw, nq = 0;
        const int c8 = 8 * q + g;
#pragma unroll
        for (int np = 0; np < 2; np++) {
            if (2 * np >= NT) continue; // warp-uniform
            float acc[2][4][4];
#pragma unroll
            for (int i2 = 0; i2 < 2; i2++)
#pragma unroll
                for (int mt = 0; mt < 4; mt++) acc[i2][mt][0] = acc[i2][mt][1] = acc[i2][mt][2] = acc[i2][mt][3] = 0.f;
            __syncwarp(); // mma.sync.aligned: the warp converged after the divergent stores
#pragma unroll
            for (int ks = 0; ks < 2; ks++) {
                if (ks >= KS) continue; // warp-uniform: rows 16ks.. past N are all padding
#pragma unroll
                for (int mt = 0; mt < 4; mt++) {
                    const unsigned w0 = nn_wd(X[ks][0], mt), w1 = nn_wd(X[ks][1], mt);
                    const unsigned w2 = nn_wd(X[ks][2], mt), w3 = nn_wd(X[ks][3], mt);
                    const unsigned a0 = nn_lo(w0, w1), a1 = nn_hi(w0, w1), a2 = nn_lo(w2, w3), a3 = nn_hi(w2, w3);
#pragma unroll
                    for (int i2 = 0; i2 < 2; i2++) {
                        const int nt = 2 * np + i2;
                        if (nt < NT) nn_mma16(x0, acc[i2][mt], a0, a1, a2, a3, Sb[ks][nt][0], Sb[ks][nt][1]);
                    }
                }
            }
            // After the last pass's mma X is free: the next item's loads
            // fly while the rows are stored.
            if (2 * np + 2 >= NT && ns < B) nn_bwd_hmma_load(X, x0, emb, ns, nq, g, t, N, n, d8);
            if (c8 < d8) {
#pragma unroll
                for (int i2 = 0; i2 < 2; i2++)
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        const int v = 8 * (2 * np + i2) + 2 * t + i;
                        float f[8];
#pragma unroll
                        for (int mt = 0; mt < 4; mt++) {
                            f[2 * mt] = acc[i2][mt][i];
                            f[2 * mt + 1] = acc[i2][mt][2 + i];
                        }
                        if (v == 0) {
#pragma unroll
                            for (int mt = 0; mt < 4; mt++) {
                                const unsigned w = nn_wd(gx, mt);
                                f[2 * mt] += nn_hf(x0, (h16)(w & 0xffffu));
                                f[2 * mt + 1] += nn_hf(x0, (h16)(w >> 16));
                            }
                        }
                        nn_u4* dst = v == 0 ? (nn_u4*)dx0 + s * d8 + c8 : (nn_u4*)demb + (s * n + v - 1) * d8 + c8;
                        if (v < N)
                            *dst = nn_u4{nn_pk(x0, f[0], f[1]), nn_pk(x0, f[2], f[3]), nn_pk(x0, f[4], f[5]),
                                         nn_pk(x0, f[6], f[7])};
                    }
            }
        }
        if (ns < B) {
            gx = nn_bwd_hmma_x0(dOut, ns, nq, g, t, W, d8, vec);
            if (nq == 0) nn_bwd_hmma_gp(gp, dOut, ns, lane, W, d, P, vec);
        }
        s = ns;
        q = nq;
    }
}
NN_STAMPH(interaction_bwd_hmma, nn_bwd_hmma, NN_LB_BWD_HM, BWD, (dx0, demb, dOut, x0, emb, B, n, d))

// ---- FmOrder2 ----
// One thread per (sample, column j) over total = B·k; sums in double.
extern "C" __global__ void fm_order2(float* __restrict__ out, const float* __restrict__ in, int f, int k, i64 total) {
    FOR(e, total) {
        i64 s = e / k;
        int j = (int)(e - s * k);
        const float* v = in + s * f * k + j;
        double sum = 0, sq = 0;
        for (int i = 0; i < f; i++) {
            double x = v[(i64)i * k];
            sum += x;
            sq += x * x;
        }
        out[e] = (float)(0.5 * (sum * sum - sq));
    }
}

// fm_order2_grad: din[b,i,j] = dOut[b,j]·(Σ_i' v_i'j − v_ij), in double.
extern "C" __global__ void fm_order2_grad(float* __restrict__ din, const float* __restrict__ dOut,
                                          const float* __restrict__ in, int f, int k, i64 total) {
    FOR(e, total) {
        i64 s = e / k;
        int j = (int)(e - s * k);
        const float* v = in + s * f * k + j;
        float* dv = din + s * f * k + j;
        double sum = 0;
        for (int i = 0; i < f; i++) sum += (double)v[(i64)i * k];
        double g = dOut[e];
        for (int i = 0; i < f; i++) dv[(i64)i * k] = (float)(g * (sum - (double)v[(i64)i * k]));
    }
}

// ---- BatchNorm ----
// Column statistics in two steps: bn_partial sums a chunk of rows per block,
// bn_stats / bn_grad_stats add the chunks per column in order.

// bn_partial: block (32, 8); blockIdx.x picks 32 columns (threadIdx.x, one
// coalesced 128-byte row segment per warp), blockIdx.y a chunk of rows that
// threadIdx.y strides by 8. part is [chunks][2][C] doubles:
//   forward (dy null): Σ (x−K), Σ (x−K)² with the shift K = x[0, col];
//   backward: Σ dy, Σ dy·(x−mean)·inv.
extern "C" __global__ void bn_partial(double* __restrict__ part, const float* __restrict__ x,
                                      const float* __restrict__ dy, const float* __restrict__ mean,
                                      const float* __restrict__ inv, i64 rows, int C, i64 chunkRows) {
    __shared__ double sa[8][33], sb[8][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    i64 r0 = (i64)blockIdx.y * chunkRows, r1 = r0 + chunkRows;
    if (r1 > rows) r1 = rows;
    double a = 0, b = 0;
    if (col < C) {
        if (dy == 0) {
            double K = x[col];
            for (i64 r = r0 + threadIdx.y; r < r1; r += 8) {
                double v = (double)x[r * C + col] - K;
                a += v;
                b += v * v;
            }
        } else {
            double m = mean[col], iv = inv[col];
            for (i64 r = r0 + threadIdx.y; r < r1; r += 8) {
                double g = dy[r * C + col];
                a += g;
                b += g * ((double)x[r * C + col] - m) * iv;
            }
        }
    }
    sa[threadIdx.y][threadIdx.x] = a;
    sb[threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y == 0 && col < C) {
        for (int y = 1; y < 8; y++) {
            a += sa[y][threadIdx.x];
            b += sb[y][threadIdx.x];
        }
        double* p = part + (i64)blockIdx.y * 2 * C;
        p[col] = a;
        p[C + col] = b;
    }
}

// bn_stats (training): one thread per column; mean, biased variance for the
// normalization (saved as mean and 1/√(var+eps)), unbiased for the running
// variance.
extern "C" __global__ void bn_stats(float* __restrict__ saveMean, float* __restrict__ saveInv,
                                    float* __restrict__ runMean, float* __restrict__ runVar,
                                    const double* __restrict__ part, const float* __restrict__ x, int chunks,
                                    int C, i64 rows, double factor, double eps) {
    FOR(j, C) {
        double a = 0, b = 0;
        for (int ch = 0; ch < chunks; ch++) {
            a += part[(i64)ch * 2 * C + j];
            b += part[(i64)ch * 2 * C + C + j];
        }
        double nr = (double)rows;
        double mean = (double)x[j] + a / nr;
        double q = b - a * a / nr; // Σ (x−mean)²
        if (q < 0) q = 0;
        double inv = 1.0 / sqrt(q / nr + eps);
        saveMean[j] = (float)mean;
        saveInv[j] = (float)inv;
        runMean[j] = (float)((1 - factor) * (double)runMean[j] + factor * mean);
        runVar[j] = (float)((1 - factor) * (double)runVar[j] + factor * q / (nr - 1));
    }
}

// bn_infer_stats (inference): per-column mean and 1/√(runVar+eps) into
// scratch m, iv.
extern "C" __global__ void bn_infer_stats(float* __restrict__ m, float* __restrict__ iv,
                                          const float* __restrict__ runMean, const float* __restrict__ runVar,
                                          int C, double eps) {
    FOR(j, C) {
        m[j] = runMean[j];
        iv[j] = (float)(1.0 / sqrt((double)runVar[j] + eps));
    }
}

// bn_apply: y = γ(x−m)·iv + β elementwise (float, as the CPU's T).
extern "C" __global__ void bn_apply(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ g,
                                    const float* __restrict__ bt, const float* __restrict__ m,
                                    const float* __restrict__ iv, int C, i64 total) {
    FOR(i, total) {
        int j = (int)(i % C);
        y[i] = g[j] * (x[i] - m[j]) * iv[j] + bt[j];
    }
}

// bn_grad_stats: one thread per column: dbeta = Σ dy, dgamma = Σ dy·x̂, and
// coef [3][C] doubles = (Σ dy, Σ dy·x̂, γ·inv/rows) for bn_grad_apply.
extern "C" __global__ void bn_grad_stats(float* __restrict__ dgamma, float* __restrict__ dbeta,
                                         double* __restrict__ coef, const double* __restrict__ part,
                                         const float* __restrict__ gamma, const float* __restrict__ inv,
                                         int chunks, int C, i64 rows) {
    FOR(j, C) {
        double sb = 0, sg = 0;
        for (int ch = 0; ch < chunks; ch++) {
            sb += part[(i64)ch * 2 * C + j];
            sg += part[(i64)ch * 2 * C + C + j];
        }
        dbeta[j] = (float)sb;
        dgamma[j] = (float)sg;
        coef[j] = sb;
        coef[C + j] = sg;
        coef[2 * C + j] = (double)gamma[j] * (double)inv[j] / (double)rows;
    }
}

// bn_grad_apply: dx = k·(rows·dy − Σdy − x̂·Σdy·x̂) elementwise, in double.
extern "C" __global__ void bn_grad_apply(float* __restrict__ dx, const float* __restrict__ dy,
                                         const float* __restrict__ x, const float* __restrict__ mean,
                                         const float* __restrict__ inv, const double* __restrict__ coef, int C,
                                         i64 rows, i64 total) {
    FOR(i, total) {
        int j = (int)(i % C);
        double xh = ((double)x[i] - (double)mean[j]) * (double)inv[j];
        dx[i] = (float)(coef[2 * C + j] * ((double)rows * (double)dy[i] - coef[j] - xh * coef[C + j]));
    }
}

// ---- Softmax and losses ----
// Row kernels: one warp per row (warps grid-stride over rows, so every lane
// of a warp runs the same iterations), lanes stride the row's n columns.

static __device__ __forceinline__ float nn_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static __device__ __forceinline__ double nn_warp_allsum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// nn_row_max_sum: the row maximum m and Σ exp(x−m) (double), on every lane.
static __device__ __forceinline__ double nn_row_max_sum(const float* xr, int n, int lane, float* m) {
    float mx = xr[0];
    for (int c = lane; c < n; c += 32) mx = fmaxf(mx, xr[c]);
    mx = nn_warp_max(mx);
    double s = 0;
    for (int c = lane; c < n; c += 32) s += (double)expf(xr[c] - mx);
    *m = mx;
    return nn_warp_allsum_d(s);
}

extern "C" __global__ void softmax_rows(float* __restrict__ y, const float* __restrict__ x, i64 rows, int n) {
    const int lane = threadIdx.x & 31;
    const i64 wpb = blockDim.x >> 5;
    for (i64 r = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (i64)gridDim.x * wpb) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        float m;
        float inv = (float)(1.0 / nn_row_max_sum(xr, n, lane, &m));
        for (int c = lane; c < n; c += 32) yr[c] = expf(xr[c] - m) * inv;
    }
}

// softmax_grad_rows: dx = y⊙(dy − Σ dy⊙y), in double (dy − Σ may cancel).
extern "C" __global__ void softmax_grad_rows(float* __restrict__ dx, const float* __restrict__ dy,
                                             const float* __restrict__ y, i64 rows, int n) {
    const int lane = threadIdx.x & 31;
    const i64 wpb = blockDim.x >> 5;
    for (i64 r = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (i64)gridDim.x * wpb) {
        i64 o = r * n;
        double s = 0;
        for (int c = lane; c < n; c += 32) s += (double)dy[o + c] * (double)y[o + c];
        s = nn_warp_allsum_d(s);
        for (int c = lane; c < n; c += 32) dx[o + c] = (float)((double)y[o + c] * ((double)dy[o + c] - s));
    }
}

// bce_partial: fused sigmoid BCE over total = B·T elements (grid-stride);
// the block's Σ w·bce goes to part[blockIdx.x]. w (per column, t of them)
// and dx may be null. Computed in double: σ(x) − y cancels when σ(x) ≈ y.
// mask != 0 (MultiCrossEntropyLoss): a label below −0.5 gives loss 0, dx 0.
// nn_bce_body takes x's and dx's dtype codes (the float32 kernel passes
// constants); gs (the loss scale × 1/batch) multiplies before dx is
// rounded to its dtype, so a scaled fp16 gradient keeps its small values.
static __device__ __forceinline__ void nn_bce_body(double* __restrict__ part, void* __restrict__ dx, int tdx,
                                                   const void* __restrict__ x, int tx, const float* __restrict__ y,
                                                   const float* __restrict__ w, int t, int mask, float gs, i64 total) {
    __shared__ double sh[32];
    double s = 0;
    FOR(i, total) {
        double xv = ldv(x, tx, i), yv = y[i];
        if (mask && yv < -0.5) {
            if (dx) stv(dx, tdx, i, 0.f);
            continue;
        }
        double wt = w ? (double)w[(int)(i % t)] : 1.0;
        double e = exp(-fabs(xv)); // e^−|x| ≤ 1: no overflow
        s += wt * ((xv >= 0 ? xv * (1 - yv) : -xv * yv) + log1p(e));
        if (dx) {
            double sg = xv >= 0 ? 1 / (1 + e) : e / (1 + e);
            stv(dx, tdx, i, (float)((double)gs * wt * (sg - yv)));
        }
    }
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

extern "C" __global__ void bce_partial(double* __restrict__ part, float* __restrict__ dx,
                                       const float* __restrict__ x, const float* __restrict__ y,
                                       const float* __restrict__ w, int t, int mask, float gs, i64 total) {
    nn_bce_body(part, dx, DT_F32, x, DT_F32, y, w, t, mask, gs, total);
}

// bce_partial_h is bce_partial for logits x and gradient dx of any dtype
// code (labels, weights and the loss stay float32).
extern "C" __global__ void bce_partial_h(double* __restrict__ part, void* __restrict__ dx, int tdx,
                                         const void* __restrict__ x, int tx, const float* __restrict__ y,
                                         const float* __restrict__ w, int t, int mask, float gs, i64 total) {
    nn_bce_body(part, dx, tdx, x, tx, y, w, t, mask, gs, total);
}

// softmax_ce_rows: one warp per row. A label that is not an integral class
// in [0, n) is reported (ERR_RANGE, row, label) and the row skipped. Loss
// per row = min(log Σe − (x_l − m), −ln 1e-300) (the CPU clamps p ≥
// 1e-300); the block's sum goes to part[blockIdx.x].
extern "C" __global__ void softmax_ce_rows(double* __restrict__ part, float* __restrict__ dx,
                                           const float* __restrict__ x, const float* __restrict__ labels,
                                           u64* flag, float gs, i64 rows, int n) {
    __shared__ double sh[32];
    const int lane = threadIdx.x & 31;
    const i64 wpb = blockDim.x >> 5;
    double acc = 0;
    for (i64 r = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (i64)gridDim.x * wpb) {
        float lab = labels[r];
        int l = -1;
        if (lab >= 0.f && lab < 2147483648.f) {
            l = (int)lab;
            if (l >= n || (float)l != lab) l = -1;
        }
        if (l < 0) {
            if (lane == 0) report(flag, ERR_RANGE, NN_OP_SOFTMAX_CE, r, (i64)lab);
            continue;
        }
        const float* xr = x + r * n;
        float m;
        double s = nn_row_max_sum(xr, n, lane, &m);
        if (lane == 0) acc += fmin(log(s) - (double)(xr[l] - m), 690.7755278982137);
        if (dx) { // in double: e/s − 1 is exact to double rounding (s holds the same e)
            float* dr = dx + r * n;
            for (int c = lane; c < n; c += 32) {
                double pr = (double)expf(xr[c] - m) / s;
                dr[c] = (float)((double)gs * (c == l ? pr - 1.0 : pr));
            }
        }
    }
    acc = block_sum_d(acc, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

// nn_loss_final: one block; loss[0] = Σ part / rows.
extern "C" __global__ void nn_loss_final(float* __restrict__ loss, const double* __restrict__ part, int nparts,
                                         i64 rows) {
    __shared__ double sh[32];
    double s = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) s += part[i];
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0) loss[0] = (float)(s / (double)rows);
}
