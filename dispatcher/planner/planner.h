/* planner: where to cut a job's pipeline and how much the client keeps,
 * predicted from profiles (docs/design.md, docs/planner.md).
 *
 * Pure arithmetic: no I/O, no clock, no allocation, no logging, so every
 * decision can be unit-tested on hand-made profiles
 * (tests/unit/test_planner.c) and explained from its inputs.
 *
 * Model, per sample (K = pipeline units run remotely, F = share of samples
 * the client runs through every unit itself):
 *   a        = read + cost_all + c              (client CPU, local sample)
 *   b(K)     = cost_after_K + recv * bytes_K + c (client CPU, received sample)
 *   (c = sample_sec: per-sample overhead the client measured while running)
 *   client   = cores / (F a + (1 - F) b(K))
 *   worker   = sum over workers of cores / cost_before_K(class) / (1 - F)
 *   network  = bandwidth / bytes_K / (1 - F)
 *   throughput(K, F) = min(consumer, client, worker, network)
 * where cost_before_K includes reading the encoded bytes on the worker and
 * bandwidth is min(client ingress cap, sum of the workers' links).
 *
 * Shared machines (docs/planner.md "Shared machines"): hosts listed in one
 * machine share its cores. Its workers together produce at most what the
 * machine's cores minus the client's CPU (when the client is on it, T d at
 * throughput T, d the client's CPU per sample) allow, cheapest class first;
 * the worker term is then the largest T with remote(T) >= (1 - F) T. So the
 * client's work and the workers' compete for the one budget. Workers on no
 * listed machine (and the extra ones of the workers-needed hint) each have
 * a machine of their own, as before.
 *
 * Compression (docs/planner.md "Compression"): a candidate may ship boundary
 * K compressed with Sluice's codec (codec.h, as the worker picks it for the
 * dtype). The client profiles, per boundary, ratio_K (raw / compressed bytes)
 * and its CPU s per sample to compress and to decompress. Compressed:
 *   bytes on the wire   bytes_K / ratio_K             (network term)
 *   worker cost         cost_before_K(class) + compress_sec_K * speed(class)
 *   b(K)                cost_after_K + recv * bytes_K / ratio_K
 *                       + decompress_sec_K + c
 * speed(class) = the class's unit costs over the client's on units [0, K)
 * (1 when not profiled). Every K with ratio_K > DISP_PL_MIN_RATIO is also
 * evaluated compressed (its own best F); a compressed candidate is chosen
 * only when it beats the best uncompressed one by more than DISP_PL_TIE.
 * No ratios (an older client): never compressed.
 *
 * F as the runtime realizes it: whole splits of an epoch are local or
 * remote (disp_plan_split_is_local), so with n splits an epoch F takes only
 * n + 1 values, and the last split may be shorter. When the input lists
 * them (nsteps), candidates are evaluated at those values only, and each
 * candidate carries the share to hand to the runtime. */
#ifndef DISP_PLANNER_H
#define DISP_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#define DISP_PL_MAX_UNITS 32
#define DISP_PL_MAX_CLASSES 16
/* "off" when the client alone reaches the consumer rate within this. */
#define DISP_PL_OFF_TOLERANCE 0.10
/* When the consumer binds, keep this much slack on the client's CPU. */
#define DISP_PL_HEADROOM 0.05
/* Candidates within this relative distance of the best count as equal. */
#define DISP_PL_TIE 0.01
/* Realizable shares listed at most this many splits an epoch; beyond it F
 * is treated as continuous (one split is < 1/64 of the epoch). */
#define DISP_PL_MAX_STEPS 64
/* A boundary is worth evaluating compressed only above this ratio. */
#define DISP_PL_MIN_RATIO 1.05
/* Bound on the workers-needed search. */
#define DISP_PL_MAX_EXTRA_WORKERS 4096
/* FastFlow's default cpu_bottleneck_threshold: offload only when the
 * consumer is this much faster than the local pipeline. */
#define DISP_FF_BOTTLENECK 1.3

typedef enum {
    DISP_BIND_NONE = 0,
    DISP_BIND_CONSUMER,   /* the training loop: no stall */
    DISP_BIND_CLIENT_CPU,
    DISP_BIND_WORKER_CPU,
    DISP_BIND_NETWORK,
} disp_bind_e;

