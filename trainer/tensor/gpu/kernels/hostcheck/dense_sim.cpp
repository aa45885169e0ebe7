// dense_sim.cpp runs the half-precision dense kernels (dense.cu's _h
// kernels, nn.cu's bce_partial_h) on the host and requires each to give,
// bit for bit, the float32 kernel's result on the widened inputs rounded
// once to the output's dtype: for every dtype of every operand (float32,
// float16, bfloat16), odd lengths, and operands one element off their
// alignment (the kernels' scalar paths). The float32 kernels are checked
// against the CPU backend by the GPU tests; this pins the _h kernels to
// them. check_kernels.sh builds it with dense.cu whole and nn.cu's loss
// section; common.cuh's host models stand for cvt.rn. No CUDA needed.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
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
thread_local D3 threadIdx, blockIdx;
D3 blockDim, gridDim;

// A block's threads: one std::thread each, a barrier for __syncthreads,
// exchange slots for the warp shuffles. Kernels without barriers run their
// threads one after another (blk null).
struct BlockSim {
    std::unique_ptr<std::barrier<>> bar;
    std::vector<std::unique_ptr<std::barrier<>>> wbar;
    std::vector<u64> slot;
};
BlockSim* blk;
void __syncthreads() { blk->bar->arrive_and_wait(); }
template <class T> T __shfl_down_sync(unsigned, T v, int o, int width = 32) {
    u64 b = 0;
    std::memcpy(&b, &v, sizeof(T));
    blk->slot[threadIdx.x] = b;
    blk->wbar[threadIdx.x / 32]->arrive_and_wait();
    const int lane = threadIdx.x & 31, seg = lane & ~(width - 1);
    const int s = lane + o < seg + width ? lane + o : lane;
    u64 r = blk->slot[(threadIdx.x & ~31u) + (unsigned)s];
    blk->wbar[threadIdx.x / 32]->arrive_and_wait();
    T out;
    std::memcpy(&out, &r, sizeof(T));
    return out;
}
unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((u64)a * b) >> 32); }
// Declared only: common.cuh uses it in code the sim never runs.
unsigned long long atomicCAS(unsigned long long*, unsigned long long, unsigned long long);
#include "../common.cuh"
#include "../dense.cu"
#include "bce.inc"

// Pool is a block's worth of threads kept between launches (creating
// 256 threads per block would dominate the run time): each block's run
// releases them through start and waits for them at done.
struct Pool {
    int size = 0;
    bool quit = false;
    std::function<void(int)> fn;
    std::unique_ptr<std::barrier<>> start, done;
    std::vector<std::thread> ts;
    void resize(int n) {
        if (n == size) return;
        stop();
        size = n;
        start.reset(new std::barrier<>(n + 1));
        done.reset(new std::barrier<>(n + 1));
        for (int t = 0; t < n; t++)
            ts.emplace_back([this, t] {
                for (;;) {
                    start->arrive_and_wait();
                    if (quit) return;
                    fn(t);
                    done->arrive_and_wait();
                }
            });
    }
    void run(std::function<void(int)> f) {
        fn = std::move(f);
        start->arrive_and_wait();
        done->arrive_and_wait();
    }
    void stop() {
        if (!size) return;
        quit = true;
        start->arrive_and_wait();
        for (auto& t : ts) t.join();
        ts.clear();
        quit = false;
        size = 0;
    }
    ~Pool() { stop(); }
} pool;

// launch runs k over a grid of grid.x × grid.y blocks of block threads,
// concurrently (sync: the kernel meets barriers) or one after another.
template <class K> void launch(D3 grid, int block, bool sync, K k) {
    gridDim = {grid.x, grid.y, 1};
    blockDim = {(unsigned)block, 1, 1};
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            if (!sync) {
                blockIdx = {bx, by, 0};
                for (int t = 0; t < block; t++) {
                    threadIdx = {(unsigned)t, 0, 0};
                    k();
                }
                continue;
            }
            BlockSim s;
            s.bar.reset(new std::barrier<>(block));
            for (int w = 0; w < block / 32; w++) s.wbar.emplace_back(new std::barrier<>(32));
            s.slot.assign(block, 0);
            blk = &s;
            pool.resize(block);
            pool.run([&, bx, by](int t) {
                blockIdx = {bx, by, 0};
                threadIdx = {(unsigned)t, 0, 0};
                k();
            });
            blk = nullptr;
        }
}
template <class K> void seq(K k) { launch({3, 1, 1}, 64, false, k); }

