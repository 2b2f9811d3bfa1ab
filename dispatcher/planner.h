/* planner: where to cut a job's pipeline and how much the client keeps,
 * predicted from profiles (DESIGN.md "Planner", docs/planner.md).
 *
 * Pure arithmetic: no I/O, no clock, no allocation, no logging, so every
 * decision can be unit-tested on hand-made profiles
 * (tests/unit/test_planner.c) and explained from its inputs.
 *
 * Model, per sample (K = pipeline units run remotely, F = share of samples
 * the client runs through every unit itself):
 *   a        = read + cost_all                  (client CPU, local sample)
 *   b(K)     = cost_after_K + recv * bytes_K    (client CPU, received sample)
 *   client   = cores / (F a + (1 - F) b(K))
 *   worker   = sum over workers of cores / cost_before_K(class) / (1 - F)
 *   network  = bandwidth / bytes_K / (1 - F)
 *   throughput(K, F) = min(consumer, client, worker, network)
 * where cost_before_K includes reading the encoded bytes on the worker and
 * bandwidth is min(client ingress cap, sum of the workers' links). */
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
} disp_pl_class_t;

typedef struct disp_pl_input_s {
    uint32_t nunits;                       /* 1..DISP_PL_MAX_UNITS */
    double unit_sec[DISP_PL_MAX_UNITS];    /* client CPU s per sample of each unit */
    double read_sec;                       /* client CPU s per sample to read */
    double bytes[DISP_PL_MAX_UNITS + 1];   /* bytes per sample crossing boundary K;
                                            * [0] = encoded, [u + 1] = after unit u */
    double recv_sec_per_byte;              /* client CPU to receive one byte */
    double client_cores;                   /* the client's CPU budget */
    double consumer_rate;                  /* samples/s the training loop takes; 0 = unlimited */
    double client_bandwidth;               /* client ingress cap bytes/s; 0 = none */
    disp_pl_class_t classes[DISP_PL_MAX_CLASSES];
    uint32_t nclasses;
} disp_pl_input_t;

/* What each resource allows at one (K, F), samples/s; INFINITY = no limit. */
typedef struct disp_pl_terms_s {
    double consumer, client, worker, network;
} disp_pl_terms_t;

typedef struct disp_pl_cand_s {
    uint32_t split;      /* K */
    double share;        /* F */
    double predicted;    /* samples/s */
    disp_bind_e binding;
    disp_pl_terms_t terms;
    int off;             /* the "off" row: K = 0, F = 1 */
} disp_pl_cand_t;

typedef struct disp_pl_result_s {
    disp_pl_cand_t cand[DISP_PL_MAX_UNITS + 2]; /* one per K (its best F), then "off" */
    uint32_t ncand;
    uint32_t chosen;        /* index into cand */
    double local_rate;      /* the client alone (the "off" row) */
    int off_rule;           /* off chosen: local reaches the consumer within 10 % */
    /* More workers of the measured speed that lift the binding resource
     * (until something else binds); 0 when workers would not help. */
    uint32_t workers_needed;
    int hint_estimated;     /* no worker measured: the hint assumes client-speed workers */
    double lifted_rate;     /* predicted samples/s with those workers */
    char reason[256];
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
    double share;
    double predicted; /* Sluice's prediction for (split, share), for comparison */
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

/* FastFlow's Algorithm 1. Returns 0 or -EINVAL as above. */
int disp_planner_fastflow(const disp_pl_input_t *in, disp_ff_result_t *ret);

const char *disp_bind_name(disp_bind_e b);
const char *disp_ff_cand_name(disp_ff_cand_e c);
/* FastFlow's ratio formula (utils.calculate_ratio_local_optimal), exposed
 * for tests. gthp may be INFINITY. */
double disp_ff_ratio_local(double gthp, double lthp, double rthp, double pcycle, double dcycle,
                           double num_workers);

#endif
