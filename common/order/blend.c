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
    const sl_resume_run_t *skip; /* a carry's draws of this source (resume.h) */
    uint32_t nskip;
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

/* Source j's own stream: the job's seed mixed with its index. */
static void pass_of(uint64_t seed, uint32_t j, bool shuffle, uint64_t epoch, uint64_t pass,
                    uint64_t size, uint64_t *perm)
{
    sl_epoch_order(seed ^ (BLEND_SEED_MIX * (j + 1)), (epoch << 32) ^ pass, shuffle, size, perm);
}

/* Draw d of source s (pass d / size): a new permutation at each pass. */
static uint64_t sample_at(blend_src_t *s, uint32_t j, uint64_t seed, bool shuffle, uint64_t epoch,
                          uint64_t d)
{
    uint64_t pass = d / s->size;
    if (pass != s->pass) {
        pass_of(seed, j, shuffle, epoch, pass, s->size, s->perm);
        s->pass = pass;
    }
    return s->offset + s->perm[d % s->size];
}

int sl_blend_pass(const sl_mix_t *mix, uint64_t seed, bool shuffle, uint64_t epoch, uint32_t j,
                  uint64_t pass, uint64_t *perm)
{
    if (mix == NULL || j >= mix->nsources || mix->src[j].count == 0) {
        return -EINVAL;
    }
    pass_of(seed, j, shuffle, epoch, pass, mix->src[j].count, perm);
    return 0;
}

/* The next sample of source s, past the draws a carry holds. */
static uint64_t draw(blend_src_t *s, uint32_t j, uint64_t seed, bool shuffle, uint64_t epoch)
{
    while (s->nskip > 0 && s->drawn >= s->skip->begin) {
        s->drawn = s->drawn > s->skip->end ? s->drawn : s->skip->end;
        s->skip++;
        s->nskip--;
    }
    return sample_at(s, j, seed, shuffle, epoch, s->drawn++);
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

/* A carry's draws, in order, at positions 0 .. k - 1 (k: at most the
 * epoch's length); returns k. */
static uint64_t carried(const sl_mix_t *mix, blend_src_t *src, const sl_resume_carry_t *carry,
                        uint64_t seed, bool shuffle, uint64_t epoch, uint64_t *out,
                        uint64_t *counts)
{
    uint64_t p = 0;
    for (uint32_t i = 0; carry != NULL && i < carry->nruns; i++) {
        const sl_resume_run_t *u = &carry->runs[i];
        for (uint64_t d = u->begin; d < u->end && p < mix->samples_per_epoch; d++, p++) {
            if (out != NULL) {
                out[p] = sample_at(&src[u->rank], u->rank, seed, shuffle, epoch, d);
            }
            if (counts != NULL) {
                counts[u->rank]++;
            }
        }
    }
    return p;
}

static void run(const sl_mix_t *mix, blend_src_t *src, const sl_resume_carry_t *carry,
                uint64_t seed, bool shuffle, uint64_t step_len, uint64_t epoch, uint64_t *out,
                uint64_t *counts)
{
    double w[SL_MIX_MAX_SOURCES];
    uint64_t got[SL_MIX_MAX_SOURCES] = {0};
    uint64_t k = carried(mix, src, carry, seed, shuffle, epoch, out, counts);
    uint64_t step = sl_blend_step(mix, step_len, epoch, k), i = 0;
    weights_at(mix, step, w);
    for (uint64_t p = k; p < mix->samples_per_epoch; p++) {
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
    return sl_blend_epoch_carry(mix, NULL, seed, shuffle, step_len, epoch, out, counts);
}

int sl_blend_epoch_carry(const sl_mix_t *mix, const sl_resume_carry_t *carry, uint64_t seed,
                         bool shuffle, uint64_t step_len, uint64_t epoch, uint64_t *out,
                         uint64_t *counts)
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
    for (uint32_t i = 0; carry != NULL && i < carry->nruns; i++) {
        const sl_resume_run_t *u = &carry->runs[i];
        if (u->rank >= mix->nsources) {
            rc = rc < 0 ? rc : -EINVAL; /* a carry of another mix */
        } else if (src[u->rank].nskip++ == 0) {
            src[u->rank].skip = u; /* sorted by source: its runs are contiguous */
        }
    }
    if (counts != NULL) {
        for (uint32_t j = 0; j < mix->nsources; j++) {
            counts[j] = 0;
        }
    }
    if (rc == 0) {
        run(mix, src, carry, seed, shuffle, step_len, epoch, out, counts);
    }
    for (uint32_t j = 0; j < mix->nsources; j++) {
        free(src[j].perm);
    }
    return rc;
}

int sl_blend_counts(const sl_mix_t *mix, uint64_t step_len, uint64_t epoch, uint64_t *counts)
{
    return sl_blend_counts_carry(mix, NULL, step_len, epoch, counts);
}

int sl_blend_counts_carry(const sl_mix_t *mix, const sl_resume_carry_t *carry, uint64_t step_len,
                          uint64_t epoch, uint64_t *counts)
{
    if (mix == NULL || !sl_mix_resolved(mix)) {
        return -EINVAL;
    }
    for (uint32_t i = 0; carry != NULL && i < carry->nruns; i++) {
        if (carry->runs[i].rank >= mix->nsources) {
            return -EINVAL; /* a carry of another mix */
        }
    }
    for (uint32_t j = 0; j < mix->nsources; j++) {
        counts[j] = 0;
    }
    /* Counts only: no sample is drawn, so no source's permutation is made. */
    run(mix, NULL, carry, 0, false, step_len, epoch, NULL, counts);
    return 0;
}