/* Workers of one speed class: measured on one of them. */
typedef struct disp_pl_class_s {
    uint32_t workers;  /* live workers in the class */
    double cores;      /* CPUs each gives the job (its threads, capped by its budget) */
    int profiled;      /* 0: costs unknown, the client's are used */
    double read_sec;   /* CPU s per sample to read the encoded bytes */
    double unit_sec[DISP_PL_MAX_UNITS]; /* CPU s per sample of each unit */
    double bandwidth;  /* bytes/s between one worker and the client; 0 = not measured */
    /* Remote sources: bytes/s one worker of the class reads the source at
     * (measured, planner_read.c); 0 = local or not measured: no limit. */
    double source_rate;
    /* Its mean request latency, s (HEAD time; 0 = not measured): each
     * sample's requests wait it, spread over the class's cores. */
    double source_latency;
} disp_pl_class_t;

/* Hosts that share CPUs: at most DISP_PL_MAX_MACHINES such groups. */
#define DISP_PL_MAX_MACHINES 16

typedef struct disp_pl_machine_s {
    double cores;                           /* CPUs the machine has for all of them */
    uint32_t workers[DISP_PL_MAX_CLASSES];  /* workers of each class on it */
    int client;                             /* the client runs here too */
} disp_pl_machine_t;

typedef struct disp_pl_input_s {
    uint32_t nunits;                       /* 1..DISP_PL_MAX_UNITS */
    double unit_sec[DISP_PL_MAX_UNITS];    /* client CPU s per sample of each unit */
    double read_sec;                       /* client CPU s per sample to read */
    double bytes[DISP_PL_MAX_UNITS + 1];   /* bytes per sample crossing boundary K;
                                            * [0] = encoded, [u + 1] = after unit u */
    double recv_sec_per_byte;              /* client CPU to receive one byte */
    /* Client CPU per delivered sample (local or received) outside the
     * units, the read and the per-byte receive cost: batching, messages,
     * bookkeeping. Measured while the job runs (0 until then). */
    double sample_sec;
    /* The client's own prefix cache (docs/cache.md): CPU s a local sample
     * saves on average (its hit rate x (read + prefix units - reading the
     * entry back)); only a sample the client runs whole looks it up, so
     * only the local sample's cost is lowered. 0 = none. */
    double local_cache_sec;
    double client_cores;                   /* the client's CPU budget */
    /* CPU per second the client spends whatever its rate (its control
     * thread's polls and reports, gRPC's timers, the consumer's waits),
     * taken off client_cores
     * before anything is priced (docs/planner.md "A right first plan");
     * 0 = none charged. */
    double client_persec_cpu;
    double consumer_rate;                  /* samples/s the training loop takes; 0 = unlimited */
    double client_bandwidth;               /* client ingress cap bytes/s; 0 = none */
    disp_pl_class_t classes[DISP_PL_MAX_CLASSES];
    uint32_t nclasses;
    /* Splits an epoch (1..DISP_PL_MAX_STEPS); 0 = F is continuous. */
    uint32_t nsteps;
    /* step_share[j]: fraction of an epoch's samples that are local when
     * the runtime is handed F = j / nsteps (j = 0..nsteps; [0] = 0,
     * [nsteps] = 1, non-decreasing). */
    double step_share[DISP_PL_MAX_STEPS + 1];
    /* Shared machines; 0 = every host is a machine of its own. */
    disp_pl_machine_t machines[DISP_PL_MAX_MACHINES];
    uint32_t nmachines;
    /* The codec at each boundary, measured on the client (0 = not measured:
     * that boundary is never compressed; [0] is always uncompressed). */
    double ratio[DISP_PL_MAX_UNITS + 1];          /* raw bytes / compressed bytes */
    double compress_sec[DISP_PL_MAX_UNITS + 1];   /* client CPU s per sample */
    double decompress_sec[DISP_PL_MAX_UNITS + 1]; /* client CPU s per sample */
    /* 1: price every boundary with ratio > DISP_PL_MIN_RATIO compressed.
     * The planner sets it on its working copy for the compressed
     * candidates; a caller sets it to predict a compressed plan (drift). */
    int compress;
    /* Remote sources: bytes/s the client reads the source at (measured,
     * planner_read.c); 0 = local or not measured: no limit. */
    double client_source_rate;
    double client_source_latency; /* s per request, as source_latency */
    /* Requests per sample of a remote read; 0: SL_READ_REQUESTS_PER_SAMPLE
     * (common/cost/read_rate.h). */
    double source_requests;
} disp_pl_input_t;

