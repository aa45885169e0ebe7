// multicross_sim.cpp runs the cross-layer kernels (multicross.cu: mc_fwd4,
// mc_fwd1, mc_bwd4, mc_bwd1) on the host, one std::thread per CUDA thread
// and a std::barrier per block for __syncthreads, and checks them against a
// float64 reference: vector and scalar widths, partial column tiles, one
// and several row chunks (the chunks' partials summed as
// dense_reduce_final does), every beta/res mode, absent dx0 and copy, and
// grid-strided forward launches; then the same through the half kernels
// (mc_fwd4h, …) with every activation float16, every one bfloat16, and a
// mix (each activation its own dtype, float32 among them), the inputs
// rounded to their dtypes and each output compared within its dtype's
// rounding. check_kernels.sh builds it with common.cuh and multicross.cu
// (extern "C" removed) as mc.inc. No CUDA needed; it sees results only, not
// timing. Outputs start as NaN, so an unwritten element fails.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __launch_bounds__(...)
using std::max;
using std::min;
struct D3 { unsigned x, y, z; };
thread_local D3 threadIdx;
D3 blockIdx, blockDim, gridDim;
std::barrier<>* block_bar;
void __syncthreads() { block_bar->arrive_and_wait(); }
// Declarations common.cuh's helpers refer to (unused here).
template <class T> T __shfl_down_sync(unsigned, T, int, int = 32);
unsigned long long atomicCAS(unsigned long long*, unsigned long long, unsigned long long);
#include "../common.cuh"
#include "mc.inc"

template <class K> void launch(D3 grid, int block, K k) {
  gridDim = grid;
  blockDim = {(unsigned)block, 1, 1};
  for (unsigned y = 0; y < grid.y; y++)
    for (unsigned b = 0; b < grid.x; b++) {
      blockIdx = {b, y, 0};
      std::barrier<> bar(block);
      block_bar = &bar;
      std::vector<std::thread> ts;
      for (int t = 0; t < block; t++) ts.emplace_back([&, t] { threadIdx = {(unsigned)t, 0, 0}; k(); });
      for (auto& t : ts) t.join();
    }
}

static double err(double got, double want, double tol = 1e-5) {
  double e = std::fabs(got - want) / (1 + std::fabs(want));
  return e <= tol ? e : 1e9;  // NaN too
}

// An activation of dtype code dt: its bits (4 or 2 bytes an element) and
// its values as float (what the kernels read).
struct Act {
  int dt;
  std::vector<float> f32;
  std::vector<h16> h;
  Act(int dt, size_t n) : dt(dt), f32(dt == DT_F32 ? n : 0), h(dt == DT_F32 ? 0 : n) {}
  void* p() { return dt == DT_F32 ? (void*)f32.data() : (void*)h.data(); }
  float get(size_t i) const { return ldv(dt == DT_F32 ? (const void*)f32.data() : (const void*)h.data(), dt, (i64)i); }
  void set(size_t i, float v) { stv(p(), dt, (i64)i, v); }
  void fill(float v) { for (size_t i = 0; i < f32.size() + h.size(); i++) set(i, v); }
};
// tolOf is the comparison tolerance of an output of dtype code dt.
static double tolOf(int dt) { return dt == DT_F16 ? 1e-3 : dt == DT_BF16 ? 8e-3 : 1e-5; }

