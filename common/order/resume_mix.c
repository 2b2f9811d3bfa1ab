/* resume_mix: a resumed epoch's consumption per source (resume_mix.h). */
#include "common/order/resume_mix.h"

#include <errno.h>
#include <stdlib.h>

#include "common/order/blend.h"
#include "common/order/ranks.h"
#include "common/spec/mix.h"

/* A carry longer than the epoch (the weights before consumed more than
 * this mix's epoch holds): its draws past len count as consumed too. */
static int carried_past(const sl_spec_t *old, const sl_resume_epoch_t *re, uint64_t len,
                        uint32_t *cnt)
{
    uint64_t k = re->carry->consumed;
    sl_mix_t *m = sl_mix_dup(old->mix);
    uint64_t *all = malloc(k * sizeof(*all));
    int rc = m != NULL && all != NULL ? 0 : -ENOMEM;
    if (rc == 0) {
        m->samples_per_epoch = k; /* the carried head only */
        rc = sl_blend_epoch_carry(m, re->carry, old->seed, old->shuffle, 1, re->epoch, all, NULL);
    }
    for (uint64_t p = len; rc == 0 && p < k; p++) {
        cnt[all[p]]++;
    }
    sl_mix_free(m);
    free(all);
    return rc;
}

/* How often each sample is in the epoch's slots (generation 0's: padding
 * repeats the head for count batching; a packed layout holds each position
 * once) into cnt (n entries). */
static int slots_count(const sl_spec_t *old, const sl_resume_epoch_t *re, uint64_t n, uint32_t *cnt)
{
    uint64_t len = sl_spec_epoch_len(old, n);
    uint32_t w0 = re->gens[0].world;
    uint64_t slots = len;
    if (old->batching.mode != SL_BATCHING_PACKED) {
        slots = sl_rank_count(len, w0, old->rank_padding) * w0;
    }
    sl_spec_t *s0 = malloc(sizeof(*s0));
    uint64_t *base = malloc((len > 0 ? len : 1) * sizeof(*base));
    int rc = s0 != NULL && base != NULL && sl_spec_copy(s0, old) == 0 ? 0 : -ENOMEM;
    if (rc == 0) {
        s0->world_size = w0;
        s0->rank = 0;
        rc = sl_spec_epoch_order(s0, re->epoch, n, NULL, NULL, base); /* the multiset only */
        sl_spec_clear(s0);
    }
    for (uint64_t s = 0; rc == 0 && s < slots; s++) {
        uint64_t g = base[s % len];
        if (g >= n) {
            rc = -EINVAL;
        } else {
            cnt[g]++;
        }
    }
    free(s0);
    free(base);
    if (rc == 0 && re->carry != NULL && re->carry->consumed > len) {
        rc = carried_past(old, re, len, cnt); /* consumed before, past this epoch's end */
    }
    return rc;
}

/* Takes away what is left of the epoch (a world-1 resume of old). */
static int left_uncount(const sl_spec_t *old, uint64_t epoch, uint64_t n, const float *cost,
                        const uint32_t *tokens, const uint32_t *tiles, uint32_t *cnt)
{
    sl_spec_t *s1 = malloc(sizeof(*s1));
    int rc = s1 != NULL && sl_spec_copy(s1, old) == 0 ? 0 : -ENOMEM;
    uint64_t total = 0, *out = NULL;
    if (rc == 0) {
        s1->world_size = 1;
        s1->rank = 0;
        total = sl_spec_order_len(s1, n);
        out = malloc(total * sizeof(*out));
        rc = out != NULL ? sl_resume_order(s1, epoch, n, cost, tokens, tiles, out) : -ENOMEM;
        total = sl_spec_positions(s1, n);
        sl_spec_clear(s1);
    }
    for (uint64_t q = 0; rc == 0 && q < total; q++) {
        if (out[q] == SL_POS_HOLE) {
            continue;
        }
        if (out[q] >= n || cnt[out[q]] == 0) {
            rc = -EINVAL; /* left more often than it was there */
        } else {
            cnt[out[q]]--;
        }
    }
    free(out);
    free(s1);
    return rc;
}

