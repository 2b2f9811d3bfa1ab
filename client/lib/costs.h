/* costs: the per-sample predicted cost a client sends with SubmitJob
 * (SubmitJobRequest.sample_costs, docs/planner.md "Data-aware balancing").
 *
 * With the client's fitted cost model (client/lib/profile.h: profiled for this
 * job, or cached by the dispatcher for this spec on this host) each sample
 * costs what the model predicts from its JPEG header -- the first
 * SL_COST_HEAD_BYTES of every file, read within a time budget. Without a
 * model, or when the headers take longer than the budget, each sample's
 * encoded size from the index stands in (no file is opened). */
#ifndef CL_COSTS_H
#define CL_COSTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/cost/costmodel.h"
#include "common/data/source.h"

/* Must not exceed the dispatcher's DISP_MAX_SAMPLE_COSTS (it refuses more). */
#define CL_MAX_SAMPLE_COSTS (1u << 23)
/* Reading every header may take this long before the sizes are used
 * instead (~100k local files; a network file system gets fewer). */
#define CL_COST_HEAD_BUDGET_MS 3000

typedef enum {
    CL_COSTS_SIZE = 0, /* size + SL_COST_SIZE_OVERHEAD_SHARE * mean size */
    CL_COSTS_MODEL,    /* the model's prediction from each header */
} cl_costs_from_e;

/* Predicted relative cost of each sample index of src into out[n]
 * (n = sl_source_count). model NULL, or headers not all read within
 * budget_ms (0: no time for them), gives the size proxy. Only ratios matter
 * to the dispatcher. *ret_from says which. Returns 0 (an unreadable sample
 * is costed from its size). */
int cl_sample_costs(const sl_source_t *src, const sl_costmodel_t *model, int budget_ms,
                    float *out, uint64_t n, cl_costs_from_e *ret_from);
/* "header model" or "file size". */
const char *cl_costs_from_name(cl_costs_from_e from);

#endif
