// interaction_sim.cpp runs the warp-per-sample interaction kernels
// (nn.cu: interaction_fwd4, interaction_bwd4) on the host, one std::thread
// per lane and a std::barrier per warp for __syncwarp, and checks them
// against a float64 reference: indexing, padding, tiles beyond 32 lanes and
// the grid-stride over samples, for several shapes, warps per block and
// grid sizes. check_kernels.sh builds it with the kernels extracted from
// nn.cu (k4.inc, tri.inc). No CUDA needed; it cannot see timing or bank
// conflicts, only results. Unwritten shared memory reads as NaN.
#include <cstdio>
#include <cmath>
#include <vector>
#include <thread>
#include <barrier>
#include <random>
#include <memory>
#include <algorithm>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
typedef long long i64;
using std::min; using std::max;
struct D3 { unsigned x, y, z; };
thread_local D3 threadIdx;
D3 blockIdx, blockDim, gridDim;
thread_local std::barrier<>* wbar;
void __syncwarp(unsigned = 0xffffffffu) { wbar->arrive_and_wait(); }
struct alignas(16) nn_f4 { float x, y, z, w; };
alignas(16) nn_f4 nn_smem[1 << 16];
#include "tri.inc"
#include "k4.inc"
template <class K> void launch(int grid, int block, K k) {
  gridDim = {(unsigned)grid, 1, 1}; blockDim = {(unsigned)block, 1, 1};
  for (int b = 0; b < grid; b++) {
    blockIdx = {(unsigned)b, 1, 1};
    std::fill((float*)nn_smem, (float*)nn_smem + 4 * (1 << 16), NAN); // catch reads of unwritten shared
    std::vector<std::unique_ptr<std::barrier<>>> bars;
    for (int w = 0; w < block / 32; w++) bars.emplace_back(new std::barrier<>(32));
    std::vector<std::thread> ts;
    for (int t = 0; t < block; t++) ts.emplace_back([&, t] { threadIdx = {(unsigned)t, 0, 0}; wbar = bars[t / 32].get(); k(); });
    for (auto& t : ts) t.join();
  }
}
int main() {
  int shapes[][3] = {{1, 4, 1}, {7, 4, 1}, {5, 16, 8}, {33, 128, 26}, {9, 64, 31}, {3, 8, 40}, {6, 4, 3}, {11, 12, 4}};
  std::mt19937 rng(1); std::uniform_real_distribution<float> U(-1, 1);
  int bad = 0;
  for (auto& sh : shapes) {
    int B = sh[0], d = sh[1], n = sh[2], N = n + 1, W = d + n * (n + 1) / 2 + 1;
    std::vector<float> x0(B * d), emb(B * n * d), dOut(B * W);
    for (auto& v : x0) v = U(rng);
    for (auto& v : emb) v = U(rng);
    for (auto& v : dOut) v = U(rng);
    auto F = [&](int s, int v, int c) -> double { return v == 0 ? x0[s * d + c] : emb[(s * n + v - 1) * d + c]; };
    std::vector<float> out(B * W, NAN), dx0(B * d, NAN), demb(B * n * d, NAN);
    for (int wpb : {1, 2}) for (int grid : {1, 2}) {
      std::fill(out.begin(), out.end(), NAN); std::fill(dx0.begin(), dx0.end(), NAN); std::fill(demb.begin(), demb.end(), NAN);
      launch(grid, 32 * wpb, [&] { interaction_fwd4(out.data(), x0.data(), emb.data(), B, n, d); });
      launch(grid, 32 * wpb, [&] { interaction_bwd4(dx0.data(), demb.data(), dOut.data(), x0.data(), emb.data(), B, n, d); });
      double e1 = 0, e2 = 0;
      for (int s = 0; s < B; s++) {
        for (int k = 0; k < W; k++) {
          double r;
          if (k < d) r = x0[s * d + k]; else if (k == W - 1) r = 0; else {
            int q = k - d, j = 1; while ((j + 1) * j / 2 <= q) j++; int i = q - j * (j - 1) / 2;
            r = 0; for (int c = 0; c < d; c++) r += F(s, i, c) * F(s, j, c);
          }
          double e = std::fabs(out[s * W + k] - r); if (!(e <= 1e-4)) e = 1e9; e1 = std::max(e1, e);
        }
        for (int v = 0; v < N; v++) for (int c = 0; c < d; c++) {
          double r = v == 0 ? dOut[s * W + c] : 0;
          for (int u = 0; u < N; u++) if (u != v) { int a = min(u, v), b = max(u, v); r += dOut[s * W + d + b * (b - 1) / 2 + a] * F(s, u, c); }
          double g = v == 0 ? dx0[s * d + c] : demb[(s * n + v - 1) * d + c];
          double e = std::fabs(g - r); if (!(e <= 1e-4)) e = 1e9; e2 = std::max(e2, e);
        }
      }
      printf("B%d d%d n%d wpb%d grid%d: fwd %.2g bwd %.2g\n", B, d, n, wpb, grid, e1, e2);
      if (e1 > 1e-4 || e2 > 1e-4) bad++;
    }
  }
  printf(bad ? "FAIL\n" : "OK\n");
  return bad;
}