/* What each resource allows at one (K, F), samples/s; INFINITY = no limit. */
typedef struct disp_pl_terms_s {
    double consumer, client, worker, network;
} disp_pl_terms_t;

typedef struct disp_pl_cand_s {
    uint32_t split;      /* K */
    double share;        /* F: the fraction of samples the client runs, as the model uses it */
    double runtime_share; /* what to hand the runtime (j / nsteps; = share when continuous) */
    double predicted;    /* samples/s */
    disp_bind_e binding;
    disp_pl_terms_t terms;
    int off;             /* the "off" row: K = 0, F = 1 */
    int compress;        /* boundary K shipped compressed (codec.h) */
} disp_pl_cand_t;

typedef struct disp_pl_result_s {
    /* One per K (its best F), then "off", then one per compressible K
     * (ratio > DISP_PL_MIN_RATIO), compressed. */
    disp_pl_cand_t cand[2 * DISP_PL_MAX_UNITS + 3];
    uint32_t ncand;
    uint32_t chosen;        /* index into cand */
    double local_rate;      /* the client alone (the "off" row) */
    int off_rule;           /* off chosen: local reaches the consumer within 10 % */
    /* More workers of the measured speed that lift the binding resource
     * (until something else binds); 0 when workers would not help. */
    uint32_t workers_needed;
    int hint_new_machines;  /* some hosts share a machine: the hint means machines of their own */
    int hint_estimated;     /* no worker measured: the hint assumes client-speed workers */
    double lifted_rate;     /* predicted samples/s with those workers */
    char reason[256];
    /* The chosen plan keeps everything local (split 0, share 1): why, in
     * words a user acts on ("no worker: none registered", "workers share
     * the client's host", "workers slower than the client: predicted X/s
     * remote vs Y/s local", "link too slow: ..."); "" otherwise. */
    char local_reason[192];
} disp_pl_result_t;

/* FastFlow (VLDB'23) Algorithm 1 over its three coarse candidates, mapped
 * onto Sluice's cut points (docs/planner.md "FastFlow"). */
typedef enum {
    DISP_FF_ELEMENT = 0, /* read + preprocessing remote, batching local */
    DISP_FF_BATCH,       /* everything incl. batching remote */
    DISP_FF_MIDDLE,      /* preprocessing only remote, read local */
    DISP_FF__COUNT
} disp_ff_cand_e;

typedef struct disp_ff_cand_s {
    int applicable;
    uint32_t split;
    double rthp;   /* end-to-end samples/s with everything offloaded this way */
    double cycles; /* client CPU s per sample then (FastFlow's per-candidate cycles) */
    double score;  /* rthp + local overhead saved (FastFlow's calibrated rthp) */
} disp_ff_cand_t;

typedef struct disp_ff_result_s {
    double gthp;   /* consumer rate; INFINITY = unlimited */
    double lthp;   /* throughput without offloading */
    double pcycle; /* client CPU s per sample without offloading */
    double dcycle; /* ... with the chosen candidate */
    disp_ff_cand_t cand[DISP_FF__COUNT];
    int chosen;    /* disp_ff_cand_e, or -1: no offloading */
    double ratio_local;
    uint32_t split;
    double share;     /* ratio_local, handed to the runtime as is */
    double realized_share; /* the sample share the runtime makes of it (input steps) */
    double predicted; /* Sluice's prediction for (split, realized_share), for comparison */
    disp_bind_e binding;
    char reason[256];
} disp_ff_result_t;

/* Each resource's limit at (K, F). K <= nunits, F in [0, 1]. */
void disp_planner_terms(const disp_pl_input_t *in, uint32_t k, double f, disp_pl_terms_t *ret);
/* min of the terms, and which one binds (ties go to consumer, then the
 * remote resources -- workers can be added -- then the client). */
