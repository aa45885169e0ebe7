// Embedding kernels: hash-table lookup and insert, one-hot slot rows,
// EmbeddingBag forward and backward, and AUC. They use the scan, compaction
// and radix sort of sort.cu; embed.go has the launch sequences.
//
// "Team" kernels give each bag / distinct row / chunk a team of ts lanes (a
// power of two ≤ 32 dividing the block, so a team never straddles a warp):
// lane tl of the team owns columns tl·W + k·ts·W of the V-wide vector,
// W = 4 (16-byte loads of float32, 8-byte loads and stores of 4 halves)
// when V % 4 == 0 and every pointer is aligned to W elements, else 1.
// Teams grid-stride over their items.
//
// Half precision: the pooled output of EmbeddingBag and the output
// gradient EmbeddingBagGrad reads may be float16 or bfloat16 (storage type
// T: half_t, bf16_t; float for float32); tables, partials and uniqGrad are
// float32. Sums are float32 in the same order for every T, and a half
// output is the float32 result rounded once, so a half run equals the
// float32 run rounded (forward) or fed the rounded gradient (backward), bit
// for bit. Kernels per T are named <kernel>[_f16|_bf16]_v<W>.

#define EMB_EMPTY ((i64)0x8000000000000000ull)  // tensor.EmptyKey
#define EMB_SKIP ((i64)0x8000000000000001ull)   // tensor.SkipKey
#define EMB_SIGN 0x8000000000000000ull

template <int W>
struct alignas(4 * W) emb_vec {
    float v[W];
};

template <int W>
static __device__ __forceinline__ void emb_zero(emb_vec<W>& a) {
#pragma unroll
    for (int e = 0; e < W; e++) a.v[e] = 0.f;
}

// emb_tv is W elements of storage type T, aligned as one access (16 bytes
// of float32 or 8 bytes of halves for W = 4).
template <class T, int W>
struct alignas(sizeof(T) * W) emb_tv {
    T v[W];
};

// emb_load: W elements at p (one vector access) widened to float32.
template <int W, class T>
static __device__ __forceinline__ emb_vec<W> emb_load(const T* p) {
    const emb_tv<T, W> s = *(const emb_tv<T, W>*)p;
    emb_vec<W> a;
#pragma unroll
    for (int e = 0; e < W; e++) a.v[e] = ldt(s.v, e);
    return a;
}

// emb_store: a rounded to T, written at p as one vector access.
template <int W, class T>
static __device__ __forceinline__ void emb_store(T* p, const emb_vec<W>& a) {
    emb_tv<T, W> s;
#pragma unroll
    for (int e = 0; e < W; e++) stt(s.v, e, a.v[e]);
    *(emb_tv<T, W>*)p = s;
}

// emb_axpy: a += x·s, elementwise in order.
template <int W>
static __device__ __forceinline__ void emb_axpy(emb_vec<W>& a, const emb_vec<W>& x, float s) {
#pragma unroll
    for (int e = 0; e < W; e++) a.v[e] += x.v[e] * s;
}

template <int W>
static __device__ __forceinline__ void emb_add(emb_vec<W>& a, const emb_vec<W>& x) {
#pragma unroll
    for (int e = 0; e < W; e++) a.v[e] += x.v[e];
}

// ---- HashLookup ----

// emb_hash_slot is tensor.HashSlot: the splitmix64 finalizer of the key.
static __device__ __forceinline__ u64 emb_hash_slot(i64 key, u64 mask) {
    u64 z = (u64)key;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z & mask;
}

// emb_hash_find probes linearly from the key's slot: its row, or −1 at the
// first free slot (the table is at most half full, so one is near).
static __device__ __forceinline__ int emb_hash_find(const i64* tk, const int* tr, u64 mask, i64 key) {
    u64 s = emb_hash_slot(key, mask);
    for (u64 k = 0; k <= mask; k++) {
        const i64 t = tk[s];
        if (t == key) return tr[s];
        if (t == EMB_EMPTY) return -1;
        s = (s + 1) & mask;
    }
    return -1;
}

// emb_hash_probe: one thread per key: rows[i] = its row or −1; miss[i] (when
// given) = 1 for a valid missing key. The reserved empty key is ErrRange;
// so is the skip key unless the table is sharded (then its row is −1 and it
// is not missing).
extern "C" __global__ void emb_hash_probe(const i64* tk, const int* tr, u64 mask, const i64* keys, int* rows, u32* miss,
                                          i64 n, u64* flag, int op, int sharded) {
    FOR(i, n) {
        const i64 key = keys[i];
        const bool reserved = key == EMB_EMPTY || key == EMB_SKIP;
        int r = -1;
        if (reserved) {
            if (key == EMB_EMPTY || !sharded) report(flag, ERR_RANGE, op, i, key);
        } else {
            r = emb_hash_find(tk, tr, mask, key);
        }
        rows[i] = r;
        if (miss != nullptr) miss[i] = (r < 0 && !reserved) ? 1u : 0u;
    }
}

