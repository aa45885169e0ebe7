// Optimizers (SPEC §8): DenseUpdate, SparseUpdate (Local, Global,
// LazyGlobal) and LazyFlush. The float32 arithmetic mirrors cpu/optim.go
// operation by operation; the host computes the step's scalars in float64
// (lr, 1/loss_scale, Adam's bias-corrected lrT, 1−β, 1+μ) and passes them
// rounded.
//
// Row kernels use groups of G threads (G = the power of two ≥ V, at most
// 32, so a group never straddles a warp) per embedding row, the G lanes
// striding over the row's V columns (coalesced). Their loops run per warp
// (every lane of a warp takes the same number of iterations, idle lanes
// included) so group-wide shuffles may use the full mask.

// Optimizer kinds (tensor.OptKind).
#define OPT_SGD 0
#define OPT_MOMENTUM 1
#define OPT_NESTEROV 2
#define OPT_ADAGRAD 3
#define OPT_ADAM 4

// The coefficients; omb1 = 1−β1, omb2 = 1−β2 and opmu = 1+μ are rounded
// from float64 on the host (float32(1−0.999) is exact to 2⁻²⁴, 1 −
// float32(0.999) only to 1e-5).
struct OptCoef {
    int kind;
    float lr, mu, opmu, b1, omb1, b2, omb2, eps, is, lrT;
};

// optim_step is coef.step of cpu/optim.go: one update of element i from
// gradient g (not yet unscaled). s1/s2 are touched only by the kinds that
// own them.
static __device__ __forceinline__ void optim_step(const OptCoef& c, float* w, float* s1, float* s2, i64 i, float g) {
    g *= c.is;
    switch (c.kind) {
    case OPT_SGD:
        w[i] -= c.lr * g;
        break;
    case OPT_MOMENTUM: {
        float m = c.mu * s1[i] - c.lr * g;
        s1[i] = m;
        w[i] += m;
        break;
    }
    case OPT_NESTEROV: {
        float a = s1[i];
        float an = c.mu * a - c.lr * g;
        s1[i] = an;
        w[i] += -c.mu * a + c.opmu * an;
        break;
    }
    case OPT_ADAGRAD: {
        float s = s1[i] + g * g;
        s1[i] = s;
        w[i] -= c.lr * g / (sqrtf(s) + c.eps);
        break;
    }
    case OPT_ADAM: {
        float m = c.b1 * s1[i] + c.omb1 * g;
        float v = c.b2 * s2[i] + c.omb2 * g * g;
        s1[i] = m;
        s2[i] = v;
        w[i] -= c.lrT * m / (sqrtf(v) + c.eps);
        break;
    }
    }
}

// OptDyn is a CUDA graph step's slot of the scalars that change every step
// (gpu/graph.go): when the kernel's dyn argument is not null they replace
// lr, lrT and opt_sparse_lazy's step.
struct OptDyn {
    float lr, lrT;
    i64 step;
};

#define OPT_COEF_PARAMS                                                                                            \
    int kind, float lr, float mu, float opmu, float b1, float omb1, float b2, float omb2, float eps, float is, \
        float lrT, const OptDyn *dyn
#define OPT_COEF {kind, dyn ? dyn->lr : lr, mu, opmu, b1, omb1, b2, omb2, eps, is, dyn ? dyn->lrT : lrT}

// optim_skipped reads the overflow guard's flag (guard.cu, gpu/guard.go):
// skip is null when no guard is armed; when the flag is raised (a gradient
// of the step holds Inf or NaN) an update changes no weight, state or last
// step. The flag is the same for every thread of the grid.
static __device__ __forceinline__ bool optim_skipped(const int* skip) { return skip && *skip; }

// opt_dense: DenseUpdate, one thread per element (grid-stride).
extern "C" __global__ void opt_dense(float* w, const float* g, float* s1, float* s2, i64 n, const int* skip,
                                     OPT_COEF_PARAMS) {
    if (optim_skipped(skip)) return;
    const OptCoef c = OPT_COEF;
    FOR(i, n) optim_step(c, w, s1, s2, i, g[i]);
}