// checkHalf runs mc_fwd*h and mc_bwd*h on one shape with the activations'
// dtype codes dts (y, x0, z, x of the forward; the backward's dz, dx0, gc,
// g take y's, x0's, z's and x's codes); it returns the failures.
static int checkHalf(int B, int d, int nchunks, int V, const int (&dts)[4], std::mt19937& rng) {
  std::uniform_real_distribution<float> U(-1, 1);
  const int n = B * d, rowsPer = (B + nchunks - 1) / nchunks, chunks = (B + rowsPer - 1) / rowsPer;
  const i64 colsv = d / V;
  int bad = 0;
  Act x0(dts[1], n), z(dts[2], n), x(dts[3], n), s(dts[2], B), g(dts[3], n), dx0in(dts[0], n);
  for (Act* a : {&x0, &z, &x, &s, &g, &dx0in})
    for (size_t i = 0; i < a->f32.size() + a->h.size(); i++) a->set(i, U(rng));
  std::vector<float> bias(d);
  for (auto& e : bias) e = U(rng);
  for (int v1 = 0; v1 < 2; v1++) {
    Act y(dts[0], n);
    y.fill(NAN);
    Act& zz = v1 ? s : z;
    launch({3, 1, 1}, 64, [&] {
      if (V == 4) mc_fwd4h(y.p(), x0.p(), zz.p(), bias.data(), x.p(), n / V, colsv, 1, v1, y.dt, x0.dt, zz.dt, x.dt);
      else mc_fwd1h(y.p(), x0.p(), zz.p(), bias.data(), x.p(), n / V, colsv, 1, v1, y.dt, x0.dt, zz.dt, x.dt);
    });
    double e = 0;
    for (int r = 0; r < B; r++)
      for (int c = 0; c < d; c++) {
        const int i = r * d + c;
        const double want = v1 ? (double)x0.get(i) * s.get(r) + bias[c] + x.get(i) : (double)x0.get(i) * ((double)z.get(i) + bias[c]) + x.get(i);
        e = max(e, err(y.get(i), want, tolOf(y.dt)));
      }
    printf("fwd half %d%d%d%d B%d d%d V%d v1 %d: %.2g\n", dts[0], dts[1], dts[2], dts[3], B, d, V, v1, e);
    bad += e > tolOf(y.dt);
  }
  for (int mode = 0; mode < 3; mode++) { // beta 0; beta 1 res 1; no dx0, no copy
    const float beta = mode == 1 ? 1.f : 0.f, res = mode == 1 ? 1.f : 0.f;
    const bool withDx0 = mode < 2, withCopy = mode < 2;
    Act dz(dts[0], n), dx0(dts[1], n), gc(dts[2], n);
    dz.fill(NAN), dx0.fill(NAN), gc.fill(NAN);
    if (beta != 0)
      for (int i = 0; i < n; i++) dx0.set(i, dx0in.get(i));
    std::vector<float> dxin(n);
    for (int i = 0; i < n; i++) dxin[i] = dx0.get(i);
    std::vector<float> db(d, NAN);
    std::vector<double> part((size_t)chunks * d, NAN);
    const int tiles = (int)((colsv + 31) / 32);
    void* dxp = withDx0 ? dx0.p() : nullptr;
    void* gcp = withCopy ? gc.p() : nullptr;
    launch({(unsigned)tiles, (unsigned)chunks, 1}, 256, [&] {
      if (V == 4) mc_bwd4h(dz.p(), part.data(), db.data(), dxp, beta, res, gcp, g.p(), x0.p(), z.p(), bias.data(), B, colsv, rowsPer, dz.dt, dx0.dt, gc.dt, g.dt, x0.dt, z.dt);
      else mc_bwd1h(dz.p(), part.data(), db.data(), dxp, beta, res, gcp, g.p(), x0.p(), z.p(), bias.data(), B, colsv, rowsPer, dz.dt, dx0.dt, gc.dt, g.dt, x0.dt, z.dt);
    });
    if (chunks > 1)
      for (int c = 0; c < d; c++) {
        double a = 0;
        for (int yy = 0; yy < chunks; yy++) a += part[(size_t)yy * d + c];
        db[c] = (float)a;
      }
    double e = 0;
    for (int c = 0; c < d; c++) {
      double sum = 0;
      for (int r = 0; r < B; r++) {
        const int i = r * d + c;
        const double dzr = (double)g.get(i) * x0.get(i);
        sum += dzr;
        e = max(e, err(dz.get(i), dzr, tolOf(dz.dt)));
        if (withDx0) e = max(e, err(dx0.get(i), (double)g.get(i) * ((double)z.get(i) + bias[c]) + res * g.get(i) + (beta != 0 ? dxin[i] : 0), tolOf(dx0.dt)));
        if (withCopy) e = max(e, err(gc.get(i), g.get(i), tolOf(gc.dt)));
      }
      e = max(e, err(db[c], sum)); // float32, from the float32 products
    }
    printf("bwd half %d%d%d%d B%d d%d V%d chunks %d mode %d: %.2g\n", dts[0], dts[1], dts[2], dts[3], B, d, V, chunks, mode, e);
    bad += e > 8e-3;
  }
  return bad;
}

