/* plan_job: see plan_job.h. */
#include "client/lib/plan_job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/lib/remote_opts.h"
#include "client/lib/profile.h"
#include "common/profile/profile_mix.h"
#include "client/lib/short_job.h"
#include "common/order/blend.h"
#include "common/profile/profiler.h"
#include "common/data/source.h"
#include "common/engine/pipeline.h"
#include "common/plugin/plugin.h"
#include "common/spec/spec.h"

struct cl_plan_job_s {
    const char *spec_path;
    sl_spec_t *spec;
    sl_source_t *src;
    sl_remote_t *remote; /* URL sources: remote_roots + cache */
    sl_pipeline_t *pipe;
    sl_plugins_t *plugins; /* a spec with plugin stages: plugin_dir's */
    sl_rpc_channel_t *ch;
    int rpc; /* sl_rpc_init called */
    cl_planner_t *pl;
    ProtobufCMessage *resp;
    cl_plan_short_t shortj; /* the short-job guard's verdict */
    int always_profile;     /* cl_plan_job_args_t's */
};

size_t cl_plan_job_default_samples(void) { return SL_PROFILE_DEFAULT_SAMPLES; }

size_t cl_plan_job_max_samples(void) { return SL_PROFILE_MAX_SAMPLES; }

void cl_plan_job_free(cl_plan_job_t *pj)
{
    if (pj == NULL) {
        return;
    }
    if (pj->resp != NULL) {
        protobuf_c_message_free_unpacked(pj->resp, NULL);
    }
    cl_planner_free(pj->pl);
    sl_rpc_channel_free(pj->ch);
    if (pj->rpc) {
        sl_rpc_shutdown();
    }
    sl_pipeline_free(pj->pipe);
    sl_plugins_free(pj->plugins);
    sl_source_free(pj->src);
    sl_remote_free(pj->remote);
    sl_spec_clear(pj->spec);
    free(pj->spec);
    free(pj);
}

