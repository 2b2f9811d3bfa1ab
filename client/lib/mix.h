/* mix: batch-level MixUp / CutMix (the spec's "batch_transforms") with
 * torchvision's semantics (references/classification/transforms.py
 * RandomMixup, RandomCutmix; RandomChoice between them when both are
 * given): applied where a batch is handed to the loop, whose samples are
 * final there. Every draw comes from the counter-based stream of (seed,
 * epoch, the batch's first position, CL_MIX_STREAM + rank), so a batch
 * mixes the same whatever ran where. */
#ifndef CL_MIX_H
#define CL_MIX_H

#include <stdint.h>

#include "common/spec/spec.h"

#define CL_MIX_STREAM 0x6d69780000000000ull /* "mix": above every stage's stream */

enum { CL_MIX_NONE = 0, CL_MIX_MIXUP = 1, CL_MIX_CUTMIX = 2 }; /* = SLUICE_MIX_* */

typedef struct cl_mix_s {
    int op;          /* CL_MIX_*: what applies (NONE: the batch stays, labels one-hot) */
    double lam;      /* the weight of each sample itself; 1.0 for NONE */
    uint32_t box[4]; /* CUTMIX: x1, y1, x2, y2 (end exclusive), pasted from the rolled batch */
} cl_mix_t;

/* The draws for one batch of h x w images: which transform (a uniform
 * choice when there are two), whether it applies (p), lambda ~ Beta(alpha,
 * alpha) and, for CutMix, the box centred at a uniform pixel with area ratio
 * 1 - lambda clamped to the image, lambda then 1 - box area / (h * w). */
void cl_mix_draw(const sl_spec_t *spec, uint64_t epoch, uint64_t first_position, uint32_t h,
                 uint32_t w, cl_mix_t *ret);

/* Applies m to n float32 images (chw: [n, c, h, w], else [n, h, w, c]) in
 * place, sample j mixed with sample j - 1 (j = 0 with n - 1: torch.roll by
 * 1), and writes the soft labels [n x k]: lam * onehot(y_j) + (1 - lam) *
 * onehot(y_{j-1}), in float32 as torch computes them. scratch holds one
 * image (c * h * w floats). Returns 0, -EINVAL for a label outside 0..k-1
 * (nothing written). */
int cl_mix_apply(const cl_mix_t *m, float *data, uint32_t n, uint32_t c, uint32_t h, uint32_t w,
                 int chw, const int32_t *labels, uint32_t k, float *soft, float *scratch);

#endif
