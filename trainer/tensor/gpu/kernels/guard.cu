// The overflow guard of fp16 loss scaling (gpu/guard.go,
// tensor.OverflowGuard), on the device with no host synchronisation, so a
// step that uses it can be a CUDA graph. The guard's words are an int flag
// (the step's) and a u64 counter (skipped steps since the backend was
// made). GuardBegin clears the flag (a memset); guard_check raises it when
// a tensor holds Inf or NaN; the update kernels of optim.cu take the flag
// as `skip` and change nothing when it is raised; guard_end adds the flag
// to the counter.

// A 32-bit word holds one float32 or two float16 / bfloat16 elements; an
// element is Inf or NaN when its exponent bits are all ones. GuardMask is
// those bits for the low and the high element of dtype code dt (float32:
// the same mask twice); a single 16-bit element sits in the low half with
// the high half zero, which the high mask never matches.
struct GuardMask {
    u32 lo, hi;
};

__device__ __forceinline__ GuardMask guard_mask(int dt) {
    if (dt == DT_F16) return {0x7c00u, 0x7c000000u};
    if (dt == DT_BF16) return {0x7f80u, 0x7f800000u};
    return {0x7f800000u, 0x7f800000u};
}

__device__ __forceinline__ bool guard_bad(u32 w, GuardMask m) { return ((w & m.lo) == m.lo) | ((w & m.hi) == m.hi); }

struct alignas(16) guard_u4 {
    u32 w[4];
};

// guard_check raises *flag when one of the n elements of x (dtype code dt:
// DT_F32, DT_F16, DT_BF16) is Inf or NaN. A block that finds the flag
// raised returns at once (an earlier check of the step found one). The
// elements before x's first 16-byte boundary and after its last are read
// one by one, the rest 16 bytes at a time (grid-stride loops; any grid).
extern "C" __global__ void guard_check(const void* x, int dt, i64 n, int* flag) {
    if (*(volatile int*)flag) return;
    const i64 es = dt == DT_F32 ? 4 : 2;
    const u64 addr = (u64)x;
    i64 head = (i64)((16u - (addr & 15u)) & 15u) / es;
    if (head > n) head = n;
    const i64 nv = (n - head) * es / 16;  // 16-byte groups
    const i64 tail = head + nv * (16 / es);  // first element after them
    const guard_u4* v = (const guard_u4*)((const unsigned char*)x + head * es);
    const GuardMask m = guard_mask(dt);
    bool bad = false;
    FOR(i, nv) {
        const guard_u4 q = v[i];
        bad |= guard_bad(q.w[0], m) | guard_bad(q.w[1], m) | guard_bad(q.w[2], m) | guard_bad(q.w[3], m);
    }
    FOR(i, head + (n - tail)) {
        const i64 e = i < head ? i : tail + (i - head);
        const u32 w = es == 4 ? ((const u32*)x)[e] : (u32)((const h16*)x)[e];
        bad |= guard_bad(w, m);
    }
    if (bad) *flag = 1;
}

// guard_end adds the step's flag (0 or 1) to the counter; one thread.
extern "C" __global__ void guard_end(const int* flag, u64* count) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && *flag) *count += 1;
}
