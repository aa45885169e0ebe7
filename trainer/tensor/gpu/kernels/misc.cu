// The tensor.MiscOps kernels (gpu/misc.go): HugeCTR's PReLU_Dice and the
// binary16 rounding of its Cast layer. Shapes and arithmetic mirror
// cpu/misc.go; names carry the misc_ prefix (one NVRTC module).

// misc_dice_stats: per column c of x [m, n], mean[c] = E[x] and var[c] =
// max(0, E[x²] − E[x]²) over the m rows, in double. Block (32, 32): 32
// columns, the 32 row lanes stride the rows and meet in shared memory, so
// the sums are summed in one fixed order (deterministic).
extern "C" __global__ void misc_dice_stats(float* __restrict__ mean, float* __restrict__ var,
                                           const float* __restrict__ x, i64 m, int n) {
    __shared__ double s1[32][33];
    __shared__ double s2[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (i64 c0 = (i64)blockIdx.x * 32; c0 < n; c0 += (i64)gridDim.x * 32) {
        const i64 c = c0 + tx;
        double a = 0, b = 0;
        if (c < n) {
            for (i64 r = ty; r < m; r += 32) {
                double v = (double)x[r * n + c];
                a += v;
                b += v * v;
            }
        }
        s1[ty][tx] = a;
        s2[ty][tx] = b;
        __syncthreads();
        if (ty == 0 && c < n) {
            double sa = 0, sb = 0;
            for (int k = 0; k < 32; k++) {
                sa += s1[k][tx];
                sb += s2[k][tx];
            }
            double e = sa / (double)m;
            mean[c] = (float)e;
            var[c] = (float)fmax(0.0, sb / (double)m - e * e);
        }
        __syncthreads();
    }
}

// misc_dice_fwd: y = p·x + (1−p)·alpha·x, p = 1/(1 + exp((mean − x)/√(var + eps))).
extern "C" __global__ void misc_dice_fwd(float* y, const float* x, const float* __restrict__ mean,
                                         const float* __restrict__ var, i64 total, int n,
                                         double alpha, double eps) {
    FOR(i, total) {
        const int c = (int)(i % n);
        double v = (double)x[i];
        double p = 1.0 / (1.0 + exp(((double)mean[c] - v) / sqrt((double)var[c] + eps)));
        y[i] = (float)(p * v + (1.0 - p) * alpha * v);
    }
}

// misc_dice_bwd: HugeCTR's bprop, dx = dy·((p_s·x + p)(1−alpha) + alpha)
// with inv = 1/m (cpu.DiceDeriv).
extern "C" __global__ void misc_dice_bwd(float* dx, const float* dy, const float* __restrict__ x,
                                         const float* __restrict__ mean, const float* __restrict__ var,
                                         i64 total, int n, double inv, double alpha, double eps) {
    FOR(i, total) {
        const int c = (int)(i % n);
        double s = (double)x[i], e = (double)mean[c], v = (double)var[c] + eps;
        double r1 = 0, r3 = 0;
        if (v >= 1e-8) {
            r1 = 1.0 / sqrt(v);
            r3 = r1 * r1 * r1;
        }
        double ys_s = (inv - 1.0) * r1 - inv * (e - s) * r3 * (s - e);
        double p = 1.0 / (1.0 + exp((e - s) * r1));
        double ps_s = -ys_s * p * (1.0 - p);
        dx[i] = (float)(((ps_s * s + p) * (1.0 - alpha) + alpha) * (double)dy[i]);
    }
}

// misc_round_half32 is tensor.RoundHalf32: round to the nearest binary16
// value, ties to even, in integer steps.
static __device__ __forceinline__ float misc_round_half32(float f) {
    u32 x = __float_as_uint(f);
    u32 sign = x & 0x80000000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return f;                          // NaN
    if (a >= 0x477ff000u) return __uint_as_float(sign | 0x7f800000u); // ±Inf
    if (a < 0x38800000u) {                                  // a multiple of 2^-24
        u32 e = a >> 23;
        if (e == 0) return __uint_as_float(sign);
        u32 shift = 126u - e;
        if (shift > 25u) return __uint_as_float(sign);
        u32 m = (a & 0x7fffffu) | 0x800000u;
        u32 q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        float v = (float)q * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    u32 q = a >> 13, rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return __uint_as_float(sign | (q << 13));
}

extern "C" __global__ void misc_round_half(float* dst, const float* src, i64 n) {
    FOR(i, n) dst[i] = misc_round_half32(src[i]);
}
