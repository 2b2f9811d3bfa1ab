/* resume: what a resumed job carries about the epochs its predecessors
 * consumed part of (docs/protocol.md "Resume"). It travels as the spec's
 * "resume" section, so the client, the dispatcher and every worker lay the
 * rest of such an epoch out alike (common/order/ranks.h).
 *
 * An epoch's history is a list of generations: generation 0 is the job that
 * started the epoch (its world size decides the epoch's slots), every later
 * one a job resumed from the one before. A generation says which of its
 * ranks' positions were consumed: runs (rank, [begin, end)) of rank
 * positions, sorted by rank then begin, disjoint. Positions, not samples:
 * a few runs per rank whatever the epoch's size.
 *
 * This module owns the data and its JSON form only; the layout arithmetic
 * is in common/order/resume_order.c. */
#ifndef SL_RESUME_H
#define SL_RESUME_H

#include <jansson.h>
#include <stdint.h>

#define SL_RESUME_MAX_EPOCHS 64    /* partly consumed epochs in one state */
#define SL_RESUME_MAX_GENS 64      /* resumes of one epoch */
#define SL_RESUME_MAX_RUNS 1048576 /* runs over all epochs and generations */

typedef struct sl_resume_run_s {
    uint32_t rank;
    uint64_t begin, end;
} sl_resume_run_t;

typedef struct sl_resume_gen_s {
    uint32_t world;
    uint32_t nruns;
    sl_resume_run_t *runs;
} sl_resume_gen_t;

/* A mixed job resumed with other weights (docs/mixing.md "Resume"): what
 * each source had consumed of the epoch under the weights before, as draws
 * of its own sequence (runs with rank = the source's index, [begin, end)
 * its draw indices, sorted, disjoint). The epoch's order is then those
 * draws' samples (consumed positions 0 .. consumed - 1) followed by the
 * blend of the new weights drawing each source's draws not carried, and
 * gens[0] is {world 1, runs [[0, 0, min(consumed, epoch length)]]}: it
 * removes them, so later generations build on it as on any epoch. */
typedef struct sl_resume_carry_s {
    uint32_t world;    /* the resuming job's: the blend's steps after it */
    uint64_t consumed; /* the draws' count */
    uint32_t nruns;
    sl_resume_run_t *runs;
} sl_resume_carry_t;

#define SL_RESUME_CARRY_SOURCES 16 /* = SL_MIX_MAX_SOURCES (common/spec/mix.h) */

typedef struct sl_resume_epoch_s {
    uint64_t epoch;
    uint32_t ngens;
    sl_resume_gen_t *gens;
    sl_resume_carry_t *carry; /* NULL: the spec's own blend from position 0 */
} sl_resume_epoch_t;

typedef struct sl_resume_s {
    uint32_t nepochs; /* ascending epochs */
    sl_resume_epoch_t *ep;
} sl_resume_t;

/* Parses {"epochs": [{"epoch": E, "gens": [{"world": W, "runs": [[rank,
 * begin, end], ...]}, ...], "carry"?: {"world": W, "drawn": [[source,
 * begin, end], ...]}}, ...]}: the limits above, world in 1..max_world,
 * rank < world, begin < end, runs sorted and disjoint, epochs ascending.
 * err names the offending value's path. Returns 0, -EINVAL, -ENOMEM. */
int sl_resume_from_json(const json_t *v, uint32_t max_world, sl_resume_t **ret, char *err,
                        size_t errlen);
/* The same form; NULL on ENOMEM. */
json_t *sl_resume_to_json(const sl_resume_t *r);
/* A deep copy; NULL on ENOMEM (or for NULL). */
sl_resume_t *sl_resume_dup(const sl_resume_t *r);
void sl_resume_free(sl_resume_t *r); /* NULL ok */
void sl_resume_carry_free(sl_resume_carry_t *c); /* NULL ok */
/* A deep copy; NULL on ENOMEM. */
sl_resume_carry_t *sl_resume_carry_dup(const sl_resume_carry_t *c);
/* The epoch's history, NULL when r holds none for it. */
const sl_resume_epoch_t *sl_resume_find(const sl_resume_t *r, uint64_t epoch);

#endif
