/* augment_impl: what the augment_*.c files share. Not a public API. */
#ifndef SL_AUGMENT_IMPL_H
#define SL_AUGMENT_IMPL_H

#include <errno.h>
#include <math.h>
#include <stdint.h>

#include "common/sample/tensor.h"

/* Bytes must not depend on the host (docs/design.md invariant 2): a build
 * for a CPU with FMA would otherwise fuse a * b + c into one rounding here
 * and not on another host. Every file including this header, from here on. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC optimize("fp-contract=off")
#endif

/* The ops work on uint8 HWC images of 1 or 3 channels (torchvision's
 * _assert_channels) whose bytes match their shape: 0 or -EINVAL. */
static inline int sl_aug_check(const sl_tensor_t *t)
{
    if (t == NULL || t->dtype != SL_DT_U8 || t->layout != SL_LAYOUT_HWC || t->h == 0 || t->w == 0 ||
        (t->c != 1 && t->c != 3) || t->data == NULL || t->nbytes != (size_t)t->h * t->w * t->c) {
        return -EINVAL;
    }
    return 0;
}

/* torch.round then .to(uint8) of a float32: half to even, clamped against
 * float drift past the ends. */
static inline uint8_t sl_aug_round_u8(float v)
{
    v = rintf(v);
    return (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
}

#endif
