// Sequence and attention kernels (cpu/seq.go is the reference): head
// permutation, masked softmax, layer norm, sequence mask, GRU cell.
// Row reductions run one warp per row and accumulate in double.

// seq_warp_all_d: the warp's sum of v, in every lane.
static __device__ __forceinline__ double seq_warp_all_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// seq_permute0213: dst[a,c,b,d] = src[a,b,c,d] for src [d0,d1,d2,d3].
extern "C" __global__ void seq_permute0213(float* __restrict__ dst, const float* __restrict__ src,
                                           int d1, int d2, int d3, i64 total) {
    FOR(i, total) {
        i64 d = i % d3, t = i / d3;
        i64 c = t % d2;
        t /= d2;
        i64 b = t % d1, a = t / d1;
        dst[((a * d2 + c) * d1 + b) * d3 + d] = src[i];
    }
}

// seq_masked_softmax: rows of n over [B, heads, m, n]; the mask row is
// mask[b, i, :] for every head. y = e/(Σe + 1e-6), e = exp(v − max), v =
// scale·x − 10000·(1 − mask).
extern "C" __global__ void seq_masked_softmax(float* __restrict__ y, const float* __restrict__ x,
                                              const float* __restrict__ mask, i64 rows, int heads,
                                              int m, int n, float scale) {
    const int lane = threadIdx.x & 31;
    const i64 wpb = blockDim.x >> 5;
    for (i64 r = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (i64)gridDim.x * wpb) {
        const i64 s = r / ((i64)heads * m);
        const int i = (int)(r % m);
        const float* xr = x + r * n;
        const float* mr = mask + (s * m + i) * n;
        float* yr = y + r * n;
        // v in double: scale·x − 10000 in float would keep only ~1e-3 of a
        // fully masked row's scores (the CPU reference computes in double).
        double mx = -1e300;
        for (int c = lane; c < n; c += 32)
            mx = fmax(mx, (double)scale * xr[c] - 10000.0 * (1.0 - (double)mr[c]));
        for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        double sum = 0;
        for (int c = lane; c < n; c += 32)
            sum += (double)expf((float)((double)scale * xr[c] - 10000.0 * (1.0 - (double)mr[c]) - mx));
        sum = seq_warp_all_d(sum);
        const double inv = 1.0 / (sum + 1e-6);
        for (int c = lane; c < n; c += 32)
            yr[c] = (float)((double)expf((float)((double)scale * xr[c] - 10000.0 * (1.0 - (double)mr[c]) - mx)) * inv);
    }
}

// seq_layer_norm: one warp per row of n; mean and biased variance in double.
extern "C" __global__ void seq_layer_norm(float* __restrict__ y, const float* __restrict__ x,
                                          const float* __restrict__ gamma, const float* __restrict__ beta,
                                          float* __restrict__ mean, float* __restrict__ rstd, i64 rows,
                                          int n, float eps) {
    const int lane = threadIdx.x & 31;
    const i64 wpb = blockDim.x >> 5;
    for (i64 r = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (i64)gridDim.x * wpb) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        double s = 0;
        for (int c = lane; c < n; c += 32) s += xr[c];
        const double mu = seq_warp_all_d(s) / n;
        double q = 0;
        for (int c = lane; c < n; c += 32) q += ((double)xr[c] - mu) * ((double)xr[c] - mu);
        const double inv = 1.0 / sqrt(seq_warp_all_d(q) / n + (double)eps);
        if (lane == 0) {
            mean[r] = (float)mu;
            rstd[r] = (float)inv;
        }
        for (int c = lane; c < n; c += 32) yr[c] = (float)(((double)xr[c] - mu) * inv * gamma[c] + beta[c]);
    }
}

// seq_layer_norm_dx: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ.
extern "C" __global__ void seq_layer_norm_dx(float* __restrict__ dx, const float* __restrict__ dy,
                                             const float* __restrict__ x, const float* __restrict__ gamma,
                                             const float* __restrict__ mean, const float* __restrict__ rstd,
                                             i64 rows, int n) {
    const int lane = threadIdx.x & 31;
    const i64 wpb = blockDim.x >> 5;
    for (i64 r = (i64)blockIdx.x * wpb + (threadIdx.x >> 5); r < rows; r += (i64)gridDim.x * wpb) {
        const float* xr = x + r * n;
        const float* dr = dy + r * n;
        const double mu = mean[r], inv = rstd[r];
        double s1 = 0, s2 = 0;
        for (int c = lane; c < n; c += 32) {
            double g = (double)dr[c] * gamma[c];
            s1 += g;
            s2 += g * ((double)xr[c] - mu) * inv;
        }
        s1 = seq_warp_all_d(s1) / n;
        s2 = seq_warp_all_d(s2) / n;
        for (int c = lane; c < n; c += 32) {
            double g = (double)dr[c] * gamma[c];
            double xh = ((double)xr[c] - mu) * inv;
            dx[r * n + c] = (float)(inv * (g - s1 - xh * s2));
        }
    }
}