const int DTS[3] = {DT_F32, DT_F16, DT_BF16};
static const char* dtn(int d) { return d == DT_F32 ? "f32" : d == DT_F16 ? "f16" : "bf16"; }
static int esz(int d) { return d == DT_F32 ? 4 : 2; }

// Buf is an operand of dtype code dt, n elements starting off elements
// into a 16-byte aligned allocation (off 1: misaligned for pair loads).
struct Buf {
    int dt = DT_F32;
    i64 n = 0;
    int off = 0;
    std::vector<u64> mem;
    Buf() {}
    Buf(int dt_, i64 n_, int off_) : dt(dt_), n(n_), off(off_), mem((size_t)(n_ + off_ + 2) * 4 / 8 + 2, 0) {}
    void* p() { return (char*)mem.data() + (size_t)off * esz(dt); }
    float get(i64 i) { return ldv(p(), dt, i); }
    void set(i64 i, float v) { stv(p(), dt, i, v); }
    // f32 is the operand widened to a float32 Buf (aligned).
    Buf f32() {
        Buf b(DT_F32, n, 0);
        for (i64 i = 0; i < n; i++) b.set(i, get(i));
        return b;
    }
};

std::mt19937_64 rng(7);
static Buf rnd(int dt, i64 n, int off, float lo, float hi, int zeroEvery = 0) {
    Buf b(dt, n, off);
    std::uniform_real_distribution<float> U(lo, hi);
    for (i64 i = 0; i < n; i++) b.set(i, zeroEvery && i % zeroEvery == 0 ? 0.f : U(rng));
    return b;
}
static Buf poison(int dt, i64 n, int off) {
    Buf b(dt, n, off);
    for (i64 i = 0; i < n; i++) b.set(i, NAN);
    return b;
}

static int fails, cases;
// same requires got = ref (a float32 kernel's output) rounded to got's
// dtype, bit for bit.
static void same(const std::string& what, Buf& got, Buf& ref) {
    cases++;
    for (i64 i = 0; i < got.n; i++) {
        float g = got.get(i), r = rndv(got.dt, ref.get(i));
        u32 gb, rb;
        std::memcpy(&gb, &g, 4);
        std::memcpy(&rb, &r, 4);
        if (gb != rb) {
            if (fails++ < 20) printf("%s: [%lld] got %.9g, want %.9g\n", what.c_str(), i, g, r);
            return;
        }
    }
}

static const i64 SIZES[] = {1, 2, 3, 15, 64, 231, 1001};

static std::string nm(const char* op, i64 n, std::initializer_list<int> dts, std::initializer_list<int> offs) {
    std::string s = std::string(op) + " n " + std::to_string(n);
    for (int d : dts) s += std::string(" ") + dtn(d);
    s += " off";
    for (int o : offs) s += " " + std::to_string(o);
    return s;
}

