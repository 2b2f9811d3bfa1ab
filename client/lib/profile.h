/* profile: the client's part of planning (docs/planner.md).
 *
 * Before SubmitJob of an auto/fastflow job (and for `sluice plan`) the
 * client gathers the planner's inputs and sends them with the request:
 *  1. GetPlanContext: the live workers, and profiles the dispatcher has
 *     cached for this spec hash (those hosts are not profiled again);
 *  2. its own profile: every unit on ~200 evenly spread samples of the
 *     job's data, one thread, at most ~2 s (common/profile/profiler.h);
 *     A mixed job's sources are profiled one by one as well (in half the
 *     profile's time again: profile_mix_inputs.h), so the dispatcher can
 *     weigh their costs by the weights in force;
 *  3. its CPU budget (affinity, cgroup quota), capped by its threads; when
 *     no cgroup of ours is readable, what the profile pass's lone thread
 *     got, if that shows a limit (client/lib/profile_budget.h);
 *  4. each worker's identity (Worker.Profile without samples), grouping
 *     them into speed classes (CPU model, threads, budget); then one
 *     Worker.Profile of each class on the same sample indices;
 *  5. one Worker.Probe per class: link bandwidth, and this process's CPU
 *     per received byte (the receive cost);
 *  6. the client's own ingress: Worker.Probe from up to CL_PROBE_CONCURRENT
 *     workers at once (client_bandwidth; the links summed overstate it
 *     when the client's link is the narrow one);
 *  7. last, with nothing else running here: its own CPU per received sample
 *     under its real quota, a Worker.Probe of the largest class in messages
 *     of batch_size samples of the pipeline's output, beyond the per-byte
 *     receive cost (client_overhead_profiled_sec; issue 39 part 4). Not
 *     when the cached profile carries a running job's overhead.
 * Order: 1, 3, the identities of 4, 5 and 6 (the probes charge this
 * process's CPU to the bytes received, so nothing else runs here then),
 * then 2 while the uncached classes' Worker.Profile calls run on another
 * thread (their CPU is the workers'; a short job's cold start was the sum
 * of both) -- after it when the budget is unknown (the lone thread then
 * measures it, and workers on this machine would slow it).
 * The client profiles the workers, not the dispatcher, because only the
 * client can measure its links to them and the dispatcher never blocks on
 * a worker.
 *
 * While the job runs, the control thread reports the delivered rate, the
 * time next_batch waited, the consumer rate (samples per second of time
 * spent outside next_batch), CPU use and per-unit costs every
 * CL_REPORT_MS, and, when the budget is unknown, the CPUs it measured it
 * gets (profile_budget.h); the reply carries the current plan (re-plans).
 *
 * Library code: never logs. Thread use: profile/inputs on the opening
 * thread; note_batch on the consumer's; tick on the control thread; get
 * from any (the mutex). */
#ifndef SL_CLIENT_PROFILE_H
#define SL_CLIENT_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/cost/costmodel.h"
#include "common/profile/profiler.h"
#include "common/engine/pipeline.h"
#include "common/rpc/rpc.h"
#include "common/data/source.h"
#include "common/spec/spec.h"
#include "proto/sluice.pb-c.h"

#define CL_PLAN_MAX_CLASSES 16
#define CL_PLAN_MAX_WORKERS 256   /* workers asked for their identity */
#define CL_PROBE_BYTES (8u << 20)
#define CL_PROBE_CHUNK (256u << 10)
/* A probe stops this long after its first chunk even if CL_PROBE_BYTES are
 * not all in: 8 MiB take 0.7 s on a 100 Mbit/s link (1.4 s for the ingress
 * probe's streams sharing it), most of a short job's start. Stopped after
 * 0.12 s or 0.25 s, the probes read within 2 % of the full 8 MiB on emulated
 * 100 Mbit/s and 1 Gbit/s links (docs/benchmarks.md). */
#define CL_PROBE_MAX_SEC 0.15
/* The aggregate probe (client ingress): at most this many workers stream at
 * once, each stream bounded by this deadline. */
#define CL_PROBE_CONCURRENT 8
#define CL_PROBE_AGG_TIMEOUT_MS 5000
#define CL_REPORT_MS 1000
#define CL_IDENTITY_TIMEOUT_MS 2000
#define CL_CONTEXT_TIMEOUT_MS 3000
#define CL_REPORT_TIMEOUT_MS 1000

struct sluice_job;
typedef struct cl_planner_s cl_planner_t;