// Schedule is tensor.Schedule; optim_lr is Schedule.LR in double.
struct OptSched {
    double base;
    i64 warmup, dstart, dsteps;
    double power, endlr;
};

static __device__ double optim_lr(const OptSched& s, i64 n) {
    if (n <= s.warmup) return s.base * (double)n / (double)s.warmup;
    if (s.dstart == 0) return s.base;
    if (n <= s.dstart) return s.base;
    if (n <= s.dstart + s.dsteps) {
        double f = (double)(s.dstart + s.dsteps - n) / (double)s.dsteps;
        double lr = s.base * pow(f, s.power);
        return lr > s.endlr ? lr : s.endlr;  // Go max (no NaN here)
    }
    return s.endlr;
}

// Lazy (Adam catch-up) scalars: the float64 β's, q = β1/√β2, maxLR =
// max(BaseLR, EndLR), and the float32 ε.
struct OptLazy {
    OptSched s;
    double b1, b2, q, maxLR;
    float eps;
};

#define OPT_LAZY_PARAMS double base, i64 warmup, i64 dstart, i64 dsteps, double power, double endlr, \
    double lb1, double lb2, double q, double maxLR, float leps
#define OPT_LAZY {{base, warmup, dstart, dsteps, power, endlr}, lb1, lb2, q, maxLR, leps}

// optim_catchup is lazyCatchUp of cpu/optim.go for one row, called by every
// lane of the warp (the row maximum is a group shuffle); lanes with
// active = false only join the shuffle. Lane `lane` of the group owns
// columns lane, lane+G, … of the row at w+base (m, v alike), so no other
// thread touches its elements. Each element sums the zero-gradient Adam
// steps from+1…to one by one with the CPU's early stop; the bias
// correction β^j is carried as a running product in double (the CPU calls
// math.Pow per step; they differ by ~j·2⁻⁵³ relative, far below float32).
static __device__ void optim_catchup(const OptLazy& L, float* w, float* m, float* v, i64 base, int V, int G, int lane,
                                     bool active, i64 from, i64 to) {
    const i64 k = to - from;  // the same on the whole group
    const bool run = active && k > 0;
    float wm = 0.0f;
    if (run)
        for (int c = lane; c < V; c += G) wm = fmaxf(wm, fabsf(w[base + c]));
    for (int o = G >> 1; o > 0; o >>= 1) wm = fmaxf(wm, __shfl_xor_sync(0xffffffffu, wm, o));
    if (!run) return;
    const double wmax = (double)wm;
    const double pk1 = pow(L.b1, (double)k), pk2 = pow(L.b2, (double)k);
    const double p1 = pow(L.b1, (double)(from + 1)), p2 = pow(L.b2, (double)(from + 1));
    const float b1 = (float)L.b1, b2 = (float)L.b2;
    for (int c = lane; c < V; c += G) {
        const i64 i = base + c;
        const float m0 = m[i], v0 = v[i];
        if (m0 == 0.0f) continue;
        float mj = m0, vj = v0, wi = w[i];
        double pb1 = p1, pb2 = p2;  // β^j
        for (i64 j = from + 1; j <= to; j++) {
            mj *= b1;
            vj *= b2;
            double lrT = optim_lr(L.s, j) * sqrt(1.0 - pb2) / (1.0 - pb1);
            pb1 *= L.b1;
            pb2 *= L.b2;
            float step = (float)lrT * mj / (sqrtf(vj) + L.eps);
            wi -= step;
            if (L.q < 1.0 && vj > 0.0f) {
                double rest = L.maxLR / (1.0 - L.b1) * fabs((double)mj) / sqrt((double)vj) * L.q / (1.0 - L.q);
                if (rest < wmax * 0x1p-40) break;
            }
        }
        w[i] = wi;
        m[i] = (float)((double)m0 * pk1);
        v[i] = (float)((double)v0 * pk2);
    }
}

