/* Multi-rank jobs on the client (docs/protocol.md "Multi-rank jobs"): the
 * rank and world size go into the spec (so the worker and dispatcher cut
 * the same share, common/order/ranks.h), the ranks of one job share a name, and
 * a restarted rank skips what the dispatcher says is acknowledged. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "common/base/err.h"
#include "common/base/jobcap.h"
#include "common/base/sha256.h"

int cl_ranks_apply(sluice_job_t *job, const sluice_options_t *opts, char *err, size_t errlen)
{
    if (opts->job_secret != NULL && opts->job_secret[0] != '\0') {
        if (strlen(opts->job_secret) < SL_JOBCAP_MIN ||
            strlen(opts->job_secret) >= sizeof(job->secret_key)) {
            return sl_err(err, errlen, -EINVAL, "job_secret: %d..%d bytes", SL_JOBCAP_MIN,
                          SL_JOBCAP_MAX);
        }
        snprintf(job->secret_key, sizeof(job->secret_key), "%s", opts->job_secret);
    }
    if (opts->world_size == 0) {
        if (opts->rank != 0) {
            return sl_err(err, errlen, -EINVAL, "rank %u given without a world size",
                          opts->rank);
        }
        return 0; /* the spec's (default rank 0 of 1) */
    }
    if (opts->world_size > SL_SPEC_WORLD_MAX || opts->rank >= opts->world_size) {
        return sl_err(err, errlen, -EINVAL,
                      "rank %u of world size %u: need rank < world size <= %d", opts->rank,
                      opts->world_size, SL_SPEC_WORLD_MAX);
    }
    job->spec.world_size = opts->world_size;
    job->spec.rank = opts->rank;
    return 0;
}

/* torchrun's run id (TORCHELASTIC_RUN_ID; "none" when it was given no
 * --rdzv-id, which is no secret) keyed with the token: a key every rank of
 * one launch derives alike. 0 and *ret set, or 1 when not under torchrun. */
static int torchrun_key(const sluice_job_t *job, char ret[65])
{
    const char *run = getenv("TORCHELASTIC_RUN_ID");
    if (run == NULL || run[0] == '\0' || strcmp(run, "none") == 0) {
        return 1;
    }
    char name[256];
    snprintf(name, sizeof(name), "torchrun\n%s", run);
    sl_jobcap_derive(job->token, name, ret);
    return 0;
}

int cl_ranks_job_secret(sluice_job_t *job, char *err, size_t errlen)
{
    char run_key[65];
    const char *key = getenv("SLUICE_JOB_SECRET");
    if (job->secret_key[0] != '\0') {
        key = job->secret_key; /* the caller's (Python: torch.distributed's broadcast) */
    } else if (key != NULL && key[0] != '\0') {
        if (strlen(key) < SL_JOBCAP_MIN) {
            return sl_err(err, errlen, -EINVAL,
                          "SLUICE_JOB_SECRET: at least %d bytes (it is the multi-rank job's "
                          "capability)",
                          SL_JOBCAP_MIN);
        }
    } else if (torchrun_key(job, run_key) == 0) {
        key = run_key;
    } else {
        key = job->token; /* "" without a token */
    }
    job->no_secret = key[0] == '\0';
    char hex[65];
    sl_jobcap_derive(key, job->job_name, hex);
    snprintf(job->job_secret, sizeof(job->job_secret), "%s", hex);
    return 0;
}

const char *sluice_secret_warning(const sluice_job_t *job)
{
    if (!job->no_secret) {
        return NULL;
    }
    return "this multi-rank job has no secret: anyone who knows its name can join it and take "
           "its samples (set SLUICE_JOB_SECRET to one random value for all ranks, run under "
           "torch.distributed or torchrun, or give the cluster a token)";
}

void cl_ranks_job_name(const sluice_job_t *job, char *buf, size_t len)
{
    if (job->opts.job_name != NULL && job->opts.job_name[0] != '\0') {
        snprintf(buf, len, "%s", job->opts.job_name);
        return;
    }
    /* Same spec (but the rank) and same source -> same name on every rank. */
    sl_spec_t *copy = malloc(sizeof(*copy));
    char *json = NULL;
    if (copy != NULL && sl_spec_copy(copy, &job->spec) == 0) {
        copy->rank = 0;
        json = sl_spec_to_json(copy);
        sl_spec_clear(copy);
    }
    free(copy);
    char hex[65] = "0000000000000000";
    if (json != NULL) {
        sl_sha256_hex(json, strlen(json), hex);
    }
    free(json);
    snprintf(buf, len, "spec-%.16s-%016" PRIx64 "-w%u", hex, sl_source_fingerprint(job->src),
             job->spec.world_size);
    if (job->first_epoch > 0) {
        /* One job per epoch (an outer loop): a rank restarted in epoch e
         * re-attaches to its part of epoch e, never of another. */
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, "-e%" PRIu64, job->first_epoch);
    }
}

int cl_ranks_resume(sluice_job_t *job, const Sluice__SubmitJobResponse *r, char *err,
                    size_t errlen)
{
    if (!r->resumed) {
        return 0;
    }
    if (r->resume_epoch < job->first_epoch || r->resume_epoch > job->end_epoch) {
        return sl_err(err, errlen, -EPROTO,
                      "dispatcher resumes at epoch %" PRIu64 ", outside this job's epochs %" PRIu64
                      "..%" PRIu64,
                      r->resume_epoch, job->first_epoch, job->end_epoch - 1);
    }
    /* Epochs before the resume epoch were delivered by the earlier process:
     * never declared, so their late copies count as duplicates. */
    cl_line_resume_at(job->consumer.line, r->resume_epoch);
    for (size_t i = 0; i < r->n_acked; i++) {
        const Sluice__SplitAssignment *a = r->acked[i];
        if (a->epoch < r->resume_epoch || a->epoch >= job->end_epoch) {
            continue;
        }
        int64_t n = cl_line_mark_done(job->consumer.line, a->epoch, a->begin, a->end);
        if (n == -ENOMEM) {
            return sl_err(err, errlen, -ENOMEM, "cannot declare epoch %" PRIu64, a->epoch);
        }
        if (n < 0) {
            return sl_err(err, errlen, -EPROTO,
                          "dispatcher resumes with range [%" PRIu64 ", %" PRIu64
                          ") of epoch %" PRIu64 " outside the rank's %" PRIu64 " positions",
                          a->begin, a->end, a->epoch, job->positions);
        }
    }
    return 0;
}
