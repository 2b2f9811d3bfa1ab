/* Opening and closing a job: spec, source, pipeline, executor, batcher, and
 * in remote mode the submission and the control thread. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/lib/client_impl.h"
#include "client/lib/costs.h"
#include "client/lib/profile.h"
#include "common/base/err.h"
#include "common/engine/ranks.h"
#include "common/base/clock.h"

/* planner: the profiles for an auto/fastflow job, or NULL. */
static int submit(sluice_job_t *job, const char *spec_path, Sluice__PlannerInputs *planner,
                  char *err, size_t errlen)
{
    char *json = sl_spec_to_json(&job->spec);
    if (json == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = json;
    req.spec_name = (char *)spec_path;
    req.num_samples = job->num_samples;
    req.source_fingerprint = sl_source_fingerprint(job->src);
    req.client_threads = job->opts.threads;
    req.client_id = host;
    req.world_size = job->spec.world_size;
    req.rank = job->spec.rank;
    req.job_name = job->spec.world_size > 1 ? job->job_name : NULL;
    req.planner = planner;
    /* Per-sample costs for cost-cut splits: single-consumer jobs only (the
     * dispatcher cuts multi-rank jobs by count), bounded in size. */
    float *costs = NULL;
    if (job->spec.world_size <= 1 && job->num_samples > 0 &&
        job->num_samples <= CL_MAX_SAMPLE_COSTS) {
        costs = malloc(job->num_samples * sizeof(*costs));
        sl_costmodel_t model;
        int have_model = cl_planner_cost_model(job->planner, &model) == 0;
        cl_costs_from_e from = CL_COSTS_SIZE;
        if (costs != NULL &&
            cl_sample_costs(job->src, have_model ? &model : NULL, CL_COST_HEAD_BUDGET_MS, costs,
                            job->num_samples, &from) == 0) {
            req.n_sample_costs = job->num_samples;
            req.sample_costs = costs;
            snprintf(job->sample_costs, sizeof(job->sample_costs), "%s",
                     cl_costs_from_name(from));
        } /* out of memory: sent without, the job is cut by count */
    }
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    int rc = sl_rpc_unary(job->disp, "/sluice.Dispatcher/SubmitJob", &req.base,
                          &sluice__submit_job_response__descriptor, job->timeout_ms, 1, &resp,
                          &st);
    free(json);
    free(costs);
    if (rc < 0) {
        if (rc == -ECOMM && st.code == SL_RPC_INVALID_ARGUMENT) {
            return sl_err(err, errlen, -EINVAL, "%s", st.details);
        }
        /* A TLS/plaintext mismatch never connects: it looks like a dead
         * peer, so say which setting to check. */
        int noconn = rc == -ECOMM &&
                     (st.code == SL_RPC_UNAVAILABLE || st.code == SL_RPC_DEADLINE_EXCEEDED);
        const char *hint = !noconn ? ""
                           : job->sec.tls_ca != NULL || job->sec.tls_cert != NULL
                               ? "; no connection: is the dispatcher up, and does it serve TLS "
                                 "with a certificate --tls-ca trusts?"
                               : "; no connection: is the dispatcher up, and is it plaintext "
                                 "(a TLS dispatcher needs --tls-ca)?";
        return sl_err(err, errlen, -ECONNREFUSED, "dispatcher %s: SubmitJob failed: %s (%s)%s",
                      job->dispatcher, rc == -ECOMM ? st.details : "bad reply",
                      rc == -ECOMM ? sl_rpc_code_name(st.code) : "", hint);
    }
    Sluice__SubmitJobResponse *r = (Sluice__SubmitJobResponse *)resp;
    job->job_id = r->job_id;
    if (r->plan != NULL) {
        job->split_units = r->plan->split;
        job->local_share = r->plan->local_share;
        snprintf(job->plan_mode, sizeof(job->plan_mode), "%s",
                 r->plan->mode ? r->plan->mode : "?");
        cl_planner_note_plan(job->planner, r->plan);
    }
    rc = cl_ranks_resume(job, r, err, errlen); /* a restarted rank */
    protobuf_c_message_free_unpacked(resp, NULL);
    if (rc < 0) {
        return rc;
    }
    if (job->split_units > job->nunits) {
        return sl_err(err, errlen, -EPROTO, "dispatcher planned split %u beyond %u units",
                      job->split_units, job->nunits);
    }
    return 0;
}

/* Copies the TLS paths (checked readable now, for an error naming the file)
 * and reads the token file into job->sec. */
static int copy_path(const char *what, const char *src, char *dst, size_t dstlen,
                     const char **ret, char *err, size_t errlen)
{
    if (src == NULL || src[0] == '\0') {
        *ret = NULL;
        return 0;
    }
    if (strlen(src) >= dstlen) {
        return sl_err(err, errlen, -EINVAL, "%s: path longer than %zu bytes", what, dstlen - 1);
    }
    if (access(src, R_OK) != 0) {
        int e = errno;
        return sl_err(err, errlen, -EINVAL, "%s \"%s\": %s", what, src, strerror(e));
    }
    snprintf(dst, dstlen, "%s", src);
    *ret = dst;
    return 0;
}

static int security_from(sluice_job_t *job, const sluice_options_t *o, char *err,
                         size_t errlen)
{
    memset(&job->sec, 0, sizeof(job->sec));
    int rc = copy_path("tls_ca", o->tls_ca, job->tls_ca, sizeof(job->tls_ca), &job->sec.tls_ca,
                       err, errlen);
    if (rc == 0) {
        rc = copy_path("tls_cert", o->tls_cert, job->tls_cert, sizeof(job->tls_cert),
                       &job->sec.tls_cert, err, errlen);
    }
    if (rc == 0) {
        rc = copy_path("tls_key", o->tls_key, job->tls_key, sizeof(job->tls_key),
                       &job->sec.tls_key, err, errlen);
    }
    if (rc == 0 && (job->sec.tls_cert == NULL) != (job->sec.tls_key == NULL)) {
        rc = sl_err(err, errlen, -EINVAL, "tls_cert and tls_key go together");
    }
    if (rc == 0 && o->token_file != NULL && o->token_file[0] != '\0') {
        rc = sl_secret_read(o->token_file, job->token, sizeof(job->token), err, errlen);
        rc = rc < 0 ? -EINVAL : 0;
        job->sec.token = rc == 0 ? job->token : NULL;
    }
    return rc;
}

int sluice_open(const char *spec_path, const sluice_options_t *opts, sluice_job_t **ret,
                char *err, size_t errlen)
{
    sluice_options_t defaults = {0};
    if (opts == NULL) {
        opts = &defaults;
    }
    sluice_job_t *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&job->mu, NULL);
    if (sl_cond_init_mono(&job->cv) != 0) {
        free(job);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    job->t_start = sl_mono_sec();
    job->opts = *opts;
    snprintf(job->data_root, sizeof(job->data_root), "%s", opts->data_root ? opts->data_root : ".");
    job->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : 10000;
    job->dispatcher_timeout_ms =
        opts->dispatcher_timeout_ms > 0 ? opts->dispatcher_timeout_ms : 60000;
    snprintf(job->plan_mode, sizeof(job->plan_mode), "local");
    job->local_share = 1.0;
    int rc = sl_spec_parse_file(spec_path, &job->spec, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    if (opts->epochs > 0) {
        job->spec.epochs = opts->epochs;
    }
    rc = cl_ranks_apply(job, opts, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    if (opts->offload != NULL) {
        rc = sl_offload_parse(opts->offload, &job->spec.offload, &job->spec.split,
                              &job->spec.local_share, err, errlen);
        if (rc < 0) {
            goto fail;
        }
        if (job->spec.offload == SL_OFFLOAD_FIXED && job->spec.split > job->spec.nstages) {
            rc = sl_err(err, errlen, -EINVAL, "offload split %u beyond the spec's %u stages",
                        job->spec.split, job->spec.nstages);
            goto fail;
        }
    }
    unsigned threads = opts->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    job->opts.threads = threads;
    rc = sl_source_open(job->data_root, job->spec.source_type, job->spec.source_path, &job->src,
                        err, errlen);
    if (rc < 0) {
        goto fail;
    }
    job->num_samples = sl_source_count(job->src);
    job->positions = sl_spec_positions(&job->spec, job->num_samples);
    if (job->spec.world_size > 1) {
        if (job->positions == 0) {
            rc = sl_err(err, errlen, -EINVAL,
                        "world size %u with %" PRIu64 " samples leaves every rank nothing "
                        "(rank_padding \"drop\")",
                        job->spec.world_size, job->num_samples);
            goto fail;
        }
        cl_ranks_job_name(job, job->job_name, sizeof(job->job_name));
        job->ack_on_pop = opts->dispatcher != NULL;
    }
    rc = sl_pipeline_new(&job->spec, 0, &job->pipe, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    job->nunits = sl_pipeline_nunits(job->pipe);
    /* Room for a whole batch beyond the threads' own window, so one batch
     * can be made while the training loop works on the previous one
     * (sluice_next_batch refills before returning). */
    unsigned batch_room = job->spec.batch_size < 4096 ? job->spec.batch_size : 4096;
    job->exec = sl_exec_new(job->pipe, job->src, threads, threads * 8 + 8 + batch_room);
    job->batcher = sl_batcher_new(job->spec.batch_size, job->spec.drop_last,
                                  job->spec.deterministic);
    job->splits = calloc(CL_MAX_SPLITS, sizeof(*job->splits));
    if (job->exec == NULL || job->batcher == NULL || job->splits == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "out of memory setting up the job");
        goto fail;
    }
    if (job->ack_on_pop) {
        sl_batcher_track_drops(job->batcher);
    }
    if (opts->dispatcher != NULL) {
        snprintf(job->dispatcher, sizeof(job->dispatcher), "%s", opts->dispatcher);
        rc = security_from(job, opts, err, errlen);
        if (rc < 0) {
            goto fail;
        }
        sl_rpc_init();
        job->disp = sl_rpc_channel_new(job->dispatcher, SL_RPC_DEFAULT_MAX_MSG, &job->sec, 0,
                                       err, errlen);
        if (job->disp == NULL) {
            rc = -EINVAL;
            sl_rpc_shutdown();
            goto fail;
        }
        /* auto/fastflow: profile first (client/lib/profile.h). A failure is not
         * the job's: it then runs on the dispatcher's fallback plan. */
        job->planner = cl_planner_new();
        if (job->planner == NULL) {
            rc = sl_err(err, errlen, -ENOMEM, "out of memory");
            goto fail;
        }
        Sluice__PlannerInputs *inputs = NULL;
        cl_plan_args_t pa = {.spec = &job->spec, .src = job->src, .pipe = job->pipe,
                             .disp = job->disp, .threads = threads,
                             .consumer_rate = opts->consumer_rate,
                             .security = &job->sec,
                             .timeout_ms = job->timeout_ms};
        char perr[512];
        if (job->spec.offload == SL_OFFLOAD_AUTO || job->spec.offload == SL_OFFLOAD_FASTFLOW) {
            if (cl_planner_profile(job->planner, &pa, perr, sizeof(perr)) == 0) {
                inputs = cl_planner_inputs(job->planner);
            }
        } else if (job->spec.world_size <= 1) {
            /* A fixed plan needs no profile, but a cached one's cost model
             * sizes the splits better than file sizes (client/lib/costs.h). */
            (void)cl_planner_cached_client(job->planner, &pa, perr, sizeof(perr));
        }
        rc = submit(job, spec_path, inputs, err, errlen);
        if (rc < 0) {
            goto fail;
        }
        rc = cl_control_start(job);
        if (rc < 0) {
            sl_err(err, errlen, rc, "cannot start the control thread");
            goto fail;
        }
    }
    *ret = job;
    return 0;
fail:
    sluice_close(job);
    return rc;
}

void sluice_close(sluice_job_t *job)
{
    if (job == NULL) {
        return;
    }
    pthread_mutex_lock(&job->mu);
    job->closing = 1;
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
    if (job->control_started) {
        cl_control_stop(job); /* stops fetchers, tells the dispatcher */
    }
    sl_exec_free(job->exec);
    while (job->in_head != NULL) {
        cl_msg_t *m = job->in_head;
        job->in_head = m->next;
        cl_msg_free(m);
    }
    if (job->disp != NULL) {
        sl_rpc_channel_free(job->disp);
        sl_rpc_shutdown();
    }
    cl_planner_free(job->planner); /* after the control thread, its other user */
    for (int i = 0; i < CL_ORDER_CACHE; i++) {
        free(job->orders[i].order);
    }
    sl_batcher_free(job->batcher);
    sl_pipeline_free(job->pipe);
    sl_source_free(job->src);
    free(job->order_scratch);
    free(job->splits);
    free(job->acks);
    free(job->recvd);
    free(job->local_pending);
    pthread_mutex_destroy(&job->mu);
    pthread_cond_destroy(&job->cv);
    free(job);
}
