// interaction_sim.cpp runs the warp-per-sample interaction kernels
// (nn.cu: interaction_fwd4, interaction_bwd4, the TF32 tensor-core
// interaction_fwd_tc, interaction_bwd_tc, and the native half mma
// interaction_fwd_hmma, interaction_bwd_hmma) on the host, one std::thread per
// lane and a std::barrier per warp for __syncwarp, and checks them against a
// float64 reference: indexing, padding, tiles beyond 32 lanes, the
// grid-stride over samples (and the tensor-core kernels' prefetch of the
// next sample), for several shapes, warps per block and grid sizes.
// mma.sync m16n8k8 TF32 is emulated warp-wide from the PTX ISA's fragment
// layout (independently of how the kernels fill the fragments), cvt.rna
// bit for bit, and mma.sync m16n8k16 f16/bf16 likewise from its fragment
// layout; the tensor-core kernels are checked against a reference on
// TF32-rounded operands (x0 and the dOut passthrough exact), the half mma
// ones (half storage only) against the reference on the half values, also
// with out and dOut one element off 16-byte alignment (their scalar paths). Every check
// runs for each storage type of the kernels' templates: float, and the
// half_t / bf16_t of the _f16 / _bf16 kernels (operands rounded to the
// type, the reference computed from the rounded values, outputs compared
// within the type's rounding; the half types' values are exact in TF32).
// check_kernels.sh builds it with common.cuh and the kernels extracted
// from nn.cu (st.inc, k4.inc, tc.inc, hm.inc, tri.inc). No CUDA needed; it
// cannot see timing or bank conflicts, only results. Unwritten shared memory
// (all bytes 0xff: NaN as float, float16 and bfloat16) and outputs read as
// NaN.
#include <cstdio>
#include <cmath>
#include <vector>
#include <thread>
#include <barrier>
#include <random>
#include <memory>
#include <algorithm>
#include <cstring>
#include <cstdint>
#include <type_traits>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
using std::min; using std::max;
struct D3 { unsigned x, y, z; };
thread_local D3 threadIdx;
D3 blockIdx, blockDim, gridDim;
thread_local std::barrier<>* wbar;
void __syncwarp(unsigned = 0xffffffffu) { wbar->arrive_and_wait(); }
// Declarations common.cuh's helpers refer to (unused here).
template <class T> T __shfl_down_sync(unsigned, T, int, int = 32);
unsigned long long atomicCAS(unsigned long long*, unsigned long long, unsigned long long);
void __syncthreads();
#include "../common.cuh"
struct alignas(16) nn_f4 { float x, y, z, w; };
alignas(16) nn_f4 nn_smem[1 << 16];
unsigned __float_as_uint(float x) { unsigned u; std::memcpy(&u, &x, 4); return u; }
float __uint_as_float(unsigned u) { float x; std::memcpy(&x, &u, 4); return x; }
// cvt.rna.tf32.f32: round to 10 mantissa bits, ties away from zero (finite x).
unsigned nn_tf32(float x) {
  unsigned u = __float_as_uint(x);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  return u;
}
float tf32f(float x) { return __uint_as_float(nn_tf32(x)); }
// One warp's mma.sync operands, exchanged through memory between barriers.
struct WarpMMA { unsigned a[32][4], b[32][2]; float c[32][4]; };
thread_local WarpMMA* wmma;
thread_local long mmas; // mma calls of this lane
// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 from the PTX ISA's
// fragments: A[r][k] is register (r>=8)+2(k>=4) of lane 4(r%8)+k%4; B[k][c]
// register k>=4 of lane 4c+k%4; C[r][c] register 2(r>=8)+c%2 of lane
// 4(r%8)+c/2. Inputs are used as TF32 (low 13 bits ignored).
void nn_mma_tf32(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  int l = threadIdx.x & 31;
  unsigned* a = wmma->a[l]; a[0] = a0; a[1] = a1; a[2] = a2; a[3] = a3;
  wmma->b[l][0] = b0; wmma->b[l][1] = b1;
  for (int h = 0; h < 4; h++) wmma->c[l][h] = c[h];
  wbar->arrive_and_wait();
  float d[4];
  for (int h = 0; h < 4; h++) {
    int r = l / 4 + 8 * (h >> 1), col = 2 * (l % 4) + (h & 1);
    double sum = wmma->c[4 * (r % 8) + col / 2][2 * (r >= 8) + col % 2]; // = c[h]
    for (int k = 0; k < 8; k++) {
      float av = __uint_as_float(wmma->a[4 * (r % 8) + k % 4][(r >= 8) + 2 * (k >= 4)] & 0xffffe000u);
      float bv = __uint_as_float(wmma->b[4 * col + k % 4][k >= 4] & 0xffffe000u);
      sum += (double)av * bv;
    }
    d[h] = (float)sum;
  }
  wbar->arrive_and_wait();
  for (int h = 0; h < 4; h++) c[h] = d[h];
  mmas++;
}
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 from the
// PTX ISA's fragments, each register two adjacent k (the lower k in the low
// 16 bits): A register r of lane l holds row l/4+8(r%2) at k-pair
// l%4+4(r/2); B register r of lane l column l/4 at k-pair l%4+4r; C as
// m16n8k8's. Elements decoded as T (dec), products and sums in double.
template <class Dec> void mma16(Dec dec, float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  int l = threadIdx.x & 31;
  unsigned* a = wmma->a[l]; a[0] = a0; a[1] = a1; a[2] = a2; a[3] = a3;
  wmma->b[l][0] = b0; wmma->b[l][1] = b1;
  for (int h = 0; h < 4; h++) wmma->c[l][h] = c[h];
  wbar->arrive_and_wait();
  auto el = [](unsigned w, int k) { return (h16)(k & 1 ? w >> 16 : w & 0xffffu); };
  float d[4];
  for (int h = 0; h < 4; h++) {
    int r = l / 4 + 8 * (h >> 1), col = 2 * (l % 4) + (h & 1);
    double sum = wmma->c[4 * (r % 8) + col / 2][2 * (r >= 8) + col % 2]; // = c[h]
    for (int k = 0; k < 16; k++) {
      int kp = k / 2; // k-pair
      double av = dec(el(wmma->a[4 * (r % 8) + kp % 4][(r >= 8) + 2 * (kp >= 4)], k));
      double bv = dec(el(wmma->b[4 * col + kp % 4][kp >= 4], k));
      sum += av * bv;
    }
    d[h] = (float)sum;
  }
  wbar->arrive_and_wait();
  for (int h = 0; h < 4; h++) c[h] = d[h];
  mmas++;
}
void nn_mma16(const half_t*, float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  mma16([](h16 v) { return host_h2f(v); }, c, a0, a1, a2, a3, b0, b1);
}
void nn_mma16(const bf16_t*, float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  mma16([](h16 v) { return b2f(v); }, c, a0, a1, a2, a3, b0, b1);
}
#include "tri.inc"
#include "st.inc"
#include "k4.inc"
#include "tc.inc"
#include "hm.inc"
template <class K> void launch(int grid, int block, K k) {
  gridDim = {(unsigned)grid, 1, 1}; blockDim = {(unsigned)block, 1, 1};
  for (int b = 0; b < grid; b++) {
    blockIdx = {(unsigned)b, 1, 1};
    std::memset(nn_smem, 0xff, sizeof nn_smem); // catch reads of unwritten shared: NaN in every type
    std::vector<std::unique_ptr<std::barrier<>>> bars;
    std::vector<WarpMMA> mm(block / 32);
    for (int w = 0; w < block / 32; w++) bars.emplace_back(new std::barrier<>(32));
    std::vector<std::thread> ts;
    for (int t = 0; t < block; t++)
      ts.emplace_back([&, t] { threadIdx = {(unsigned)t, 0, 0}; wbar = bars[t / 32].get(); wmma = &mm[t / 32]; k(); });
    for (auto& t : ts) t.join();
  }
}
// Storage types: ld/st of element i, the name, and the output tolerance
// relative to max(1, |reference|) (float: the fp32 kernels' 1e-4; half:
// the type's rounding, 2^-11 or 2^-8, with room for fp32 accumulation).
template <class T> float ld(const std::vector<T>& v, size_t i) { return ldt(v.data(), (i64)i); }
template <class T> void fill(std::vector<T>& v, float x) { for (size_t i = 0; i < v.size(); i++) stt(v.data(), (i64)i, x); }
template <class T> struct Traits;
template <> struct Traits<float> { static constexpr const char* name = "f32"; static constexpr double tol = 1e-4; };
template <> struct Traits<half_t> { static constexpr const char* name = "f16"; static constexpr double tol = 1e-3; };
template <> struct Traits<bf16_t> { static constexpr const char* name = "bf16"; static constexpr double tol = 8e-3; };
template <class T> double relerr(double got, double want) {
  double e = std::fabs(got - want) / std::max(1.0, std::fabs(want));
  return e <= Traits<T>::tol ? e : 1e9; // NaN too
}
template <class T> std::vector<T> randv(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> U(-1, 1);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; i++) stt(v.data(), (i64)i, U(rng));
  return v;
}

