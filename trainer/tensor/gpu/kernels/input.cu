// ---- SplitInputs ----
//
// A batch's sparse part arrives as the reader decoded it: keys (u32 or
// i64) of all S slots and one CSR over them (bag i·S+s). Each network
// input k takes slots [first, first+sk): input_offsets builds its CSR
// (one block scanning the per-sample key counts), input_keys copies its
// keys, widened to i64 with the slot's offset added (one thread per bag).

#define INPUT_THREADS 1024

// input_offsets: one block of INPUT_THREADS threads. Thread t takes the
// samples [t·chunk, (t+1)·chunk) of n; their key counts in the input are
// summed, scanned across the block, and each thread writes its samples'
// offsets from its exclusive prefix. Bags of samples n..B-1 are empty.
extern "C" __global__ void input_offsets(int* dst, const int* src, i64 n, i64 B, int S, int first, int sk) {
    __shared__ int part[INPUT_THREADS];
    const int t = threadIdx.x;
    const i64 chunk = (n + INPUT_THREADS - 1) / INPUT_THREADS;
    const i64 lo = t * chunk, hi = lo + chunk < n ? lo + chunk : n;
    int sum = 0;
    for (i64 i = lo; i < hi; i++) sum += src[i * S + first + sk] - src[i * S + first];
    part[t] = sum;
    __syncthreads();
    for (int d = 1; d < INPUT_THREADS; d <<= 1) {  // inclusive Hillis-Steele scan
        int v = t >= d ? part[t - d] : 0;
        __syncthreads();
        part[t] += v;
        __syncthreads();
    }
    int base = part[t] - sum;
    for (i64 i = lo; i < hi; i++) {
        const int s0 = src[i * S + first];
        for (int s = 0; s < sk; s++) dst[i * sk + s] = base + src[i * S + first + s] - s0;
        base += src[i * S + first + sk] - s0;
    }
    const int total = part[INPUT_THREADS - 1];
    for (i64 j = n * sk + t; j <= B * sk; j += INPUT_THREADS) dst[j] = total;
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