// emb_hash_gather compacts the missing keys, sign bit flipped so that the
// unsigned radix order is the int64 order: mk[pos[i]] for miss[i].
extern "C" __global__ void emb_hash_gather(const i64* keys, const u32* miss, const u32* pos, u64* mk, i64 n) {
    FOR(i, n) if (miss[i]) mk[pos[i]] = (u64)keys[i] ^ EMB_SIGN;
}

// emb_hash_heads: head[i] = 1 where sorted missing key i (i < *cnt) starts a
// run of equal keys, else 0 (its exclusive scan ranks the distinct keys).
extern "C" __global__ void emb_hash_heads(const u64* mk, const u32* cnt, u32* head, i64 n) {
    const i64 m = (i64)*cnt;
    FOR(i, n) head[i] = (i < m && (i == 0 || mk[i] != mk[i - 1])) ? 1u : 0u;
}

// emb_hash_insert: one thread per sorted missing key; the first of each run
// inserts its key at row Count + rank (rank = upos[i], ascending key order)
// with atomicCAS on the key slot (distinct keys, so no two threads insert
// the same key). If Count + distinct > maxRows nothing is inserted and the
// key that would get row maxRows reports ERR_FULL. Nothing happens when the
// error record is already set (e.g. the probe met the empty key). rk (when
// given) is the table's RowKeys: rk[row] = key.
extern "C" __global__ void emb_hash_insert(i64* tk, int* tr, u64 mask, const int* count, int maxRows, const u64* mk,
                                           const u32* upos, const u32* cnt, i64 n, u64* flag, int op, i64* rk) {
    if (flag[0] != 0) return;
    const i64 m = (i64)*cnt, nu = (i64)upos[n], c0 = (i64)*count;
    const bool full = c0 + nu > (i64)maxRows;
    FOR(i, m) {
        if (i > 0 && mk[i] == mk[i - 1]) continue;
        const i64 rank = (i64)upos[i];
        const i64 key = (i64)(mk[i] ^ EMB_SIGN);
        if (full) {
            if (c0 + rank == (i64)maxRows) report(flag, ERR_FULL, op, key, maxRows);
            continue;
        }
        u64 s = emb_hash_slot(key, mask);
        for (u64 k = 0; k <= mask; k++) {
            const u64 prev = atomicCAS((unsigned long long*)(tk + s), (unsigned long long)EMB_EMPTY,
                                       (unsigned long long)key);
            if (prev == (u64)EMB_EMPTY) {
                tr[s] = (int)(c0 + rank);
                if (rk != nullptr) rk[c0 + rank] = key;
                break;
            }
            s = (s + 1) & mask;
        }
    }
}

// emb_hash_count: Count += distinct new keys (one thread; after insert, so
// every inserting thread read the old Count).
extern "C" __global__ void emb_hash_count(int* count, const u32* upos, i64 n, const u64* flag) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && flag[0] == 0) *count += (int)upos[n];
}

// emb_hash_reprobe: the keys still at −1 are probed again after the insert.
extern "C" __global__ void emb_hash_reprobe(const i64* tk, const int* tr, u64 mask, const i64* keys, int* rows, i64 n) {
    FOR(i, n) {
        if (rows[i] >= 0) continue;
        const i64 key = keys[i];
        if (key != EMB_EMPTY && key != EMB_SKIP) rows[i] = emb_hash_find(tk, tr, mask, key);
    }
}

// ---- Bag groups ----
// Kernels over the positions of CSR bags give each warp a group of 32
// consecutive bags: its lanes stride over the group's positions
// [off[b0], off[b0+nb]) (coalesced, no lane waits for a long bag of
// another) and find a position's bag by a binary search of the group's
// offsets in shared memory. Offsets are clamped to [0, nnz], the first
// group starts at 0 and the last ends at nnz: consecutive groups share
// their boundary offset, so even offsets that decrease (the CPU rejects
// those) leave no position of [0, nnz) unwritten, and each gets a bag of
// its group (no garbage bag index reaches a later gather).

// emb_group_load: the warp loads the clamped offsets of bags b0 … b0+nb
// into sh[0..nb] (nb = min(32, bags − b0)) and returns nb.
static __device__ __forceinline__ int emb_group_load(const int* off, i64 bags, i64 nnz, i64 b0, int* sh) {
    const int lane = threadIdx.x & 31;
    const int nb = (int)(bags - b0 < 32 ? bags - b0 : 32);
    for (int k = lane; k <= nb; k += 32) {
        i64 o = off[b0 + k];
        o = o < 0 ? 0 : (o > nnz ? nnz : o);
        if (b0 + k == 0) o = 0;
        if (b0 + k == bags) o = nnz;
        sh[k] = (int)o;
    }
    __syncwarp();
    return nb;
}

