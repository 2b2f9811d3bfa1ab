/* planner_impl: the planner's state (cl_planner_t, profile.h), shared by the
 * three files that make up the client's part of planning:
 *   profile.c  profiling before SubmitJob (steps 1-6 of profile.h), on the
 *              opening thread;
 *   probe.c    link probes (Worker.Probe streams), called from profile.c;
 *   rates.c    while the job runs: the consumer's notes and the control
 *              thread's rate reports (cl_planner_tick).
 * Private to client/lib: nothing outside those files includes it. */
#ifndef SL_CLIENT_PLANNER_IMPL_H
#define SL_CLIENT_PLANNER_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "client/lib/overhead.h"
#include "client/lib/persec.h"
#include "client/lib/owncpu.h"
#include "client/lib/profile.h"
#include "client/lib/profile_budget.h"
#include "client/lib/window.h"
#include "common/cost/hostfacts.h"

#define CL_NAME_MAX 96
#define CL_KEY_MAX 128

/* One host's profile with the storage its message points into. */
typedef struct cl_hp_s {
    Sluice__HostProfile msg;
    Sluice__StageStat units[SL_PIPE_MAX_UNITS];
    Sluice__StageStat *punits[SL_PIPE_MAX_UNITS];
    char names[SL_PIPE_MAX_UNITS][CL_NAME_MAX];
    char host[CL_KEY_MAX];
    double coef[SL_COST_NPARAM];
} cl_hp_t;

typedef struct cl_mix_inputs_s cl_mix_inputs_t;

typedef struct cl_class_s {
    Sluice__WorkerClass msg;
    char key[CL_KEY_MAX];
    uint64_t ids[CL_PLAN_MAX_WORKERS];
    char first_addr[256]; /* the worker profiled and probed */
    int have_profile;
    cl_hp_t hp;
} cl_class_t;

struct cl_planner_s {
    const sl_rpc_security_t *security; /* cl_planner_profile's; the job's, outlives p */
    /* inputs: written by the profiling thread before SubmitJob */
    Sluice__PlannerInputs in;
    cl_hp_t client;
    cl_class_t classes[CL_PLAN_MAX_CLASSES];
    Sluice__WorkerClass *pclasses[CL_PLAN_MAX_CLASSES];
    char machine_id[SL_MACHINE_ID_MAX]; /* in.client_machine_id points here */
    char cpu_set[512];                  /* in.client_cpu_set points here */
    char host_key[CL_KEY_MAX];          /* in.client_host points here */
    /* in.codec_* point here: the wire codec per boundary (profile_codec) */
    double codec_ratio[SL_PIPE_MAX_UNITS + 1];
    double codec_compress[SL_PIPE_MAX_UNITS + 1];
    double codec_decompress[SL_PIPE_MAX_UNITS + 1];
    double profile_seconds;
    /* The short-job guard's link probe (short_job.c), which profiling's
     * probe of that worker's class reuses; guard_bw 0: none. */
    char guard_addr[256];
    double guard_bw;
    double guard_recv;
    /* in.mix_sources point here (profile_mix_inputs.c); NULL: unmixed */
    struct cl_mix_inputs_s *mix;
    /* The CPU budget (profile_budget.h): what hostfacts read, and, when it
     * could not tell (src unknown), the estimate from the profile pass and
     * then from every report window (the control thread's). */
    sl_budget_src_e budget_src;
    double lone_cpu; /* the profile pass's thread CPU and wall seconds; 0 = not run */
    double lone_wall;
    cl_budget_est_t best;
    cl_rundelay_t rundelay;
    int have_rundelay;

    /* mu guards everything below (consumer, control and caller threads) */
    pthread_mutex_t mu;
    double predicted;
    char binding[32];
    char local_reason[192]; /* Plan.local_reason */
    uint32_t version;
    double measured;
    /* the consumer's window since the last report (window.h) */
    cl_window_acc_t win;
    uint64_t delivered;
    uint64_t accepted; /* by the batcher (cl_planner_note_accepted) */
    /* The consumer's thread CPU inside sluice_next_batch: summed over the
     * calls that returned, and the running call's clock at entry. */
    double consumer_cpu;
    double consumer_enter_cpu;
    /* the control thread's */
    double last_report;
    double cpu_at_report;
    /* Sluice's own CPU (owncpu.h): each part's clock at the last report,
     * which the next window counts from. */
    double own_ctl, own_line, own_consumer;
    cl_owncpu_fetch_t own_fetch;
    cl_owncpu_grpc_t own_grpc;
    double units_cpu_at_report; /* the executor's unit CPU, summed */
    uint64_t accepted_at_report;
    cl_overhead_t overhead;
    cl_persec_t persec; /* the per-second cost (persec.h) */
};

/* profile.c, for short_job.c: this host's key in the profile cache; step 1
 * (GetPlanContext for the spec hash in p->in, reply into *ret); a cached
 * profile of host usable for pipe, or NULL. */
void cl_planner_client_key(char *key, size_t len);
int cl_planner_context(cl_planner_t *p, const cl_plan_args_t *a, ProtobufCMessage **ret, char *err,
                       size_t errlen);
const Sluice__HostProfile *cl_planner_find_cached(const Sluice__PlanContextResponse *ctx,
                                                  const char *host, const sl_pipeline_t *pipe);

/* probe.c: one worker's link (step 5): bandwidth in *ret_bw, this
 * process's CPU per received byte in *ret_recv. Returns 0 with both set,
 * or -1. */
int cl_probe_link(const char *addr, const sl_rpc_security_t *sec, int timeout_ms, double *ret_bw,
                  double *ret_recv);
/* probe.c: the client's own CPU per received sample under its quota
 * (docs/planner.md "A right first plan"): a Worker.Probe whose chunks are
 * messages of `batch` samples of sample_bytes each (a job's Batch message
 * of the plan's output; at most CL_PROBE_SAMPLES_MAX_CHUNK), its thread's
 * and gRPC's threads' CPU per sample beyond recv_per_byte x sample_bytes
 * (cl_overhead_from_probe) into *ret_sec. Returns 0, or -1 (no probe). */
#define CL_PROBE_SAMPLES_MAX_CHUNK (1u << 20)
int cl_probe_samples(const char *addr, const sl_rpc_security_t *sec, int timeout_ms,
                     double sample_bytes, uint32_t batch, double recv_per_byte, double *ret_sec);

#endif
