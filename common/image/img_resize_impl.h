/* img_resize_impl: the resample's kernels by instruction set, for tests and
 * benchmarks that compare or time them. Not for pipeline code: the public
 * sl_img_resize_rect_ex picks the fastest path, and every path gives the
 * same bytes. */
#ifndef SL_IMG_RESIZE_IMPL_H
#define SL_IMG_RESIZE_IMPL_H

#include <stdint.h>

#include "common/image/tensor.h"

typedef enum {
    SL_RESIZE_PATH_AUTO = 0, /* the fastest this build and CPU run */
    SL_RESIZE_PATH_SCALAR,   /* plain C */
    SL_RESIZE_PATH_SSE2,     /* x86-64 builds */
    SL_RESIZE_PATH_AVX2,     /* x86-64 builds on a CPU with AVX2 */
} sl_resize_path_e;

/* 1 if this build and this CPU can run path, else 0. */
int sl_img_resize_path_ok(sl_resize_path_e path);

/* sl_img_resize_rect_ex on the given path; -ENOTSUP when
 * sl_img_resize_path_ok(path) is 0. */
int sl_img_resize_rect_path(const sl_tensor_t *in, double x, double y, double w, double h,
                            uint32_t out_h, uint32_t out_w, uint32_t flags, sl_tensor_t *scratch,
                            sl_tensor_t *out, sl_resize_path_e path);

#endif