// emb_group_bag: the largest k < nb with sh[k] ≤ j (0 when none): the bag
// of position j (empty bags share their start with the next bag).
static __device__ __forceinline__ int emb_group_bag(const int* sh, int nb, i64 j) {
    int lo = 0, hi = nb;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if ((i64)sh[mid] <= j)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

// EMB_GROUP_LOOP(b0) runs the body once per 32-bag group b0 of the warp
// (grid-stride, the same trip count on all 32 lanes; 256-thread blocks);
// sh is the warp's 33 offsets.
#define EMB_GROUP_WARPS 8
#define EMB_GROUP_LOOP(b0, bags)                                                                        \
    for (i64 b0 = (((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5) << 5; b0 < (bags);               \
         b0 += ((i64)gridDim.x * blockDim.x >> 5) << 5)

// ---- SlotRows ----

// emb_slot_rows: a warp per 32 bags (bag groups above); position j of bag b
// (slot b mod ns): rows[j] = keys[j] + so[s], ERR_RANGE unless 0 ≤ key <
// ss[s] and the row fits an int32; a negative so[s] (another rank's slot)
// gives row −1 after the same range check.
extern "C" __global__ void __launch_bounds__(256) emb_slot_rows(int* rows, const i64* keys, const int* off, const i64* so,
                                                                const i64* ss, i64 bags, int ns, i64 nnz, u64* flag,
                                                                int op) {
    __shared__ int shg[EMB_GROUP_WARPS][33];
    int* sh = shg[threadIdx.x >> 5];
    const int lane = threadIdx.x & 31;
    EMB_GROUP_LOOP(b0, bags) {
        const int nb = emb_group_load(off, bags, nnz, b0, sh);
        const i64 hi = sh[nb];
        for (i64 j = (i64)sh[0] + lane; j < hi; j += 32) {
            const i64 b = b0 + emb_group_bag(sh, nb, j);
            const int s = (int)(b % ns);
            const i64 o = so[s], sz = ss[s];
            const i64 k = keys[j], v = k + o;
            if (k < 0 || k >= sz || v > 2147483647ll) {
                report(flag, ERR_RANGE, op, j, k);
                continue;
            }
            rows[j] = o < 0 ? -1 : (int)v;
        }
        __syncwarp();  // sh is reused by the next group
    }
}

// ---- RecordSlots ----

// emb_record_slots: one thread per bag b (slot b mod ns): rows still
// negative (−1: never seen, < −1: pending this call) take the minimum of
// INT_MIN + slot; rows beyond nrows report ERR_RANGE.
extern "C" __global__ void emb_record_slots(int* rs, const int* rows, const int* off, i64 bags, int ns, i64 nnz,
                                            int nrows, u64* flag, int op) {
    FOR(b, bags) {
        const int s = (int)(b % ns);
        i64 lo = off[b], hi = off[b + 1];
        lo = lo < 0 ? 0 : lo;
        hi = hi > nnz ? nnz : hi;
        for (i64 j = lo; j < hi; j++) {
            const int r = rows[j];
            if (r < 0) continue;
            if (r >= nrows) {
                report(flag, ERR_RANGE, op, j, r);
                continue;
            }
            if (rs[r] < 0) atomicMin(&rs[r], (int)(-2147483647 - 1) + s);
        }
    }
}

// emb_finish_slots: one thread per position: a pending value becomes its
// slot (threads of one row all write the same value).
extern "C" __global__ void emb_finish_slots(int* rs, const int* rows, i64 nnz, int nrows) {
    FOR(j, nnz) {
        const int r = rows[j];
        if (r < 0 || r >= nrows) continue;
        const int v = rs[r];
        if (v < -1) rs[r] = v - (int)(-2147483647 - 1);
    }
}

// ---- EmbeddingBag ----

// emb_bag_fwd: one team per group of EMB_FWD_BAGS consecutive bags (see
// the top of the file): the team walks the group's positions [off[b0],
// off[b0+nb]) four at a time (4 rows loaded ahead whatever the bags'
// lengths, so one-hot bags do not wait on one row each) with one
// accumulator, stored (and cleared) where a bag ends: out[b, :] = Σ
// table[rows[j], :] over the bag in position order (the same float
// additions as one bag at a time). Rows < 0 add nothing, rows ≥ nrows
// report ERR_RANGE; Mean scales by 1/nnz when nnz > 1. Offsets are clamped
// to [0, nnz] and made non-decreasing within the group.
#define EMB_FWD_BAGS 4  // o0 … o4 below are written out for 4

// emb_clamp_off: offset x clamped to [lo, nnz] (lo: the previous offset,
// so the group's offsets never decrease; bad offsets give empty bags).
static __device__ __forceinline__ i64 emb_clamp_off(i64 x, i64 lo, i64 nnz) {
    x = x > nnz ? nnz : x;
    return x < lo ? lo : x;
}

template <class T, int W>
static __device__ __forceinline__ void emb_bag_store(T* out, emb_vec<W>& a, i64 b, int V, int c, int mean, i64 cnt) {
    if (mean && cnt > 1) {
        const float scale = 1.0f / (float)cnt;
#pragma unroll
        for (int k = 0; k < W; k++) a.v[k] *= scale;
    }
    emb_store<W>(out + b * V + c, a);
    emb_zero(a);
}

template <class T, int W>
static __device__ __forceinline__ void emb_bag_fwd_t(T* out, const float* tab, const int* rows, const int* off,
                                                     i64 bags, int V, int nrows, int mean, int ts, i64 nnz, u64* flag,
                                                     int op) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const int tl = (int)(tid & (ts - 1));
    const i64 teams = (i64)gridDim.x * blockDim.x / ts;
    const i64 groups = (bags + EMB_FWD_BAGS - 1) / EMB_FWD_BAGS;
    for (i64 g = tid / ts; g < groups; g += teams) {
        const i64 b0 = g * EMB_FWD_BAGS;
        const int nb = bags - b0 < EMB_FWD_BAGS ? (int)(bags - b0) : EMB_FWD_BAGS;
        // The group's offsets o0 … o4 as scalars (an array indexed by the
        // current bag would live in local memory); past nb they repeat the
        // end.
        const i64 o0 = emb_clamp_off(off[b0], 0, nnz);
        const i64 o1 = emb_clamp_off(off[b0 + (nb > 1 ? 1 : nb)], o0, nnz);
        const i64 o2 = emb_clamp_off(off[b0 + (nb > 2 ? 2 : nb)], o1, nnz);
        const i64 o3 = emb_clamp_off(off[b0 + (nb > 3 ? 3 : nb)], o2, nnz);
        const i64 E = emb_clamp_off(off[b0 + nb], o3, nnz);
        for (int c = tl * W; c < V; c += ts * W) {
            emb_vec<W> a;
            emb_zero(a);
            int cur = 0;             // the bag being summed
            i64 lo = o0, hi = o1;  // its positions
            // EMB_FWD_NEXT(i) = o_i, the end of bag i−1 (E past the group).
#define EMB_FWD_NEXT(i) ((i) <= 1 ? o1 : (i) == 2 ? o2 : (i) == 3 ? o3 : E)
            for (i64 j = o0; j < E; j += 4) {
                int r[4];
                emb_vec<W> x[4];
#pragma unroll
                for (int k = 0; k < 4; k++) r[k] = j + k < E ? rows[j + k] : -1;
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    emb_zero(x[k]);
                    if (r[k] >= nrows)
                        report(flag, ERR_RANGE, op, j + k, r[k]);
                    else if (r[k] >= 0)
                        x[k] = emb_load<W>(tab + (i64)r[k] * V + c);
                }
#pragma unroll
                for (int k = 0; k < 4; k++) {  // guarded, not broken off: fully unrolled, x stays in registers
                    if (j + k < E) {
                        while (j + k >= hi) {  // bag cur (and any empty ones) ended
                            emb_bag_store<T, W>(out, a, b0 + cur, V, c, mean, hi - lo);
                            cur++;
                            lo = hi;
                            hi = EMB_FWD_NEXT(cur + 1);
                        }
                        emb_add(a, x[k]);
                    }
                }
            }
            for (; cur < nb; cur++) {  // the last bag summed, then any empty ones
                emb_bag_store<T, W>(out, a, b0 + cur, V, c, mean, hi - lo);
                lo = hi;
                hi = EMB_FWD_NEXT(cur + 2);
            }
#undef EMB_FWD_NEXT
        }
    }
}

// EMB_BAG_FWD stamps emb_bag_fwd for output type T and width W.
#define EMB_BAG_FWD(name, T, W)                                                                                   \
    extern "C" __global__ void name(T* out, const float* tab, const int* rows, const int* off, i64 bags, int V,     \
                                    int nrows, int mean, int ts, i64 nnz, u64* flag, int op) {                      \
        emb_bag_fwd_t<T, W>(out, tab, rows, off, bags, V, nrows, mean, ts, nnz, flag, op);                          \
    }
EMB_BAG_FWD(emb_bag_fwd_v1, float, 1)
EMB_BAG_FWD(emb_bag_fwd_v4, float, 4)
EMB_BAG_FWD(emb_bag_fwd_f16_v1, half_t, 1)
EMB_BAG_FWD(emb_bag_fwd_f16_v4, half_t, 4)
EMB_BAG_FWD(emb_bag_fwd_bf16_v1, bf16_t, 1)
EMB_BAG_FWD(emb_bag_fwd_bf16_v4, bf16_t, 4)

// ---- EmbeddingBagGrad ----
// Occurrence j becomes the pair (key = row+1, or 0 for a row < 0; value =
// bag(j)); the pairs are radix-sorted stably by key, so each distinct row's
// occurrences are contiguous and in occurrence order, with the dropped
// (negative) rows in front. Runs ("segments") are ranked by a scan of their
// heads; seg[u] is the first sorted position of distinct row u and seg[U] =
// nnz. A segment of ≤ 64 occurrences is summed by one team in order; a
// longer one (a hot row) is cut into pieces at the 64-position windows of
// the sorted order (below), each summed in order by a team into a partial.
// A segment of at most finTeam (embFinTeam) pieces then adds its partials
// in window order (one team); a longer one (the hottest rows) is reduced
// by a whole block: partials strided over the block's teams, then the team
// sums in team order (emb_grad_finb). So every sum has a fixed order
// (results are deterministic and do not depend on the grid), hot rows use
// many SMs and no row's sum is a long serial chain: the longest in-order
// chain is max(64, finTeam, ⌈pieces/teams⌉) loads.

// emb_grad_prep: a warp per 32 bags (bag groups) writes the pairs of
// their positions.
extern "C" __global__ void __launch_bounds__(256)
    emb_grad_prep(const int* rows, const int* off, i64 bags, i64 nnz, u32* keys, u32* vals) {
    __shared__ int shg[EMB_GROUP_WARPS][33];
    int* sh = shg[threadIdx.x >> 5];
    const int lane = threadIdx.x & 31;
    EMB_GROUP_LOOP(b0, bags) {
        const int nb = emb_group_load(off, bags, nnz, b0, sh);
        const i64 hi = sh[nb];
        for (i64 j = (i64)sh[0] + lane; j < hi; j += 32) {
            const int r = rows[j];
            keys[j] = r >= 0 ? (u32)r + 1u : 0u;
            vals[j] = (u32)(b0 + emb_group_bag(sh, nb, j));
        }
        __syncwarp();
    }
}

// emb_grad_heads: head[i] = 1 where sorted key i is a row (≠ 0) that starts
// a run.
extern "C" __global__ void emb_grad_heads(const u32* k, u32* head, i64 n) {
    FOR(i, n) head[i] = (k[i] != 0u && (i == 0 || k[i] != k[i - 1])) ? 1u : 0u;
}

// emb_grad_rle: from the scanned heads hpos: uniqRows[u] and seg[u] for
// each run, seg[U] = n and numUniq[0] = U; the hot-row list counts nl[0],
// nl[1] start at 0.
extern "C" __global__ void emb_grad_rle(const u32* k, const u32* hpos, int* uniqRows, u32* seg, int* numUniq, u32* nl,
                                        i64 n) {
    FOR(i, n + 1) {
        if (i == n) {
            seg[hpos[n]] = (u32)n;
            numUniq[0] = (int)hpos[n];
            nl[0] = 0u;
            nl[1] = 0u;
        } else if (k[i] != 0u && (i == 0 || k[i] != k[i - 1])) {
            const u32 u = hpos[i];
            seg[u] = (u32)i;
            uniqRows[u] = (int)(k[i] - 1u);
        }
    }
}

// emb_grad_range adds, in order, dOut[bag[k], c..c+W) (÷ the bag's nnz for
// Mean) over the sorted occurrences k ∈ [s, e), 4 loads ahead.
template <class T, int W>
static __device__ __forceinline__ void emb_grad_range(emb_vec<W>& a, const T* dOut, const u32* bag, const int* off,
                                                      int V, int c, int mean, i64 s, i64 e) {
    i64 k = s;
    for (; k + 4 <= e; k += 4) {
        u32 b[4];
        float sc[4];
        emb_vec<W> x[4];
#pragma unroll
        for (int u = 0; u < 4; u++) b[u] = bag[k + u];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            x[u] = emb_load<W>(dOut + (i64)b[u] * V + c);
            const int nb = off[b[u] + 1] - off[b[u]];
            sc[u] = (mean && nb > 1) ? 1.0f / (float)nb : 1.0f;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) emb_axpy(a, x[u], sc[u]);
    }
    for (; k < e; k++) {
        const u32 b = bag[k];
        const int nb = off[b + 1] - off[b];
        emb_axpy(a, emb_load<W>(dOut + (i64)b * V + c), (mean && nb > 1) ? 1.0f / (float)nb : 1.0f);
    }
}

