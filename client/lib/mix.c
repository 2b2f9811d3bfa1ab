/* mix: see mix.h. */
#include "client/lib/mix.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/base/rng.h"

void cl_mix_draw(const sl_spec_t *spec, uint64_t epoch, uint64_t first_position, uint32_t h,
                 uint32_t w, cl_mix_t *ret)
{
    *ret = (cl_mix_t){.op = CL_MIX_NONE, .lam = 1.0};
    if (spec->nbatch_tfs == 0) {
        return;
    }
    sl_rng_t r;
    sl_rng_init(&r, spec->seed, epoch, first_position, CL_MIX_STREAM + spec->rank);
    uint32_t pick = spec->nbatch_tfs > 1 ? (uint32_t)sl_rng_below(&r, spec->nbatch_tfs) : 0;
    const sl_batch_tf_t *tf = &spec->batch_tfs[pick];
    /* torchvision: `if torch.rand(1).item() >= self.p: return` */
    if (sl_rng_uniform(&r) >= tf->p) {
        return;
    }
    double lam = sl_rng_beta(&r, tf->alpha, tf->alpha);
    if (tf->op == SL_BATCH_TF_MIXUP) {
        *ret = (cl_mix_t){.op = CL_MIX_MIXUP, .lam = lam};
        return;
    }
    if (h == 0 || w == 0) {
        return;
    }
    int64_t rx = (int64_t)sl_rng_below(&r, w), ry = (int64_t)sl_rng_below(&r, h);
    double half = 0.5 * sqrt(1.0 - lam);
    int64_t rw = (int64_t)(half * w), rh = (int64_t)(half * h);
    int64_t x1 = rx - rw < 0 ? 0 : rx - rw, y1 = ry - rh < 0 ? 0 : ry - rh;
    int64_t x2 = rx + rw > w ? w : rx + rw, y2 = ry + rh > h ? h : ry + rh;
    *ret = (cl_mix_t){.op = CL_MIX_CUTMIX,
                      .lam = 1.0 - (double)((x2 - x1) * (y2 - y1)) / ((double)w * h),
                      .box = {(uint32_t)x1, (uint32_t)y1, (uint32_t)x2, (uint32_t)y2}};
}

/* dst = dst * a + src * b over count floats (torch's mul_, mul_, add_). */
static void blend(float *dst, const float *src, size_t count, float a, float b)
{
    for (size_t i = 0; i < count; i++) {
        float x = dst[i] * a;
        float y = src[i] * b;
        dst[i] = x + y;
    }
}

/* The box of src over dst: rows y1..y2 of width x1..x2, per channel (CHW) or
 * with the channels interleaved (HWC). */
static void paste(float *dst, const float *src, const cl_mix_t *m, uint32_t c, uint32_t h,
                  uint32_t w, int chw)
{
    uint32_t x1 = m->box[0], y1 = m->box[1], x2 = m->box[2], y2 = m->box[3];
    if (x2 <= x1 || y2 <= y1) {
        return;
    }
    for (uint32_t ch = 0; ch < (chw ? c : 1); ch++) {
        for (uint32_t y = y1; y < y2; y++) {
            size_t at = chw ? ((size_t)ch * h + y) * w + x1 : ((size_t)y * w + x1) * c;
            size_t len = (size_t)(x2 - x1) * (chw ? 1 : c);
            memcpy(dst + at, src + at, len * sizeof(float));
        }
    }
}

int cl_mix_apply(const cl_mix_t *m, float *data, uint32_t n, uint32_t c, uint32_t h, uint32_t w,
                 int chw, const int32_t *labels, uint32_t k, float *soft, float *scratch)
{
    for (uint32_t i = 0; i < n; i++) {
        if (labels[i] < 0 || (uint32_t)labels[i] >= k) {
            return -EINVAL;
        }
    }
    float a = (float)m->lam, b = (float)(1.0 - m->lam);
    size_t per = (size_t)c * h * w;
    if (m->op != CL_MIX_NONE && n > 0) {
        /* Back to front, so sample j - 1 is still unmixed when j reads it;
         * sample 0 reads the last one's original, kept in scratch. */
        memcpy(scratch, data + (size_t)(n - 1) * per, per * sizeof(float));
        for (uint32_t j = n; j-- > 0;) {
            float *dst = data + (size_t)j * per;
            const float *src = j > 0 ? dst - per : scratch;
            if (m->op == CL_MIX_MIXUP) {
                blend(dst, src, per, a, b);
            } else {
                paste(dst, src, m, c, h, w, chw);
            }
        }
    }
    for (uint32_t j = 0; j < n; j++) {
        float *row = soft + (size_t)j * k;
        uint32_t yj = (uint32_t)labels[j], yr = (uint32_t)labels[j > 0 ? j - 1 : n - 1];
        memset(row, 0, (size_t)k * sizeof(float));
        if (m->op == CL_MIX_NONE) {
            row[yj] = 1.0f;
            continue;
        }
        row[yj] = a; /* 1 * a + 0 * b */
        row[yr] = yr == yj ? a + b : b;
    }
    return 0;
}
