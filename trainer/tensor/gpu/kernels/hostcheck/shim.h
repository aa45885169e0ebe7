// shim.h lets a host C++ compiler syntax- and type-check the kernels
// without CUDA: `make kernels-check` (g++ -fsyntax-only). It declares the
// CUDA built-ins the kernels use; it is never part of a GPU build. Add a
// declaration here when a kernel needs a new built-in.
#pragma once
#include <cstddef>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__
#define __launch_bounds__(...)
struct dim3_ { unsigned x, y, z; };
extern dim3_ threadIdx, blockIdx, blockDim, gridDim;
extern int warpSize;
void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);
void __threadfence();
int __syncthreads_or(int);
int __syncthreads_count(int);
template <class T> T __shfl_down_sync(unsigned, T, int, int = 32);
template <class T> T __shfl_up_sync(unsigned, T, int, int = 32);
template <class T> T __shfl_xor_sync(unsigned, T, int, int = 32);
template <class T> T __shfl_sync(unsigned, T, int, int = 32);
unsigned __ballot_sync(unsigned, int);
int __any_sync(unsigned, int);
int __all_sync(unsigned, int);
template <class T> unsigned __match_any_sync(unsigned, T);
int __popc(unsigned);
int __popcll(unsigned long long);
int __clz(int);
int __clzll(long long);
int __ffs(int);
int __ffsll(long long);
unsigned __umulhi(unsigned, unsigned);
float __fmul_rn(float, float);
float __fadd_rn(float, float);
unsigned long long __umul64hi(unsigned long long, unsigned long long);
unsigned __brev(unsigned);
int atomicAdd(int*, int);
unsigned atomicAdd(unsigned*, unsigned);
unsigned long long atomicAdd(unsigned long long*, unsigned long long);
float atomicAdd(float*, float);
double atomicAdd(double*, double);
int atomicCAS(int*, int, int);
unsigned atomicCAS(unsigned*, unsigned, unsigned);
unsigned long long atomicCAS(unsigned long long*, unsigned long long, unsigned long long);
int atomicMax(int*, int);
int atomicMin(int*, int);
unsigned atomicOr(unsigned*, unsigned);
unsigned long long atomicOr(unsigned long long*, unsigned long long);
int atomicExch(int*, int);
unsigned long long atomicExch(unsigned long long*, unsigned long long);
long long atomicMax(long long*, long long);
template <class T> T __ldg(const T*);
float __expf(float);
float __logf(float);
float __fdividef(float, float);
float __int_as_float(int);
int __float_as_int(float);
unsigned __float_as_uint(float);
float __uint_as_float(unsigned);
double __longlong_as_double(long long);
long long __double_as_longlong(double);
float rsqrtf(float);
float expf(float); float logf(float); float log1pf(float); float sqrtf(float); float fabsf(float);
float powf(float, float); float fmaxf(float, float); float fminf(float, float); float tanhf(float);
float expm1f(float); float copysignf(float, float); float fmaf(float, float, float);
double exp(double); double log(double); double log1p(double); double sqrt(double); double fabs(double);
double pow(double, double); double fmax(double, double); double fmin(double, double); double expm1(double);
int isnan(double); int isinf(double);
int min(int, int); int max(int, int);
long long min(long long, long long); long long max(long long, long long);
unsigned min(unsigned, unsigned); unsigned max(unsigned, unsigned);
float min(float, float); float max(float, float);
