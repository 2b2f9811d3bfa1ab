/* pace: when the control thread's next round is due (control.c).
 *
 * The control thread polls GetAssignment (and sends what it owes with
 * AckSplits) in rounds. It used to poll every CL_PACE_MIN_MS whatever
 * happened: a client whose workers are slow spent ~4-8 ms of CPU a second
 * on ten polls that mostly said the same (docs/benchmarks.md "The control
 * thread's pace"). Now each round whose answer shows nothing new from the
 * dispatcher lets the next wait twice as long, up to CL_PACE_QUIET_MAX_MS,
 * and a round that shows something (a plan, a changed set of workers, a
 * split given to the client itself, a failure, a fallback, the end) brings
 * the pace back to CL_PACE_MIN_MS. Remote splits coming and going are not
 * news: they follow the client's own acknowledgements, and samples of a
 * split no assignment listed yet make a round due by themselves.
 *
 * Whatever the interval, an event that needs a round makes one due within
 * CL_PACE_MIN_MS of the last (cl_control_due: acknowledgements queued,
 * samples of a split not yet listed, a fetch stream's end), and a consumer
 * that ran out of local work still cuts the wait at once
 * (job->control.kick).
 *
 * Pure bookkeeping, no clock and no lock: the control thread owns a
 * cl_pace_t. */
#ifndef SLUICE_CLIENT_PACE_H
#define SLUICE_CLIENT_PACE_H

#include <stdint.h>

#include "proto/sluice.pb-c.h"

#define CL_PACE_MIN_MS 100
/* At most the workers' default heartbeat (dispatcher heartbeat_ms, 500):
 * a split the dispatcher assigns reaches its worker no sooner than that. */
#define CL_PACE_QUIET_MAX_MS 500

typedef struct cl_pace_s {
    int interval_ms; /* the next round's wait when nothing makes it due */
    uint64_t sig;    /* the last assignment's fingerprint (cl_pace_sig) */
    int have_sig;
} cl_pace_t;

void cl_pace_init(cl_pace_t *p);

/* After a round whose GetAssignment answered, sig its fingerprint:
 * returns the wait before the next round. */
int cl_pace_after(cl_pace_t *p, uint64_t sig);

/* A fingerprint of what in an assignment is the dispatcher's own news: the
 * plan, the workers, the splits given to the client itself (worker 0),
 * finished, failure and fallback -- not the remote splits nor the cache
 * counters. */
uint64_t cl_pace_sig(const Sluice__GetAssignmentResponse *r);

#endif
