/* service_ranks: SubmitJob for multi-rank jobs (world_size > 1), the RPC
 * side of dispatcher/ranks.h. */
#ifndef DISP_SERVICE_RANKS_H
#define DISP_SERVICE_RANKS_H

#include "dispatcher/disp.h"
#include "dispatcher/service.h"

/* Re-attaches a rank to its open part of the job, or creates the part (the
 * single-consumer SubmitJob on the rank's spec, then tagged). An SL_RPC_*
 * code; err holds the details. */
int disp_svc_submit_rank(disp_t *d, const Sluice__SubmitJobRequest *req,
                         Sluice__SubmitJobResponse *resp, disp_arena_t *a, int64_t now_ms,
                         char *err, size_t errlen);
/* dispatcher/service.c: a plan as a message in the arena; NULL on ENOMEM. */
Sluice__Plan *disp_svc_plan_msg(disp_arena_t *a, const disp_plan_t *p);

#endif