// emb_grad_sum: one team per distinct row u < numUniq with a short segment.
template <class T, int W>
static __device__ __forceinline__ void emb_grad_sum_t(float* ug, const T* dOut, const u32* bag, const int* off,
                                                      const u32* seg, const int* numUniq, int V, int mean, int ts,
                                                      int longLen) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const int tl = (int)(tid & (ts - 1));
    const i64 teams = (i64)gridDim.x * blockDim.x / ts;
    const i64 nu = (i64)*numUniq;
    for (i64 u = tid / ts; u < nu; u += teams) {
        const i64 s = seg[u], e = seg[u + 1];
        if (e - s > longLen) continue;
        for (int c = tl * W; c < V; c += ts * W) {
            emb_vec<W> a;
            emb_zero(a);
            emb_grad_range<T, W>(a, dOut, bag, off, V, c, mean, s, e);
            *(emb_vec<W>*)(ug + u * V + c) = a;
        }
    }
}

// EMB_GRAD_SUM stamps emb_grad_sum for gradient type T and width W.
#define EMB_GRAD_SUM(name, T, W)                                                                                  \
    extern "C" __global__ void name(float* ug, const T* dOut, const u32* bag, const int* off, const u32* seg,      \
                                    const int* numUniq, int V, int mean, int ts, int longLen) {                     \
        emb_grad_sum_t<T, W>(ug, dOut, bag, off, seg, numUniq, V, mean, ts, longLen);                               \
    }
