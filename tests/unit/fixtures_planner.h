/* The dispatcher-side planner fixture shared by test_planner*.c and
 * test_journal_state.c: a spec with an "auto" plan and the PlannerInputs a
 * client would send for it. */
#ifndef TESTS_UNIT_FIXTURES_PLANNER_H
#define TESTS_UNIT_FIXTURES_PLANNER_H

#include <stdint.h>

#include "common/cost/costmodel.h"
#include "dispatcher/planner/planner.h"
#include "proto/sluice.pb-c.h"

#define FX_PIN_SPEC                                                                         \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8},"      \
    " {\"op\": \"flip\"}, {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5],"               \
    " \"std\": [0.2, 0.2, 0.2]}], \"batch_size\": 4, \"epochs\": 3, \"offload\": \"auto\"}"

/* The client's PlannerInputs, with storage for everything they point to. */
/* The client profile's cost model coefficients (HostProfile.cost_model_coef). */
#define FX_PIN_COEF {1e-3, 2e-5, 8e-3, 4e-3, 0, 0}

typedef struct fx_pin_s {
    Sluice__PlannerInputs in;
    Sluice__HostProfile client, wprof;
    Sluice__StageStat cu[3], wu[3];
    Sluice__StageStat *pcu[3], *pwu[3];
    double coef[SL_COST_NPARAM]; /* the client's cost model: FX_PIN_COEF */
    Sluice__WorkerClass cls;
    Sluice__WorkerClass *pcls[1];
    uint64_t ids[1];
} fx_pin_t;

/* Client 2 cores; decode+crop 10 ms, flip 0.01 ms, normalize 0.05 ms;
 * one class (2 threads, same speed) holding worker wid. With one worker
 * R = 200/s at K=1: F* = (2 - 200 b) / (2 + 200 (a - b)) ~ 0.497; with two
 * R = 400/s: F* ~ 0.329. */
void fx_pin_init(fx_pin_t *p, uint64_t wid);
/* A SubmitJob (or PlanJob) request for FX_PIN_SPEC over 200 samples of
 * source 99 with p's planner inputs (p NULL: none), the test secret. */
void fx_pin_request(fx_pin_t *p, Sluice__SubmitJobRequest *req);

/* The planner's hand-made profile (test_planner.c, test_planner_machines.c):
 * two units, decode 10 ms and normalize 2 ms, no read cost; 100 KB encoded,
 * 150 KB after decode, 600 KB after normalize; receiving costs 1 ns per
 * byte; a client of `cores` CPUs; no worker class. */
void fx_pl_base(disp_pl_input_t *in, double cores);
/* A profiled class of `workers` workers of `cores` CPUs each, `speed` times
 * the client's per core (its read and unit costs divided by it), each
 * reached at `bandwidth` bytes/s (0: not measured). */
void fx_pl_add_class(disp_pl_input_t *in, uint32_t workers, double cores, double speed,
                     double bandwidth);

#endif