int main() {
  // rows, cols, row chunks (1 = direct write of db), vector width
  int shapes[][4] = {{1, 8, 1, 4}, {37, 12, 1, 4}, {29, 7, 1, 1}, {200, 160, 3, 4}, {130, 300, 3, 4}, {77, 33, 2, 1}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> U(-1, 1);
  int bad = 0;
  for (auto& sh : shapes) {
    const int B = sh[0], d = sh[1], V = sh[3], n = B * d;
    const int rowsPer = (B + sh[2] - 1) / sh[2], chunks = (B + rowsPer - 1) / rowsPer;
    std::vector<float> g(n), x0(n), z(n), x(n), bias(d), s(B), dx0in(n);
    for (auto* v : {&g, &x0, &z, &x, &bias, &s, &dx0in})
      for (auto& e : *v) e = U(rng);
    const i64 colsv = d / V;
    for (int v1 = 0; v1 < 2; v1++)
      for (int grid : {1, 3}) {
        std::vector<float> y(n, NAN);
        const float* zp = v1 ? s.data() : z.data();
        launch({(unsigned)grid, 1, 1}, 64, [&] {
          if (V == 4) mc_fwd4(y.data(), x0.data(), zp, bias.data(), x.data(), n / V, colsv, 1, v1);
          else mc_fwd1(y.data(), x0.data(), zp, bias.data(), x.data(), n / V, colsv, 1, v1);
        });
        double e = 0;
        for (int r = 0; r < B; r++)
          for (int c = 0; c < d; c++) {
            const int i = r * d + c;
            const double want = v1 ? (double)x0[i] * s[r] + bias[c] + x[i] : (double)x0[i] * ((double)z[i] + bias[c]) + x[i];
            e = max(e, err(y[i], want));
          }
        printf("fwd B%d d%d V%d v1 %d grid %d: %.2g\n", B, d, V, v1, grid, e);
        bad += e > 1e-5;
      }
    for (int mode = 0; mode < 6; mode++) {
      const float beta = (mode & 1) ? 1.f : 0.f, res = (mode & 2) ? 1.f : 0.f;
      const bool withDx0 = mode < 4, withCopy = mode != 1;
      std::vector<float> dz(n, NAN), db(d, NAN), dx0(withDx0 && beta != 0 ? dx0in : std::vector<float>(n, NAN)), gc(n, NAN);
      std::vector<double> part((size_t)chunks * d, NAN);
      const int tiles = (int)((colsv + 31) / 32);
      float* dxp = withDx0 ? dx0.data() : nullptr;
      float* gcp = withCopy ? gc.data() : nullptr;
      launch({(unsigned)tiles, (unsigned)chunks, 1}, 256, [&] {
        if (V == 4) mc_bwd4(dz.data(), part.data(), db.data(), dxp, beta, res, gcp, g.data(), x0.data(), z.data(), bias.data(), B, colsv, rowsPer);
        else mc_bwd1(dz.data(), part.data(), db.data(), dxp, beta, res, gcp, g.data(), x0.data(), z.data(), bias.data(), B, colsv, rowsPer);
      });
      if (chunks > 1)  // dense_reduce_final
        for (int c = 0; c < d; c++) {
          double a = 0;
          for (int y = 0; y < chunks; y++) a += part[(size_t)y * d + c];
          db[c] = (float)a;
        }
      double e = 0;
      for (int c = 0; c < d; c++) {
        double sum = 0;
        for (int r = 0; r < B; r++) {
          const int i = r * d + c;
          const double dzr = (double)g[i] * x0[i];
          sum += dzr;
          e = max(e, err(dz[i], dzr));
          if (withDx0) e = max(e, err(dx0[i], (double)g[i] * ((double)z[i] + bias[c]) + res * g[i] + (beta != 0 ? dx0in[i] : 0)));
          if (withCopy) e = max(e, err(gc[i], g[i]));
        }
        e = max(e, err(db[c], sum));
      }
      printf("bwd B%d d%d V%d chunks %d beta %g res %g dx0 %d copy %d: %.2g\n", B, d, V, chunks, beta, res, withDx0, withCopy, e);
      bad += e > 1e-5;
    }
  }
  const int dtss[][4] = {{DT_F16, DT_F16, DT_F16, DT_F16}, {DT_BF16, DT_BF16, DT_BF16, DT_BF16}, {DT_F16, DT_F32, DT_BF16, DT_F16}};
  int hshapes[][4] = {{37, 12, 1, 4}, {29, 7, 1, 1}, {130, 300, 3, 4}, {77, 33, 2, 1}, {9, 3456, 2, 4}};
  for (auto& dts : dtss)
    for (auto& sh : hshapes) bad += checkHalf(sh[0], sh[1], sh[2], sh[3], dts, rng);
  if (bad) printf("%d cases failed\n", bad);
  return bad != 0;
}
