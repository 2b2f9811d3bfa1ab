/* resume_order: how a resumed job lays out the rest of an epoch its
 * predecessors consumed part of (common/order/ranks.h, docs/protocol.md
 * "Resume").
 *
 * Generation 0's slots are the epoch order's first P0 * W0 positions, P0 =
 * sl_rank_count(n, W0, padding) (padding wraps slots past n to the head).
 * Every generation takes its world's shares of the list left by the one
 * before -- rank r owns list entries r, r + W, ... -- and removes what its
 * ranks consumed; the resumed job shares what is left the same way, so its
 * ranks' counts differ by at most one. With the same world size as before
 * and ranks stopped at one step, that is the uninterrupted order. Balanced
 * batching re-packs the list whenever the world size changes (the schedule
 * is a function of the list and the world). Positions of a rank past its
 * share (its job has the same count every epoch: the largest) are holes.
 *
 * Packed batching (common/order/pack.h) has holes inside its layout, which
 * only the data tells apart, so its arithmetic is the layout's bound: every
 * generation's list has sl_pack_positions(n, world, ...) slots per rank,
 * and every generation (and the resumed job) re-packs what is left -- the
 * samples of the previous list not consumed, in list order -- into a fresh
 * layout for its world. The same with the same world: a removed run leaves
 * packs short, so they are made again. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/order/balance.h"
#include "common/order/blend.h"
#include "common/order/pack.h"
#include "common/order/ranks.h"
#include "common/spec/resume.h"

/* Rank's count of a list of len shared by world. */
static uint64_t share(uint64_t len, uint32_t world, uint32_t rank)
{
    return len / world + (rank < len % world);
}

static bool packed(const sl_spec_t *spec) { return spec->batching.mode == SL_BATCHING_PACKED; }

/* A packed layout's slots per rank for world: the bound, data-free (over
 * the epoch's length: a mix's is not its sample count). */
static uint64_t pack_share(const sl_spec_t *spec, uint64_t n, uint32_t world)
{
    return sl_pack_positions(sl_spec_epoch_len(spec, n), world, spec->batching.microbatches,
                             spec->batch_size);
}

static uint64_t gen0_slots(const sl_spec_t *spec, const sl_resume_epoch_t *re, uint64_t n)
{
    uint32_t w0 = re->gens[0].world;
    if (packed(spec)) {
        return pack_share(spec, n, w0) * w0;
    }
    return sl_rank_count(sl_spec_epoch_len(spec, n), w0, spec->rank_padding) * w0;
}

/* What is left of the epoch after re's generations; -EINVAL (err says
 * which run) when a run lies outside its generation's shares. */
static int64_t left_after(const sl_spec_t *spec, const sl_resume_epoch_t *re, uint64_t n,
                          char *err, size_t errlen)
{
    uint64_t len = gen0_slots(spec, re, n);
    for (uint32_t g = 0; g < re->ngens; g++) {
        const sl_resume_gen_t *gen = &re->gens[g];
        uint64_t used = 0;
        if (packed(spec)) {
            len = pack_share(spec, n, gen->world) * gen->world; /* each generation re-packs */
        }
        for (uint32_t i = 0; i < gen->nruns; i++) {
            const sl_resume_run_t *u = &gen->runs[i];
            if (u->end > share(len, gen->world, u->rank)) {
                return sl_err(err, errlen, -EINVAL,
                              "resume: epoch %" PRIu64 ", generation %u: rank %u of %u "
                              "consumed positions up to %" PRIu64 " of its %" PRIu64
                              " (a state of another source or spec?)",
                              re->epoch, g, u->rank, gen->world, u->end,
                              share(len, gen->world, u->rank));
            }
            used += u->end - u->begin;
        }
        len -= used; /* runs are disjoint and within shares: used <= len */
    }
    return (int64_t)len;
}

