// Device-wide primitives written for ctrkit (no CUB): exclusive scan
// (u32 → u32, float → double), index compaction, and a stable LSD radix sort
// of (key, u32 value) pairs with u32 or u64 keys, 8 bits a pass. The launch
// sequences are in sort.go. Every kernel here runs 256-thread blocks
// (PRIM_THREADS); the tiled kernels give block b the PRIM_TILE elements
// [b·PRIM_TILE, (b+1)·PRIM_TILE), so their grids are exactly tiles(n).

#define PRIM_THREADS 256
#define PRIM_ITEMS 8
#define PRIM_TILE (PRIM_THREADS * PRIM_ITEMS)
#define PRIM_WARPS (PRIM_THREADS / 32)

// prim_count is the element count of a sort: min(*count, n) when the count
// lives on the device (count != 0), else n.
static __device__ __forceinline__ i64 prim_count(const u32* count, i64 n) {
    if (count == nullptr) return n;
    const i64 c = (i64)*count;
    return c < n ? c : n;
}

// prim_block_exscan returns the exclusive prefix sum of v over the block in
// thread order and the block total in total; every thread must call it. sh
// holds 33 elements. The association order is fixed (warp shuffles, then
// the warp totals), so double scans are deterministic.
template <class T>
static __device__ __forceinline__ T prim_block_exscan(T v, T* sh, T& total) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    T x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) sh[w] = x;
    __syncthreads();
    if (w == 0) {
        const T s = lane < nw ? sh[lane] : T(0);
        T t = s;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const T y = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t += y;
        }
        sh[lane] = t - s;
        if (lane == 31) sh[32] = t;
    }
    __syncthreads();
    const T r = sh[w] + x - v;
    total = sh[32];
    __syncthreads();  // sh is free again on return
    return r;
}

// ---- exclusive scan: out[i] = Σ_{k<i} in[k] for i < n, out[n] = total ----
// Three launches: prim_scan_reduce (block b sums tile b into part[b]),
// prim_scan_part (one block scans part in place), prim_scan_down (block b
// scans tile b from part[b]; the last block writes out[n]). in may equal
// out when they have the same type.

template <class TI, class TO>
static __device__ __forceinline__ void prim_scan_reduce_t(const TI* in, TO* part, i64 n, TO* sh) {
    const i64 base = (i64)blockIdx.x * PRIM_TILE;
    TO s = TO(0);
#pragma unroll
    for (int c = 0; c < PRIM_ITEMS; c++) {
        const i64 i = base + c * PRIM_THREADS + threadIdx.x;
        if (i < n) s += (TO)in[i];
    }
    TO tot;
    prim_block_exscan(s, sh, tot);
    if (threadIdx.x == 0) part[blockIdx.x] = tot;
}

template <class T>
static __device__ __forceinline__ void prim_scan_part_t(T* part, i64 nb, T* sh) {
    T carry = T(0);
    for (i64 b0 = 0; b0 < nb; b0 += blockDim.x) {
        const i64 i = b0 + threadIdx.x;
        const T v = i < nb ? part[i] : T(0);
        T tot;
        const T ex = prim_block_exscan(v, sh, tot);
        if (i < nb) part[i] = carry + ex;
        carry += tot;
    }
}

template <class TI, class TO>
static __device__ __forceinline__ void prim_scan_down_t(const TI* in, TO* out, const TO* part, i64 n, TO* sh) {
    const i64 base = (i64)blockIdx.x * PRIM_TILE;
    TO carry = part[blockIdx.x];
    for (int c = 0; c < PRIM_ITEMS; c++) {
        const i64 i = base + c * PRIM_THREADS + threadIdx.x;
        const TO v = i < n ? (TO)in[i] : TO(0);
        TO tot;
        const TO ex = prim_block_exscan(v, sh, tot);
        if (i < n) out[i] = carry + ex;
        carry += tot;
    }
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) out[n] = carry;
}

