// Sharded embedding tables (tensor/shard.go): the key mask of one rank and
// the key-derived initial values of newly inserted hash rows.

#define SHARD_EMPTY ((i64)0x8000000000000000ull)  // tensor.EmptyKey
#define SHARD_SKIP ((i64)0x8000000000000001ull)   // tensor.SkipKey

// shard_mask_keys: one thread per position: dst[j] = keys[j] when
// floorMod(key, world) == rank, else the skip key; a reserved key reports
// ERR_RANGE (index j). dst may alias keys.
extern "C" __global__ void shard_mask_keys(i64* dst, const i64* keys, i64 n, int rank, int world, u64* flag, int op) {
    FOR(j, n) {
        const i64 k = keys[j];
        if (k == SHARD_EMPTY || k == SHARD_SKIP) {
            report(flag, ERR_RANGE, op, j, k);
            continue;
        }
        i64 m = k % (i64)world;
        if (m < 0) m += world;
        dst[j] = m == (i64)rank ? k : SHARD_SKIP;
    }
}

// shard_mask_slots: one thread per bag b (slot b mod ns): its keys stay when
// slot mod world == rank, else become the skip key; reserved keys report
// ERR_RANGE. Bag ranges are clamped to the keys.
extern "C" __global__ void shard_mask_slots(i64* dst, const i64* keys, const int* off, i64 bags, int ns, i64 nnz,
                                            int rank, int world, u64* flag, int op) {
    FOR(b, bags) {
        const bool own = ((int)(b % ns)) % world == rank;
        i64 lo = off[b], hi = off[b + 1];
        lo = lo < 0 ? 0 : lo;
        hi = hi > nnz ? nnz : hi;
        for (i64 j = lo; j < hi; j++) {
            const i64 k = keys[j];
            if (k == SHARD_EMPTY || k == SHARD_SKIP) {
                report(flag, ERR_RANGE, op, j, k);
                continue;
            }
            dst[j] = own ? k : SHARD_SKIP;
        }
    }
}

// shard_philox is tensor.Philox4x32 of the counter (c0, c1, c2, c3) under
// key (k0, k1).
static __device__ __forceinline__ void shard_philox(u32 c0, u32 c1, u32 c2, u32 c3, u32 k0, u32 k1, u32 w[4]) {
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

// shard_init_rows: one thread per (row, block of 4 columns) of the rows in
// [*first, *count) (read on the device; the grid is fixed and strides over
// them): t[r, j] = round(round((a+a)·u) − a) with u from Philox of (key,
// j/4, tag) under the seed (tensor.InitValue32), a = bound, or sb[rs[r]]
// when sb is given (a row without a slot reports ERR_RANGE).
extern "C" __global__ void shard_init_rows(float* t, const i64* rk, const int* first, const int* count, int maxRows,
                                           int V, u64 seed, u32 tag, float bound, const int* rs, const float* sb,
                                           int nslots, u64* flag, int op) {
    i64 lo = *first, hi = *count;
    lo = lo < 0 ? 0 : lo;
    hi = hi > maxRows ? maxRows : hi;
    if (hi <= lo) return;
    const i64 q = (V + 3) / 4;
    FOR(i, (hi - lo) * q) {
        const i64 r = lo + i / q;
        const int b = (int)(i % q);
        float a = bound;
        if (sb != nullptr) {
            const int s = rs[r];
            if (s < 0 || s >= nslots) {
                report(flag, ERR_RANGE, op, r, s);
                continue;
            }
            a = sb[s];
        }
        const u64 key = (u64)rk[r];
        u32 w[4];
        shard_philox((u32)key, (u32)(key >> 32), (u32)b, tag, (u32)seed, (u32)(seed >> 32), w);
        float* row = t + r * (i64)V;
        const float two = __fadd_rn(a, a);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int j = 4 * b + e;
            if (j >= V) break;
            const float u = (float)(w[e] >> 8) * (1.0f / 16777216.0f);
            row[j] = __fadd_rn(__fmul_rn(two, u), -a);
        }
    }
}
