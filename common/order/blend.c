/* blend: a mixed spec's epoch order (blend.h). Pure; any thread. */
#include "common/order/blend.h"

#include <errno.h>
#include <stdlib.h>

#include "common/base/rng.h"

/* Each source's own stream: the job's seed mixed with its index. */
#define BLEND_SEED_MIX UINT64_C(0x9E3779B97F4A7C15)

typedef struct blend_src_s {
    uint64_t size, offset;
    uint64_t drawn; /* draws this epoch */
    uint64_t pass;  /* the pass perm holds, UINT64_MAX: none yet */
    uint64_t *perm; /* size entries */
} blend_src_t;

uint64_t sl_spec_epoch_len(const sl_spec_t *spec, uint64_t n)
{
    return spec->mix != NULL ? spec->mix->samples_per_epoch : n;
}

uint64_t sl_blend_step(const sl_mix_t *mix, uint64_t step_len, uint64_t epoch, uint64_t p)
{
    uint64_t g = step_len > 0 ? step_len : 1;
    uint64_t per_epoch = (mix->samples_per_epoch + g - 1) / g;
    return epoch * per_epoch + p / g;
}

uint32_t sl_blend_source_of(const sl_mix_t *mix, uint64_t g)
{
    uint64_t off = 0;
    for (uint32_t j = 0; j < mix->nsources; j++) {
        off += mix->src[j].count;
        if (g < off) {
            return j;
        }
    }
    return mix->nsources;
}

/* The next sample of source s: a new permutation at each pass. */
static uint64_t draw(blend_src_t *s, uint32_t j, uint64_t seed, bool shuffle, uint64_t epoch)
{
    uint64_t pass = s->drawn / s->size;
    if (pass != s->pass) {
        sl_epoch_order(seed ^ (BLEND_SEED_MIX * (j + 1)), (epoch << 32) ^ pass, shuffle, s->size,
                       s->perm);
        s->pass = pass;
    }
    uint64_t idx = s->perm[s->drawn % s->size];
    s->drawn++;
    return s->offset + idx;
}

/* The weights (normalized) in force at step. */
static void weights_at(const sl_mix_t *mix, uint64_t step, double *w)
{
    sl_mix_weights_at(mix, step, w);
    double sum = 0.0;
    for (uint32_t j = 0; j < mix->nsources; j++) {
        sum += w[j];
    }
    for (uint32_t j = 0; j < mix->nsources; j++) {
        w[j] = sum > 0.0 ? w[j] / sum : 1.0 / mix->nsources;
    }
}

/* The greedy: the source furthest below its share of the i + 1 positions. */
static uint32_t pick(const double *w, const uint64_t *got, uint32_t k, uint64_t i)
{
    uint32_t best = 0;
    double best_def = -1e300;
    for (uint32_t j = 0; j < k; j++) {
        double def = w[j] * (double)(i + 1) - (double)got[j];
        if (w[j] > 0.0 && def > best_def) {
            best_def = def;
            best = j;
        }
    }
    return best;
}

static void run(const sl_mix_t *mix, blend_src_t *src, uint64_t seed, bool shuffle,
                uint64_t step_len, uint64_t epoch, uint64_t *out, uint64_t *counts)
{
    double w[SL_MIX_MAX_SOURCES];
    uint64_t got[SL_MIX_MAX_SOURCES] = {0};
    uint64_t step = sl_blend_step(mix, step_len, epoch, 0), i = 0;
    weights_at(mix, step, w);
    for (uint64_t p = 0; p < mix->samples_per_epoch; p++) {
        uint64_t st = sl_blend_step(mix, step_len, epoch, p);
        if (st != step) { /* a schedule entry may start here: shares restart */
            double nw[SL_MIX_MAX_SOURCES];
            weights_at(mix, st, nw);
            bool same = true;
            for (uint32_t j = 0; j < mix->nsources; j++) {
                same = same && nw[j] == w[j];
                w[j] = nw[j];
            }
            if (!same) {
                i = 0;
                for (uint32_t j = 0; j < mix->nsources; j++) {
                    got[j] = 0;
                }
            }
            step = st;
        }
        uint32_t j = pick(w, got, mix->nsources, i);
        got[j]++;
        i++;
        if (out != NULL) {
            out[p] = draw(&src[j], j, seed, shuffle, epoch);
        }
        if (counts != NULL) {
            counts[j]++;
        }
    }
}

int sl_blend_epoch(const sl_mix_t *mix, uint64_t seed, bool shuffle, uint64_t step_len,
                   uint64_t epoch, uint64_t *out, uint64_t *counts)
{
    if (mix == NULL || !sl_mix_resolved(mix)) {
        return -EINVAL;
    }
    blend_src_t src[SL_MIX_MAX_SOURCES] = {{0}};
    int rc = 0;
    uint64_t off = 0;
    for (uint32_t j = 0; j < mix->nsources; j++) {
        src[j] = (blend_src_t){.size = mix->src[j].count, .offset = off, .pass = UINT64_MAX};
        off += mix->src[j].count;
        src[j].perm = malloc(src[j].size * sizeof(uint64_t));
        if (src[j].perm == NULL) {
            rc = -ENOMEM;
        }
    }
    if (counts != NULL) {
        for (uint32_t j = 0; j < mix->nsources; j++) {
            counts[j] = 0;
        }
    }
    if (rc == 0) {
        run(mix, src, seed, shuffle, step_len, epoch, out, counts);
    }
    for (uint32_t j = 0; j < mix->nsources; j++) {
        free(src[j].perm);
    }
    return rc;
}

int sl_blend_counts(const sl_mix_t *mix, uint64_t step_len, uint64_t epoch, uint64_t *counts)
{
    if (mix == NULL || !sl_mix_resolved(mix)) {
        return -EINVAL;
    }
    for (uint32_t j = 0; j < mix->nsources; j++) {
        counts[j] = 0;
    }
    run(mix, NULL, 0, false, step_len, epoch, NULL, counts);
    return 0;
}
