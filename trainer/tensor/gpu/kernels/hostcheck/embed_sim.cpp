// embed_sim.cpp runs EmbeddingBagGrad's segment stage (embed.cu:
// emb_grad_heads, emb_grad_rle, emb_grad_sum, emb_grad_chunk,
// emb_grad_fin, emb_grad_finb), the forward (emb_bag_fwd), the bag-group kernels
// (emb_grad_prep, emb_slot_rows) and the float4 sparse
// update (optim.cu: opt_sparse_local_v4) on the host, one std::thread per
// thread of a block with barriers for __syncthreads and the warp
// collectives, and checks them against a float64 reference: the team
// layouts, the window pieces of hot rows and their list appends, the block
// reduction of the hottest rows and the grid-strides,
// for several shapes and grids; the float16/bfloat16 variants (a half
// pooled output equal to the float32 one rounded, a half dOut giving the
// float32 kernels' sums of the same values, bit for bit, with the host
// models of the conversions). The sort and scans come from the host here
// (sort.cu has its own GPU tests). check_kernels.sh builds it with embed.cu
// and optim.cu included whole. No CUDA needed; results only, no timing.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__ static
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
using std::max;
using std::min;
struct D3 { unsigned x, y, z; };
thread_local D3 threadIdx;
D3 blockIdx, blockDim, gridDim;

// Block-level state: barriers and the warp exchange slots.
struct BlockSim {
    std::unique_ptr<std::barrier<>> bar;
    std::vector<std::unique_ptr<std::barrier<>>> wbar;
    std::vector<u64> slot;  // one per thread
};
BlockSim* blk;
std::mutex amu;

