// multicross_sim.cpp runs the cross-layer kernels (multicross.cu: mc_fwd4,
// mc_fwd1, mc_bwd4, mc_bwd1) on the host, one std::thread per CUDA thread
// and a std::barrier per block for __syncthreads, and checks them against a
// float64 reference: vector and scalar widths, partial column tiles, one
// and several row chunks (the chunks' partials summed as
// dense_reduce_final does), every beta/res mode, absent dx0 and copy, and
// grid-strided forward launches. check_kernels.sh builds it with
// multicross.cu (extern "C" removed) as mc.inc. No CUDA needed; it sees
// results only, not timing. Outputs start as NaN, so an unwritten element
// fails.
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
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
using std::max;
using std::min;
struct D3 { unsigned x, y, z; };
thread_local D3 threadIdx;
D3 blockIdx, blockDim, gridDim;
std::barrier<>* block_bar;
void __syncthreads() { block_bar->arrive_and_wait(); }
#define FOR(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (i64)(n); i += (i64)blockDim.x * gridDim.x)
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

static double err(double got, double want) {
  double e = std::fabs(got - want) / (1 + std::fabs(want));
  return e <= 1e-5 ? e : 1e9;  // NaN too
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
  if (bad) printf("%d cases failed\n", bad);
  return bad != 0;
}
