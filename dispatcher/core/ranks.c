#include "dispatcher/core/ranks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"

disp_job_t *disp_ranks_find(disp_jobs_t *js, const char *name, uint32_t world, uint32_t rank)
{
    for (size_t i = 0; i < js->n; i++) {
        disp_job_t *job = js->jobs[i];
        if (job->state != DISP_JOB_CLOSED && job->world_size == world && job->rank == rank &&
            strcmp(job->group, name) == 0) {
            return job;
        }
    }
    return NULL;
}

/* Canonical JSON of spec with the rank cleared: equal for every rank of
 * one job. malloc'd; NULL on ENOMEM. */
static char *rankless_json(const sl_spec_t *spec)
{
    sl_spec_t *copy = malloc(sizeof(*copy));
    if (copy == NULL || sl_spec_copy(copy, spec) < 0) {
        free(copy);
        return NULL;
    }
    copy->rank = 0;
    char *json = sl_spec_to_json(copy);
    sl_spec_clear(copy);
    free(copy);
    return json;
}

int disp_ranks_check(disp_jobs_t *js, const char *name, const sl_spec_t *spec,
                     uint64_t num_samples, uint64_t fingerprint, char *err, size_t errlen)
{
    char *mine = rankless_json(spec);
    if (mine == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = 0;
    for (size_t i = 0; i < js->n && rc == 0; i++) {
        disp_job_t *job = js->jobs[i];
        if (job->state == DISP_JOB_CLOSED || job->world_size <= 1 ||
            strcmp(job->group, name) != 0) {
            continue;
        }
        if (job->world_size != spec->world_size) {
            rc = sl_err(err, errlen, -EINVAL,
                        "world_size: job \"%s\" is open with world_size %u, not %u", name,
                        job->world_size, spec->world_size);
            break;
        }
        if (job->num_samples != num_samples || job->fingerprint != fingerprint) {
            rc = sl_err(err, errlen, -EINVAL,
                        "source: job \"%s\" rank %u indexed %" PRIu64
                        " samples (fingerprint %016" PRIx64 "), this rank %" PRIu64
                        " (%016" PRIx64 "): the ranks' data roots differ",
                        name, job->rank, job->num_samples, job->fingerprint, num_samples,
                        fingerprint);
            break;
        }
        char *theirs = rankless_json(&job->spec);
        if (theirs == NULL) {
            rc = sl_err(err, errlen, -ENOMEM, "out of memory");
        } else if (strcmp(theirs, mine) != 0) {
            rc = sl_err(err, errlen, -EINVAL,
                        "spec: job \"%s\" is open with another spec (rank %u); every rank "
                        "must submit the same spec, or use another --job-name",
                        name, job->rank);
        }
        free(theirs);
    }
    free(mine);
    return rc;
}

void disp_ranks_tag(disp_job_t *job, const char *name)
{
    disp_text_copy(job->group, sizeof(job->group), name);
}

size_t disp_ranks_reattach(disp_jobs_t *js, disp_job_t *job, int64_t now_ms)
{
    size_t n = 0;
    job->last_client_ms = now_ms;
    /* By index: disp_jobs_retry hands the splits out again, which may grow
     * job->jw. The old process's Fetch streams died with it, so whatever a
     * worker holds or sent for this rank may never have arrived. */
    for (size_t i = 0; i < job->njw; i++) {
        if (job->jw[i].n > 0) {
            n += disp_jobs_retry(js, job, NULL, 0, job->jw[i].worker_id, now_ms);
        }
    }
    return n;
}

uint64_t disp_ranks_resume_epoch(const disp_job_t *job)
{
    if (job->state != DISP_JOB_ACTIVE) {
        return disp_job_end_epoch(job);
    }
    return job->nep > 0 ? job->ep[0].epoch : job->next_epoch;
}

int disp_ranks_acked(const disp_job_t *job, disp_range_t *out, size_t max)
{
    size_t n = 0;
    if (job->state != DISP_JOB_ACTIVE) {
        return 0;
    }
    for (uint32_t k = 0; k < job->nep; k++) {
        const disp_epoch_t *ep = &job->ep[k];
        for (uint32_t i = 0; ep->splits != NULL && i < job->nsplits; i++) {
            if (ep->splits[i].state != DISP_SPLIT_ACKED) {
                continue;
            }
            uint64_t begin = (uint64_t)i * job->split_size;
            uint64_t end = begin + job->split_size;
            end = end < job->positions ? end : job->positions;
            if (n > 0 && out[n - 1].epoch == ep->epoch && out[n - 1].end == begin) {
                out[n - 1].end = end;
                continue;
            }
            if (n == max) {
                return -E2BIG;
            }
            out[n++] = (disp_range_t){.epoch = ep->epoch, .begin = begin, .end = end};
        }
    }
    return (int)n;
}