EMB_GRAD_SUM(emb_grad_sum_v1, float, 1)
EMB_GRAD_SUM(emb_grad_sum_v4, float, 4)
EMB_GRAD_SUM(emb_grad_sum_f16_v1, half_t, 1)
EMB_GRAD_SUM(emb_grad_sum_f16_v4, half_t, 4)
EMB_GRAD_SUM(emb_grad_sum_bf16_v1, bf16_t, 1)
EMB_GRAD_SUM(emb_grad_sum_bf16_v4, bf16_t, 4)

// Hot rows are cut at the 64-position windows of the sorted order: window
// k holds sorted positions [64k, 64k+64), and a long segment (more than 64
// occurrences) meets a window in one piece. A window meets at most two
// long segments: the one covering its first position (side 0) and one
// starting inside it (side 1; a long segment starting inside runs past the
// window's end, so there is one at most). Piece (k, side) has partial
// 2k + side, so no scan is needed to place the partials: segment u = [s, e)
// has the P = ⌊(e−1)/64⌋ − ⌊s/64⌋ + 1 partials 2⌊s/64⌋ + (s mod 64 ≠ 0),
// then 2(⌊s/64⌋ + j) for j = 1 … P−1, in window order.

// emb_grad_piece: the partial of piece j of the segment starting at s.
static __device__ __forceinline__ i64 emb_grad_piece(i64 s, i64 j) {
    const i64 k0 = s >> 6;
    return j == 0 ? 2 * k0 + ((s & 63) != 0 ? 1 : 0) : 2 * (k0 + j);
}