int sl_resume_check(const sl_spec_t *spec, uint64_t n, char *err, size_t errlen)
{
    const sl_resume_t *r = spec->resume;
    for (uint32_t e = 0; r != NULL && e < r->nepochs; e++) {
        const sl_resume_carry_t *c = r->ep[e].carry;
        uint64_t len = sl_spec_epoch_len(spec, n);
        if (c != NULL && (spec->mix == NULL || r->ep[e].gens[0].runs[0].end !=
                                                   (c->consumed < len ? c->consumed : len))) {
            return sl_err(err, errlen, -EINVAL,
                          "resume: epoch %" PRIu64 ": a carry of %" PRIu64 " draws needs a mixed "
                          "spec and gens[0] removing them",
                          r->ep[e].epoch, c->consumed);
        }
        int64_t left = left_after(spec, &r->ep[e], n, err, errlen);
        if (left < 0) {
            return (int)left;
        }
    }
    return 0;
}

uint64_t sl_resume_live_positions(const sl_spec_t *spec, uint64_t n, uint64_t epoch,
                                  uint32_t world, uint32_t rank)
{
    const sl_resume_epoch_t *re = sl_resume_find(spec->resume, epoch);
    if (packed(spec)) {
        return pack_share(spec, n, world > 0 ? world : 1); /* holes where nothing is left */
    }
    if (re == NULL) {
        return sl_rank_count(sl_spec_epoch_len(spec, n), world, spec->rank_padding);
    }
    int64_t left = left_after(spec, re, n, NULL, 0);
    uint32_t w = world > 0 ? world : 1;
    return left < 0 ? 0 : share((uint64_t)left, w, rank);
}

uint64_t sl_spec_live_positions(const sl_spec_t *spec, uint64_t n, uint64_t epoch)
{
    return sl_resume_live_positions(spec, n, epoch, spec->world_size, spec->rank);
}

uint64_t sl_spec_positions(const sl_spec_t *spec, uint64_t n)
{
    uint64_t len = sl_spec_epoch_len(spec, n); /* a mix's epoch is not its count */
    uint64_t p = sl_rank_count(len, spec->world_size, spec->rank_padding);
    if (spec->batching.mode == SL_BATCHING_PACKED) {
        p = sl_pack_positions(len, spec->world_size, spec->batching.microbatches, spec->batch_size);
    }
    const sl_resume_t *r = spec->resume;
    for (uint32_t e = 0; r != NULL && e < r->nepochs; e++) {
        uint64_t live = sl_spec_live_positions(spec, n, r->ep[e].epoch);
        p = live > p ? live : p;
    }
    return p;
}

uint64_t sl_spec_order_len(const sl_spec_t *spec, uint64_t n)
{
    uint64_t p = sl_spec_positions(spec, n), e = sl_spec_epoch_len(spec, n);
    p = p > e ? p : e;
    return (p > n ? p : n) > 0 ? (p > n ? p : n) : 1;
}

/* A copy of spec for world (rank 0): a generation's layout. NULL on
 * ENOMEM; spec_free frees it. */
static sl_spec_t *spec_for(const sl_spec_t *spec, uint32_t world)
{
    sl_spec_t *s = malloc(sizeof(*s)); /* KBs: off the caller's stack */
    if (s == NULL || sl_spec_copy(s, spec) < 0) {
        free(s);
        return NULL;
    }
    s->world_size = world;
    s->rank = 0;
    return s;
}

static void spec_free(sl_spec_t *s)
{
    if (s != NULL) {
        sl_spec_clear(s);
        free(s);
    }
}

/* Balanced batching: re-packs list (len sample indices) for world. */
static int repack(const sl_spec_t *spec, uint32_t world, const float *cost, const uint32_t *tokens,
                  uint64_t *list, uint64_t len)
{
    if (spec->batching.mode != SL_BATCHING_BALANCED || cost == NULL) {
        return 0;
    }
    sl_spec_t *s = spec_for(spec, world);
    int rc = s != NULL ? sl_balance_order(s, len, cost, tokens, list) : -ENOMEM;
    spec_free(s);
    return rc;
}

