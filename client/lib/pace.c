/* pace: the control thread's round interval (pace.h). */
#include "client/lib/pace.h"

#include <string.h>

void cl_pace_init(cl_pace_t *p) { *p = (cl_pace_t){.interval_ms = CL_PACE_MIN_MS}; }

int cl_pace_after(cl_pace_t *p, uint64_t sig)
{
    int same = p->have_sig && sig == p->sig;
    p->sig = sig;
    p->have_sig = 1;
    if (!same) {
        p->interval_ms = CL_PACE_MIN_MS;
    } else {
        int next = p->interval_ms * 2;
        p->interval_ms = next > CL_PACE_QUIET_MAX_MS ? CL_PACE_QUIET_MAX_MS : next;
    }
    return p->interval_ms;
}

/* FNV-1a, 64 bits: a fingerprint, not a defence (the dispatcher is trusted
 * with the assignment itself). */
#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * FNV_PRIME;
    }
    return h;
}

static uint64_t mix_u64(uint64_t h, uint64_t v) { return mix_bytes(h, &v, sizeof(v)); }

/* A string with its terminator, so "ab","c" and "a","bc" differ; NULL as "". */
static uint64_t mix_str(uint64_t h, const char *s)
{
    return s == NULL ? mix_bytes(h, "", 1) : mix_bytes(h, s, strlen(s) + 1);
}

static uint64_t mix_plan(uint64_t h, const Sluice__Plan *pl)
{
    if (pl == NULL) {
        return mix_u64(h, 0);
    }
    uint64_t share;
    memcpy(&share, &pl->local_share, sizeof(share));
    h = mix_u64(h, 1);
    h = mix_u64(h, pl->version);
    h = mix_u64(h, pl->split);
    h = mix_u64(h, share);
    h = mix_u64(h, pl->compress);
    return mix_str(h, pl->mode);
}

uint64_t cl_pace_sig(const Sluice__GetAssignmentResponse *r)
{
    uint64_t h = mix_plan(FNV_OFFSET, r->plan);
    for (size_t i = 0; i < r->n_splits; i++) {
        const Sluice__SplitAssignment *a = r->splits[i];
        if (a->worker_id == 0) {
            const uint64_t v[4] = {a->split_id, a->epoch, a->begin, a->end};
            h = mix_bytes(h, v, sizeof(v));
        }
    }
    h = mix_u64(h, r->n_workers);
    for (size_t i = 0; i < r->n_workers; i++) {
        h = mix_u64(h, r->workers[i]->worker_id);
        h = mix_str(h, r->workers[i]->address);
    }
    h = mix_u64(h, r->finished);
    h = mix_str(h, r->failure);
    return mix_str(h, r->fallback);
}