typedef struct cl_plan_args_s {
    const sl_spec_t *spec;
    const sl_source_t *src;
    const sl_pipeline_t *pipe;
    sl_rpc_channel_t *disp;
    unsigned threads;      /* the client's pipeline threads (caps its budget) */
    double consumer_rate;  /* target samples/s; 0 = unlimited */
    int timeout_ms;        /* dispatcher calls */
    size_t samples;        /* per profile; 0 = SL_PROFILE_DEFAULT_SAMPLES */
    int max_ms;            /* per profile; 0 = SL_PROFILE_DEFAULT_MS */
    const sl_rpc_security_t *security; /* for the worker channels; NULL = plaintext */
} cl_plan_args_t;

/* How many samples the client profiles for a job of `count` samples an
 * epoch over `epochs` epochs on `world` ranks: SL_PROFILE_DEFAULT_SAMPLES,
 * but never more than a twentieth of the rank's share of the job (at least
 * CL_PROFILE_MIN_SAMPLES): profiling 200 samples of a 400-sample job on a
 * 0.25-CPU node took 0.8 s, longer than running the job's local share. */
#define CL_PROFILE_MIN_SAMPLES 32
size_t cl_profile_samples_for(uint64_t count, uint64_t epochs, uint32_t world);

cl_planner_t *cl_planner_new(void);
void cl_planner_free(cl_planner_t *p); /* NULL ok */

/* Steps 1-5 above. Returns 0, -ENOTSUP when the dispatcher has no planner
 * (the job then runs with the dispatcher's fallback plan), other negative
 * codes with err filled. */
int cl_planner_profile(cl_planner_t *p, const cl_plan_args_t *a, char *err, size_t errlen);
/* Step 1 and the cache half of step 2 alone, for a job with a fixed plan:
 * the client profile the dispatcher has cached for this spec on this host
 * (from an earlier auto job or `sluice plan`), for its cost model. Returns
 * 0, -ENOENT (none cached), -ENOTSUP (no planner), other negative codes
 * with err filled. */
int cl_planner_cached_client(cl_planner_t *p, const cl_plan_args_t *a, char *err,
                             size_t errlen);
/* The client's fitted per-sample cost model (profiled now or cached) into
 * ret. Returns 0, or -ENOENT when there is none. */
int cl_planner_cost_model(const cl_planner_t *p, sl_costmodel_t *ret);
/* The inputs for SubmitJob/PlanJob (owned by p; valid until it is freed). */
Sluice__PlannerInputs *cl_planner_inputs(cl_planner_t *p);
/* Wall seconds the profiling took. */
double cl_planner_profile_seconds(const cl_planner_t *p);

/* The plan the dispatcher answered (SubmitJob, GetAssignment, ReportRates). */
void cl_planner_note_plan(cl_planner_t *p, const Sluice__Plan *plan);
typedef struct cl_plan_info_s {
    double predicted;
    char binding[32];
    uint32_t version;
    double measured;        /* delivered samples/s in the last report window (window.h) */
    char local_reason[192]; /* Plan.local_reason: why an auto plan is all local; "" */
} cl_plan_info_t;
void cl_planner_get(cl_planner_t *p, cl_plan_info_t *ret);

/* Consumer thread: a sluice_next_batch call began at t_enter (monotonic
 * seconds), so a report taken while it waits counts the wait so far. */
void cl_planner_note_enter(cl_planner_t *p, double t_enter);
/* Consumer thread: one sluice_next_batch call from t_enter to t_leave
 * (monotonic seconds) that delivered n samples. */
void cl_planner_note_batch(cl_planner_t *p, double t_enter, double t_leave, uint32_t n);
/* Consumer thread: the batcher has taken this many samples so far
 * (delivered, or waiting in batches still open). */
void cl_planner_note_accepted(cl_planner_t *p, uint64_t accepted);

/* Control thread, every poll: sends ReportRates once per CL_REPORT_MS. */
void cl_planner_tick(struct sluice_job *job);
/* Control thread: ms until cl_planner_tick next reports (INT_MAX without
 * a planner), so a quiet control thread wakes for it (pace.h). */
int cl_planner_due_ms(const struct sluice_job *job);

/* Step 6 alone: bytes/s of all bytes after each stream's first chunk over
 * the span from the earliest first chunk to the latest end, with the first
 * CL_PROBE_CONCURRENT of addrs streaming at once (one thread each, each
 * bounded by timeout_ms), and in *ret_recv this process's CPU over that
 * span per byte. 0 (both) when fewer than two streams succeeded. */
double cl_probe_aggregate(const char *const *addrs, size_t n, const sl_rpc_security_t *sec,
                          int timeout_ms, double *ret_recv);
/* The receive cost per byte to plan with once another probe measured
 * probe (0, negative or not finite: it measured nothing), have being the
 * figure so far (0: none): the lower. A probe only ever reads high --
 * whatever else this process did in its fraction of a second, or quota it
 * lacked, lands on its bytes -- so the lowest probe is the best estimate. */
double cl_recv_lowest(double have, double probe);

#endif