/* Packs the samples of list (len entries, holes skipped) for world into
 * list itself (room: n samples' bound * world); *ret_len its new length. */
static int packed_repack(const sl_spec_t *spec, uint64_t n, uint32_t world, const float *cost,
                         const uint32_t *tokens, const uint32_t *tiles, uint64_t *list,
                         uint64_t *len)
{
    uint64_t k = 0;
    for (uint64_t j = 0; j < *len; j++) {
        if (list[j] != SL_POS_HOLE) {
            list[k++] = list[j];
        }
    }
    uint64_t slots = pack_share(spec, n, world) * world;
    uint64_t *base = malloc((k > 0 ? k : 1) * sizeof(*base));
    if (base == NULL) {
        return -ENOMEM;
    }
    memcpy(base, list, k * sizeof(*base));
    sl_pack_params_t p = sl_pack_params_of(spec, world);
    /* The remainder's layout fits the bound of n (k <= n): holes after it. */
    uint64_t used = sl_pack_positions(k, world, p.micro, p.cap) * world;
    int rc = sl_pack_layout(&p, k, base, cost, tokens, tiles, 0, list, NULL);
    for (uint64_t j = used; rc == 0 && j < slots; j++) {
        list[j] = SL_POS_HOLE;
    }
    free(base);
    *len = slots;
    return rc;
}

int sl_pack_resume_order(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                         const uint32_t *tokens, const uint32_t *tiles, uint64_t *out,
                         uint64_t *step_tokens)
{
    const sl_resume_epoch_t *re = sl_resume_find(spec->resume, epoch);
    if (re == NULL || n == 0 || !packed(spec) || cost == NULL || tokens == NULL) {
        return -EINVAL;
    }
    uint32_t w = spec->world_size > 0 ? spec->world_size : 1, wmax = w;
    for (uint32_t g = 0; g < re->ngens; g++) {
        wmax = re->gens[g].world > wmax ? re->gens[g].world : wmax;
    }
    uint64_t room = pack_share(spec, n, wmax) * wmax, len = gen0_slots(spec, re, n);
    /* The bound grows with the world (more ranks: more packs a step). */
    for (uint32_t g = 0; g < re->ngens; g++) {
        uint64_t s = pack_share(spec, n, re->gens[g].world) * re->gens[g].world;
        room = s > room ? s : room;
    }
    room = pack_share(spec, n, w) * w > room ? pack_share(spec, n, w) * w : room;
    uint64_t *list = malloc((room > 0 ? room : 1) * sizeof(*list));
    uint8_t *gone = calloc(room > 0 ? room : 1, 1);
    sl_spec_t *s0 = spec_for(spec, re->gens[0].world);
    int rc = list && gone && s0 ? 0 : -ENOMEM;
    if (rc == 0 && re->carry != NULL) {
        /* The carried head and the new weights' blend, unpacked: generation 0
         * (world 1) removes the head, the next one packs the rest. */
        uint64_t e = sl_spec_epoch_len(spec, n);
        rc = sl_spec_epoch_order(s0, re->epoch, n, NULL, NULL, list);
        for (uint64_t j = e; rc == 0 && j < len; j++) {
            list[j] = SL_POS_HOLE;
        }
    } else if (rc == 0) {
        rc = sl_pack_epoch(s0, re->epoch, n, cost, tokens, tiles, list, NULL);
    }
    spec_free(s0);
    for (uint32_t g = 0; rc == 0 && g < re->ngens; g++) {
        const sl_resume_gen_t *gen = &re->gens[g];
        if (g > 0) {
            rc = packed_repack(spec, n, gen->world, cost, tokens, tiles, list, &len);
        }
        memset(gone, 0, len);
        for (uint32_t i = 0; rc == 0 && i < gen->nruns; i++) {
            for (uint64_t q = gen->runs[i].begin; q < gen->runs[i].end; q++) {
                uint64_t at = q * gen->world + gen->runs[i].rank;
                if (at >= len) {
                    rc = -EINVAL; /* sl_resume_check refuses it first */
                    break;
                }
                gone[at] = 1;
            }
        }
        for (uint64_t j = 0; rc == 0 && j < len; j++) {
            list[j] = gone[j] ? SL_POS_HOLE : list[j];
        }
    }
    if (rc == 0) {
        rc = packed_repack(spec, n, w, cost, tokens, tiles, list, &len);
    }
    for (uint64_t q = 0; rc == 0 && q < len / w; q++) {
        out[q] = list[q * w + spec->rank];
    }
    if (rc == 0 && step_tokens != NULL) {
        uint64_t per_step = (uint64_t)spec->batching.microbatches * spec->batch_size;
        sl_pack_step_tokens(list, len, w, per_step, tokens, step_tokens);
    }
    free(list);
    free(gone);
    return rc;
}

