// Fill, Convert: the memory kernels behind Alloc/Fill/Convert.

extern "C" __global__ void fill_u32(u32* p, u32 v, i64 n) { FOR(i, n) p[i] = v; }
extern "C" __global__ void fill_u64(u64* p, u64 v, i64 n) { FOR(i, n) p[i] = v; }

// convert: dtype codes 1 f32, 3 i32, 4 i64, 5 u32, 6 f16, 7 bf16
// (tensor.DType); Go conversion rules (float → int truncates toward zero;
// integers to f16/bf16 go through float32).
extern "C" __global__ void convert(void* dst, int ddt, const void* src, int sdt, i64 n) {
    FOR(i, n) {
        if (sdt == 4) {
            i64 v = ((const i64*)src)[i];
            switch (ddt) {
            case 1: ((float*)dst)[i] = (float)v; break;
            case 3: ((int*)dst)[i] = (int)v; break;
            case 4: ((i64*)dst)[i] = v; break;
            case 5: ((u32*)dst)[i] = (u32)v; break;
            case DT_F16: ((h16*)dst)[i] = f2h((float)v); break;
            case DT_BF16: ((h16*)dst)[i] = f2b((float)v); break;
            }
            continue;
        }
        if (sdt == 3 || sdt == 5) {
            i64 v = sdt == 3 ? (i64)((const int*)src)[i] : (i64)((const u32*)src)[i];
            switch (ddt) {
            case 1: ((float*)dst)[i] = (float)v; break;
            case 3: ((int*)dst)[i] = (int)v; break;
            case 4: ((i64*)dst)[i] = v; break;
            case 5: ((u32*)dst)[i] = (u32)v; break;
            case DT_F16: ((h16*)dst)[i] = f2h((float)v); break;
            case DT_BF16: ((h16*)dst)[i] = f2b((float)v); break;
            }
            continue;
        }
        float v = ldv(src, sdt, i); // f32, f16, bf16
        switch (ddt) {
        case 1: ((float*)dst)[i] = v; break;
        case DT_F16: ((h16*)dst)[i] = f2h(v); break;
        case DT_BF16: ((h16*)dst)[i] = f2b(v); break;
        case 3: ((int*)dst)[i] = (int)v; break;
        case 4: ((i64*)dst)[i] = (i64)v; break;
        case 5: ((u32*)dst)[i] = (u32)(i64)v; break;
        }
    }
}
