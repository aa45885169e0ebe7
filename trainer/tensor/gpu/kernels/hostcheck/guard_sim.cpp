// guard_sim.cpp runs the overflow guard's kernels (guard.cu: guard_check,
// guard_end) on the host, block by block and thread by thread (they use no
// barrier or warp collective), and checks guard_check against a scalar
// reference: every dtype (float32, float16, bfloat16), lengths around the
// 16-byte groups, every start offset within a 16-byte line, a bad element
// (±Inf, NaN with any payload) at every position, and finite extremes
// (largest finite, subnormals, −0) that must not raise the flag, for
// several grids. check_kernels.sh builds it with guard.cu included whole.
// No CUDA needed; results only, no timing.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "shim.h"
dim3_ threadIdx, blockIdx, blockDim, gridDim;

#include "../common.cuh"
#include "../guard.cu"

static void launch(unsigned grid, unsigned block, const void* x, int dt, i64 n, int* flag) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; b++)
        for (unsigned t = 0; t < block; t++) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            guard_check(x, dt, n, flag);
        }
}

struct Kind {
    const char* name;
    int dt, es;
    std::vector<uint32_t> bad, finite;  // bit patterns
};

int main() {
    const Kind kinds[] = {
        {"float32", DT_F32, 4,
         {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu},
         {0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x80000000u, 0x3f800000u, 0x007fffffu}},
        {"float16", DT_F16, 2,
         {0x7c00u, 0xfc00u, 0x7e00u, 0xfe00u, 0x7c01u, 0x7fffu},
         {0x7bffu, 0xfbffu, 0x0001u, 0x8000u, 0x3c00u, 0x03ffu}},
        {"bfloat16", DT_BF16, 2,
         {0x7f80u, 0xff80u, 0x7fc0u, 0xffc0u, 0x7f81u, 0x7fffu},
         {0x7f7fu, 0xff7fu, 0x0001u, 0x8000u, 0x3f80u, 0x007fu}},
    };
    const unsigned grids[][2] = {{1, 32}, {3, 64}, {2, 256}};
    std::mt19937 rng(7);
    int fails = 0, runs = 0;
    alignas(16) static unsigned char buf[4096 + 64];
    for (const Kind& k : kinds) {
        for (int n = 0; n <= 72; n++) {
            for (int off = 0; off < 16; off += k.es) {
                unsigned char* x = buf + off;
                auto put = [&](int i, uint32_t v) { std::memcpy(x + (size_t)i * k.es, &v, k.es); };
                // Finite values, the extremes among them: no flag.
                for (int i = 0; i < n; i++) put(i, k.finite[rng() % k.finite.size()]);
                for (const auto& g : grids) {
                    int flag = 0;
                    launch(g[0], g[1], x, k.dt, n, &flag);
                    runs++;
                    if (flag != 0) {
                        printf("guard_check %s n %d offset %d grid %ux%u: flag raised on finite values\n", k.name, n, off, g[0], g[1]);
                        fails++;
                    }
                }
                // One bad element at each position.
                for (int pos = 0; pos < n; pos++) {
                    uint32_t old = 0;
                    std::memcpy(&old, x + (size_t)pos * k.es, k.es);
                    put(pos, k.bad[(pos + off) % k.bad.size()]);
                    const auto& g = grids[pos % 3];
                    int flag = 0;
                    launch(g[0], g[1], x, k.dt, n, &flag);
                    runs++;
                    if (flag != 1) {
                        printf("guard_check %s n %d offset %d grid %ux%u: bad element at %d not found\n", k.name, n, off, g[0], g[1], pos);
                        fails++;
                    }
                    put(pos, old);
                }
            }
        }
        // A longer run: several grid strides, the bad element last.
        const int n = 4096 / k.es - 3;
        unsigned char* x = buf + k.es;
        for (int i = 0; i < n; i++) std::memcpy(x + (size_t)i * k.es, &k.finite[i % k.finite.size()], k.es);
        std::memcpy(x + (size_t)(n - 1) * k.es, &k.bad[0], k.es);
        int flag = 0;
        launch(2, 32, x, k.dt, n, &flag);
        runs++;
        if (flag != 1) {
            printf("guard_check %s n %d: last element not found\n", k.name, n);
            fails++;
        }
    }
    // A raised flag: the kernel returns before it reads x.
    int flag = 1;
    launch(2, 32, nullptr, DT_F32, 1000, &flag);
    // guard_end counts the flag once per launch, whatever the grid.
    u64 count = 5;
    int f1 = 1, f0 = 0;
    gridDim = {2, 1, 1};
    blockDim = {32, 1, 1};
    for (unsigned b = 0; b < 2; b++)
        for (unsigned t = 0; t < 32; t++) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            guard_end(&f1, &count);
            guard_end(&f0, &count);
        }
    if (count != 6) {
        printf("guard_end: count %llu, want 6\n", count);
        fails++;
    }
    if (fails) {
        printf("guard_sim: %d of %d checks failed\n", fails, runs);
        return 1;
    }
    return 0;
}
