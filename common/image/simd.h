/* simd: the image kernels by instruction set, for tests and benchmarks that
 * compare or time them. Not for pipeline code: the public entry points
 * (sl_img_resize_rect_ex, sl_img_normalize_chw) pick the fastest path this
 * build and CPU run, and every path gives the same bytes. */
#ifndef SL_IMG_SIMD_H
#define SL_IMG_SIMD_H

#include <stdint.h>

#include "common/sample/tensor.h"

typedef enum {
    SL_SIMD_AUTO = 0, /* the fastest this build and CPU run */
    SL_SIMD_SCALAR,   /* plain C */
    SL_SIMD_SSE2,     /* x86-64 builds */
    SL_SIMD_AVX2,     /* x86-64 builds on a CPU with AVX2 */
} sl_simd_e;

/* 1 if this build and this CPU can run path, else 0. Any thread. */
int sl_simd_ok(sl_simd_e path);

/* sl_img_resize_rect_ex on the given path; -ENOTSUP when sl_simd_ok(path)
 * is 0. */
int sl_img_resize_rect_path(const sl_tensor_t *in, double x, double y, double w, double h,
                            uint32_t out_h, uint32_t out_w, uint32_t flags, sl_tensor_t *scratch,
                            sl_tensor_t *out, sl_simd_e path);

/* sl_img_normalize_chw on the given path (SSE2 is the scalar table lookup:
 * the AVX2 one gathers from the same table); -ENOTSUP as above. */
int sl_img_normalize_chw_path(const sl_tensor_t *in, const float mean[3], const float std[3],
                              sl_tensor_t *out, sl_simd_e path);

#endif
