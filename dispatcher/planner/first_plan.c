/* first_plan: see first_plan.h. */
#include "dispatcher/planner/first_plan.h"

#include <math.h>
#include <stddef.h>

static const char *const OVH_NAMES[DISP_OVH_COUNT] = {
    [DISP_OVH_NONE] = "none",         [DISP_OVH_CACHED] = "cached",     [DISP_OVH_PRIOR] = "prior",
    [DISP_OVH_PROFILED] = "profiled", [DISP_OVH_MEASURED] = "measured",
};

const char *disp_ovh_src_name(disp_ovh_src_e s)
{
    return (unsigned)s < DISP_OVH_COUNT ? OVH_NAMES[s] : "?";
}

static int known(double v) { return isfinite(v) && v > 0.0; }

disp_ovh_src_e disp_first_overhead(double cached, double prior, double profiled, double *ret_sec)
{
    /* A running job's measurement beats a profile's: it counted the
     * library's wake-ups and per-second costs at a job's real pace. */
    const double cand[] = {cached, prior, profiled};
    const disp_ovh_src_e src[] = {DISP_OVH_CACHED, DISP_OVH_PRIOR, DISP_OVH_PROFILED};
    for (size_t i = 0; i < sizeof(cand) / sizeof(cand[0]); i++) {
        if (known(cand[i])) {
            *ret_sec = cand[i];
            return src[i];
        }
    }
    *ret_sec = 0.0;
    return DISP_OVH_NONE;
}

double disp_first_persec(disp_ovh_src_e src, double host_persec, double budget)
{
    if (!known(host_persec) || (src != DISP_OVH_NONE && src != DISP_OVH_PROFILED)) {
        return 0.0;
    }
    double cap = fmin(DISP_PERSEC_MAX_SHARE * (known(budget) ? budget : 0.0), DISP_PERSEC_MAX_CPU);
    return fmin(host_persec, cap);
}