// seq_layer_norm_dparam: one block per column j (grid-stride): dgamma[j] =
// Σ_r dy·x̂, dbeta[j] = Σ_r dy, the block's threads striding over rows and
// reduced in double in a fixed order (deterministic). blockDim.x is a
// multiple of 32.
extern "C" __global__ void seq_layer_norm_dparam(float* __restrict__ dgamma, float* __restrict__ dbeta,
                                                 const float* __restrict__ dy, const float* __restrict__ x,
                                                 const float* __restrict__ mean, const float* __restrict__ rstd,
                                                 i64 rows, int n) {
    __shared__ double sh[32];
    for (int j = blockIdx.x; j < n; j += gridDim.x) {
        double sg = 0, sb = 0;
        for (i64 r = threadIdx.x; r < rows; r += blockDim.x) {
            double d = dy[r * n + j];
            sg += d * ((double)x[r * n + j] - (double)mean[r]) * (double)rstd[r];
            sb += d;
        }
        sg = block_sum_d(sg, sh);
        if (threadIdx.x == 0) dgamma[j] = (float)sg;
        sb = block_sum_d(sb, sh);
        if (threadIdx.x == 0) dbeta[j] = (float)sb;
    }
}

// seq_sequence_mask: out[b,i,j] = i < lenFrom[b] && j < lenTo[b].
extern "C" __global__ void seq_sequence_mask(float* __restrict__ out, const float* __restrict__ lenFrom,
                                             const float* __restrict__ lenTo, int from, int to, i64 total) {
    FOR(e, total) {
        i64 j = e % to, t = e / to;
        i64 i = t % from, b = t / from;
        out[e] = ((float)i < lenFrom[b] && (float)j < lenTo[b]) ? 1.f : 0.f;
    }
}

// seq_gru_cell: one cuDNN GRU step over B·H elements (gates r, z, n).
extern "C" __global__ void seq_gru_cell(float* __restrict__ h, float* __restrict__ save,
                                        const float* __restrict__ xw, const float* __restrict__ hw,
                                        const float* __restrict__ hPrev, int H, i64 total) {
    FOR(e, total) {
        i64 s = e / H, j = e % H;
        const float* x = xw + s * 3 * H;
        const float* w = hw + s * 3 * H;
        float* sv = save + s * 4 * H;
        float r = 1.f / (1.f + expf(-(x[j] + w[j])));
        float z = 1.f / (1.f + expf(-(x[H + j] + w[H + j])));
        float hn = w[2 * H + j];
        float n = tanhf(x[2 * H + j] + r * hn);
        float p = hPrev ? hPrev[e] : 0.f;
        h[e] = (1.f - z) * n + z * p;
        sv[j] = r;
        sv[H + j] = z;
        sv[2 * H + j] = n;
        sv[3 * H + j] = hn;
    }
}

// seq_gru_cell_grad: the pre-activation gradients of one step.
extern "C" __global__ void seq_gru_cell_grad(float* __restrict__ dxw, float* __restrict__ dhw,
                                             float* __restrict__ dhPrev, const float* __restrict__ dh,
                                             const float* __restrict__ save, const float* __restrict__ hPrev,
                                             int H, i64 total) {
    FOR(e, total) {
        i64 s = e / H, j = e % H;
        const float* sv = save + s * 4 * H;
        float r = sv[j], z = sv[H + j], n = sv[2 * H + j], hn = sv[3 * H + j];
        float p = hPrev ? hPrev[e] : 0.f;
        float g = dh[e];
        float dan = g * (1.f - z) * (1.f - n * n);
        float daz = g * (p - n) * z * (1.f - z);
        float dar = dan * hn * r * (1.f - r);
        float* dx = dxw + s * 3 * H;
        float* dw = dhw + s * 3 * H;
        dx[j] = dar;
        dx[H + j] = daz;
        dx[2 * H + j] = dan;
        dw[j] = dar;
        dw[H + j] = daz;
        dw[2 * H + j] = dan * r;
        if (dhPrev) dhPrev[e] = g * z;
    }
}
