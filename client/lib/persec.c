/* persec: see persec.h. */
#include "client/lib/persec.h"

#include <math.h>

int cl_persec_saturated(double proc_cpu, double wall, double budget)
{
    return isfinite(budget) && budget > 0.0 && proc_cpu >= CL_PERSEC_SATURATED * budget * wall;
}

static double figure(const cl_persec_t *s)
{
    return s->entered >= CL_PERSEC_MIN_WINDOWS && s->wall > 0.0 ? s->cpu / s->wall : 0.0;
}

double cl_persec_add(cl_persec_t *s, double cpu, double wall, double proc_cpu, double budget)
{
    s->seen++;
    if (s->seen <= CL_PERSEC_SKIP_WINDOWS || !isfinite(cpu) || !isfinite(wall) ||
        !isfinite(proc_cpu) || cpu < 0.0 || wall <= 0.0 || proc_cpu < 0.0 ||
        cl_persec_saturated(proc_cpu, wall, budget)) {
        return figure(s);
    }
    double keep = 1.0 - 1.0 / CL_PERSEC_WINDOW_REPORTS;
    s->cpu = s->cpu * keep + cpu;
    s->wall = s->wall * keep + wall;
    s->entered++;
    return figure(s);
}