double disp_planner_predict(const disp_pl_input_t *in, uint32_t k, double f,
                            disp_bind_e *ret_binding);

/* Every K with its best F, the "off" row, the choice and the hint.
 * Returns 0, or -EINVAL for inputs outside the model (nunits 0 or too
 * many, nclasses too many); non-finite or negative numbers count as 0. */
int disp_planner_plan(const disp_pl_input_t *in, disp_pl_result_t *ret);

/* The diagnosis of a given plan (a fixed offload "K:F", "off", "all"),
 * as disp_planner_plan gives the plan it chooses: cand[0] is (K, F as the
 * runtime realizes it; runtime_share = f) with its prediction and binding,
 * cand[1] the "off" row (local_rate), chosen 0, and the workers-needed hint
 * for that plan (more workers that would lift its binding resource).
 * Returns 0 or -EINVAL as disp_planner_plan. */
int disp_planner_evaluate(const disp_pl_input_t *in, uint32_t k, double f, disp_pl_result_t *ret);

/* What-if for one worker class (docs/planner.md "Workers wanted"): the
 * predicted rate with k more or fewer workers of class cls, the others as
 * they are, and what binds then -- for an auto job the best plan at that
 * count (the plan follows the workers), for a given plan (fixed non-NULL:
 * disp_planner_evaluate's cand[0]) that plan. Added workers are each on a
 * machine of their own; removed ones leave the listed machines last first. */
#define DISP_WI_POINTS 9 /* deltas -4, -2, -1, 0, +1, +2, +4, +8, +16 (>= 0 workers) */
typedef struct disp_wi_point_s {
    int32_t delta;    /* workers of the class added (< 0: removed) */
    uint32_t workers; /* of the class then */
    double predicted; /* samples/s */
    disp_bind_e binding;
} disp_wi_point_t;

typedef struct disp_wi_curve_s {
    uint32_t cls;
    uint32_t workers; /* of the class now */
    uint32_t npoints;
    disp_wi_point_t p[DISP_WI_POINTS];
    /* The fewest workers of the class whose rate is within DISP_PL_TIE of
     * what DISP_PL_MAX_EXTRA_WORKERS more would reach: more would not lift
     * the job, fewer would slow it. May be below workers (the job wants
     * fewer) and 0 (none of the class helps). wanted_binding: what binds
     * with unlimited workers of the class -- what caps the job there. */
    uint32_t wanted;
    double wanted_rate;
    disp_bind_e wanted_binding;
    /* The client's ingress the curve priced (bytes/s; 0 = no limit) and
     * whether it was assumed from one worker's path (whatif_ingress.h). */
    double ingress;
    int ingress_assumed;
} disp_wi_curve_t;

/* Returns 0, or -EINVAL as disp_planner_plan (and for cls >= nclasses). */
int disp_planner_whatif(const disp_pl_input_t *in, uint32_t cls, const disp_pl_cand_t *fixed,
                        disp_wi_curve_t *ret);

/* FastFlow's Algorithm 1. Returns 0 or -EINVAL as above. */
int disp_planner_fastflow(const disp_pl_input_t *in, disp_ff_result_t *ret);

/* Multi-rank jobs (docs/planner.md "Per-node planning"): turns the inputs
 * one rank measured for its whole node into that rank's part. The
 * node_ranks ranks of the job on one client node share its CPU budget and
 * ingress; the world ranks of the job share the workers (cores and links).
 * 0 or 1 leaves a resource whole. So the plans of a node's ranks add up to
 * the node's plan with its share of the workers. */
void disp_planner_rank_share(disp_pl_input_t *in, uint32_t node_ranks, uint32_t world);

/* The fraction of samples the runtime keeps local when handed share f:
 * step_share[floor(f nsteps)] with steps, else f clamped to [0, 1]. */
double disp_planner_realized_share(const disp_pl_input_t *in, double f);

const char *disp_bind_name(disp_bind_e b);
const char *disp_ff_cand_name(disp_ff_cand_e c);
/* FastFlow's ratio formula (utils.calculate_ratio_local_optimal), exposed
 * for tests. gthp may be INFINITY. */
double disp_ff_ratio_local(double gthp, double lthp, double rthp, double pcycle, double dcycle,
                           double num_workers);

#endif
