/* planner_svc: the planner inside the dispatcher (docs/planner.md).
 *
 *  - SubmitJob of an auto/fastflow job with PlannerInputs: the plan is
 *    computed from them before the job's first epoch exists
 *    (disp_planner_submit, called by the SubmitJob handler instead of
 *    disp_jobs_submit), and the candidate table goes back in the reply.
 *  - PlanJob: the same computation without a job (`sluice plan`).
 *  - GetPlanContext: live workers and cached profiles for a spec hash, so
 *    a client profiles only what is not cached.
 *  - ReportRates feeds the job's planner state; the periodic tick re-plans
 *    jobs whose worker set changed or whose measured rate drifted, and the
 *    new plan applies to splits not yet handed out (jobs.c).
 * All functions taking disp_t expect d->mu held unless they say otherwise. */
#ifndef DISP_PLANNER_SVC_H
#define DISP_PLANNER_SVC_H

#include <jansson.h>
#include <stdint.h>

#include "common/rpc/rpc.h"
#include "dispatcher/disp.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/service/service.h"
#include "proto/sluice.pb-c.h"

/* Registers GetPlanContext and PlanJob (before the server starts). */
int disp_planner_service_add(disp_t *d, sl_rpc_server_t *srv);

/* d->mu held. Plans (when the spec asks for auto/fastflow and the request
 * carries PlannerInputs), then disp_jobs_submit with that plan. Returns
 * what disp_jobs_submit returns; *ret_explain (arena memory) is NULL for
 * jobs without a planner. */
int disp_planner_submit(disp_t *d, const Sluice__SubmitJobRequest *req, disp_submit_t *sub,
                        int64_t now_ms, disp_job_t **ret_job, Sluice__PlanExplain **ret_explain,
                        disp_arena_t *a, char *err, size_t errlen);

/* d->mu held: a ReportRates for job. */
void disp_planner_on_rates(disp_t *d, disp_job_t *job, const Sluice__ReportRatesRequest *req,
                           int64_t now_ms);

/* d->mu held: re-plans jobs that need it (disp_tick). */
void disp_planner_tick(disp_t *d, int64_t now_ms);

/* Multi-rank jobs (#8): how many open parts of job's group came from the
 * same client host (job included; 1 for a single consumer). The tick
 * re-plans a job when this changes; each rank gets 1/n of the node's CPU
 * budget and ingress (planner.h disp_planner_rank_share). */
uint32_t disp_planner_node_ranks(const disp_jobs_t *js, const disp_job_t *job);

/* The job's planner object for /status (NULL when it has none); the
 * caller owns the reference. d->mu held. */
json_t *disp_planner_status_json(const disp_job_t *job);

/* Handlers as plain functions (unit tests); they take d->mu themselves and
 * return 0 or a negative errno (service.h), with err set on failure. */
int disp_svc_get_plan_context(disp_t *d, const Sluice__PlanContextRequest *req,
                              Sluice__PlanContextResponse *resp, disp_arena_t *a,
                              int64_t now_ms, char *err, size_t errlen);
int disp_svc_plan_job(disp_t *d, const Sluice__SubmitJobRequest *req,
                      Sluice__SubmitJobResponse *resp, disp_arena_t *a, int64_t now_ms,
                      char *err, size_t errlen);

#endif
