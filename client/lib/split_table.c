/* The client's table of live splits: open addressing on the split id with
 * backward-shift deletion, so lookups stay O(1) however long the job runs.
 * Called with job->mu held. */
#include <string.h>

#include "client/lib/client_impl.h"

static size_t slot_of(uint64_t id) { return (size_t)((id * 0x9e3779b97f4a7c15ULL) >> 48) % CL_MAX_SPLITS; }

cl_split_t *cl_split_find(struct sluice_job *job, uint64_t id)
{
    size_t i = slot_of(id);
    for (size_t n = 0; n < CL_MAX_SPLITS; n++) {
        cl_split_t *s = &job->splits[i];
        if (!s->in_use) {
            return NULL;
        }
        if (s->id == id) {
            return s;
        }
        i = (i + 1) % CL_MAX_SPLITS;
    }
    return NULL;
}

cl_split_t *cl_split_add(struct sluice_job *job, uint64_t id)
{
    size_t i = slot_of(id);
    for (size_t n = 0; n < CL_MAX_SPLITS; n++) {
        cl_split_t *s = &job->splits[i];
        if (!s->in_use) {
            memset(s, 0, sizeof(*s));
            s->in_use = 1;
            s->id = id;
            return s;
        }
        if (s->id == id) {
            return s;
        }
        i = (i + 1) % CL_MAX_SPLITS;
    }
    return NULL; /* full: the caller fails the job with a clear message */
}

void cl_split_remove(struct sluice_job *job, cl_split_t *s)
{
    size_t i = (size_t)(s - job->splits);
    job->splits[i].in_use = 0;
    /* Backward shift: pull later entries of the probe run into the hole. */
    size_t j = i;
    for (;;) {
        j = (j + 1) % CL_MAX_SPLITS;
        if (!job->splits[j].in_use) {
            return;
        }
        size_t home = slot_of(job->splits[j].id);
        /* Entry j may move to hole i if its home is not in (i, j]. */
        int between = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!between) {
            job->splits[i] = job->splits[j];
            job->splits[j].in_use = 0;
            i = j;
        }
    }
}