/* The spec (as an auto or fastflow job), its source and pipeline. */
static int open_spec(const cl_plan_job_args_t *a, cl_plan_job_t *pj, char *err, size_t errlen)
{
    pj->spec = calloc(1, sizeof(*pj->spec));
    if (pj->spec == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (sl_spec_parse_file(a->spec_path, pj->spec, err, errlen) < 0) {
        return -EINVAL;
    }
    sl_offload_e given = SL_OFFLOAD_AUTO;
    uint32_t split = 0;
    double share = 0.0;
    if (a->offload != NULL && sl_offload_parse(a->offload, &given, &split, &share, NULL, 0) == 0 &&
        given != SL_OFFLOAD_AUTO && given != SL_OFFLOAD_FASTFLOW) {
        /* A fixed plan: the dispatcher diagnoses it instead of choosing. */
        pj->spec->offload = given;
        pj->spec->split = split;
        pj->spec->local_share = share;
    } else if (a->offload != NULL) {
        pj->spec->offload = strcmp(a->offload, "fastflow") == 0 ? SL_OFFLOAD_FASTFLOW
                                                                : SL_OFFLOAD_AUTO;
    } else if (pj->spec->offload != SL_OFFLOAD_FASTFLOW) {
        pj->spec->offload = SL_OFFLOAD_AUTO;
    }
    int rc = cl_remote_new(a->remote_roots, a->cache_dir, a->cache_bytes, &pj->remote, err, errlen);
    if (rc == 0) {
        rc = sl_source_open_spec(a->data_root, pj->remote, pj->spec, &pj->src, err, errlen);
    }
    if (rc == 0) {
        rc = sl_source_mix_apply(pj->src, pj->spec);
    }
    if (rc < 0) {
        return rc == -EINVAL || cl_remote_refused(rc, err) ? -EINVAL : -EIO;
    }
    if (sl_pipeline_new(pj->spec, 0, &pj->pipe, err, errlen) < 0 ||
        sl_pipeline_load(pj->pipe, pj->src, err, errlen) < 0) {
        return -EIO;
    }
    /* Plugin units are profiled like the others, in their host process. */
    if (sl_spec_has_plugins(pj->spec) &&
        (sl_plugins_scan_client(a->plugin_dir, &pj->plugins, err, errlen) < 0 ||
         sl_pipeline_bind_plugins(pj->pipe, pj->plugins, err, errlen) < 0)) {
        return -EINVAL;
    }
    return 0;
}

int cl_plan_job_open(const cl_plan_job_args_t *a, cl_plan_job_t **ret, char *err, size_t errlen)
{
    cl_plan_job_t *pj = calloc(1, sizeof(*pj));
    if (pj == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    pj->spec_path = a->spec_path;
    pj->always_profile = a->always_profile;
    int rc = open_spec(a, pj, err, errlen);
    if (rc < 0) {
        cl_plan_job_free(pj);
        return rc;
    }
    *ret = pj;
    return 0;
}

/* The short-job guard as a job of the spec would run it (open.c): before
 * profiling, one rank, every epoch of the whole source, the job's profile
 * size. */
static void assess_short(cl_plan_job_t *pj, const cl_plan_args_t *pa)
{
    cl_plan_short_t *r = &pj->shortj;
    memset(r, 0, sizeof(*r));
    if (pj->spec->offload != SL_OFFLOAD_AUTO && pj->spec->offload != SL_OFFLOAD_FASTFLOW) {
        snprintf(r->why, sizeof(r->why), "a fixed plan does not profile");
        return;
    }
    if (cl_short_forced(pj->always_profile)) {
        snprintf(r->why, sizeof(r->why),
                 "always profile: --always-profile or "
                 "SLUICE_ALWAYS_PROFILE=1");
        return;
    }
    uint64_t n = sl_spec_epoch_len(pj->spec, sl_source_count(pj->src));
    uint64_t total = n * (pj->spec->epochs > 0 ? pj->spec->epochs : 1);
    cl_plan_args_t a = *pa;
    a.samples = cl_profile_samples_for(n, pj->spec->epochs, 1);
    cl_short_t sj;
    if (cl_short_assess(pj->pl, &a, total, &sj, r->why, sizeof(r->why)) < 0) {
        return;
    }
    *r = (cl_plan_short_t){.assessed = 1,
                           .choice = cl_short_name(sj.choice),
                           .reason = cl_short_why_name(sj.why),
                           .samples = sj.in.samples,
                           .profile_sec = sj.in.profile_sec,
                           .fixed_sec = sj.fixed_sec,
                           .saving_sec = sj.saving_sec,
                           .rate_off = sj.in.rate_off,
                           .rate_all = sj.in.rate_all,
                           .rate_both = sj.in.rate_both,
                           .bandwidth = sj.bandwidth,
                           .link_probed = sj.link_probed,
                           .free_share = CL_SHORT_FREE_SHARE,
                           .cost_factor = CL_SHORT_COST_FACTOR};
}

void cl_plan_job_short(const cl_plan_job_t *pj, cl_plan_short_t *ret) { *ret = pj->shortj; }

/* The dispatcher channel and the planner's profiles. */
static int profile(cl_plan_job_t *pj, const char *addr, const sl_rpc_security_t *sec,
                   unsigned threads, double consumer_rate, size_t samples, char *err, size_t errlen)
{
    char why[1024];
    sl_rpc_init();
    pj->rpc = 1;
    pj->ch = sl_rpc_channel_new(addr, SL_RPC_DEFAULT_MAX_MSG, sec, 0, why, sizeof(why));
    pj->pl = cl_planner_new();
    if (pj->ch == NULL || pj->pl == NULL) {
        snprintf(err, errlen, "%s", pj->ch == NULL ? why : "out of memory");
        return pj->ch == NULL ? -EINVAL : -ENOMEM;
    }
    cl_plan_args_t pa = {.spec = pj->spec,
                         .src = pj->src,
                         .pipe = pj->pipe,
                         .disp = pj->ch,
                         .threads = threads,
                         .consumer_rate = consumer_rate,
                         .timeout_ms = 10000,
                         .samples = samples,
                         .security = sec};
    assess_short(pj, &pa);
    if (cl_planner_profile(pj->pl, &pa, why, sizeof(why)) < 0) {
        snprintf(err, errlen, "dispatcher %s: %s", addr, why);
        return -EIO;
    }
    return 0;
}

/* PlanJob: the dispatcher plans the job without creating it; pj->resp
 * holds the answer. */
static int plan_job(cl_plan_job_t *pj, const char *addr, unsigned threads, char *err, size_t errlen)
{
    char *json = sl_spec_to_json(pj->spec);
    if (json == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = json;
    req.spec_name = (char *)pj->spec_path;
    req.num_samples = sl_source_count(pj->src);
    req.source_fingerprint = sl_source_fingerprint(pj->src);
    req.client_threads = threads;
    req.client_id = host;
    req.world_size = 1;
    req.planner = cl_planner_inputs(pj->pl);
    sl_rpc_status_t st;
    int rc = sl_rpc_unary(pj->ch, "/sluice.Dispatcher/PlanJob", &req.base,
                          &sluice__submit_job_response__descriptor, 30000, 1, &pj->resp, &st);
    free(json);
    if (rc < 0) {
        snprintf(err, errlen, "dispatcher %s: PlanJob failed: %s (%s)", addr,
                 rc == -ECOMM ? st.details : "bad reply",
                 rc == -ECOMM ? sl_rpc_code_name(st.code) : "");
        return rc == -ECOMM && st.code == SL_RPC_INVALID_ARGUMENT ? -EINVAL : -EIO;
    }
    return 0;
}

int cl_plan_job_ask(cl_plan_job_t *pj, const char *addr, const sl_rpc_security_t *sec,
                    unsigned threads, double consumer_rate, size_t samples, char *err,
                    size_t errlen)
{
    int rc = profile(pj, addr, sec, threads, consumer_rate, samples, err, errlen);
    return rc < 0 ? rc : plan_job(pj, addr, threads, err, errlen);
}

const Sluice__SubmitJobResponse *cl_plan_job_answer(const cl_plan_job_t *pj)
{
    return (const Sluice__SubmitJobResponse *)pj->resp;
}

const Sluice__PlannerInputs *cl_plan_job_inputs(const cl_plan_job_t *pj)
{
    return cl_planner_inputs(pj->pl);
}

double cl_plan_job_profile_seconds(const cl_plan_job_t *pj)
{
    return cl_planner_profile_seconds(pj->pl);
}

int cl_plan_job_mix_costs(const cl_plan_job_t *pj, size_t samples, json_t **ret, char *err,
                          size_t errlen)
{
    *ret = NULL;
    const sl_mix_t *m = pj->spec->mix;
    if (m == NULL) {
        return 0;
    }
    sl_profile_mix_t *pm = calloc(1, sizeof(*pm));
    if (pm == NULL) {
        return -ENOMEM;
    }
    int rc = sl_profile_mix(pj->pipe, pj->src, pj->spec, samples, SL_PROFILE_DEFAULT_MS, pm, err,
                            errlen);
    json_t *a = rc == 0 ? json_array() : NULL;
    double w[SL_MIX_MAX_SOURCES];
    for (uint32_t j = 0; a != NULL && j < m->nsources; j++) {
        const sl_profile_source_t *s = &pm->src[j];
        json_t *units = json_array();
        for (uint32_t u = 0; units != NULL && u < pm->nunits; u++) {
            json_array_append_new(units, json_real(s->unit_sec[u] * 1e3));
        }
        w[j] = m->src[j].weight;
        json_array_append_new(a, json_pack("{s:s, s:f, s:I, s:f, s:o, s:f, s:f, s:f}", "name",
                                           m->src[j].name, "weight_share", 0.0, "samples",
                                           (json_int_t)s->samples, "cpu_ms_per_sample",
                                           s->cpu_sec * 1e3, "unit_ms", units, "read_ms",
                                           s->read_sec * 1e3, "encoded_bytes_per_sample",
                                           s->encoded_bytes, "out_bytes_per_sample", s->out_bytes));
    }
    double sum = 0.0;
    for (uint32_t j = 0; a != NULL && j < m->nsources; j++) {
        sum += w[j];
    }
    for (uint32_t j = 0; a != NULL && j < m->nsources; j++) {
        json_object_set_new(json_array_get(a, j), "weight_share", json_real(w[j] / sum));
    }
    if (a != NULL) {
        *ret = json_pack("{s:o, s:f}", "sources", a, "blend_cpu_ms_per_sample",
                         sl_profile_mix_sec(pm, w) * 1e3);
    }
    free(pm);
    return rc < 0 ? rc : (*ret != NULL ? 0 : -ENOMEM);
}
