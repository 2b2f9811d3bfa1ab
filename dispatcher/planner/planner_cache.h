/* planner_cache: the planner's side of the prefix cache (docs/cache.md
 * "When", issue #36).
 *
 * The decision, per job, with its first plan: cache the spec's
 * deterministic prefix when
 *   - there is one and the spec does not say "cache": "off";
 *   - computing it (the read of the encoded bytes and the prefix's units,
 *     CPU s per sample) costs more than reading its output back (a fixed
 *     cost per entry, a cost per stored byte, the codec's decompression
 *     when the entry would be stored compressed);
 *   - at least DISP_PC_MIN_FIT of the data set's output fits the live
 *     workers' cache budgets together (RegisterWorker cache_bytes; no
 *     budget reported: not checked);
 *   - something reads it again: more than one epoch, or the spec was seen
 *     before (the client's profile came from the dispatcher's profile
 *     cache: a job of the same spec and data ran within its hour).
 * The decision goes out with the plan (Plan.cache_off, JobSpec.cache_off)
 * and is kept for the job: a worker opens its cache when it first sees it.
 *
 * The pricing, on every plan: once the workers' heartbeats measured the
 * job's hit rate h over a window of DISP_PC_WINDOW lookups, each worker
 * class's read and prefix units are charged (1 - h) of their computed
 * cost and h of the cache read: a cache that fills makes the workers
 * cheaper and the plan follows. A window's rate that moved more than
 * DISP_PC_REPLAN_DIFF from the one the last plan priced re-plans.
 *
 * Pure: no clock, no I/O, no allocation. Runs under the dispatcher mutex
 * like the rest of planner_job.h. */
#ifndef DISP_PLANNER_CACHE_H
#define DISP_PLANNER_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "dispatcher/planner/planner.h"
#include "dispatcher/planner/planner_cache_cost.h"

/* Reading one entry back, as assumed before anything was measured
 * (planner_cache_cost.h): open, read, checksum and close, plus a cost per
 * stored byte (a page-cache or SSD read and the checksum, ~1 GB/s). */
#define DISP_PC_ENTRY_SEC 50e-6
#define DISP_PC_SEC_PER_BYTE 1e-9
/* Below this share of the data set's output fitting, the cache keeps too
 * little to pay for its writes. */
#define DISP_PC_MIN_FIT 0.05
/* A hit rate is measured over this many lookups (the job's workers',
 * from their heartbeats). */
#define DISP_PC_WINDOW 256
/* A measured hit rate this far from the priced one re-plans. */
#define DISP_PC_REPLAN_DIFF 0.25

/* What the decision is made from. */
typedef struct disp_pc_in_s {
    uint32_t prefix;       /* units the cache would keep; 0 = none */
    int spec_off;          /* the spec says "cache": "off" */
    uint32_t epochs;       /* the job's */
    int seen;              /* a job of the spec was planned before */
    double samples;        /* the data set's samples */
    double compute_sec;    /* read + the prefix's units, CPU s per sample */
    double out_bytes;      /* the prefix's output per sample, raw */
    double ratio;          /* the codec's raw / compressed at the prefix; <= 1 = none */
    double decompress_sec; /* the codec's decompression per sample at the prefix */
    double budget;         /* the live workers' cache bytes together; 0 = unknown */
    /* The live workers' read-back cost as measured (planner_cache_cost.h);
     * have 0: the assumed one. */
    disp_pc_cost_t measured;
} disp_pc_in_t;

typedef struct disp_pc_decision_s {
    int on;
    double read_sec;     /* reading one entry back, s per sample */
    double stored_bytes; /* one entry as stored */
    double total_bytes;  /* the data set's entries */
    double fit;          /* share of them the budget holds (1 when unknown) */
    int measured;        /* read_sec is the workers' measured cost (else assumed) */
    char why[384];       /* "on: ..." / "off: ..." with the numbers */
} disp_pc_decision_t;

/* The cost of reading one entry of out_bytes back (stored compressed when
 * ratio > DISP_PL_MIN_RATIO, then also decompress_sec); *ret_stored gets
 * its stored size (NULL ok). */
double disp_pc_read_sec(double out_bytes, double ratio, double decompress_sec, double *ret_stored);

void disp_pc_decide(const disp_pc_in_t *in, disp_pc_decision_t *ret);

/* A job's cache state in its planner (planner_job.h disp_pjob_t.cache). */
typedef struct disp_pc_job_s {
    disp_pc_in_t in; /* prefix, spec_off, epochs, seen, samples: at submission */
    int decided;
    disp_pc_decision_t d;
    /* The job's workers' lookups (disp_jobs' counters, noted each tick):
     * the totals at the current window's start, the latest totals, the
     * last complete window's hit rate and the one the last plan priced. */
    uint64_t win_hits, win_misses;
    uint64_t hits, misses;
    int have_rate;
    double hit_rate;
    double priced_rate;
    /* The client's own cache (GetAssignmentRequest.cache, cumulative):
     * its hit rate in the same windows, its measured read cost, and the
     * rate the last plan priced its units at. */
    disp_pc_hitwin_t client;
    disp_pc_costwin_t client_cost;
    double client_priced_rate;
    /* Reading an entry back as the last plan priced it: the workers'
     * (measured when they have a figure) and the client's. */
    double worker_read_sec, client_read_sec;
    int worker_read_measured, client_read_measured;
} disp_pc_job_t;

/* The job's counters so far (cumulative): closes a window every
 * DISP_PC_WINDOW lookups. Counters that went backwards restart it. */
void disp_pc_note(disp_pc_job_t *c, uint64_t hits, uint64_t misses);

/* The hit rate a plan prices: the last window's when the job caches and one
 * was measured, else 0 (computed). */
double disp_pc_rate(const disp_pc_job_t *c);

/* Prices the workers' prefix in in at hit rate h: each class's read and
 * units [0, prefix) cost (1 - h) of themselves plus h read_sec on the read.
 * h <= 0 or prefix 0: unchanged. The client's costs stay (priced by
 * disp_pc_price_client at its own rate). */
void disp_pc_price(disp_pl_input_t *in, uint32_t prefix, double h, double read_sec);

/* The client's own cache at its hit rate h: in->local_cache_sec = h x
 * (its read and units [0, prefix) - read_sec), what a sample it runs whole
 * saves (a sample it finishes from a worker's output looks nothing up, so
 * its unit costs stay; classes not profiled, priced at the client's
 * costs, are not discounted). h <= 0, prefix 0 or nothing saved: 0. */
void disp_pc_price_client(disp_pl_input_t *in, uint32_t prefix, double h, double read_sec);

/* The client's hit rate a plan prices: its last window's when the job
 * caches and one was measured, else 0. */
double disp_pc_client_rate(const disp_pc_job_t *c);

/* The measured rate (the workers' or the client's) moved more than
 * DISP_PC_REPLAN_DIFF from the priced one (why says from what to what). */
int disp_pc_replan_due(const disp_pc_job_t *c, char *why, size_t whylen);

#endif