// The kernel families check runs.
enum Kind { kWarp, kTC, kHMMA, kHMMA64 };
const char* kindName[] = {"warp", "tc", "hmma", "hmma64"};

// check runs the warp kernels (interaction_fwd4/bwd4), the TF32
// tensor-core ones (interaction_fwd_tc/bwd_tc) or the native half mma ones
// (interaction_fwd_hmma/bwd_hmma, half T only; kHMMA64 with the 64-column
// forward, interaction_fwd_hmma64) on one shape for several
// warps per block and grid sizes; with off, out and dOut start off
// elements into their buffers (not 16-byte aligned for off = 1: the half
// mma kernels' scalar stores and loads). It returns the failures.
template <class T> int check(Kind kind, int B, int d, int n, std::mt19937& rng, int off = 0) {
  const bool tc = kind != kWarp;
  int N = n + 1, W = d + n * (n + 1) / 2 + 1, bad = 0;
  std::vector<T> x0 = randv<T>(B * d, rng), emb = randv<T>(B * n * d, rng), dOutb = randv<T>(B * W + off, rng);
  const T* dOutp = dOutb.data() + off;
  auto r32 = [&](float v) -> double { return tc ? tf32f(v) : v; }; // half values: exact in TF32
  auto F = [&](int s, int v, int c) -> double { return r32(v == 0 ? ld(x0, s * d + c) : ld(emb, (s * n + v - 1) * d + c)); };
  auto ldo = [&](const std::vector<T>& v, size_t i) { return ld(v, i + off); }; // out and dOut
  std::vector<T> outb(B * W + off), dx0(B * d), demb(B * n * d);
  T* outp = outb.data() + off;
  for (int wpb : {1, 2}) for (int grid : {1, 3}) {
    fill(outb, NAN); fill(dx0, NAN); fill(demb, NAN);
    if (kind == kHMMA || kind == kHMMA64) {
      if constexpr (!std::is_same_v<T, float>) {
        if (kind == kHMMA) launch(grid, 32 * wpb, [&] { nn_fwd_hmma128<T>(outp, x0.data(), emb.data(), B, n, d); });
        else launch(grid, 32 * wpb, [&] { nn_fwd_hmma64<T>(outp, x0.data(), emb.data(), B, n, d); });
        launch(grid, 32 * wpb, [&] { nn_bwd_hmma<T>(dx0.data(), demb.data(), dOutp, x0.data(), emb.data(), B, n, d); });
      }
    } else if (tc) {
      launch(grid, 32 * wpb, [&] { nn_fwd_tc<T>(outp, x0.data(), emb.data(), B, n, d); });
      launch(grid, 32 * wpb, [&] { nn_bwd_tc<T>(dx0.data(), demb.data(), dOutp, x0.data(), emb.data(), B, n, d); });
    } else {
      launch(grid, 32 * wpb, [&] { nn_fwd4<T>(outp, x0.data(), emb.data(), B, n, d); });
      launch(grid, 32 * wpb, [&] { nn_bwd4<T>(dx0.data(), demb.data(), dOutp, x0.data(), emb.data(), B, n, d); });
    }
    double e1 = 0, e2 = 0;
    for (int s = 0; s < B; s++) {
      for (int k = 0; k < W; k++) {
        double r, e;
        if (k < d) {
          e = ldo(outb, s * W + k) == ld(x0, s * d + k) ? 0 : 1e9; // x0 passes exact
        } else {
          if (k == W - 1) r = 0; else {
            int q = k - d, j = 1; while ((j + 1) * j / 2 <= q) j++; int i = q - j * (j - 1) / 2;
            r = 0; for (int c = 0; c < d; c++) r += F(s, i, c) * F(s, j, c);
          }
          e = k == W - 1 ? (ldo(outb, s * W + k) == 0 ? 0 : 1e9) : relerr<T>(ldo(outb, s * W + k), r); // the pad exactly 0
        }
        e1 = std::max(e1, e);
      }
      for (int v = 0; v < N; v++) for (int c = 0; c < d; c++) {
        double r = v == 0 ? ldo(dOutb, s * W + c) : 0;
        for (int u = 0; u < N; u++) if (u != v) { int a = min(u, v), b = max(u, v); r += r32(ldo(dOutb, s * W + d + b * (b - 1) / 2 + a)) * F(s, u, c); }
        double g = v == 0 ? ld(dx0, s * d + c) : ld(demb, (s * n + v - 1) * d + c);
        e2 = std::max(e2, relerr<T>(g, r));
      }
    }
    // Outside the batch (the elements before an offset out) stays unwritten.
    for (int i = 0; i < off; i++) if (!std::isnan(ld(outb, i))) e1 = 1e9;
    printf("%s %s B%d d%d n%d off%d wpb%d grid%d: fwd %.2g bwd %.2g\n", kindName[kind], Traits<T>::name, B, d, n, off, wpb, grid, e1, e2);
    if (e1 > Traits<T>::tol || e2 > Traits<T>::tol) bad++;
  }
  return bad;
}

