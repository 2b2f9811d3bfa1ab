/* service_ranks: SubmitJob for multi-rank jobs (world_size > 1), the RPC
 * side of dispatcher/core/ranks.h. */
#ifndef DISP_SERVICE_RANKS_H
#define DISP_SERVICE_RANKS_H

#include "dispatcher/disp.h"
#include "dispatcher/service/service.h"

/* Re-attaches a rank to its open part of the job, or creates the part (the
 * single-consumer SubmitJob on the rank's spec, then tagged). Returns 0 or a
 * negative errno (-ESTALE: the request disagrees with the job's other
 * ranks); err holds the details. Pool thread; takes d->mu itself. */
int disp_svc_submit_rank(disp_t *d, const Sluice__SubmitJobRequest *req,
                         Sluice__SubmitJobResponse *resp, disp_arena_t *a, int64_t now_ms,
                         char *err, size_t errlen);

#endif