extern "C" __global__ void __launch_bounds__(PRIM_THREADS) prim_scan_reduce_u32(const u32* in, u32* part, i64 n) {
    __shared__ u32 sh[33];
    prim_scan_reduce_t<u32, u32>(in, part, n, sh);
}
extern "C" __global__ void __launch_bounds__(PRIM_THREADS) prim_scan_part_u32(u32* part, i64 nb) {
    __shared__ u32 sh[33];
    prim_scan_part_t<u32>(part, nb, sh);
}
extern "C" __global__ void __launch_bounds__(PRIM_THREADS)
    prim_scan_down_u32(const u32* in, u32* out, const u32* part, i64 n) {
    __shared__ u32 sh[33];
    prim_scan_down_t<u32, u32>(in, out, part, n, sh);
}
extern "C" __global__ void __launch_bounds__(PRIM_THREADS) prim_scan_reduce_f2d(const float* in, double* part, i64 n) {
    __shared__ double sh[33];
    prim_scan_reduce_t<float, double>(in, part, n, sh);
}
extern "C" __global__ void __launch_bounds__(PRIM_THREADS) prim_scan_part_f2d(double* part, i64 nb) {
    __shared__ double sh[33];
    prim_scan_part_t<double>(part, nb, sh);
}
extern "C" __global__ void __launch_bounds__(PRIM_THREADS)
    prim_scan_down_f2d(const float* in, double* out, const double* part, i64 n) {
    __shared__ double sh[33];
    prim_scan_down_t<float, double>(in, out, part, n, sh);
}

// prim_compact_idx: out[pos[i]] = i for every i < n with flag[i] ≠ 0, pos
// being the exclusive scan of the flags (the kept indices, ascending).
extern "C" __global__ void prim_compact_idx(const u32* flag, const u32* pos, u32* out, i64 n) {
    FOR(i, n) if (flag[i]) out[pos[i]] = (u32)i;
}

// ---- radix sort ----
// Per pass (shift = 0, 8, …): prim_rs_hist counts the digits of tile b into
// hist[digit·nb + b]; an exclusive scan of hist gives every (digit, tile)
// its output offset; prim_rs_scatter ranks each element stably within its
// tile and writes it there. prim_rs_diff first ORs key ^ key[0] over the
// keys into *diff: a pass whose digit is the same for every key is the
// identity, so hist skips it and scatter only copies (the result then still
// alternates buffers, as the host expects).

template <class K>
static __device__ __forceinline__ void prim_rs_diff_t(const K* keys, const u32* count, i64 n, u64* diff) {
    const i64 m = prim_count(count, n);
    if (m == 0) return;
    const K k0 = keys[0];
    u64 d = 0;
    FOR(i, m) d |= (u64)(keys[i] ^ k0);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) d |= __shfl_xor_sync(0xffffffffu, d, o);
    if ((threadIdx.x & 31) == 0 && d != 0) atomicOr(diff, d);
}

extern "C" __global__ void prim_rs_diff_u32(const u32* keys, const u32* count, i64 n, u64* diff) {
    prim_rs_diff_t<u32>(keys, count, n, diff);
}
extern "C" __global__ void prim_rs_diff_u64(const u64* keys, const u32* count, i64 n, u64* diff) {
    prim_rs_diff_t<u64>(keys, count, n, diff);
}

// prim_rs_hist: one thread per digit for the counters; lanes holding the
// same digit are grouped with __match_any_sync and their leader adds the
// group size (no shared-atomic contention on hot digits). Tiles past the
// count write zeros.
template <class K>
static __device__ __forceinline__ void prim_rs_hist_t(const K* keys, const u32* count, i64 n, int shift,
                                                      const u64* diff, u32* hist, u32* cnt) {
    if (((*diff >> shift) & 255u) == 0) return;  // identity pass
    const i64 m = prim_count(count, n);
    const int t = threadIdx.x, lane = t & 31;
    cnt[t] = 0;
    __syncthreads();
    const i64 base = (i64)blockIdx.x * PRIM_TILE;
#pragma unroll
    for (int c = 0; c < PRIM_ITEMS; c++) {
        const i64 i = base + c * PRIM_THREADS + t;
        const bool ok = i < m;
        const u32 d = ok ? (u32)(keys[i] >> shift) & 255u : 256u;
        const unsigned peers = __match_any_sync(0xffffffffu, d);
        if (ok && lane == __ffs(peers) - 1) atomicAdd(&cnt[d], (u32)__popc(peers));
    }
    __syncthreads();
    hist[(i64)t * gridDim.x + blockIdx.x] = cnt[t];
}