int sl_resume_order(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                    const uint32_t *tokens, const uint32_t *tiles, uint64_t *out)
{
    const sl_resume_epoch_t *re = sl_resume_find(spec->resume, epoch);
    if (re == NULL || n == 0) {
        return -EINVAL;
    }
    if (packed(spec)) {
        return sl_pack_resume_order(spec, epoch, n, cost, tokens, tiles, out, NULL);
    }
    int64_t left = left_after(spec, re, n, NULL, 0);
    if (left < 0) {
        return (int)left;
    }
    uint64_t len = gen0_slots(spec, re, n);
    uint64_t e = sl_spec_epoch_len(spec, n); /* the order's length (a mix's is not n) */
    uint64_t *base = malloc((e > 0 ? e : 1) * sizeof(*base));
    uint64_t *list = malloc((len > 0 ? len : 1) * sizeof(*list));
    uint8_t *gone = calloc(len > 0 ? len : 1, 1);
    int rc = base && list && gone ? 0 : -ENOMEM;
    sl_spec_t *s0 = rc == 0 ? spec_for(spec, re->gens[0].world) : NULL;
    if (rc == 0 && s0 == NULL) {
        rc = -ENOMEM;
    }
    if (rc == 0) {
        /* Generation 0's order, balanced for its world as it was. */
        rc = sl_spec_epoch_order(s0, epoch, n, cost, tokens, base); /* a carry's: unbalanced */
    }
    spec_free(s0);
    for (uint64_t s = 0; rc == 0 && s < len; s++) {
        list[s] = base[s % e];
    }
    uint32_t prev = re->gens[0].world;
    for (uint32_t g = 0; rc == 0 && g < re->ngens; g++) {
        const sl_resume_gen_t *gen = &re->gens[g];
        if (gen->world != prev) {
            rc = repack(spec, gen->world, cost, tokens, list, len);
        }
        /* After a carry's head is gone, the rest is balanced for the next world. */
        prev = g == 0 && re->carry != NULL ? 0 : gen->world;
        memset(gone, 0, len);
        for (uint32_t i = 0; rc == 0 && i < gen->nruns; i++) {
            for (uint64_t q = gen->runs[i].begin; q < gen->runs[i].end; q++) {
                gone[q * gen->world + gen->runs[i].rank] = 1; /* < len: left_after checked */
            }
        }
        uint64_t k = 0;
        for (uint64_t j = 0; j < len; j++) {
            if (!gone[j]) {
                list[k++] = list[j];
            }
        }
        len = k;
    }
    uint32_t w = spec->world_size > 0 ? spec->world_size : 1;
    if (rc == 0 && w != prev) {
        rc = repack(spec, w, cost, tokens, list, len);
    }
    if (rc == 0) {
        uint64_t live = share(len, w, spec->rank), total = sl_spec_positions(spec, n);
        for (uint64_t q = 0; q < total; q++) {
            out[q] = q < live ? list[q * w + spec->rank] : SL_POS_HOLE;
        }
    }
    free(base);
    free(list);
    free(gone);
    return rc;
}