int main() {
    for (i64 n : SIZES)
        for (int to : DTS)
            for (int ti : DTS)
                for (int oo = 0; oo < 2; oo++)
                    for (int oi = 0; oi < 2; oi++) {
                        const i64 cols = n % 7 == 0 ? 7 : n % 5 == 0 ? 5 : n;
                        Buf x = rnd(ti, n, oi, -4, 4, 7), xf = x.f32(), bias = rnd(DT_F32, cols, 0, -1, 1);
                        for (int a = 0; a < 4; a++) {
                            Buf y = poison(to, n, oo), yf = poison(DT_F32, n, 0);
                            seq([&] { dense_bias_act_h(y.p(), to, x.p(), ti, (float*)bias.p(), a, 0.7f, n, cols, 1); });
                            seq([&] { dense_bias_act((float*)yf.p(), (float*)xf.p(), (float*)bias.p(), a, 0.7f, n, cols, 1); });
                            same(nm("bias_act", n, {to, ti, a}, {oo, oi}), y, yf);
                            seq([&] { dense_act_fwd_h(y.p(), to, x.p(), ti, a, 1.3f, n); });
                            seq([&] { dense_act_fwd((float*)yf.p(), (float*)xf.p(), a, 1.3f, n); });
                            same(nm("act", n, {to, ti, a}, {oo, oi}), y, yf);
                        }
                        // Axpby, Mul, RowScale with the second input in each dtype.
                        for (int t2 : DTS) {
                            Buf z = rnd(t2, n, oo ^ oi, -2, 2), zf = z.f32();
                            Buf d = poison(to, n, oo), df = poison(DT_F32, n, 0);
                            seq([&] { dense_axpby_h(d.p(), to, 0.75f, x.p(), ti, -1.5f, z.p(), t2, n); });
                            seq([&] { dense_axpby((float*)df.p(), 0.75f, (float*)xf.p(), -1.5f, (float*)zf.p(), n); });
                            same(nm("axpby", n, {to, ti, t2}, {oo, oi}), d, df);
                            seq([&] { dense_axpby_h(d.p(), to, -2.f, x.p(), ti, 3.f, nullptr, 0, n); });
                            seq([&] { dense_axpby((float*)df.p(), -2.f, (float*)xf.p(), 3.f, nullptr, n); });
                            same(nm("axpby no y", n, {to, ti, t2}, {oo, oi}), d, df);
                            seq([&] { dense_mul_h(d.p(), to, 0.f, x.p(), ti, z.p(), t2, n); });
                            seq([&] { dense_mul((float*)df.p(), 0.f, (float*)xf.p(), (float*)zf.p(), n); });
                            same(nm("mul", n, {to, ti, t2}, {oo, oi}), d, df);
                            {  // Mul with beta: d read back in its dtype.
                                Buf d0 = rnd(to, n, oo, -1, 1), d0f = d0.f32();
                                seq([&] { dense_mul_h(d0.p(), to, 0.5f, x.p(), ti, z.p(), t2, n); });
                                seq([&] { dense_mul((float*)d0f.p(), 0.5f, (float*)xf.p(), (float*)zf.p(), n); });
                                same(nm("mul beta", n, {to, ti, t2}, {oo, oi}), d0, d0f);
                            }
                            const i64 rows = n / cols;
                            Buf s = rnd(t2, rows, oi, -3, 3), sf = s.f32();
                            for (float beta : {0.f, 1.f}) {
                                Buf d0 = rnd(to, n, oo, -1, 1), d0f = d0.f32();
                                seq([&] { dense_row_scale_h(d0.p(), to, beta, x.p(), ti, s.p(), t2, n, cols, 1); });
                                seq([&] { dense_row_scale((float*)d0f.p(), beta, (float*)xf.p(), (float*)sf.p(), n, cols, 1); });
                                same(nm("row_scale", n, {to, ti, t2, (int)beta}, {oo, oi}), d0, d0f);
                            }
                            // ActGrad: dy in t2, x and y in ti.
                            Buf yin = rnd(ti, n, oo, -0.5, 1, 5), yinf = yin.f32();
                            for (int a = 0; a < 4; a++) {
                                Buf dx = poison(to, n, oi), dxf = poison(DT_F32, n, 0);
                                const void* xo = a == 3 ? x.p() : nullptr;
                                const void* yo = a == 1 || a == 2 ? yin.p() : nullptr;
                                seq([&] { dense_act_grad_h(dx.p(), to, z.p(), t2, xo, ti, yo, ti, a, 1.3f, n); });
                                seq([&] {
                                    dense_act_grad((float*)dxf.p(), (float*)zf.p(), a == 3 ? (float*)xf.p() : nullptr,
                                                   a == 1 || a == 2 ? (float*)yinf.p() : nullptr, a, 1.3f, n);
                                });
                                same(nm("act_grad", n, {to, t2, ti, a}, {oo, oi}), dx, dxf);
                            }
                            // RowDot (scalar loads: aligned operands only): dst to, x ti, z t2.
                            if (oo || oi || (n != 3 && n != 231)) continue;
                            Buf rd = poison(to, rows, oo), rdf = poison(DT_F32, rows, 0);
                            launch({2, 1, 1}, 32, true, [&] { dense_row_dot_h(rd.p(), to, x.p(), ti, z.p(), t2, rows, cols); });
                            launch({2, 1, 1}, 32, true, [&] { dense_row_dot((float*)rdf.p(), (float*)xf.p(), (float*)zf.p(), rows, cols); });
                            same(nm("row_dot", n, {to, ti, t2}, {oo, oi}), rd, rdf);
                        }
                        // Dropout: the same mask and values as the float32 kernel.
                        for (float rate : {0.f, 0.5f}) {
                            Buf y = poison(to, n, oo), yf = poison(DT_F32, n, 0);
                            const float scale = 1 / (1 - rate);
                            const u64 seed = 0x0123456789abcdefull, ctr = (1ull << 32) - 3;
                            seq([&] { dense_dropout_h(y.p(), to, x.p(), ti, n, rate, scale, seed, ctr, nullptr); });
                            seq([&] { dense_dropout((float*)yf.p(), (float*)xf.p(), n, rate, scale, seed, ctr, nullptr); });
                            same(nm("dropout", n, {to, ti, (int)(rate * 10)}, {oo, oi}), y, yf);
                        }
                        // CopyCols: a block of width w at columns (dc, sc); the second
                        // shape is 16-byte aligned for half (dc 8 or 9: aligned or not).
                        for (int shape = 0; shape < 2; shape++) {
                            const i64 r = std::max<i64>(1, n / 9), sn = shape ? 24 : 9, dn = shape ? 40 : 11,
                                      w = shape ? 16 : 5, dc = shape ? 16 + oo : oo * 3 + 1, sc = shape ? 8 * oi : oi * 3;
                            Buf src = rnd(ti, r * sn, 0, -1, 1), srcf = src.f32();
                            for (float beta : {0.f, 1.f, -0.5f}) {
                                Buf dst = rnd(to, r * dn, 0, -1, 1), dstf = dst.f32();
                                seq([&] {
                                    dense_copy_cols_h((char*)dst.p() + dc * esz(to), to, dn, (char*)src.p() + sc * esz(ti), ti,
                                                      sn, w, r * w, beta, 1);
                                });
                                seq([&] {
                                    dense_copy_cols((float*)dstf.p() + dc, dn, (float*)srcf.p() + sc, sn, w, r * w, beta, 1);
                                });
                                same(nm("copy_cols", n, {to, ti, (int)(beta * 2)}, {(int)dc, (int)sc}), dst, dstf);
                            }
                        }
                        // Broadcast [o, k, i] from [o, i].
                        {
                            const i64 o = 3, k = 4, in = std::max<i64>(1, n / 12);
                            Buf src = rnd(ti, o * in, oi, -1, 1), srcf = src.f32();
                            for (float beta : {0.f, -0.5f}) {
                                Buf dst = rnd(to, o * k * in, oo, -1, 1), dstf = dst.f32();
                                seq([&] { dense_broadcast_h(dst.p(), to, beta, src.p(), ti, o * k * in, k, in, 1.5f, 1); });
                                seq([&] { dense_broadcast((float*)dstf.p(), beta, (float*)srcf.p(), o * k * in, k, in, 1.5f, 1); });
                                same(nm("broadcast", n, {to, ti}, {oo, oi}), dst, dstf);
                            }
                        }
                    }
    // Reduce (ColSum is outer 1): one chunk, and three chunks with the final pass.
    const int RDT[4][2] = {{DT_F32, DT_F16}, {DT_F16, DT_BF16}, {DT_BF16, DT_F32}, {DT_F16, DT_F16}};
    for (auto& tt : RDT)
        for (auto sh : std::vector<std::vector<i64>>{{1, 300, 5}, {3, 70, 37}, {2, 9, 1}}) {
            const int to = tt[0], ti = tt[1];
                const i64 outer = sh[0], n = sh[1], inner = sh[2], m = outer * inner;
                const int txLog = inner >= 32 ? 5 : inner == 1 ? 0 : 32 - __builtin_clz((unsigned)(inner - 1));
                const int tyLog = std::min(3, 8 - txLog);
                const int g = 256 >> (txLog + tyLog);
                const unsigned blocks = (unsigned)std::max<i64>(1, (outer * ((inner + (1 << txLog) - 1) >> txLog) + g - 1) / g);
                Buf src = rnd(ti, outer * n * inner, 1, -1, 1), srcf = src.f32();
                for (int chunks : {1, 3}) {
                    const i64 nPer = (n + chunks - 1) / chunks;
                    for (double beta : {chunks == 1 ? 0.0 : 0.5}) {
                        Buf dst = rnd(to, m, 0, -1, 1), dstf = dst.f32();
                        std::vector<double> part((size_t)chunks * m, NAN), partf((size_t)chunks * m, NAN);
                        launch({blocks, (unsigned)chunks, 1}, 256, true, [&] {
                            dense_reduce_part_h(dst.p(), to, src.p(), ti, part.data(), outer, n, inner, txLog, tyLog, nPer, 0.25, beta);
                        });
                        launch({blocks, (unsigned)chunks, 1}, 256, true, [&] {
                            dense_reduce_part((float*)dstf.p(), (float*)srcf.p(), partf.data(), outer, n, inner, txLog, tyLog, nPer,
                                              0.25, beta);
                        });
                        if (chunks > 1) {
                            seq([&] { dense_reduce_final_h(dst.p(), to, part.data(), m, chunks, 0.25, beta); });
                            seq([&] { dense_reduce_final((float*)dstf.p(), partf.data(), m, chunks, 0.25, beta); });
                        }
                        same(nm("reduce", outer * n * inner, {to, ti, chunks}, {(int)outer, (int)inner}), dst, dstf);
                    }
                }
            }
    // BCE: the partials (double) equal; dx rounded once after gs.
    for (int tdx : DTS)
        for (int tx : DTS)
            for (int mask : {0, 1}) {
                const i64 total = 1001;
                const int t = 7;
                Buf x = rnd(tx, total, 1, -20, 20), xf = x.f32(), w = rnd(DT_F32, t, 0, 0.5, 2);
                Buf y(DT_F32, total, 0);
                for (i64 i = 0; i < total; i++) y.set(i, mask && i % 4 == 0 ? -1.f : (float)(rng() % 2));
                Buf dx = poison(tdx, total, 0), dxf = poison(DT_F32, total, 0);
                std::vector<double> part(2, NAN), partf(2, NAN);
                const float gs = 1024.f / 1001.f;
                launch({2, 1, 1}, 64, true, [&] {
                    bce_partial_h(part.data(), dx.p(), tdx, x.p(), tx, (float*)y.p(), (float*)w.p(), t, mask, gs, total);
                });
                launch({2, 1, 1}, 64, true, [&] {
                    bce_partial(partf.data(), (float*)dxf.p(), (float*)xf.p(), (float*)y.p(), (float*)w.p(), t, mask, gs, total);
                });
                same(nm("bce dx", total, {tdx, tx, mask}, {1}), dx, dxf);
                cases++;
                if (part[0] != partf[0] || part[1] != partf[1]) {
                    fails++;
                    printf("bce partials %s %s: %.17g %.17g, want %.17g %.17g\n", dtn(tdx), dtn(tx), part[0], part[1], partf[0],
                           partf[1]);
                }
            }
    printf("dense_sim: %d cases, %d failed\n", cases, fails);
    return fails ? 1 : 0;
}
