#include "dispatcher/planner/plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/base/err.h"
#include "common/spec/spec_layout.h"

int disp_plan_compute(const sl_spec_t *spec, disp_plan_t *ret, char *err, size_t errlen)
{
    /* Counts and split points only: the layout, not a pipeline (the
     * dispatcher runs no stage). */
    sl_layout_t l;
    int rc = sl_spec_layout(spec, 0, &l);
    if (rc != 0) {
        return sl_err(err, errlen, rc, "the spec's stages make no pipeline");
    }
    disp_plan_t plan;
    memset(&plan, 0, sizeof(plan));
    plan.nunits = l.nunits;
    plan.version = 1;
    switch (spec->offload) {
    case SL_OFFLOAD_OFF:
        plan.split = 0;
        plan.local_share = 1.0;
        snprintf(plan.mode, sizeof(plan.mode), "off");
        break;
    case SL_OFFLOAD_ALL:
        plan.split = plan.nunits;
        plan.local_share = 0.0;
        snprintf(plan.mode, sizeof(plan.mode), "all");
        break;
    case SL_OFFLOAD_FIXED:
        plan.split = sl_layout_unit_for_split(&l, spec->split);
        plan.local_share = spec->local_share;
        snprintf(plan.mode, sizeof(plan.mode), "fixed");
        break;
    case SL_OFFLOAD_AUTO:
    case SL_OFFLOAD_FASTFLOW:
        /* Without profiles (dispatcher/planner/planner_job.c replaces this when the
         * client sent them): behave as "all", and say so where users look. */
        plan.split = plan.nunits;
        plan.local_share = 0.0;
        snprintf(plan.mode, sizeof(plan.mode), "%s(all: no profile)",
                 sl_offload_name(spec->offload));
        break;
    }
    *ret = plan;
    return 0;
}

int disp_plan_split_is_local(uint64_t i, double share)
{
    if (share <= 0.0) {
        return 0;
    }
    if (share >= 1.0) {
        return 1;
    }
    /* The epsilon makes share = j / n keep exactly j of n splits even when
     * j / n * n rounds to just below j (the planner hands out such shares). */
    return floor((double)(i + 1) * share + 1e-9) > floor((double)i * share + 1e-9);
}
