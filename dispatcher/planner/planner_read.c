/* planner_read: a remote read is not free (docs/planner.md "Remote reads").
 * With a URL source every sample a host runs starts with reading its
 * encoded bytes (bytes[0] per sample) from the data server, at the rate
 * that host measured for its remote reads (common/remote/rstats.h, sent in
 * its HostProfile). So, at local share f and throughput T:
 *   workers:  (1 - f) T bytes[0] <= sum over classes of workers x rate
 *   client:        f  T bytes[0] <= client rate
 * each a bound in samples/s that caps the worker and the client term.
 * A rate of 0 (a local source, or nothing measured yet) sets no bound, like
 * an unmeasured link; a class with workers and no rate makes the workers'
 * sum unbounded. Each worker is taken to have its own link to the data
 * server (workers on one machine share it: not modelled). Inputs are
 * sanitized here (NaN, Inf, negative: 0), as disp_pl_sanitize does for the
 * others. */
#include <math.h>

#include "dispatcher/planner/planner_impl.h"

static double clean(double v) { return isfinite(v) && v > 0.0 ? v : 0.0; }

double disp_pl_read_remote(const disp_pl_input_t *in, double f)
{
    double bytes = clean(in->bytes[0]);
    if (f >= 1.0 || bytes <= 0.0) {
        return INFINITY;
    }
    double rate = 0.0;
    uint32_t n = 0;
    for (uint32_t c = 0; c < in->nclasses && c < DISP_PL_MAX_CLASSES; c++) {
        const disp_pl_class_t *cl = &in->classes[c];
        if (cl->workers == 0) {
            continue;
        }
        double r = clean(cl->source_rate);
        if (r <= 0.0) {
            return INFINITY; /* not measured: no bound, as an unmeasured link */
        }
        rate += (double)cl->workers * r;
        n += cl->workers;
    }
    if (n == 0) {
        return INFINITY; /* no worker: the worker term says so */
    }
    return rate / bytes / (1.0 - (f > 0.0 ? f : 0.0));
}

double disp_pl_read_client(const disp_pl_input_t *in, double f)
{
    double bytes = clean(in->bytes[0]), rate = clean(in->client_source_rate);
    if (f <= 0.0 || bytes <= 0.0 || rate <= 0.0) {
        return INFINITY;
    }
    return rate / bytes / f;
}

void disp_pl_read_bound(const disp_pl_input_t *in, double f, disp_pl_terms_t *t)
{
    t->worker = fmin(t->worker, disp_pl_read_remote(in, f));
    t->client = fmin(t->client, disp_pl_read_client(in, f));
}
