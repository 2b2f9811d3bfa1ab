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
#include "client/lib/short_job.h"
#include "client/lib/state.h"
#include "client/lib/url_pins.h"
#include "common/plugin/plugin.h"
#include "common/base/err.h"
#include "common/engine/balance_costs.h"
#include "common/order/balance.h"
#include "common/order/blend.h"
#include "common/base/version.h"
#include "common/order/ranks.h"
#include "common/base/clock.h"
#include "client/lib/remote_opts.h"
#include "common/pcache/pcache.h"

/* Per-sample costs for cost-cut splits: single-consumer jobs only (the
 * dispatcher cuts multi-rank jobs by count), bounded in size. Sets req's
 * costs and returns the array to free after the call, or NULL (then sent
 * without: the job is cut by count). */
static float *sample_costs(sluice_job_t *job, Sluice__SubmitJobRequest *req)
{
    if (job->spec.world_size > 1 || job->num_samples == 0 ||
        job->num_samples > CL_MAX_SAMPLE_COSTS ||
        job->spec.batching.mode != SL_BATCHING_COUNT) { /* balanced: its own order */
        return NULL;
    }
    float *costs = malloc(job->num_samples * sizeof(*costs));
    sl_costmodel_t model;
    int have_model = cl_planner_cost_model(job->planner, &model) == 0;
    cl_costs_from_e from = CL_COSTS_SIZE;
    if (costs != NULL &&
        cl_sample_costs(job->src, have_model ? &model : NULL, CL_COST_HEAD_BUDGET_MS, costs,
                        job->num_samples, &from) == 0) {
        req->n_sample_costs = job->num_samples;
        req->sample_costs = costs;
        snprintf(job->sample_costs, sizeof(job->sample_costs), "%s", cl_costs_from_name(from));
    } /* out of memory: sent without */
    return costs;
}

/* SubmitJob failed with rc (st: the status): the error to return. */
static int submit_failed(const sluice_job_t *job, int rc, const sl_rpc_status_t *st, char *err,
                         size_t errlen)
{
    if (rc == -ECOMM && st->code == SL_RPC_INVALID_ARGUMENT) {
        return sl_err(err, errlen, -EINVAL, "%s", st->details);
    }
    /* A TLS/plaintext mismatch never connects: it looks like a dead
     * peer, so say which setting to check. */
    int noconn = rc == -ECOMM &&
                 (st->code == SL_RPC_UNAVAILABLE || st->code == SL_RPC_DEADLINE_EXCEEDED);
    const char *hint = !noconn ? ""
                       : job->sec.tls_ca != NULL || job->sec.tls_cert != NULL
                           ? "; no connection: is the dispatcher up, and does it serve TLS "
                             "with a certificate --tls-ca trusts?"
                           : "; no connection: is the dispatcher up, and is it plaintext "
                             "(a TLS dispatcher needs --tls-ca)?";
    return sl_err(err, errlen, -ECONNREFUSED, "dispatcher %s: SubmitJob failed: %s (%s)%s",
                  job->dispatcher, rc == -ECOMM ? st->details : "bad reply",
                  rc == -ECOMM ? sl_rpc_code_name(st->code) : "", hint);
}

/* What SubmitJob answered into the job: its id, capability and plan, and
 * for a restarted rank what was acknowledged. Checks what would make every
 * later call fail or nothing arrive. */