extern "C" __global__ void __launch_bounds__(PRIM_THREADS)
    prim_rs_hist_u32(const u32* keys, const u32* count, i64 n, int shift, const u64* diff, u32* hist) {
    __shared__ u32 cnt[256];
    prim_rs_hist_t<u32>(keys, count, n, shift, diff, hist, cnt);
}
extern "C" __global__ void __launch_bounds__(PRIM_THREADS)
    prim_rs_hist_u64(const u64* keys, const u32* count, i64 n, int shift, const u64* diff, u32* hist) {
    __shared__ u32 cnt[256];
    prim_rs_hist_t<u64>(keys, count, n, shift, diff, hist, cnt);
}

// prim_rs_scatter: block b walks its tile in PRIM_ITEMS chunks of 256
// elements in input order. Within a chunk an element's rank among equal
// digits is: run[d] (earlier chunks, starting at the scanned hist offset)
// + wc[w][d] (earlier warps of this chunk, an exclusive scan over the 8
// warps done by thread d) + the number of lower lanes of its warp with the
// same digit (__match_any_sync). That is the input order, so the sort is
// stable.
template <class K>
static __device__ __forceinline__ void prim_rs_scatter_t(const K* kin, K* kout, const u32* vin, u32* vout,
                                                         const u32* count, i64 n, int shift, const u64* diff,
                                                         const u32* hist, u32* run, u32* wc) {
    const i64 m = prim_count(count, n);
    const i64 base = (i64)blockIdx.x * PRIM_TILE;
    if (base >= m) return;  // uniform over the block
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    if (((*diff >> shift) & 255u) == 0) {  // identity pass: copy the tile
        for (int c = 0; c < PRIM_ITEMS; c++) {
            const i64 i = base + c * PRIM_THREADS + t;
            if (i < m) {
                kout[i] = kin[i];
                if (vin != nullptr) vout[i] = vin[i];
            }
        }
        return;
    }
    run[t] = hist[(i64)t * gridDim.x + blockIdx.x];
    const unsigned below = (1u << lane) - 1u;
    for (int c = 0; c < PRIM_ITEMS; c++) {
        const i64 i0 = base + c * PRIM_THREADS;
        if (i0 >= m) break;  // uniform over the block
#pragma unroll
        for (int k = 0; k < PRIM_WARPS; k++) wc[k * 256 + t] = 0;
        __syncthreads();
        const i64 i = i0 + t;
        const bool ok = i < m;
        const K key = ok ? kin[i] : K(0);
        const u32 d = ok ? (u32)(key >> shift) & 255u : 256u;
        const unsigned peers = __match_any_sync(0xffffffffu, d);
        const u32 r = (u32)__popc(peers & below);
        if (ok && r == 0) wc[w * 256 + d] = (u32)__popc(peers);
        __syncthreads();
        u32 s = 0;
#pragma unroll
        for (int k = 0; k < PRIM_WARPS; k++) {
            const u32 x = wc[k * 256 + t];
            wc[k * 256 + t] = s;
            s += x;
        }
        __syncthreads();
        if (ok) {
            const u32 pos = run[d] + wc[w * 256 + d] + r;
            kout[pos] = key;
            if (vin != nullptr) vout[pos] = vin[i];
        }
        __syncthreads();
        run[t] += s;
    }
}

extern "C" __global__ void __launch_bounds__(PRIM_THREADS)
    prim_rs_scatter_u32(const u32* kin, u32* kout, const u32* vin, u32* vout, const u32* count, i64 n, int shift,
                        const u64* diff, const u32* hist) {
    __shared__ u32 run[256];
    __shared__ u32 wc[PRIM_WARPS * 256];
    prim_rs_scatter_t<u32>(kin, kout, vin, vout, count, n, shift, diff, hist, run, wc);
}
extern "C" __global__ void __launch_bounds__(PRIM_THREADS)
    prim_rs_scatter_u64(const u64* kin, u64* kout, const u32* vin, u32* vout, const u32* count, i64 n, int shift,
                        const u64* diff, const u32* hist) {
    __shared__ u32 run[256];
    __shared__ u32 wc[PRIM_WARPS * 256];
    prim_rs_scatter_t<u64>(kin, kout, vin, vout, count, n, shift, diff, hist, run, wc);
}