// emb_grad_chunk: one team per piece item q = 2k + side < 2⌈n/64⌉:
// partial[q] = the in-order sum of the piece's occurrences. The team of a
// segment's first piece also appends the segment to lists[0] (at most
// finTeam pieces) or lists[1] (more; the hottest rows) with one atomicAdd
// on nl[0] or nl[1] (zeroed by emb_grad_rle): at most one per long
// segment, so contention is low; the lists' order varies from run to run
// but only decides which team or block sums a segment, not the order.
template <class T, int W>
static __device__ __forceinline__ void emb_grad_chunk_t(float* partial, const T* dOut, const u32* bag,
                                                        const int* off, const u32* keys, const u32* hpos,
                                                        const u32* seg, u32* list0, u32* list1, u32* nl, i64 n,
                                                        int V, int mean, int ts, int finTeam) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const int tl = (int)(tid & (ts - 1));
    const i64 teams = (i64)gridDim.x * blockDim.x / ts;
    const i64 items = 2 * ((n + 63) >> 6);
    for (i64 q = tid / ts; q < items; q += teams) {
        const i64 ws = (q >> 1) << 6, we = ws + 64 < n ? ws + 64 : n;
        i64 u;
        if ((q & 1) == 0) {
            if (keys[ws] == 0u) continue;  // a dropped row covers the window's start
            u = (i64)hpos[ws + 1] - 1;     // the segment of position ws
        } else {
            u = (i64)hpos[we] - 1;  // the last segment starting before we
            if (u < 0 || (i64)seg[u] <= ws) continue;
        }
        const i64 s = seg[u], e = seg[u + 1];
        if (e - s <= 64) continue;
        const i64 ps = s > ws ? s : ws, pe = e < we ? e : we;
        if (tl == 0 && ps == s) {
            const i64 P = ((e - 1) >> 6) - (s >> 6) + 1;
            const int l = P > finTeam ? 1 : 0;
            (l ? list1 : list0)[atomicAdd(&nl[l], 1u)] = (u32)u;
        }
        for (int c = tl * W; c < V; c += ts * W) {
            emb_vec<W> a;
            emb_zero(a);
            emb_grad_range<T, W>(a, dOut, bag, off, V, c, mean, ps, pe);
            *(emb_vec<W>*)(partial + q * V + c) = a;
        }
    }
}