// optim_nuniq reads numUniq on the device; a count outside [0, cap] is
// reported once (index −1) and treated as 0.
static __device__ __forceinline__ i64 optim_nuniq(const int* numUniq, i64 cap, u64* flag, u64 op) {
    i64 nu = numUniq[0];
    if (nu < 0 || nu > cap) {
        if (blockIdx.x == 0 && threadIdx.x == 0) report(flag, ERR_RANGE, op, -1, nu);
        return 0;
    }
    return nu;
}

// OptGrid is the geometry of the row kernels: the grid's groups of G lanes
// walk the entries (unique rows or table rows) warp by warp, 32/G entries
// per warp and iteration; a loop `for (i64 wb = g.first; wb < n; wb +=
// g.stride)` takes entry wb + g.sub and ends at the same iteration for the
// whole warp.
struct OptGrid {
    i64 first, stride;
    int sub, lane;
};

static __device__ __forceinline__ OptGrid optim_grid(int G) {
    const i64 gpw = 32 / G;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    OptGrid g;
    g.first = warp * gpw;
    g.stride = nwarps * gpw;
    g.sub = (int)((threadIdx.x & 31) / G);
    g.lane = (int)(threadIdx.x & (G - 1));
    return g;
}

// optim_elem is optim_step on registers (w, the states m = s1 and v = s2,
// gradient g not yet unscaled), the same float operations in the same
// order; optim_step4 applies it to the 4 elements i..i+3 with 16-byte loads
// and stores (i a multiple of 4, the rows 16-byte aligned). Only the kinds
// that own s1/s2 touch them.
struct alignas(16) opt_f4 {
    float v[4];
};

static __device__ __forceinline__ void optim_elem(const OptCoef& c, float& w, float& m, float& v, float g) {
    g *= c.is;
    switch (c.kind) {
    case OPT_SGD:
        w -= c.lr * g;
        break;
    case OPT_MOMENTUM: {
        float mm = c.mu * m - c.lr * g;
        m = mm;
        w += mm;
        break;
    }
    case OPT_NESTEROV: {
        float a = m;
        float an = c.mu * a - c.lr * g;
        m = an;
        w += -c.mu * a + c.opmu * an;
        break;
    }
    case OPT_ADAGRAD: {
        float s = m + g * g;
        m = s;
        w -= c.lr * g / (sqrtf(s) + c.eps);
        break;
    }
    case OPT_ADAM: {
        float mm = c.b1 * m + c.omb1 * g;
        float vv = c.b2 * v + c.omb2 * g * g;
        m = mm;
        v = vv;
        w -= c.lrT * mm / (sqrtf(vv) + c.eps);
        break;
    }
    }
}

static __device__ __forceinline__ void optim_step4(const OptCoef& c, float* w, float* s1, float* s2, i64 i,
                                                   const opt_f4& g) {
    const bool has1 = c.kind != OPT_SGD, has2 = c.kind == OPT_ADAM;
    opt_f4 wv = *(const opt_f4*)(w + i), m = {}, v = {};
    if (has1) m = *(const opt_f4*)(s1 + i);
    if (has2) v = *(const opt_f4*)(s2 + i);
#pragma unroll
    for (int e = 0; e < 4; e++) optim_elem(c, wv.v[e], m.v[e], v.v[e], g.v[e]);
    *(opt_f4*)(w + i) = wv;
    if (has1) *(opt_f4*)(s1 + i) = m;
    if (has2) *(opt_f4*)(s2 + i) = v;
}

