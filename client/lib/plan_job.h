/* plan_job: the library's side of `sluice plan` -- open a spec as an
 * auto/fastflow job would (its source, pipeline and plugins), profile like
 * one (client/lib/profile.h), and ask the dispatcher to plan it without
 * creating a job (PlanJob). The CLI prints the answer; it builds no
 * pipeline and opens no channel of its own.
 *
 * Library code: never logs; errors fill err (without the command's name).
 * One thread: the caller's. */
#ifndef SL_CLIENT_PLAN_JOB_H
#define SL_CLIENT_PLAN_JOB_H

#include <jansson.h>
#include <stddef.h>

#include "common/rpc/rpc.h"
#include "proto/sluice.pb-c.h"

typedef struct cl_plan_job_s cl_plan_job_t;

/* What one PlanJob plans. The strings must outlive the cl_plan_job_t. */
typedef struct cl_plan_job_args_s {
    const char *spec_path;
    const char *data_root;
    const char *plugin_dir; /* for a spec with plugin stages */
    const char *offload;    /* "auto", "fastflow", a fixed plan to diagnose ("off", "all",
                             * "K:F"), or NULL: the spec's if fastflow, else auto */
    /* URL sources (client/lib/remote_opts.h): NULL/0 = the environment's. */
    const char *remote_roots;
    const char *cache_dir;
    uint64_t cache_bytes;
    int always_profile; /* sluice_options_t's: the guard is not asked */
} cl_plan_job_args_t;

/* Samples per profile, as `sluice plan --samples` takes them. */
size_t cl_plan_job_default_samples(void);
size_t cl_plan_job_max_samples(void);

/* Opens the spec, its source and pipeline (and plugins). Returns 0 with
 * *ret, -EINVAL for a spec or plugin error (a usage error), other negative
 * codes (the source or pipeline cannot be opened), err filled. */
int cl_plan_job_open(const cl_plan_job_args_t *a, cl_plan_job_t **ret, char *err, size_t errlen);
/* Profiles (threads: this host's pipeline threads; consumer_rate: 0 =
 * unlimited; samples: per profile, 0 = the default) and asks the dispatcher
 * at addr over sec for the plan. Returns 0, -EINVAL for a usage error (no
 * channel to addr; the dispatcher refused the spec), other negative codes
 * for a runtime failure, err filled ("dispatcher ADDR: ..." where it is the
 * dispatcher's). */
int cl_plan_job_ask(cl_plan_job_t *pj, const char *addr, const sl_rpc_security_t *sec,
                    unsigned threads, double consumer_rate, size_t samples, char *err,
                    size_t errlen);

/* After cl_plan_job_ask: the dispatcher's answer, the planner's inputs sent
 * with it, and the seconds profiling took (owned by pj). */
const Sluice__SubmitJobResponse *cl_plan_job_answer(const cl_plan_job_t *pj);
const Sluice__PlannerInputs *cl_plan_job_inputs(const cl_plan_job_t *pj);
double cl_plan_job_profile_seconds(const cl_plan_job_t *pj);

/* A mixed job: what each source costs (common/profile/profile_mix.h), as
 * {"sources": [{"name", "weight_share", "samples", "cpu_ms_per_sample",
 * "unit_ms": [...], "read_ms", "encoded_bytes_per_sample",
 * "out_bytes_per_sample"}], "blend_cpu_ms_per_sample"} into *ret (NULL for
 * an unmixed job). samples: per profile, split over the sources. 0,
 * -ENOMEM or the profile's error (err). */
int cl_plan_job_mix_costs(const cl_plan_job_t *pj, size_t samples, json_t **ret, char *err,
                          size_t errlen);

/* After cl_plan_job_ask: the short-job guard's verdict for a job of the
 * spec (client/lib/short_job.h: its epochs over the whole source, one
 * rank), which an auto/fastflow job would act on before profiling. */
typedef struct cl_plan_short_s {
    int assessed;       /* 0: not assessed (a fixed plan, forced, or it failed: see why) */
    const char *choice; /* "profile", "off" or "all" */
    const char *reason; /* cl_short_why_name: "pays", "long", "link", "short", ... */
    double samples;     /* the job's samples */
    double profile_sec; /* what profiling would take (estimate) */
    double fixed_sec;   /* the job on the better fixed policy (estimate; 0 = unknown) */
    double saving_sec;  /* what profiling could gain over it (estimate) */
    double rate_off;    /* samples/s estimated, everything local / remote / both at once */
    double rate_all;
    double rate_both;
    double bandwidth;   /* bytes/s `all` was priced with; 0 = the link unknown */
    int link_probed;    /* 1: the guard probed it; 0: cached (or unknown) */
    double free_share;  /* a job profiles when profiling is at most this share of it */
    double cost_factor; /* profiling is charged this multiple of profile_sec */
    char why[256];      /* when not assessed */
} cl_plan_short_t;
void cl_plan_job_short(const cl_plan_job_t *pj, cl_plan_short_t *ret);

void cl_plan_job_free(cl_plan_job_t *pj); /* NULL ok */

#endif