// EMB_GRAD_CHUNK stamps emb_grad_chunk for gradient type T and width W.
#define EMB_GRAD_CHUNK(name, T, W)                                                                                \
    extern "C" __global__ void name(float* partial, const T* dOut, const u32* bag, const int* off, const u32* keys, \
                                    const u32* hpos, const u32* seg, u32* list0, u32* list1, u32* nl, i64 n, int V, \
                                    int mean, int ts, int finTeam) {                                                \
        emb_grad_chunk_t<T, W>(partial, dOut, bag, off, keys, hpos, seg, list0, list1, nl, n, V, mean, ts,          \
                               finTeam);                                                                            \
    }
EMB_GRAD_CHUNK(emb_grad_chunk_v1, float, 1)
EMB_GRAD_CHUNK(emb_grad_chunk_v4, float, 4)
EMB_GRAD_CHUNK(emb_grad_chunk_f16_v1, half_t, 1)
EMB_GRAD_CHUNK(emb_grad_chunk_f16_v4, half_t, 4)
EMB_GRAD_CHUNK(emb_grad_chunk_bf16_v1, bf16_t, 1)
EMB_GRAD_CHUNK(emb_grad_chunk_bf16_v4, bf16_t, 4)

// emb_grad_fin: one team per entry u of lists[0] (at most finTeam pieces):
// uniqGrad[u] = its partials added in window order.
template <int W>
static __device__ __forceinline__ void emb_grad_fin_t(float* ug, const float* partial, const u32* seg, const u32* list,
                                                      const u32* nl, int V, int ts) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const int tl = (int)(tid & (ts - 1));
    const i64 teams = (i64)gridDim.x * blockDim.x / ts;
    const i64 m = (i64)nl[0];
    for (i64 i = tid / ts; i < m; i += teams) {
        const u32 u = list[i];
        const i64 s = seg[u], e = seg[u + 1];
        const i64 P = ((e - 1) >> 6) - (s >> 6) + 1;
        for (int c = tl * W; c < V; c += ts * W) {
            emb_vec<W> a;
            emb_zero(a);
            i64 j = 0;
            for (; j + 4 <= P; j += 4) {
                emb_vec<W> x[4];
#pragma unroll
                for (int r = 0; r < 4; r++) x[r] = emb_load<W>(partial + emb_grad_piece(s, j + r) * V + c);
#pragma unroll
                for (int r = 0; r < 4; r++) emb_add(a, x[r]);
            }
            for (; j < P; j++) emb_add(a, emb_load<W>(partial + emb_grad_piece(s, j) * V + c));
            *(emb_vec<W>*)(ug + (i64)u * V + c) = a;
        }
    }
}

extern "C" __global__ void emb_grad_fin_v1(float* ug, const float* partial, const u32* seg, const u32* list,
                                           const u32* nl, int V, int ts) {
    emb_grad_fin_t<1>(ug, partial, seg, list, nl, V, ts);
}
extern "C" __global__ void emb_grad_fin_v4(float* ug, const float* partial, const u32* seg, const u32* list,
                                           const u32* nl, int V, int ts) {
    emb_grad_fin_t<4>(ug, partial, seg, list, nl, V, ts);
}