// optim_row applies the update to the columns of table row r that lane
// owns, with the gradient row gr (null: the zero gradient). W = 1: columns
// lane, lane+G, … (optim_step); W = 4: the 16-byte groups at 4·lane,
// 4·lane+4G, … (optim_step4: V % 4 == 0, every pointer 16-byte aligned),
// the same float operations on each element.
template <int W>
static __device__ __forceinline__ void optim_row(const OptCoef& c, float* w, float* s1, float* s2, i64 r,
                                                 const float* gr, int V, int G, int lane) {
    if (W == 4) {
        for (int j = 4 * lane; j < V; j += 4 * G) {
            opt_f4 gv = {};
            if (gr) gv = *(const opt_f4*)(gr + j);
            optim_step4(c, w, s1, s2, r * V + j, gv);
        }
    } else {
        for (int j = lane; j < V; j += G) optim_step(c, w, s1, s2, r * V + j, gr ? gr[j] : 0.0f);
    }
}

// sparse_local: Local update, a group per unique entry u < numUniq
// (capacity cap = the grid's extent): row uniqRows[u] += step(uniqGrad[u]).
// A skipped step (sk) only checks the count and the rows, as the scatter
// of a Global one does.
template <int W>
static __device__ __forceinline__ void sparse_local(float* w, float* s1, float* s2, const int* uniqRows,
                                                    const float* ug, const int* numUniq, i64 cap, i64 rows, int V,
                                                    int G, u64* flag, u64 op, bool sk, const OptCoef& c) {
    const i64 nu = optim_nuniq(numUniq, cap, flag, op);
    const OptGrid g = optim_grid(G);
    for (i64 wb = g.first; wb < nu; wb += g.stride) {
        const i64 u = wb + g.sub;
        if (u >= nu) continue;
        const i64 r = uniqRows[u];
        if (r < 0 || r >= rows) {
            if (g.lane == 0) report(flag, ERR_RANGE, op, u, r);
            continue;
        }
        if (sk) continue;
        optim_row<W>(c, w, s1, s2, r, ug + u * V, V, G, g.lane);
    }
}

// sparse_global: Global update of every row, a group per table row; rows
// absent from the batch (pos −1) take the zero-gradient step.
template <int W>
static __device__ __forceinline__ void sparse_global(float* w, float* s1, float* s2, const int* pos, const float* ug,
                                                     i64 rows, int V, int G, const OptCoef& c) {
    const OptGrid g = optim_grid(G);
    for (i64 wb = g.first; wb < rows; wb += g.stride) {
        const i64 r = wb + g.sub;
        if (r >= rows) continue;
        const i64 u = pos[r];
        optim_row<W>(c, w, s1, s2, r, u >= 0 ? ug + u * V : nullptr, V, G, g.lane);
    }
}

// opt_sparse_local, opt_sparse_global: the updates with G lanes per row (a
// power of two ≥ V, at most 32); the _v4 kernels with 16-byte accesses (V
// % 4 == 0, every pointer 16-byte aligned; G ≥ V/4). skip: optim_skipped
// (a skipped Global step returns at once: its scatter checked the rows).
extern "C" __global__ void opt_sparse_local(float* w, float* s1, float* s2, const int* uniqRows, const float* ug,
                                            const int* numUniq, i64 cap, i64 rows, int V, int G, u64* flag, u64 op,
                                            const int* skip, OPT_COEF_PARAMS) {
    sparse_local<1>(w, s1, s2, uniqRows, ug, numUniq, cap, rows, V, G, flag, op, optim_skipped(skip), OPT_COEF);
}
extern "C" __global__ void opt_sparse_local_v4(float* w, float* s1, float* s2, const int* uniqRows, const float* ug,
                                               const int* numUniq, i64 cap, i64 rows, int V, int G, u64* flag, u64 op,
                                               const int* skip, OPT_COEF_PARAMS) {
    sparse_local<4>(w, s1, s2, uniqRows, ug, numUniq, cap, rows, V, G, flag, op, optim_skipped(skip), OPT_COEF);
}
extern "C" __global__ void opt_sparse_global(float* w, float* s1, float* s2, const int* pos, const float* ug, i64 rows,
                                             int V, int G, const int* skip, OPT_COEF_PARAMS) {
    if (optim_skipped(skip)) return;
    sparse_global<1>(w, s1, s2, pos, ug, rows, V, G, OPT_COEF);
}
extern "C" __global__ void opt_sparse_global_v4(float* w, float* s1, float* s2, const int* pos, const float* ug,
                                                i64 rows, int V, int G, const int* skip, OPT_COEF_PARAMS) {
    if (optim_skipped(skip)) return;
    sparse_global<4>(w, s1, s2, pos, ug, rows, V, G, OPT_COEF);
}