template <class T> int checkAll(std::mt19937& rng) {
  int shapes[][3] = {{1, 4, 1}, {7, 4, 1}, {5, 16, 8}, {33, 128, 26}, {9, 64, 31}, {3, 8, 40}, {6, 4, 3}, {11, 12, 4}};
  int bad = 0;
  for (auto& sh : shapes) bad += check<T>(kWarp, sh[0], sh[1], sh[2], rng);
  // The tensor-core kernels: N = n+1 ≤ 32, d a multiple of 4; tile
  // boundaries at N = 8, 9, 16, 17, 24, 25, 32; d not a multiple of 16 or
  // 32; W a multiple of 4 (vector stores) or not; several samples a warp.
  int tcShapes[][3] = {{1, 4, 1}, {7, 4, 1}, {5, 16, 8}, {33, 128, 26}, {9, 64, 31}, {6, 4, 3}, {11, 12, 4}, {4, 20, 7},
                       {3, 36, 8}, {3, 44, 15}, {4, 8, 16}, {3, 52, 23}, {3, 24, 24}, {2, 132, 31}, {5, 16, 13}};
  for (auto& sh : tcShapes) bad += check<T>(kTC, sh[0], sh[1], sh[2], rng);
  if constexpr (!std::is_same_v<T, float>) {
    // The half mma kernels: N ≤ 32, d a multiple of 8; N = 2, 8, 9, 16, 17,
    // 25, 27, 32 (n-tiles, m-tile 1, k-step 1 on and off); d = 8, 16, 64,
    // 128, 136 and 200 (a partial 32-column group, a partial 64-column
    // chunk, a second 128-column item); W a multiple of 8 (16-byte row
    // stores and pair-gradient loads), of 4 only, or odd; several samples a
    // warp; then out and dOut off 16-byte alignment.
    int hmShapes[][3] = {{1, 8, 1},   {7, 16, 7},   {5, 16, 8},  {33, 128, 26}, {9, 64, 31}, {3, 136, 16},
                         {4, 200, 24}, {3, 8, 16},  {6, 24, 26}, {2, 264, 31},  {5, 16, 13}, {3, 40, 3},
                         {4, 48, 25},  {3, 72, 23},  {5, 32, 15}};
    for (auto& sh : hmShapes) bad += check<T>(kHMMA, sh[0], sh[1], sh[2], rng);
    // The 64-column forward variant (and the backward again) on the shapes
    // where the item size matters: d = 8, 64, 72, 128, 136, 200, 264.
    for (int i : {0, 3, 4, 5, 6, 9, 13}) bad += check<T>(kHMMA64, hmShapes[i][0], hmShapes[i][1], hmShapes[i][2], rng);
    for (auto& sh : {hmShapes[3], hmShapes[1], hmShapes[4]}) bad += check<T>(kHMMA, sh[0], sh[1], sh[2], rng, 1);
  }
  return bad;
}

int main() {
  std::mt19937 rng(1);
  int bad = checkAll<float>(rng) + checkAll<half_t>(rng) + checkAll<bf16_t>(rng);
  printf(bad ? "FAIL\n" : "OK\n");
  return bad;
}