// emb_grad_finb: one block of EMB_FINB_THREADS per entry u of lists[1]
// (more than finTeam pieces: the hottest rows), block-strided: team t of
// the T = EMB_FINB_THREADS/ts teams adds pieces t, t+T, t+2T, … in that
// order (4 loads ahead), then team 0 adds the T team sums in team order
// into uniqGrad[u]. Column passes run the same count on every thread (the
// barriers).
#define EMB_FINB_THREADS 1024
template <int W>
static __device__ __forceinline__ void emb_grad_finb_t(float* ug, const float* partial, const u32* seg,
                                                       const u32* list, const u32* nl, int V, int ts,
                                                       emb_vec<W>* sh) {
    const int t = threadIdx.x, tl = t & (ts - 1), team = t / ts, T = blockDim.x / ts;
    const int passes = (V + ts * W - 1) / (ts * W);
    const i64 m = (i64)nl[1];
    for (i64 i = blockIdx.x; i < m; i += gridDim.x) {
        const u32 u = list[i];
        const i64 s = seg[u], e = seg[u + 1];
        const i64 P = ((e - 1) >> 6) - (s >> 6) + 1;
        for (int k = 0; k < passes; k++) {
            const int c = (k * ts + tl) * W;
            emb_vec<W> a;
            emb_zero(a);
            if (c < V) {
                i64 j = team;
                for (; j + 3 * (i64)T < P; j += 4 * (i64)T) {
                    emb_vec<W> x[4];
#pragma unroll
                    for (int r = 0; r < 4; r++) x[r] = emb_load<W>(partial + emb_grad_piece(s, j + r * (i64)T) * V + c);
#pragma unroll
                    for (int r = 0; r < 4; r++) emb_add(a, x[r]);
                }
                for (; j < P; j += T) emb_add(a, emb_load<W>(partial + emb_grad_piece(s, j) * V + c));
            }
            sh[t] = a;
            __syncthreads();
            if (team == 0 && c < V) {
                emb_vec<W> sum;
                emb_zero(sum);
                for (int r = 0; r < T; r++) emb_add(sum, sh[r * ts + tl]);
                *(emb_vec<W>*)(ug + (i64)u * V + c) = sum;
            }
            __syncthreads();
        }
    }
}

extern "C" __global__ void __launch_bounds__(EMB_FINB_THREADS)
    emb_grad_finb_v1(float* ug, const float* partial, const u32* seg, const u32* list, const u32* nl, int V, int ts) {
    __shared__ emb_vec<1> sh[EMB_FINB_THREADS];
    emb_grad_finb_t<1>(ug, partial, seg, list, nl, V, ts, sh);
}
extern "C" __global__ void __launch_bounds__(EMB_FINB_THREADS)
    emb_grad_finb_v4(float* ug, const float* partial, const u32* seg, const u32* list, const u32* nl, int V, int ts) {
    __shared__ emb_vec<4> sh[EMB_FINB_THREADS];
    emb_grad_finb_t<4>(ug, partial, seg, list, nl, V, ts, sh);
}

// ---- AUC ----
// Pairs (order-preserving key of the score, label bits) are radix-sorted by
// key; P = exclusive scan of the sorted labels in double (P[n] = Σy) and
// the negative weight below position i is i − P[i]. The boundaries 0 = b_0
// < … < b_m = n of the runs of equal scores are compacted; group g = [b_g,
// b_{g+1}) adds pos·(negBelow + ½neg) = (P_b − P_a)·(E_a + E_b)/2, which is
// the CPU's formula (metrics.AUC).

// emb_auc_prep: −0 is keyed as +0 (they compare equal); negative floats
// have all bits flipped, positive ones the sign bit, so u32 order is float
// order. Scores and labels of dtype codes sdt, ldt (float32 or half, read
// widened: exact).
extern "C" __global__ void emb_auc_prep(const void* scores, int sdt, const void* labels, int ldt, u32* keys, u32* vals,
                                        i64 n) {
    FOR(i, n) {
        u32 u = __float_as_uint(ldv(scores, sdt, i));
        if ((u << 1) == 0u) u = 0u;  // −0 → +0, on the bits (immune to fast-math)
        keys[i] = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
        vals[i] = __float_as_uint(ldv(labels, ldt, i));
    }
}

// emb_auc_bounds: flag[i] = 1 for i ∈ [0, n] that starts a run of equal
// sorted keys or is n.
extern "C" __global__ void emb_auc_bounds(const u32* keys, u32* flag, i64 n) {
    FOR(i, n + 1) flag[i] = (i == 0 || i == n || keys[i] != keys[i - 1]) ? 1u : 0u;
}

// emb_auc_area: each thread adds its groups (grid-stride, fixed grid) and
// block b writes its sum to part[b].
extern "C" __global__ void __launch_bounds__(256)
    emb_auc_area(const double* P, const u32* bidx, const u32* nb, double* part) {
    __shared__ double sh[32];
    const i64 groups = (i64)*nb - 1;
    double s = 0;
    FOR(g, groups) {
        const i64 a = bidx[g], b = bidx[g + 1];
        const double pa = P[a], pb = P[b];
        s += (pb - pa) * (((double)a - pa) + ((double)b - pb)) * 0.5;
    }
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

// emb_auc_final (one block): res = {area, Σy, n − Σy}.
extern "C" __global__ void __launch_bounds__(256)
    emb_auc_final(const double* P, const double* part, int nparts, i64 n, double* res) {
    __shared__ double sh[32];
    double s = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) s += part[i];
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0) {
        res[0] = s;
        res[1] = P[n];
        res[2] = (double)n - P[n];
    }
}
