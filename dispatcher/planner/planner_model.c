/* planner_model: the planner's throughput model (planner.h): inputs
 * sanitized (peers and measurements may send anything), the cost of a
 * sample on each side of boundary k, shared machines, and the rate terms
 * (consumer, client CPU, worker CPU, network) whose minimum is the
 * predicted rate at split k and local share f. Every function here is
 * pure. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "dispatcher/planner/planner_impl.h"

/* ------------------------------------------------------------ inputs */

/* Peers and measurements may send anything: NaN, Inf or negative is 0. */
static double clean(double v) { return isfinite(v) && v > 0.0 ? v : 0.0; }

int disp_pl_sanitize(const disp_pl_input_t *in, disp_pl_input_t *out)
{
    if (in->nunits == 0 || in->nunits > DISP_PL_MAX_UNITS || in->nclasses > DISP_PL_MAX_CLASSES) {
        return -EINVAL;
    }
    *out = *in;
    for (uint32_t u = 0; u < DISP_PL_MAX_UNITS; u++) {
        out->unit_sec[u] = u < in->nunits ? clean(in->unit_sec[u]) : 0.0;
    }
    for (uint32_t k = 0; k <= DISP_PL_MAX_UNITS; k++) {
        out->bytes[k] = k <= in->nunits ? clean(in->bytes[k]) : 0.0;
    }
    for (uint32_t k = 0; k <= DISP_PL_MAX_UNITS; k++) {
        int ok = k > 0 && k <= in->nunits; /* boundary 0 (encoded bytes): never */
        out->ratio[k] = ok ? clean(in->ratio[k]) : 0.0;
        out->compress_sec[k] = ok ? clean(in->compress_sec[k]) : 0.0;
        out->decompress_sec[k] = ok ? clean(in->decompress_sec[k]) : 0.0;
    }
    out->compress = in->compress != 0;
    out->read_sec = clean(in->read_sec);
    out->recv_sec_per_byte = clean(in->recv_sec_per_byte);
    out->sample_sec = clean(in->sample_sec);
    /* The per-second cost comes off the budget once: the copy carries
     * none, so sanitizing it again changes nothing. */
    out->client_cores = fmax(clean(in->client_cores) - clean(in->client_persec_cpu), 0.0);
    out->client_persec_cpu = 0.0;
    out->consumer_rate = clean(in->consumer_rate);
    out->client_bandwidth = clean(in->client_bandwidth);
    if (in->nsteps > DISP_PL_MAX_STEPS) {
        out->nsteps = 0; /* so fine that F is as good as continuous */
    }
    /* A usable ladder: 0 at the bottom, 1 at the top, never falling. */
    double prev = 0.0;
    for (uint32_t j = 0; j <= DISP_PL_MAX_STEPS; j++) {
        double v = j <= out->nsteps ? fmin(clean(in->step_share[j]), 1.0) : 0.0;
        if (j > 0 && j <= out->nsteps) {
            v = fmax(v, prev);
        }
        out->step_share[j] = v;
        prev = v;
    }
    if (out->nsteps > 0) {
        out->step_share[0] = 0.0;
        out->step_share[out->nsteps] = 1.0;
    }
    if (in->nmachines > DISP_PL_MAX_MACHINES) {
        return -EINVAL;
    }
    /* A machine lists no more workers of a class than are live. */
    uint32_t left[DISP_PL_MAX_CLASSES];
    for (uint32_t c = 0; c < DISP_PL_MAX_CLASSES; c++) {
        left[c] = c < in->nclasses ? in->classes[c].workers : 0;
    }
    for (uint32_t m = 0; m < in->nmachines; m++) {
        disp_pl_machine_t *x = &out->machines[m];
        x->cores = clean(x->cores);
        x->client = x->client != 0;
        for (uint32_t c = 0; c < DISP_PL_MAX_CLASSES; c++) {
            x->workers[c] = x->workers[c] < left[c] ? x->workers[c] : left[c];
            left[c] -= x->workers[c];
        }
    }
    for (uint32_t c = 0; c < in->nclasses; c++) {
        disp_pl_class_t *k = &out->classes[c];
        k->cores = clean(k->cores);
        k->read_sec = clean(k->read_sec);
        k->bandwidth = clean(k->bandwidth);
        for (uint32_t u = 0; u < DISP_PL_MAX_UNITS; u++) {
            k->unit_sec[u] = u < in->nunits ? clean(k->unit_sec[u]) : 0.0;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ costs */

/* Boundary k ships compressed under these inputs. */
int disp_pl_zipped(const disp_pl_input_t *in, uint32_t k)
{
    return in->compress && k > 0 && in->ratio[k] > DISP_PL_MIN_RATIO;
}

/* Bytes per sample on the wire at boundary k. */
double disp_pl_wire_bytes(const disp_pl_input_t *in, uint32_t k)
{
    return disp_pl_zipped(in, k) ? in->bytes[k] / in->ratio[k] : in->bytes[k];
}

/* How much slower class c is than the client on the units it runs at
 * split k (their costs over the client's on units [0, k)): scales the
 * compress CPU the client measured to that class. 1 when not profiled. */
static double class_speed(const disp_pl_input_t *in, const disp_pl_class_t *c, uint32_t k)
{
    double mine = 0.0;
    double client = 0.0;
    for (uint32_t u = 0; c->profiled && u < k; u++) {
        mine += c->unit_sec[u];
        client += in->unit_sec[u];
    }
    return mine > 0.0 && client > 0.0 ? mine / client : 1.0;
}

double disp_pl_client_all(const disp_pl_input_t *in)
{
    double s = in->read_sec + in->sample_sec;
    for (uint32_t u = 0; u < in->nunits; u++) {
        s += in->unit_sec[u];
    }
    /* Bounded by what it prices (planner_cache.c): never below the rest. */
    if (isfinite(in->local_cache_sec) && in->local_cache_sec > 0.0 && in->local_cache_sec < s) {
        s -= in->local_cache_sec;
    }
    return s;
}

double disp_pl_client_after(const disp_pl_input_t *in, uint32_t k)
{
    double s = 0.0;
    for (uint32_t u = k; u < in->nunits; u++) {
        s += in->unit_sec[u];
    }
    double unzip = disp_pl_zipped(in, k) ? in->decompress_sec[k] : 0.0;
    return s + in->recv_sec_per_byte * disp_pl_wire_bytes(in, k) + unzip + in->sample_sec;
}

/* Worker CPU s per sample for units [0, k) on class c (the client's costs
 * when the class was not profiled). */
static double class_before(const disp_pl_input_t *in, const disp_pl_class_t *c, uint32_t k)
{
    const double *unit = c->profiled ? c->unit_sec : in->unit_sec;
    double s = c->profiled ? c->read_sec : in->read_sec;
    for (uint32_t u = 0; u < k; u++) {
        s += unit[u];
    }
    if (disp_pl_zipped(in, k)) {
        s += in->compress_sec[k] * class_speed(in, c, k);
    }
    return s;
}

uint32_t disp_pl_total_workers(const disp_pl_input_t *in)
{
    uint32_t n = 0;
    for (uint32_t c = 0; c < in->nclasses; c++) {
        n += in->classes[c].workers;
    }
    return n;
}

/* Samples/s the workers of machine m produce at boundary k with avail of
 * its CPUs (cores 0 = not known: no cap beyond their own). The cheapest
 * class gets the CPUs first, as stealing of unstarted splits would. */
static double machine_rate(const disp_pl_input_t *in, const disp_pl_machine_t *m, uint32_t k,
                           double avail)
{
    int done[DISP_PL_MAX_CLASSES] = {0};
    double r = 0.0;
    while (avail > 0.0) {
        int best = -1;
        double best_cost = 0.0;
        for (uint32_t c = 0; c < in->nclasses; c++) {
            const disp_pl_class_t *cl = &in->classes[c];
            if (done[c] || m->workers[c] == 0 || cl->cores <= 0.0) {
                continue;
            }
            double cost = class_before(in, cl, k);
            if (best < 0 || cost < best_cost) {
                best = (int)c;
                best_cost = cost;
            }
        }
        if (best < 0) {
            break;
        }
        if (best_cost <= 0.0) {
            return INFINITY;
        }
        done[best] = 1;
        double cpu = fmin(avail, (double)m->workers[best] * in->classes[best].cores);
        r += cpu / best_cost;
        avail -= cpu;
    }
    return r;
}

/* Samples/s the workers' CPUs can produce at boundary k (F = 0) while the
 * client uses client_cpu CPUs of the machine it shares with some of them. */
static double remote_cpu_at(const disp_pl_input_t *in, uint32_t k, double client_cpu)
{
    uint32_t alone[DISP_PL_MAX_CLASSES];
    for (uint32_t c = 0; c < in->nclasses; c++) {
        alone[c] = in->classes[c].workers;
    }
    for (uint32_t m = 0; m < in->nmachines; m++) {
        for (uint32_t c = 0; c < in->nclasses; c++) {
            alone[c] -= in->machines[m].workers[c]; /* sanitize: never below 0 */
        }
    }
    double r = 0.0;
    for (uint32_t c = 0; c < in->nclasses; c++) {
        const disp_pl_class_t *cl = &in->classes[c];
        if (alone[c] == 0 || cl->cores <= 0.0) {
            continue;
        }
        double cost = class_before(in, cl, k);
        if (cost <= 0.0) {
            return INFINITY;
        }
        r += (double)alone[c] * cl->cores / cost;
    }
    for (uint32_t m = 0; m < in->nmachines; m++) {
        const disp_pl_machine_t *x = &in->machines[m];
        double avail = x->cores > 0.0 ? x->cores : INFINITY;
        r += machine_rate(in, x, k, x->client ? avail - client_cpu : avail);
    }
    return r;
}

double disp_pl_remote_cpu(const disp_pl_input_t *in, uint32_t k)
{
    return remote_cpu_at(in, k, 0.0);
}

/* The client shares a machine with at least one worker. */
int disp_pl_client_shares(const disp_pl_input_t *in)
{
    for (uint32_t m = 0; m < in->nmachines; m++) {
        for (uint32_t c = 0; in->machines[m].client && c < in->nclasses; c++) {
            if (in->machines[m].workers[c] > 0) {
                return 1;
            }
        }
    }
    return 0;
}

/* The workers' limit at (k, f) when the client needs d CPU s per sample:
 * the largest T with remote_cpu_at(T d) >= (1 - f) T. The left side falls
 * as T grows and the right one rises, so bisection finds it. */
static double worker_term(const disp_pl_input_t *in, uint32_t k, double f, double d)
{
    if (f >= 1.0) {
        return INFINITY;
    }
    double r0 = disp_pl_remote_cpu(in, k);
    if (!disp_pl_client_shares(in) || isinf(r0) || d <= 0.0) {
        return r0 / (1.0 - f);
    }
    double lo = 0.0;
    double hi = r0 / (1.0 - f);
    for (int i = 0; i < 200 && hi - lo > hi * 1e-12; i++) {
        double mid = 0.5 * (lo + hi);
        if (remote_cpu_at(in, k, mid * d) >= (1.0 - f) * mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Samples/s the links can carry at boundary k (F = 0). An unmeasured link
 * does not limit; the client's ingress cap limits the sum. */
double disp_pl_remote_net(const disp_pl_input_t *in, uint32_t k)
{
    if (disp_pl_total_workers(in) == 0) {
        return 0.0;
    }
    double bw = 0.0;
    for (uint32_t c = 0; c < in->nclasses; c++) {
        const disp_pl_class_t *cl = &in->classes[c];
        if (cl->workers == 0) {
            continue;
        }
        bw = cl->bandwidth > 0.0 && isfinite(bw) ? bw + (double)cl->workers * cl->bandwidth
                                                 : INFINITY;
    }
    if (in->client_bandwidth > 0.0 && in->client_bandwidth < bw) {
        bw = in->client_bandwidth;
    }
    double bytes = disp_pl_wire_bytes(in, k);
    if (bytes <= 0.0) {
        return INFINITY;
    }
    return bw / bytes;
}

static double share_div(double r, double f)
{
    if (f >= 1.0) {
        return INFINITY;
    }
    return r / (1.0 - f);
}

void disp_pl_terms_clean(const disp_pl_input_t *in, uint32_t k, double f, disp_pl_terms_t *t)
{
    double a = disp_pl_client_all(in);
    double b = disp_pl_client_after(in, k);
    double den = f * a + (1.0 - f) * b;
    t->consumer = in->consumer_rate > 0.0 ? in->consumer_rate : INFINITY;
    t->client = den > 0.0 ? in->client_cores / den : INFINITY;
    t->worker = worker_term(in, k, f, den);
    t->network = share_div(disp_pl_remote_net(in, k), f);
    disp_pl_read_bound(in, f, t); /* remote reads are not free (planner_read.c) */
}

/* Ties (within 1e-9) go to the consumer (nothing stalls), then to the
 * remote resources (the operator can add workers or bandwidth), then the
 * client. At an interior balance point client and remote are equal by
 * construction; naming the remote one points at what would lift it. */
double disp_pl_terms_min(const disp_pl_terms_t *t, disp_bind_e *ret)
{
    const struct {
        double v;
        disp_bind_e b;
    } order[] = {
        {t->consumer, DISP_BIND_CONSUMER},
        {t->worker, DISP_BIND_WORKER_CPU},
        {t->network, DISP_BIND_NETWORK},
        {t->client, DISP_BIND_CLIENT_CPU},
    };
    double m = INFINITY;
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        m = fmin(m, order[i].v);
    }
    disp_bind_e b = DISP_BIND_NONE;
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]) && isfinite(m); i++) {
        if (order[i].v <= m * (1.0 + 1e-9)) {
            b = order[i].b;
            break;
        }
    }
    if (ret != NULL) {
        *ret = b;
    }
    return m;
}

void disp_planner_terms(const disp_pl_input_t *in, uint32_t k, double f, disp_pl_terms_t *ret)
{
    disp_pl_input_t c;
    if (disp_pl_sanitize(in, &c) != 0 || k > c.nunits) {
        *ret = (disp_pl_terms_t){0, 0, 0, 0};
        return;
    }
    f = isfinite(f) ? fmin(fmax(f, 0.0), 1.0) : 1.0;
    disp_pl_terms_clean(&c, k, f, ret);
}

double disp_planner_predict(const disp_pl_input_t *in, uint32_t k, double f,
                            disp_bind_e *ret_binding)
{
    disp_pl_terms_t t;
    disp_planner_terms(in, k, f, &t);
    return disp_pl_terms_min(&t, ret_binding);
}