static int take_reply(sluice_job_t *job, const Sluice__SubmitJobResponse *r, char *err,
                      size_t errlen)
{
    job->job_id = r->job_id;
    if (!sl_jobcap_valid(r->job_secret)) {
        /* Every later call about the job would be refused. */
        return sl_err(err, errlen, -EPROTO,
                      "dispatcher %s answered SubmitJob without a job_secret (a dispatcher "
                      "older than job capabilities?)",
                      job->dispatcher);
    }
    snprintf(job->job_secret, sizeof(job->job_secret), "%s", r->job_secret);
    if (r->first_epoch != job->first_epoch) {
        /* It would hand out other epochs than ours: nothing would arrive. */
        return sl_err(err, errlen, -EPROTO,
                      "dispatcher %s numbers the job's epochs from %" PRIu64 ", not from "
                      "first_epoch %" PRIu64 " (a dispatcher older than first_epoch?)",
                      job->dispatcher, r->first_epoch, job->first_epoch);
    }
    if (r->plan != NULL) {
        job->split_units = r->plan->split;
        job->local_share = r->plan->local_share;
        job->plan_compress = r->plan->compress;
        snprintf(job->plan_mode, sizeof(job->plan_mode), "%s", r->plan->mode ? r->plan->mode : "?");
        cl_planner_note_plan(job->planner, r->plan);
        if (r->plan->cache_off && job->pc != NULL) {
            /* The planner priced the prefix cache out for this job (its
             * reason is in `sluice plan --explain` and /status). */
            int rc = cl_line_drop_pcache(job->consumer.line);
            if (rc < 0) {
                return sl_err(err, errlen, rc,
                              "the plan turned the prefix cache off after "
                              "local samples started");
            }
            sl_pcache_free(job->pc);
            job->pc = NULL;
        }
    }
    return cl_ranks_resume(job, r, err, errlen); /* a restarted rank */
}

