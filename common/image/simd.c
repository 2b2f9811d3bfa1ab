/* simd: which kernels this build and CPU run (common/image/simd.h). */
#include "common/image/simd.h"

int sl_simd_ok(sl_simd_e path)
{
    switch (path) {
    case SL_SIMD_AUTO:
    case SL_SIMD_SCALAR:
        return 1;
    case SL_SIMD_SSE2:
#if defined(__x86_64__)
        return 1;
#else
        return 0;
#endif
    case SL_SIMD_AVX2:
#if defined(__x86_64__)
        /* libgcc's cpu model, filled by a constructor before main. */
        return __builtin_cpu_supports("avx2") != 0;
#else
        return 0;
#endif
    }
    return 0;
}