/* Appends draw d of source j to c's runs (sorted: j, then d ascending). */
static int add_draw(sl_resume_carry_t *c, size_t *cap, uint32_t j, uint64_t d)
{
    sl_resume_run_t *last = c->nruns > 0 ? &c->runs[c->nruns - 1] : NULL;
    c->consumed++;
    if (last != NULL && last->rank == j && last->end == d) {
        last->end++;
        return 0;
    }
    if (c->nruns >= SL_RESUME_MAX_RUNS) {
        return -E2BIG;
    }
    if (c->nruns == *cap) {
        size_t nc = *cap > 0 ? *cap * 2 : 64;
        sl_resume_run_t *p = realloc(c->runs, nc * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        c->runs = p;
        *cap = nc;
    }
    c->runs[c->nruns++] = (sl_resume_run_t){.rank = j, .begin = d, .end = d + 1};
    return 0;
}

/* Source j's consumed samples (cnt) as its earliest draws. */
static int source_draws(const sl_spec_t *old, uint64_t epoch, uint32_t j, uint64_t off,
                        uint32_t *cnt, uint64_t *perm, sl_resume_carry_t *c, size_t *cap)
{
    uint64_t size = old->mix->src[j].count, left = 0;
    for (uint64_t i = 0; i < size; i++) {
        left += cnt[off + i];
    }
    int rc = 0;
    for (uint64_t pass = 0; rc == 0 && left > 0; pass++) {
        rc = sl_blend_pass(old->mix, old->seed, old->shuffle, epoch, j, pass, perm);
        for (uint64_t i = 0; rc == 0 && i < size && left > 0; i++) {
            uint32_t *k = &cnt[off + perm[i]];
            if (*k > 0) {
                (*k)--;
                left--;
                rc = add_draw(c, cap, j, pass * size + i);
            }
        }
    }
    return rc;
}

int sl_resume_mix_carry(const sl_spec_t *old, uint64_t epoch, uint64_t n, const float *cost,
                        const uint32_t *tokens, const uint32_t *tiles, uint32_t new_world,
                        sl_resume_carry_t **ret)
{
    const sl_resume_epoch_t *re = sl_resume_find(old->resume, epoch);
    if (old->mix == NULL || !sl_mix_resolved(old->mix) || re == NULL || n == 0) {
        return -EINVAL;
    }
    uint64_t biggest = 1;
    for (uint32_t j = 0; j < old->mix->nsources; j++) {
        biggest = old->mix->src[j].count > biggest ? old->mix->src[j].count : biggest;
    }
    uint32_t *cnt = calloc(n, sizeof(*cnt));
    uint64_t *perm = malloc(biggest * sizeof(*perm));
    sl_resume_carry_t *c = calloc(1, sizeof(*c));
    int rc = cnt != NULL && perm != NULL && c != NULL ? 0 : -ENOMEM;
    if (rc == 0) {
        rc = slots_count(old, re, n, cnt);
    }
    if (rc == 0) {
        rc = left_uncount(old, epoch, n, cost, tokens, tiles, cnt);
    }
    size_t cap = 0;
    uint64_t off = 0;
    for (uint32_t j = 0; rc == 0 && j < old->mix->nsources; j++) {
        rc = source_draws(old, epoch, j, off, cnt, perm, c, &cap);
        off += old->mix->src[j].count;
    }
    free(cnt);
    free(perm);
    if (rc == 0 && c->consumed == 0) {
        rc = -EINVAL; /* nothing consumed: no history to carry */
    }
    if (rc < 0) {
        sl_resume_carry_free(c);
        return rc;
    }
    c->world = new_world > 0 ? new_world : 1;
    *ret = c;
    return 0;
}