void __syncthreads() { blk->bar->arrive_and_wait(); }
static void wsync() { blk->wbar[threadIdx.x / 32]->arrive_and_wait(); }
void __syncwarp(unsigned = 0xffffffffu) { wsync(); }
template <class T> static T xchg(T v, int src) {
    u64 b = 0;
    std::memcpy(&b, &v, sizeof(T));
    blk->slot[threadIdx.x] = b;
    wsync();
    u64 r = blk->slot[(threadIdx.x & ~31u) + (unsigned)src];
    wsync();
    T o;
    std::memcpy(&o, &r, sizeof(T));
    return o;
}
template <class T> T __shfl_sync(unsigned, T v, int src, int width = 32) {
    const int lane = threadIdx.x & 31;
    return xchg(v, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <class T> T __shfl_down_sync(unsigned, T v, int o, int width = 32) {
    const int lane = threadIdx.x & 31, seg = lane & ~(width - 1);
    const int s = lane + o < seg + width ? lane + o : lane;
    return xchg(v, s);
}
template <class T> T __shfl_up_sync(unsigned, T v, int o, int width = 32) {
    const int lane = threadIdx.x & 31, seg = lane & ~(width - 1);
    const int s = lane - o >= seg ? lane - o : lane;
    return xchg(v, s);
}
template <class T> T __shfl_xor_sync(unsigned, T v, int o, int = 32) { return xchg(v, (threadIdx.x & 31) ^ o); }
unsigned __ballot_sync(unsigned, int p) {
    blk->slot[threadIdx.x] = p ? 1 : 0;
    wsync();
    unsigned m = 0;
    for (int l = 0; l < 32; l++)
        if (blk->slot[(threadIdx.x & ~31u) + l]) m |= 1u << l;
    wsync();
    return m;
}
template <class T> unsigned __match_any_sync(unsigned, T) { std::abort(); }
int __popc(unsigned x) { return __builtin_popcount(x); }
int __ffs(int x) { return __builtin_ffs(x); }
unsigned atomicAdd(unsigned* p, unsigned v) { std::lock_guard<std::mutex> g(amu); unsigned o = *p; *p += v; return o; }
int atomicMin(int* p, int v) { std::lock_guard<std::mutex> g(amu); int o = *p; *p = std::min(o, v); return o; }
unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) {
    std::lock_guard<std::mutex> g(amu);
    unsigned long long o = *p;
    if (o == c) *p = v;
    return o;
}
unsigned long long atomicOr(unsigned long long* p, unsigned long long v) {
    std::lock_guard<std::mutex> g(amu); unsigned long long o = *p; *p |= v; return o;
}
unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
// Declared only: built-ins the sim never runs but embed.cu and optim.cu may
// use in other kernels (check_kernels.sh links with unresolved symbols
// ignored, so a kernel added there does not break this build).
template <class T> T __ldg(const T*);
float atomicAdd(float*, float);
int atomicAdd(int*, int);
unsigned long long atomicAdd(unsigned long long*, unsigned long long);
int atomicExch(int*, int);
int atomicMax(int*, int);
void __threadfence();
int __float_as_int(float);
float __int_as_float(int);
float __uint_as_float(unsigned);
float __expf(float);
float __logf(float);
float __fdividef(float, float);
float rsqrtf(float);
#include "../common.cuh"
#include "../embed.cu"
#include "../optim.cu"

template <class K> void launch(int grid, int block, K k) {
    gridDim = {(unsigned)grid, 1, 1};
    blockDim = {(unsigned)block, 1, 1};
    for (int b = 0; b < grid; b++) {
        blockIdx = {(unsigned)b, 0, 0};
        BlockSim s;
        s.bar.reset(new std::barrier<>(block));
        for (int w = 0; w < block / 32; w++) s.wbar.emplace_back(new std::barrier<>(32));
        s.slot.assign(block, 0);
        blk = &s;
        std::vector<std::thread> ts;
        for (int t = 0; t < block; t++) ts.emplace_back([&, t] { threadIdx = {(unsigned)t, 0, 0}; k(); });
        for (auto& t : ts) t.join();
    }
}

static void exscan(std::vector<u32>& a, size_t n) {  // a[0..n) → exclusive, a[n] = total
    u32 s = 0;
    for (size_t i = 0; i < n; i++) { u32 x = a[i]; a[i] = s; s += x; }
    a[n] = s;
}

static int team(int v, int w) {
    int need = (v + w - 1) / w, ts = 1;
    while (ts < need && ts < 32) ts <<= 1;
    return ts;
}

// host_round is a float rounded to dtype code dt (the value a half stores).
static float host_round(int dt, float x) {
    if (dt == DT_F16) return host_h2f(host_f2h(x));
    if (dt == DT_BF16) return b2f(host_f2b(x));
    return x;
}

// One case: bags of rows drawn with a hot row taking fraction hot of the
// occurrences; grid blocks of the team kernels. dt: the dtype code of
// dOut (its values rounded to dt; half storage read by the _f16/_bf16
// kernels unless asFloat, which passes the rounded values as float32 to the
// float32 kernels).
static int grad_case(int bags, int maxPer, int nrows, int V, double hot, int mean, int grid, std::mt19937& rng,
                     std::vector<float>* out = nullptr, int dt = DT_F32, bool asFloat = false) {
    std::vector<int> off(bags + 1), rows;
    std::uniform_real_distribution<double> U(0, 1);
    for (int b = 0; b < bags; b++) {
        int k = rng() % (maxPer + 1);
        for (int j = 0; j < k; j++) {
            double u = U(rng);
            if (u < hot) rows.push_back(nrows / 3);
            else if (u < hot + 0.05) rows.push_back(-1);
            else { double x = U(rng); rows.push_back((int)(x * x * x * nrows)); }
        }
        off[b + 1] = (int)rows.size();
    }
    const i64 n = (i64)rows.size();
    if (n == 0) return 0;
    std::vector<float> dOut((size_t)bags * V);
    for (auto& x : dOut) x = host_round(dt, (float)(U(rng) * 2 - 1));
    std::vector<half_t> dH(dOut.size());
    std::vector<bf16_t> dB(dOut.size());
    for (size_t i = 0; i < dOut.size(); i++) { dH[i].x = host_f2h(dOut[i]); dB[i].x = host_f2b(dOut[i]); }
    const int kt = asFloat ? DT_F32 : dt;  // the kernels' dOut type
    // The sorted pairs (key = row+1, bag), stable.
    std::vector<std::pair<u32, u32>> pr;
    for (int b = 0; b < bags; b++)
        for (int j = off[b]; j < off[b + 1]; j++) pr.push_back({rows[j] >= 0 ? (u32)rows[j] + 1 : 0u, (u32)b});
    {  // emb_grad_prep writes the pairs in position order
        std::vector<u32> pk(n, 0xdeadbeef), pv(n, 0xdeadbeef);
        launch(grid, 256, [&] { emb_grad_prep(rows.data(), off.data(), bags, n, pk.data(), pv.data()); });
        for (i64 j = 0; j < n; j++)
            if (pk[j] != pr[j].first || pv[j] != pr[j].second) {
                printf("grad prep [%lld]: (%u, %u) want (%u, %u)\n", j, pk[j], pv[j], pr[j].first, pr[j].second);
                return 1;
            }
    }
    std::stable_sort(pr.begin(), pr.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::vector<u32> keys(n), bag(n), hpos(n + 1), seg(n + 1), list0(n / 65 + 1), list1(n / 1920 + 1), nl{77, 77};
    for (i64 i = 0; i < n; i++) { keys[i] = pr[i].first; bag[i] = pr[i].second; }
    std::vector<int> ur(n, -7), nu(1, -3);
    launch(grid, 256, [&] { emb_grad_heads(keys.data(), hpos.data(), n); });
    exscan(hpos, n);
    launch(grid, 256, [&] { emb_grad_rle(keys.data(), hpos.data(), ur.data(), seg.data(), nu.data(), nl.data(), n); });
    const int w = V % 4 == 0 ? 4 : 1, ts = team(V, w);
    std::vector<float> ug((size_t)n * V, NAN);
    const i64 pieces = 2 * ((n + 63) / 64);
    std::vector<float> partial((size_t)pieces * V, NAN);
    auto teams = [&](auto k1, auto k4) { if (w == 4) launch(grid, 256, k4); else launch(grid, 256, k1); };
    // The dOut readers per type: (kernel, dOut) pairs.
#define EMB_SUM(K, D) [&] { K(ug.data(), D, bag.data(), off.data(), seg.data(), nu.data(), V, mean, ts, 64); }
#define EMB_CHUNK(K, D)                                                                                         \
    [&] {                                                                                                         \
        K(partial.data(), D, bag.data(), off.data(), keys.data(), hpos.data(), seg.data(), list0.data(),          \
          list1.data(), nl.data(), n, V, mean, ts, 32);                                                           \
    }
    if (kt == DT_F16) {
        teams(EMB_SUM(emb_grad_sum_f16_v1, dH.data()), EMB_SUM(emb_grad_sum_f16_v4, dH.data()));
        teams(EMB_CHUNK(emb_grad_chunk_f16_v1, dH.data()), EMB_CHUNK(emb_grad_chunk_f16_v4, dH.data()));
    } else if (kt == DT_BF16) {
        teams(EMB_SUM(emb_grad_sum_bf16_v1, dB.data()), EMB_SUM(emb_grad_sum_bf16_v4, dB.data()));
        teams(EMB_CHUNK(emb_grad_chunk_bf16_v1, dB.data()), EMB_CHUNK(emb_grad_chunk_bf16_v4, dB.data()));
    } else {
        teams(EMB_SUM(emb_grad_sum_v1, dOut.data()), EMB_SUM(emb_grad_sum_v4, dOut.data()));
        teams(EMB_CHUNK(emb_grad_chunk_v1, dOut.data()), EMB_CHUNK(emb_grad_chunk_v4, dOut.data()));
    }
#undef EMB_SUM
#undef EMB_CHUNK
    teams([&] { emb_grad_fin_v1(ug.data(), partial.data(), seg.data(), list0.data(), nl.data(), V, ts); },
          [&] { emb_grad_fin_v4(ug.data(), partial.data(), seg.data(), list0.data(), nl.data(), V, ts); });
    if (w == 4) launch(std::max(1, grid / 2), 1024, [&] { emb_grad_finb_v4(ug.data(), partial.data(), seg.data(), list1.data(), nl.data(), V, ts); });
    else launch(std::max(1, grid / 2), 1024, [&] { emb_grad_finb_v1(ug.data(), partial.data(), seg.data(), list1.data(), nl.data(), V, ts); });
    // Reference.
    std::vector<int> rr;
    std::vector<std::vector<double>> rg;
    int nhot = 0;
    for (i64 i = 0; i < n;) {
        i64 j = i;
        while (j < n && pr[j].first == pr[i].first) j++;
        if (pr[i].first != 0) {
            rr.push_back((int)pr[i].first - 1);
            std::vector<double> g(V, 0);
            for (i64 k = i; k < j; k++) {
                const int b = pr[k].second, nb = off[b + 1] - off[b];
                const double sc = (mean && nb > 1) ? 1.0 / nb : 1.0;
                for (int c = 0; c < V; c++) g[c] += dOut[(size_t)b * V + c] * sc;
            }
            rg.push_back(g);
            if (((j - 1) >> 6) - (i >> 6) + 1 > 32 && j - i > 64) nhot++;
        }
        i = j;
    }
    int bad = 0;
    if (nu[0] != (int)rr.size()) { printf("numUniq %d want %zu\n", nu[0], rr.size()); return 1; }
    if ((int)nl[1] != nhot) { printf("hot list %u want %d\n", nl[1], nhot); bad++; }
    double num = 0, den = 0;
    for (size_t u = 0; u < rr.size(); u++) {
        if (ur[u] != rr[u]) { printf("uniqRows[%zu] %d want %d\n", u, ur[u], rr[u]); return 1; }
        for (int c = 0; c < V; c++) {
            double d = ug[u * V + c] - rg[u][c];
            if (!(d == d)) d = 1e30;
            num += d * d;
            den += rg[u][c] * rg[u][c];
        }
    }
    double e = std::sqrt(num / std::max(den, 1e-300));
    printf("grad bags %d nnz %lld V %d hot %.2f mean %d grid %d dOut dt %d%s: uniq %zu, lists %u+%u, rel err %.2g\n", bags,
           n, V, hot, mean, grid, dt, asFloat ? " as float32" : "", rr.size(), nl[0], nl[1], e);
    if (!(e < 1e-5)) bad++;
    if (out != nullptr) *out = ug;
    return bad;
}

// emb_bag_fwd over 4-bag groups: bit-identical to summing each bag's rows
// in order (float), for empty, one-hot and long bags, dropped rows, both
// combiners, scalar and float4 lanes and column passes.
static int fwd_cases(std::mt19937& rng) {
    int bad = 0;
    std::uniform_real_distribution<float> U(-1, 1);
    for (int V : {1, 7, 16, 128, 256})
        for (int maxPer : {1, 5, 70})
            for (int grid : {1, 3})
                for (int mean = 0; mean < 2; mean++) {
                    const int nrows = 50, bags = 203;
                    std::vector<float> tab(nrows * V);
                    for (auto& x : tab) x = U(rng);
                    std::vector<int> off(bags + 1), rows;
                    for (int b = 0; b < bags; b++) {
                        int k = maxPer == 1 ? 1 : (int)(rng() % (maxPer + 1));
                        if (rng() % 5 == 0) k = 0;
                        for (int j = 0; j < k; j++) rows.push_back(rng() % 9 == 0 ? -1 : (int)(rng() % nrows));
                        off[b + 1] = (int)rows.size();
                    }
                    const i64 nnz = (i64)rows.size();
                    std::vector<float> out((size_t)bags * V, NAN), ref((size_t)bags * V);
                    for (int b = 0; b < bags; b++)
                        for (int c = 0; c < V; c++) {
                            float a = 0;
                            for (int j = off[b]; j < off[b + 1]; j++)
                                if (rows[j] >= 0) a += tab[(size_t)rows[j] * V + c];
                            const int cnt = off[b + 1] - off[b];
                            if (mean && cnt > 1) a *= 1.0f / (float)cnt;
                            ref[(size_t)b * V + c] = a;
                        }
                    const int w = V % 4 == 0 ? 4 : 1, ts = team(V, w);
                    u64 flag[4] = {0, 0, 0, 0};
                    if (w == 4)
                        launch(grid, 256, [&] { emb_bag_fwd_v4(out.data(), tab.data(), rows.data(), off.data(), bags, V, nrows, mean, ts, nnz, flag, 3); });
                    else
                        launch(grid, 256, [&] { emb_bag_fwd_v1(out.data(), tab.data(), rows.data(), off.data(), bags, V, nrows, mean, ts, nnz, flag, 3); });
                    if (std::memcmp(out.data(), ref.data(), 4 * out.size()) != 0 || flag[0] != 0) {
                        printf("bag fwd V %d maxPer %d grid %d mean %d: differs from the in-order sum\n", V, maxPer, grid, mean);
                        bad++;
                    }
                    // Half outputs: the in-order float sum rounded once, bit
                    // for bit; each poisoned first.
                    std::vector<half_t> oh((size_t)bags * V, half_t{0x7e01});
                    std::vector<bf16_t> ob((size_t)bags * V, bf16_t{0x7fc1});
#define EMB_FWD(K, O) [&] { K(O, tab.data(), rows.data(), off.data(), bags, V, nrows, mean, ts, nnz, flag, 3); }
                    if (w == 4) {
                        launch(grid, 256, EMB_FWD(emb_bag_fwd_f16_v4, oh.data()));
                        launch(grid, 256, EMB_FWD(emb_bag_fwd_bf16_v4, ob.data()));
                    } else {
                        launch(grid, 256, EMB_FWD(emb_bag_fwd_f16_v1, oh.data()));
                        launch(grid, 256, EMB_FWD(emb_bag_fwd_bf16_v1, ob.data()));
                    }
#undef EMB_FWD
                    for (size_t i = 0; i < ref.size(); i++)
                        if (oh[i].x != host_f2h(ref[i]) || ob[i].x != host_f2b(ref[i])) {
                            printf("bag fwd half V %d maxPer %d grid %d mean %d [%zu]: %04x %04x want %04x %04x\n", V, maxPer,
                                   grid, mean, i, oh[i].x, ob[i].x, host_f2h(ref[i]), host_f2b(ref[i]));
                            bad++;
                            break;
                        }
                    if (flag[0] != 0) { printf("bag fwd half: spurious error\n"); bad++; }
                }
    printf("bag fwd (float32, float16, bfloat16 outputs): %d of 60 cases differ\n", bad);
    return bad;
}

// emb_slot_rows over bag groups: every position's row, empty and long bags,
// a partial last group, and a key outside its slot reported.
static int slot_cases(std::mt19937& rng) {
    int bad = 0;
    const std::vector<i64> so{0, 10, 11, 1011}, ss{10, 1, 1000, 5};
    const int ns = 4;
    for (int samples : {1, 7, 100, 333})
        for (int grid : {1, 3}) {
            const i64 bags = (i64)samples * ns;
            std::vector<int> off(bags + 1);
            std::vector<i64> keys;
            for (i64 b = 0; b < bags; b++) {
                int k = rng() % 4 == 0 ? 0 : rng() % 40;
                for (int j = 0; j < k; j++) keys.push_back((i64)(rng() % ss[b % ns]));
                off[b + 1] = (int)keys.size();
            }
            const i64 nnz = (i64)keys.size();
            std::vector<int> rows(nnz, -99);
            u64 flag[4] = {0, 0, 0, 0};
            launch(grid, 256, [&] { emb_slot_rows(rows.data(), keys.data(), off.data(), so.data(), ss.data(), bags, ns, nnz, flag, 5); });
            for (i64 b = 0; b < bags; b++)
                for (int j = off[b]; j < off[b + 1]; j++)
                    if (rows[j] != (int)(keys[j] + so[b % ns])) {
                        printf("slot rows samples %d [%d]: %d want %lld\n", samples, j, rows[j], keys[j] + so[b % ns]);
                        bad++;
                        b = bags;
                        break;
                    }
            if (flag[0] != 0) { printf("slot rows: spurious error\n"); bad++; }
            if (nnz > 0) {
                keys[nnz / 2] = 1000000;  // outside every slot
                launch(grid, 256, [&] { emb_slot_rows(rows.data(), keys.data(), off.data(), so.data(), ss.data(), bags, ns, nnz, flag, 5); });
                if (flag[0] != ERR_RANGE || (i64)flag[2] != nnz / 2) { printf("slot rows: bad key not reported\n"); bad++; }
            }
        }
    printf("slot rows: %d failures\n", bad);
    return bad;
}

// emb_grad_prep with offsets that decrease (which the CPU rejects) still
// writes every position, each with a bag of range: nothing garbage reaches
// the gathers.
static int prep_bad_offsets(std::mt19937& rng) {
    int bad = 0;
    for (int t = 0; t < 20; t++) {
        const i64 bags = 1 + rng() % 300, nnz = rng() % 2000;
        std::vector<int> off(bags + 1), rows(nnz, 1);
        for (auto& o : off) o = (int)(rng() % (nnz + 50)) - 20;
        std::vector<u32> k(nnz, 0xdeadbeef), v(nnz, 0xdeadbeef);
        launch(1 + t % 3, 256, [&] { emb_grad_prep(rows.data(), off.data(), bags, nnz, k.data(), v.data()); });
        for (i64 j = 0; j < nnz; j++)
            if (k[j] != 2u || v[j] >= (u32)bags) { bad++; break; }
    }
    printf("grad prep, bad offsets: %d of 20 cases leave a position unwritten\n", bad);
    return bad;
}

// optim_step4 (the float4 sparse updates) must equal optim_step bit for
// bit (the same float operations per element), for every kind, with and
// without a loss scale. Device functions, not the kernels, so the check
// does not depend on how the kernels receive the step's scalars (the
// lanes' layout is covered by the GPU tests).
static int sparse_cases(std::mt19937& rng) {
    std::uniform_real_distribution<float> U(-1, 1);
    int bad = 0;
    for (int kind = 0; kind <= 4; kind++)
        for (float is : {1.0f, 1.0f / 256}) {
            const int n = 4 * 257;
            std::vector<float> w(n), s1(n), s2(n), g(n);
            for (auto& x : w) x = U(rng);
            for (auto& x : s1) x = std::fabs(U(rng));
            for (auto& x : s2) x = std::fabs(U(rng));
            for (auto& x : g) x = U(rng) / is;
            auto w4 = w, a4 = s1, b4 = s2;
            OptCoef c{};
            c.kind = kind;
            c.lr = 0.01f, c.mu = 0.9f, c.opmu = 1.9f, c.b1 = 0.9f, c.omb1 = 0.1f, c.b2 = 0.999f, c.omb2 = 0.001f;
            c.eps = 1e-7f, c.is = is, c.lrT = 0.003f;
            float* S1 = kind == OPT_SGD ? nullptr : s1.data();
            float* S2 = kind == OPT_ADAM ? s2.data() : nullptr;
            float* A4 = kind == OPT_SGD ? nullptr : a4.data();
            float* B4 = kind == OPT_ADAM ? b4.data() : nullptr;
            for (int i = 0; i < n; i++) optim_step(c, w.data(), S1, S2, i, g[i]);
            for (int i = 0; i < n; i += 4) {
                opt_f4 gv;
                for (int e = 0; e < 4; e++) gv.v[e] = g[i + e];
                optim_step4(c, w4.data(), A4, B4, i, gv);
            }
            if (std::memcmp(w.data(), w4.data(), 4 * n) != 0 || std::memcmp(s1.data(), a4.data(), 4 * n) != 0 ||
                std::memcmp(s2.data(), b4.data(), 4 * n) != 0) {
                printf("optim_step4 kind %d is %g: differs from optim_step\n", kind, is);
                bad++;
            }
        }
    printf("sparse update v4 = scalar: %d of 10 cases differ\n", bad);
    return bad;
}

int main() {
    std::mt19937 rng(1);
    int bad = 0;
    struct { int bags, maxPer, nrows, V; double hot; int grid; } cs[] = {
        {40, 3, 10, 8, 0, 1},        {300, 5, 100, 128, 0.3, 2}, {2000, 8, 50, 128, 0.5, 3},
        {3000, 4, 20, 13, 0.6, 2},   {1500, 6, 400, 256, 0.7, 2}, {900, 9, 30, 1, 0.9, 2},
        {5000, 3, 5, 4, 0.2, 1},
    };
    for (auto& c : cs)
        for (int mean = 0; mean < 2; mean++) bad += grad_case(c.bags, c.maxPer, c.nrows, c.V, c.hot, mean, c.grid, rng);
    for (int V : {128, 13}) {  // the sums do not depend on the grid: bit-identical
        std::vector<float> a, b;
        std::mt19937 r1(5), r2(5);
        bad += grad_case(4000, 6, 30, V, 0.6, 0, 1, r1, &a);
        bad += grad_case(4000, 6, 30, V, 0.6, 0, 4, r2, &b);
        if (a.size() != b.size() || std::memcmp(a.data(), b.data(), 4 * a.size()) != 0) {
            printf("grad V %d: grid 1 and grid 4 differ\n", V);
            bad++;
        }
    }
    // A half dOut: within the reference, and bit-identical to the float32
    // kernels fed the same rounded values (hot rows, both widths).
    for (int dt : {DT_F16, DT_BF16})
        for (int V : {128, 13, 1})
            for (int mean = 0; mean < 2; mean++) {
                std::vector<float> a, b;
                std::mt19937 r1(9 + V), r2(9 + V);
                bad += grad_case(3000, 6, 30, V, 0.6, mean, 2, r1, &a, dt, false);
                bad += grad_case(3000, 6, 30, V, 0.6, mean, 2, r2, &b, dt, true);
                if (a.size() != b.size() || std::memcmp(a.data(), b.data(), 4 * a.size()) != 0) {
                    printf("grad dOut dt %d V %d mean %d: half and float32 kernels differ\n", dt, V, mean);
                    bad++;
                }
            }
    bad += fwd_cases(rng);
    bad += prep_bad_offsets(rng);
    bad += slot_cases(rng);
    bad += sparse_cases(rng);
    if (bad) printf("%d failures\n", bad);
    return bad ? 1 : 0;
}
