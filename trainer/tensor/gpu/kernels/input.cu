// ---- SplitInputs ----
//
// A batch's sparse part arrives as the reader decoded it: keys (u32 or
// i64) of all S slots and one CSR over them (bag i·S+s). Each network
// input k takes slots [first, first+sk): three kernels build its CSR
// (a block-wise scan of the per-sample key counts), input_keys copies its
// keys, widened to i64 with the slot's offset added (one thread per bag).

#define INPUT_THREADS 1024

// The input's offsets over many blocks (one block would serialise a
// 65536-sample batch on one SM): input_block_sums sums each block's
// samples' key counts, input_scan_sums turns the block sums into
// exclusive prefixes (sums[nb] = the input's key total), and
// input_offsets_scan writes each sample's offsets from its block's prefix
// plus a scan inside the block, then the padding bags n..B-1.
__device__ int input_count(const int* src, i64 i, i64 n, int S, int first, int sk) {
    return i < n ? src[i * S + first + sk] - src[i * S + first] : 0;
}

// block_scan_i: inclusive scan of v over the block (INPUT_THREADS threads).
__device__ int block_scan_i(int v, int* part) {
    const int t = threadIdx.x;
    part[t] = v;
    __syncthreads();
    for (int d = 1; d < INPUT_THREADS; d <<= 1) {
        int u = t >= d ? part[t - d] : 0;
        __syncthreads();
        part[t] += u;
        __syncthreads();
    }
    return part[t];
}

extern "C" __global__ void input_block_sums(int* sums, const int* src, i64 n, int S, int first, int sk) {
    __shared__ int part[INPUT_THREADS];
    const i64 i = (i64)blockIdx.x * INPUT_THREADS + threadIdx.x;
    int v = block_scan_i(input_count(src, i, n, S, first, sk), part);
    if (threadIdx.x == INPUT_THREADS - 1) sums[blockIdx.x] = v;
}

// input_scan_sums: one thread; nb is small (n / 1024 blocks).
extern "C" __global__ void input_scan_sums(int* sums, int nb) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    int acc = 0;
    for (int b = 0; b < nb; b++) {
        int v = sums[b];
        sums[b] = acc;
        acc += v;
    }
    sums[nb] = acc;
}

extern "C" __global__ void input_offsets_scan(int* dst, const int* src, const int* sums, int nb, i64 n, i64 B, int S,
                                              int first, int sk) {
    __shared__ int part[INPUT_THREADS];
    const i64 i = (i64)blockIdx.x * INPUT_THREADS + threadIdx.x;
    const int c = input_count(src, i, n, S, first, sk);
    int base = sums[blockIdx.x] + block_scan_i(c, part) - c;
    if (i < n) {
        const int s0 = src[i * S + first];
        for (int s = 0; s < sk; s++) dst[i * sk + s] = base + src[i * S + first + s] - s0;
    }
    const int total = sums[nb];
    for (i64 j = n * sk + (i64)blockIdx.x * INPUT_THREADS + threadIdx.x; j <= B * sk; j += (i64)gridDim.x * INPUT_THREADS)
        dst[j] = total;
}

// input_keys: one thread per bag b = i·sk + s of the input: its keys
// src[off[i·S+first+s] ..] go to dst[doff[b] ..] as key + add[first+s];
// with size[first+s] > 0 a key outside [0, size) reports ERR_RANGE
// (index: the slot, value: the key).
extern "C" __global__ void input_keys(i64* dst, const int* doff, const void* keys, int wide, const int* off,
                                      const i64* add, const i64* size, i64 n, int S, int first, int sk,
                                      u64* flag, int op) {
    FOR(b, n * sk) {
        const i64 i = b / sk;
        const int gs = first + (int)(b % sk);
        const i64 lo = off[i * S + gs], hi = off[i * S + gs + 1];
        const i64 a = add[gs], sz = size[gs];
        i64 o = doff[b];
        for (i64 j = lo; j < hi; j++, o++) {
            const i64 k = wide ? ((const i64*)keys)[j] : (i64)((const u32*)keys)[j];
            if (sz > 0 && (k < 0 || k >= sz)) report(flag, ERR_RANGE, op, gs, k);
            dst[o] = k + a;
        }
    }
}

// input_onehot: SplitInputs for a one-hot batch, whose bag j holds key j
// (the batch's CSR is neither read nor scanned): one thread per bag
// b = i·sk + s of the input up to B·sk, its key keys[i·S+first+s] widened,
// range-checked as input_keys does and stored with the slot's offset
// added; the input's CSR is b itself, n·sk for the padding bags. The same
// threads copy c0n words of c0s to c0d and c1n of c1s to c1d (the staged
// labels and dense values; 0 words for none).
extern "C" __global__ void input_onehot(i64* dst, int* doff, const void* keys, int wide, const i64* add,
                                        const i64* size, i64 n, i64 B, int S, int first, int sk, u32* c0d,
                                        const u32* c0s, i64 c0n, u32* c1d, const u32* c1s, i64 c1n, u64* flag,
                                        int op) {
    const i64 bags = B * sk + 1;
    const i64 all = bags > c0n ? (bags > c1n ? bags : c1n) : (c0n > c1n ? c0n : c1n);
    FOR(t, all) {
        if (t < c0n) c0d[t] = c0s[t];
        if (t < c1n) c1d[t] = c1s[t];
        if (t >= bags) continue;
        if (t >= n * sk) {
            doff[t] = (int)(n * sk);
            continue;
        }
        const i64 i = t / sk;
        const int gs = first + (int)(t % sk);
        const i64 j = i * S + gs;
        const i64 k = wide ? ((const i64*)keys)[j] : (i64)((const u32*)keys)[j];
        const i64 sz = size[gs];
        if (sz > 0 && (k < 0 || k >= sz)) report(flag, ERR_RANGE, op, gs, k);
        dst[t] = k + add[gs];
        doff[t] = (int)t;
    }
}