// opt_sparse_scatter: pos[uniqRows[u]] = u for u < numUniq, one thread per
// entry (pos is pre-filled with −1); rows outside the table are reported.
extern "C" __global__ void opt_sparse_scatter(int* pos, const int* uniqRows, const int* numUniq, i64 cap, i64 rows,
                                              u64* flag, u64 op) {
    const i64 nu = optim_nuniq(numUniq, cap, flag, op);
    FOR(u, nu) {
        const i64 r = uniqRows[u];
        if (r < 0 || r >= rows)
            report(flag, ERR_RANGE, op, u, r);
        else
            pos[r] = (int)u;
    }
}

// opt_sparse_lazy: LazyGlobal Adam, a group per unique entry: the row
// catches up its skipped steps lastStep[r]+1 … step−1, then takes step
// `step` with its gradient; lane 0 alone reads and writes lastStep[r]. A
// step the guard skips (optim_skipped) only checks the count and the rows:
// lastStep stays, so the next step's catch-up takes the skipped step as
// one without a gradient for these rows.
extern "C" __global__ void opt_sparse_lazy(float* w, float* s1, float* s2, int* lastStep, const int* uniqRows,
                                           const float* ug, const int* numUniq, i64 cap, i64 rows, int V, int G,
                                           i64 step, u64* flag, u64 op, const int* skip, OPT_COEF_PARAMS,
                                           OPT_LAZY_PARAMS) {
    if (dyn) step = dyn->step;
    const bool sk = optim_skipped(skip);
    const OptCoef c = OPT_COEF;
    const OptLazy L = OPT_LAZY;
    const i64 nu = optim_nuniq(numUniq, cap, flag, op);
    const OptGrid g = optim_grid(G);
    const int lane = g.lane;
    for (i64 wb = g.first; wb < nu; wb += g.stride) {
        const i64 u = wb + g.sub;
        bool active = u < nu;
        i64 r = active ? (i64)uniqRows[u] : 0;
        if (active && (r < 0 || r >= rows)) {
            if (lane == 0) report(flag, ERR_RANGE, op, u, r);
            active = false;
        }
        if (sk) continue;  // the same on the whole grid: no shuffle is left half-joined
        int from = (active && lane == 0) ? lastStep[r] : 0;
        from = __shfl_sync(0xffffffffu, from, 0, G);
        optim_catchup(L, w, s1, s2, r * V, V, G, lane, active, (i64)from, step - 1);
        if (!active) continue;
        if (lane == 0) lastStep[r] = (int)step;
        for (int j = lane; j < V; j += G) optim_step(c, w, s1, s2, r * V + j, ug[u * V + j]);
    }
}

// opt_lazy_flush: LazyFlush, a group per table row catching up to `to`;
// nothing when the guard skips the step (optim_skipped).
extern "C" __global__ void opt_lazy_flush(float* w, float* m, float* v, int* lastStep, i64 rows, int V, int G, i64 to,
                                          const int* skip, OPT_LAZY_PARAMS) {
    if (optim_skipped(skip)) return;
    const OptLazy L = OPT_LAZY;
    const OptGrid g = optim_grid(G);
    const int lane = g.lane;
    for (i64 wb = g.first; wb < rows; wb += g.stride) {
        const i64 r = wb + g.sub;
        const bool active = r < rows;
        int from = (active && lane == 0) ? lastStep[r] : 0;
        from = __shfl_sync(0xffffffffu, from, 0, G);
        optim_catchup(L, w, m, v, r * V, V, G, lane, active, (i64)from, to);
        if (active && lane == 0) lastStep[r] = (int)to;
    }
}