/* planner: the profiles for an auto/fastflow job, or NULL. */
static int submit(sluice_job_t *job, const char *spec_path, Sluice__PlannerInputs *planner,
                  char *err, size_t errlen)
{
    if (job->spec.world_size > 1) {
        /* After the token is read (security_from): it may be the key. */
        int rc = cl_ranks_job_secret(job, err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
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
    /* Ranks share a derived capability; a single consumer gets a random one. */
    req.job_secret = job->spec.world_size > 1 ? job->job_secret : NULL;
    req.planner = planner;
    req.first_epoch = job->first_epoch;
    float *costs = sample_costs(job, &req);
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    int rc = sl_rpc_unary(job->disp, "/sluice.Dispatcher/SubmitJob", &req.base,
                          &sluice__submit_job_response__descriptor, job->timeout_ms, 1, &resp,
                          &st);
    free(json);
    free(costs);
    if (rc < 0) {
        return submit_failed(job, rc, &st, err, errlen);
    }
    rc = take_reply(job, (const Sluice__SubmitJobResponse *)resp, err, errlen);
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

/* A job with the options' defaults filled in, nothing opened yet. */
static sluice_job_t *job_new(const sluice_options_t *opts)
{
    sluice_job_t *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return NULL;
    }
    if (sl_cond_init_mono(&job->cv) != 0) {
        free(job);
        return NULL;
    }
    if (sl_cond_init_mono(&job->control.cv) != 0) {
        pthread_cond_destroy(&job->cv);
        free(job);
        return NULL;
    }
    pthread_mutex_init(&job->mu, NULL);
    job->consumer.t_start = sl_mono_sec();
    job->opts = *opts;
    snprintf(job->data_root, sizeof(job->data_root), "%s", opts->data_root ? opts->data_root : ".");
    job->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : 10000;
    job->dispatcher_timeout_ms =
        opts->dispatcher_timeout_ms > 0 ? opts->dispatcher_timeout_ms : 60000;
    snprintf(job->plan_mode, sizeof(job->plan_mode), "local");
    job->local_share = 1.0;
    if (job->opts.threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        job->opts.threads = n > 0 ? (unsigned)n : 1;
    }
    return job;
}

/* Where a job's spec comes from: a file, or JSON text (json != NULL). name:
 * the file, or what stands for it in messages. */
typedef struct spec_in_s {
    const char *name;
    const char *json;
    size_t len;
    int describe; /* sluice_describe: the spec and the source, nothing run */
} spec_in_t;

/* The options that renumber or reseed the job's epochs. */
static int apply_epochs(sluice_job_t *job, const sluice_options_t *opts, char *err,
                        size_t errlen)
{
    if (opts->has_seed) {
        if (opts->seed > (uint64_t)INT64_MAX) {
            return sl_err(err, errlen, -EINVAL, "seed: %" PRIu64 " is not in 0..%" PRId64,
                          opts->seed, INT64_MAX);
        }
        job->spec.seed = opts->seed; /* sent to the dispatcher with the spec */
    }
    if (opts->first_epoch > SLUICE_MAX_EPOCHS - job->spec.epochs) {
        return sl_err(err, errlen, -EINVAL,
                      "first_epoch: %" PRIu64 " + %u epochs goes beyond epoch %llu",
                      opts->first_epoch, job->spec.epochs, SLUICE_MAX_EPOCHS);
    }
    job->first_epoch = opts->first_epoch;
    job->end_epoch = opts->first_epoch + job->spec.epochs;
    job->consumer.local_epoch = job->first_epoch; /* local mode: where the cursor starts */
    return 0;
}

/* The spec, with the options that override it (epochs, seed, ranks, offload). */
static int load_spec(sluice_job_t *job, const spec_in_t *in, const sluice_options_t *opts,
                     char *err, size_t errlen)
{
    int rc = in->json != NULL
                 ? sl_spec_parse(in->name, in->json, in->len, &job->spec, err, errlen)
                 : sl_spec_parse_file(in->name, &job->spec, err, errlen);
    if (rc < 0) {
        return rc == -E2BIG ? -EINVAL : rc; /* too long: a bad spec like any other */
    }
    if (opts->epochs > 0) {
        job->spec.epochs = opts->epochs;
    }
    rc = apply_epochs(job, opts, err, errlen);
    if (rc == 0) {
        rc = cl_ranks_apply(job, opts, err, errlen);
    }
    if (rc < 0 || opts->offload == NULL) {
        return rc;
    }
    rc = sl_offload_parse(opts->offload, &job->spec.offload, &job->spec.split,
                          &job->spec.local_share, err, errlen);
    if (rc == 0 && job->spec.offload == SL_OFFLOAD_FIXED && job->spec.split > job->spec.nstages) {
        rc = sl_err(err, errlen, -EINVAL, "offload split %u beyond the spec's %u stages",
                    job->spec.split, job->spec.nstages);
    }
    return rc;
}

/* The spec's plugin stages from this host's plugin_dir. */
static int bind_plugins(sluice_job_t *job, const sluice_options_t *opts, char *err, size_t errlen)
{
    int rc = sl_plugins_scan_client(opts->plugin_dir, &job->plugins, err, errlen);
    if (rc < 0) {
        return rc == -ENOMEM ? rc : -EINVAL;
    }
    rc = sl_pipeline_bind_plugins(job->pipe, job->plugins, err, errlen);
    return rc == -ENOENT ? -EINVAL : rc; /* the spec asks for what is not here: a usage error */
}

/* A source that is not there while no data root was given: the relative
 * path was looked for under the current directory, which is rarely what a
 * new user meant. Appended to the source's message (which names the path
 * and the root). */
static void default_root_hint(char *err, size_t errlen)
{
    size_t len = err != NULL ? strnlen(err, errlen) : errlen;
    if (len + 1 < errlen) {
        snprintf(err + len, errlen - len,
                 "; no data root was given, so it is the current directory "
                 "(--data-root DIR, or data_root= in Python, sets it)");
    }
}

/* The source and this rank's positions (what sluice_describe opens too). */
static int open_source(sluice_job_t *job, const sluice_options_t *opts, char *err, size_t errlen)
{
    int remote = opts->dispatcher != NULL;
    int rc = 0;
    if (job->remote == NULL) {
        rc = cl_remote_new(opts->remote_roots, opts->cache_dir, opts->cache_bytes, &job->remote,
                           err, errlen);
    }
    if (rc == 0) {
        rc = sl_source_open_spec(job->data_root, job->remote, &job->spec, &job->src, err, errlen);
    }
    if (rc == -ENOENT && opts->data_root == NULL && !sl_remote_is_url(job->spec.source_path)) {
        default_root_hint(err, errlen);
    }
    if (cl_remote_refused(rc, err)) {
        return -EINVAL; /* the URL is outside this host's remote_roots: a usage error */
    }
    if (rc == 0) { /* a mix: its sizes and epoch length travel in the spec */
        rc = sl_source_mix_apply(job->src, &job->spec);
    }
    if (rc < 0) {
        return rc;
    }
    job->num_samples = sl_source_count(job->src);
    if (job->pins == NULL && cl_upins_new(0, &job->pins) < 0) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    rc = cl_state_apply(job, opts, job->token, strlen(job->token), err, errlen);
    if (rc < 0) {
        return rc;
    }
    job->positions = sl_spec_positions(&job->spec, job->num_samples);
    if (job->spec.world_size > 1) {
        if (job->positions == 0) {
            return sl_err(err, errlen, -EINVAL,
                          "world size %u with %" PRIu64 " samples leaves every rank nothing "
                          "(rank_padding \"drop\")",
                          job->spec.world_size, job->num_samples);
        }
        cl_ranks_job_name(job, job->job_name, sizeof(job->job_name));
        job->ack_on_pop = remote;
    }
    return 0;
}

/* Balanced or packed batching: every sample's predicted cost, tokens and
 * tiles, and what the first epoch's schedule predicts (its stats). */
static int predict(sluice_job_t *job, char *err, size_t errlen)
{
    size_t n = job->num_samples > 0 ? job->num_samples : 1;
    job->tcost = malloc(n * sizeof(*job->tcost));
    job->ttok = malloc(n * sizeof(*job->ttok));
    job->ttiles = malloc(n * sizeof(*job->ttiles));
    if (job->tcost == NULL || job->ttok == NULL || job->ttiles == NULL ||
        sl_balance_sample_costs(&job->spec, job->src, job->tcost, job->ttok, job->ttiles) < 0) {
        return sl_err(err, errlen, -ENOMEM, "out of memory predicting sample costs");
    }
    int packed = job->spec.batching.mode == SL_BATCHING_PACKED;
    uint64_t len = packed ? job->positions * (job->spec.world_size > 0 ? job->spec.world_size : 1)
                          : sl_spec_order_len(&job->spec, n);
    uint64_t *order = malloc((len > 0 ? len : 1) * sizeof(*order));
    if (order != NULL && packed) {
        sl_pack_stats_t ps;
        if (sl_pack_epoch(&job->spec, job->first_epoch, job->num_samples, job->tcost, job->ttok,
                          job->ttiles, order, &ps) == 0) {
            job->bstats = (sl_balance_stats_t){.step_load = ps.step_load,
                                               .imbalance = ps.imbalance,
                                               .imbalance_max = ps.imbalance_max,
                                               .steps = ps.steps};
            job->pstats = ps;
        }
    } else if (order != NULL && sl_spec_epoch_order(&job->spec, job->first_epoch, job->num_samples,
                                                    job->tcost, job->ttok, order) == 0) {
        sl_balance_stats(&job->spec, sl_spec_epoch_len(&job->spec, job->num_samples), job->tcost,
                         order, &job->bstats);
    }
    free(order); /* no stats without memory: the job runs the same */
    return 0;
}

/* The source, this rank's positions, the pipeline and the line. */
static int open_engine(sluice_job_t *job, const sluice_options_t *opts, char *err, size_t errlen)
{
    int rc = open_source(job, opts, err, errlen);
    if (rc < 0) {
        return rc;
    }
    rc = sl_pipeline_new(&job->spec, 0, &job->pipe, err, errlen);
    if (rc == 0) {
        rc = sl_pipeline_load(job->pipe, job->src, err, errlen);
    }
    if (rc == 0 && sl_spec_has_plugins(&job->spec)) {
        rc = bind_plugins(job, opts, err, errlen);
    }
    if (rc < 0) {
        return rc;
    }
    job->nunits = sl_pipeline_nunits(job->pipe);
    rc = cl_pcache_store_new(opts->cache_dir, opts->cache_bytes, &job->pc_store, err, errlen);
    if (rc == 0 && job->pc_store != NULL) {
        rc = sl_pcache_new(job->pc_store, &job->spec, sl_source_fingerprint(job->src),
                           job->opts.threads, &job->pc, err, errlen);
    }
    uint8_t sha[32];
    if (rc == 0 && job->pc != NULL && sl_pipeline_content_hash(job->pipe, sha)) {
        sl_pcache_key_content(job->pc, sha); /* the ranks file's bytes, not its path */
    }
    if (rc < 0) {
        return rc;
    }
    if (job->spec.batching.mode != SL_BATCHING_COUNT) {
        rc = predict(job, err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    cl_line_args_t la = {.spec = &job->spec,
                         .pipe = job->pipe,
                         .src = job->src,
                         .num_samples = job->num_samples,
                         .positions = job->positions,
                         .threads = job->opts.threads,
                         .track_drops = job->ack_on_pop,
                         .first_epoch = job->first_epoch,
                         .tcost = job->tcost,
                         .ttok = job->ttok,
                         .ttiles = job->ttiles,
                         .pcache = job->pc,
                         .account = cl_job_account,
                         .account_arg = job,
                         .pins = job->pins};
    rc = cl_line_new(&la, &job->consumer.line);
    job->splits = calloc(CL_MAX_SPLITS, sizeof(*job->splits));
    if (rc < 0 || job->splits == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory setting up the job");
    }
    return 0;
}

/* The guard's verdict for sluice_stats. */
static void keep_guard(sluice_job_t *job, const cl_short_t *sj, double seconds)
{
    snprintf(job->guard.choice, sizeof(job->guard.choice), "%s", cl_short_name(sj->choice));
    snprintf(job->guard.reason, sizeof(job->guard.reason), "%s", cl_short_why_name(sj->why));
    job->guard.rate_off = sj->in.rate_off;
    job->guard.rate_all = sj->in.rate_all;
    job->guard.rate_both = sj->in.rate_both;
    job->guard.profile_sec = sj->in.profile_sec;
    job->guard.gain_sec = sj->saving_sec;
    job->guard.seconds = seconds;
}

/* Profiles when the plan is the planner's (client/lib/profile.h) and
 * returns its inputs, or NULL. A failure is not the job's: it then runs on
 * the dispatcher's fallback plan. */
static Sluice__PlannerInputs *profile(sluice_job_t *job)
{
    cl_plan_args_t pa = {.spec = &job->spec, .src = job->src, .pipe = job->pipe,
                         .disp = job->disp, .threads = job->opts.threads,
                         .consumer_rate = job->opts.consumer_rate, .security = &job->sec,
                         .timeout_ms = job->timeout_ms,
                         .samples = cl_profile_samples_for(job->num_samples,
                                                           job->end_epoch - job->first_epoch,
                                                           job->spec.world_size)};
    char perr[512];
    cl_short_t sj;
    uint64_t epochs = job->end_epoch - job->first_epoch;
    uint64_t total = job->positions > UINT64_MAX / (epochs > 0 ? epochs : 1)
                         ? UINT64_MAX
                         : job->positions * epochs;
    /* A job too short to repay profiling starts on the better fixed policy
     * (client/lib/short_job.h); a failure to tell profiles as before. */
    if ((job->spec.offload == SL_OFFLOAD_AUTO || job->spec.offload == SL_OFFLOAD_FASTFLOW) &&
        job->spec.world_size <= 1 && !cl_short_forced(job->opts.always_profile)) {
        double t0 = sl_mono_sec();
        if (cl_short_assess(job->planner, &pa, total, &sj, perr, sizeof(perr)) == 0) {
            keep_guard(job, &sj, sl_mono_sec() - t0);
            if (sj.choice != CL_SHORT_PROFILE) {
                job->spec.offload = sj.choice == CL_SHORT_OFF ? SL_OFFLOAD_OFF : SL_OFFLOAD_ALL;
            }
        }
    }
    if (job->spec.offload == SL_OFFLOAD_AUTO || job->spec.offload == SL_OFFLOAD_FASTFLOW) {
        if (cl_planner_profile(job->planner, &pa, perr, sizeof(perr)) == 0) {
            return cl_planner_inputs(job->planner);
        }
    } else if (job->spec.world_size <= 1) {
        /* A fixed plan needs no profile, but a cached one's cost model
         * sizes the splits better than file sizes (client/lib/costs.h). */
        (void)cl_planner_cached_client(job->planner, &pa, perr, sizeof(perr));
    }
    return NULL;
}

/* Remote mode: the dispatcher channel, profiling, SubmitJob, the control
 * thread. */
static int attach(sluice_job_t *job, const char *spec_path, const sluice_options_t *opts,
                  char *err, size_t errlen)
{
    snprintf(job->dispatcher, sizeof(job->dispatcher), "%s", opts->dispatcher);
    sl_rpc_init();
    job->disp = sl_rpc_channel_new(job->dispatcher, SL_RPC_DEFAULT_MAX_MSG, &job->sec, 0, err,
                                   errlen);
    if (job->disp == NULL) {
        sl_rpc_shutdown();
        return -EINVAL;
    }
    job->planner = cl_planner_new();
    if (job->planner == NULL ||
        sl_ring_init(&job->local_pending, sizeof(uint64_t), CL_MAX_SPLITS) < 0) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = submit(job, spec_path, profile(job), err, errlen);
    if (rc < 0) {
        return rc;
    }
    rc = cl_control_start(job);
    if (rc < 0) {
        sl_err(err, errlen, rc, "cannot start the control thread");
    }
    return rc;
}

static int open_job(const spec_in_t *in, const sluice_options_t *opts, sluice_job_t **ret,
                    char *err, size_t errlen)
{
    sluice_options_t defaults = {0};
    if (opts == NULL) {
        opts = &defaults;
    }
    sluice_job_t *job = job_new(opts);
    if (job == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = load_spec(job, in, opts, err, errlen);
    if (rc == 0) {
        rc = security_from(job, opts, err, errlen); /* the token signs saved states too */
    }
    if (rc == 0 && in->describe) {
        rc = open_source(job, opts, err, errlen);
    } else if (rc == 0) {
        rc = open_engine(job, opts, err, errlen);
    }
    if (rc == 0 && opts->dispatcher != NULL && !in->describe) {
        rc = attach(job, in->name, opts, err, errlen);
    }
    if (rc < 0) {
        sluice_close(job);
        return rc;
    }
    *ret = job;
    return 0;
}

int sluice_open(const char *spec_path, const sluice_options_t *opts, sluice_job_t **ret,
                char *err, size_t errlen)
{
    spec_in_t in = {.name = spec_path};
    return open_job(&in, opts, ret, err, errlen);
}

int sluice_open_json(const char *json, size_t len, const char *name,
                     const sluice_options_t *opts, sluice_job_t **ret, char *err,
                     size_t errlen)
{
    if (json == NULL) {
        return sl_err(err, errlen, -EINVAL, "spec: no JSON text given");
    }
    spec_in_t in = {.name = name != NULL ? name : "<spec>", .json = json, .len = len};
    return open_job(&in, opts, ret, err, errlen);
}

int sluice_describe(const char *spec_path, const char *json, size_t len,
                    const sluice_options_t *opts, sluice_job_t **ret, char *err, size_t errlen)
{
    if (spec_path == NULL && json == NULL) {
        return sl_err(err, errlen, -EINVAL, "spec: no spec file or JSON text given");
    }
    spec_in_t in = {.name = spec_path != NULL ? spec_path : "<spec>",
                    .json = json,
                    .len = len,
                    .describe = 1};
    return open_job(&in, opts, ret, err, errlen);
}

const char *sluice_version(void) { return SL_VERSION; }

void sluice_close(sluice_job_t *job)
{
    if (job == NULL) {
        return;
    }
    pthread_mutex_lock(&job->mu);
    job->closing = 1;
    pthread_cond_broadcast(&job->cv);
    pthread_cond_signal(&job->control.cv);
    pthread_mutex_unlock(&job->mu);
    if (job->control.started) {
        cl_control_stop(job); /* stops fetchers, tells the dispatcher */
    }
    cl_line_free(job->consumer.line);
    while (job->fetch.in_head != NULL) {
        cl_msg_t *m = job->fetch.in_head;
        job->fetch.in_head = m->next;
        cl_msg_free(m);
    }
    if (job->disp != NULL) {
        sl_rpc_channel_free(job->disp);
        sl_rpc_shutdown();
    }
    cl_planner_free(job->planner); /* after the control thread, its other user */
    sl_pipeline_free(job->pipe);
    sl_plugins_free(job->plugins); /* after the line: its threads ran the stages */
    sl_source_free(job->src);
    cl_upins_free(job->pins);    /* after the line, its user */
    sl_remote_free(job->remote); /* after the source that fetched through it */
    sl_pcache_free(job->pc);     /* after the line's executor */
    sl_cache_free(job->pc_store);
    sl_spec_clear(&job->spec);
    free(job->tcost);
    free(job->ttok);
    free(job->ttiles);
    free(job->splits);
    cl_ids_free(&job->acks);
    cl_ids_free(&job->recvd);
    sl_ring_free(&job->local_pending);
    pthread_mutex_destroy(&job->mu);
    pthread_cond_destroy(&job->cv);
    pthread_cond_destroy(&job->control.cv);
    free(job);
}
