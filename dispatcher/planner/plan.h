/* plan: where a job's pipeline is cut and how much the client keeps
 * (docs/protocol.md "Plans by offload mode"). Pure. Fixed modes are decided
 * here from the spec; auto and fastflow are decided by the planner
 * (dispatcher/planner/planner_job.c) from the client's profiles, and fall back to
 * "all" here when a client sent none. */
#ifndef DISP_PLAN_H
#define DISP_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "common/spec/spec.h"

#define DISP_PLAN_MODE_MAX 64

typedef struct disp_plan_s {
    uint32_t split;     /* units run remotely: workers run [0, split) */
    double local_share; /* fraction of splits the client runs itself */
    char mode[DISP_PLAN_MODE_MAX];
    uint32_t version;   /* 1; increments on every re-plan (dispatcher/planner/planner_job.c) */
    uint32_t nunits;    /* units of the compiled pipeline */
    double predicted;   /* samples/s the planner predicts; 0 = no prediction (fixed plans) */
    char binding[32];   /* the resource the prediction says binds; "" = none */
    int compress;       /* the planner chose the wire codec at split (auto only) */
    /* auto/fastflow plans that keep everything local: why (Plan.local_reason);
     * "" otherwise. */
    char local_reason[192];
    /* The planner's prefix cache decision (planner_cache.h; Plan.cache_off):
     * 1 = the job's prefix is not cached; 0 = cached where a directory is
     * set (every plan made without the planner). Why, with the numbers;
     * "" = not decided. */
    int cache_off;
    char cache_reason[384];
} disp_plan_t;

/* Compiles the spec's stages (common/engine/pipeline.h) to count units and maps a
 * fixed split to a unit boundary. Returns 0 or the pipeline's error. */
int disp_plan_compute(const sl_spec_t *spec, disp_plan_t *ret, char *err, size_t errlen);

/* The local share rule: split i of an epoch is the client's own iff
 * floor((i+1)*F) > floor(i*F) (each with 1e-9 added, so F = j/n keeps
 * exactly j of n splits despite rounding). An epoch of n splits thus keeps
 * floor(n F) local; the planner models exactly that (planner.h nsteps). */
int disp_plan_split_is_local(uint64_t i, double share);

#endif
