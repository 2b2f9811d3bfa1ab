/* taken: what this rank's training loop has consumed, per epoch, as ranges
 * of its positions -- what a saved state holds (client/lib/state.h). A
 * position is consumed once a batch holding it was handed out, or when it
 * was skipped (a corrupt sample, a resumed job's hole) or discarded by
 * drop_last; a sample received but not yet handed out is not. Epochs before
 * done_below are consumed whole; at most CL_TAKEN_MAX_EPOCHS later ones in
 * part (samples of epoch e + 1 may be handed out before e's last batch).
 * Consumer thread only. */
#ifndef CL_TAKEN_H
#define CL_TAKEN_H

#include <stddef.h>
#include <stdint.h>

#define CL_TAKEN_MAX_EPOCHS 64     /* as SL_RESUME_MAX_EPOCHS */
#define CL_TAKEN_MAX_RANGES 262144 /* per epoch: far beyond a few per split in flight */

typedef struct cl_range_s {
    uint64_t begin, end;
} cl_range_t;

typedef struct cl_taken_epoch_s {
    uint64_t epoch;
    int complete;      /* consumed whole (an epoch after done_below may finish first) */
    size_t n, cap;     /* ranges: sorted, disjoint, not adjacent */
    cl_range_t *r;
} cl_taken_epoch_t;

typedef struct cl_taken_s {
    uint64_t done_below;
    cl_taken_epoch_t ep[CL_TAKEN_MAX_EPOCHS]; /* ascending epochs >= done_below */
    size_t nep;
    int overflow; /* a range or an epoch did not fit: no state can be saved */
} cl_taken_t;

void cl_taken_init(cl_taken_t *t, uint64_t first_epoch);
void cl_taken_clear(cl_taken_t *t);
/* Positions [begin, end) of epoch are consumed. Epochs before done_below are
 * ignored. Returns 0, or -ENOMEM / -E2BIG (t->overflow is then set). */
int cl_taken_add(cl_taken_t *t, uint64_t epoch, uint64_t begin, uint64_t end);
/* Every position of epoch is consumed; done_below moves past the complete
 * epochs at its front. */
void cl_taken_complete(cl_taken_t *t, uint64_t epoch);
/* Positions of epoch consumed below limit (holes past a share excluded). */
uint64_t cl_taken_count(const cl_taken_t *t, uint64_t epoch, uint64_t limit);

#endif
