/* planner: see planner.h for the model. Every function here is pure. */
#include "dispatcher/planner/planner.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *disp_bind_name(disp_bind_e b)
{
    switch (b) {
    case DISP_BIND_NONE:
        return "none";
    case DISP_BIND_CONSUMER:
        return "consumer";
    case DISP_BIND_CLIENT_CPU:
        return "client_cpu";
    case DISP_BIND_WORKER_CPU:
        return "worker_cpu";
    case DISP_BIND_NETWORK:
        return "network";
    }
    return "?";
}

const char *disp_ff_cand_name(disp_ff_cand_e c)
{
    switch (c) {
    case DISP_FF_ELEMENT:
        return "element";
    case DISP_FF_BATCH:
        return "batch";
    case DISP_FF_MIDDLE:
        return "middle";
    case DISP_FF__COUNT:
        break;
    }
    return "?";
}

/* ------------------------------------------------------------ inputs */

/* Peers and measurements may send anything: NaN, Inf or negative is 0. */
static double clean(double v) { return isfinite(v) && v > 0.0 ? v : 0.0; }

static int sanitize(const disp_pl_input_t *in, disp_pl_input_t *out)
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
    out->client_cores = clean(in->client_cores);
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
static int zipped(const disp_pl_input_t *in, uint32_t k)
{
    return in->compress && k > 0 && in->ratio[k] > DISP_PL_MIN_RATIO;
}

/* Bytes per sample on the wire at boundary k. */
static double wire_bytes(const disp_pl_input_t *in, uint32_t k)
{
    return zipped(in, k) ? in->bytes[k] / in->ratio[k] : in->bytes[k];
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

static double client_all(const disp_pl_input_t *in)
{
    double s = in->read_sec + in->sample_sec;
    for (uint32_t u = 0; u < in->nunits; u++) {
        s += in->unit_sec[u];
    }
    return s;
}

static double client_after(const disp_pl_input_t *in, uint32_t k)
{
    double s = 0.0;
    for (uint32_t u = k; u < in->nunits; u++) {
        s += in->unit_sec[u];
    }
    double unzip = zipped(in, k) ? in->decompress_sec[k] : 0.0;
    return s + in->recv_sec_per_byte * wire_bytes(in, k) + unzip + in->sample_sec;
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
    if (zipped(in, k)) {
        s += in->compress_sec[k] * class_speed(in, c, k);
    }
    return s;
}

static uint32_t total_workers(const disp_pl_input_t *in)
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

static double remote_cpu(const disp_pl_input_t *in, uint32_t k)
{
    return remote_cpu_at(in, k, 0.0);
}

/* The client shares a machine with at least one worker. */
static int client_shares(const disp_pl_input_t *in)
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
    double r0 = remote_cpu(in, k);
    if (!client_shares(in) || isinf(r0) || d <= 0.0) {
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
static double remote_net(const disp_pl_input_t *in, uint32_t k)
{
    if (total_workers(in) == 0) {
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
    double bytes = wire_bytes(in, k);
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

static void terms_clean(const disp_pl_input_t *in, uint32_t k, double f, disp_pl_terms_t *t)
{
    double a = client_all(in);
    double b = client_after(in, k);
    double den = f * a + (1.0 - f) * b;
    t->consumer = in->consumer_rate > 0.0 ? in->consumer_rate : INFINITY;
    t->client = den > 0.0 ? in->client_cores / den : INFINITY;
    t->worker = worker_term(in, k, f, den);
    t->network = share_div(remote_net(in, k), f);
}

/* Ties (within 1e-9) go to the consumer (nothing stalls), then to the
 * remote resources (the operator can add workers or bandwidth), then the
 * client. At an interior balance point client and remote are equal by
 * construction; naming the remote one points at what would lift it. */
static double terms_min(const disp_pl_terms_t *t, disp_bind_e *ret)
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
    if (sanitize(in, &c) != 0 || k > c.nunits) {
        *ret = (disp_pl_terms_t){0, 0, 0, 0};
        return;
    }
    f = isfinite(f) ? fmin(fmax(f, 0.0), 1.0) : 1.0;
    terms_clean(&c, k, f, ret);
}

double disp_planner_predict(const disp_pl_input_t *in, uint32_t k, double f,
                            disp_bind_e *ret_binding)
{
    disp_pl_terms_t t;
    disp_planner_terms(in, k, f, &t);
    return terms_min(&t, ret_binding);
}

/* ------------------------------------------------------------ best F per K */

/* Closed form. With client cost a per local sample and b per received one,
 * client(F) = P / (F a + (1-F) b) falls with F when a > b, and the remote
 * limit R / (1-F) rises with F: the unconstrained optimum is where they
 * meet, F* = (P - R b) / (P + R (a - b)), clamped to [0, 1]. When the
 * consumer caps the rate, the largest F that still reaches it (with
 * DISP_PL_HEADROOM of client slack) is taken: it leaves the most remote
 * capacity to other jobs. */
static double best_share_grid(const disp_pl_input_t *in, uint32_t k);

static double best_share(const disp_pl_input_t *in, uint32_t k)
{
    if (client_shares(in)) {
        return best_share_grid(in, k);
    }
    double a = client_all(in);
    double b = client_after(in, k);
    double p = in->client_cores;
    double r = fmin(remote_cpu(in, k), remote_net(in, k));
    if (r <= 0.0 || a <= b) {
        return 1.0; /* no remote capacity, or receiving costs the client more than doing */
    }
    if (p <= 0.0) {
        return 0.0;
    }
    double fstar = isinf(r) ? 0.0 : (p - r * b) / (p + r * (a - b));
    fstar = fmin(fmax(fstar, 0.0), 1.0);
    if (in->consumer_rate <= 0.0) {
        return fstar;
    }
    disp_pl_terms_t t;
    terms_clean(in, k, fstar, &t);
    double tmax = fmin(t.client, fmin(t.worker, t.network));
    double target = fmin(tmax, in->consumer_rate * (1.0 + DISP_PL_HEADROOM));
    if (!(target > 0.0) || isinf(target)) {
        return fstar;
    }
    /* client(F) >= target  <=>  F <= (P / target - b) / (a - b). */
    double f = (p / target - b) / (a - b);
    return fmin(fmax(f, fstar), 1.0);
}

/* best_share when the client shares a machine with workers: the remote
 * limit then falls as the client takes more, and no closed form holds, so
 * F is searched on a grid of DISP_PL_GRID steps. The best prediction wins;
 * among equals the largest share (the least remote work). */
#define DISP_PL_GRID 64
static double best_share_grid(const disp_pl_input_t *in, uint32_t k)
{
    double best_f = 1.0;
    double best = -1.0;
    for (int j = DISP_PL_GRID; j >= 0; j--) {
        double f = (double)j / DISP_PL_GRID;
        disp_pl_terms_t t;
        terms_clean(in, k, f, &t);
        double p = terms_min(&t, NULL);
        if (p > best * (1.0 + 1e-9)) {
            best = p;
            best_f = f;
        }
    }
    return best_f;
}

/* The runtime's version of best_share: only the shares whole splits make
 * exist, so every one of them is tried (at most DISP_PL_MAX_STEPS + 1).
 * The best prediction wins; among equals (the consumer binds) the largest
 * share that keeps DISP_PL_HEADROOM of client slack, as best_share does,
 * else the one with the most client slack; otherwise the larger share.
 * *ret_runtime is j / nsteps, what disp_plan_split_is_local turns into
 * exactly j local splits. */
static double best_step(const disp_pl_input_t *in, uint32_t k, double *ret_runtime)
{
    uint32_t n = in->nsteps;
    double pred[DISP_PL_MAX_STEPS + 1];
    double client[DISP_PL_MAX_STEPS + 1];
    double pmax = 0.0;
    for (uint32_t j = 0; j <= n; j++) {
        disp_pl_terms_t t;
        terms_clean(in, k, in->step_share[j], &t);
        pred[j] = terms_min(&t, NULL);
        client[j] = t.client;
        pmax = fmax(pmax, pred[j]);
    }
    int consumer_binds = in->consumer_rate > 0.0 && pmax >= in->consumer_rate * (1.0 - 1e-9);
    int pick = -1;
    for (uint32_t j = 0; j <= n; j++) {
        if (!(pred[j] >= pmax * (1.0 - 1e-9))) {
            continue;
        }
        if (!consumer_binds || client[j] >= in->consumer_rate * (1.0 + DISP_PL_HEADROOM)) {
            pick = (int)j; /* the largest such share */
        } else if (pick < 0) {
            pick = (int)j; /* the smallest share: most slack, until one with headroom */
        }
    }
    if (pick < 0) {
        pick = (int)n; /* all predictions NaN: cannot happen on clean input */
    }
    *ret_runtime = (double)pick / (double)n;
    return in->step_share[pick];
}

void disp_planner_rank_share(disp_pl_input_t *in, uint32_t node_ranks, uint32_t world)
{
    if (node_ranks > 1) {
        in->client_cores /= (double)node_ranks;
        in->client_bandwidth /= (double)node_ranks;
    }
    if (world > 1) {
        for (uint32_t c = 0; c < in->nclasses && c < DISP_PL_MAX_CLASSES; c++) {
            in->classes[c].cores /= (double)world;
            in->classes[c].bandwidth /= (double)world;
        }
        for (uint32_t m = 0; m < in->nmachines && m < DISP_PL_MAX_MACHINES; m++) {
            in->machines[m].cores /= (double)world;
        }
    }
}

double disp_planner_realized_share(const disp_pl_input_t *in, double f)
{
    f = isfinite(f) ? fmin(fmax(f, 0.0), 1.0) : 1.0;
    disp_pl_input_t c;
    if (sanitize(in, &c) != 0 || c.nsteps == 0) {
        return f;
    }
    /* disp_plan_split_is_local keeps floor(n F) splits (same epsilon). */
    double j = floor(f * (double)c.nsteps + 1e-9);
    return c.step_share[(uint32_t)fmin(j, (double)c.nsteps)];
}

static void fill_cand(const disp_pl_input_t *in, uint32_t k, double f, int off,
                      disp_pl_cand_t *c)
{
    memset(c, 0, sizeof(*c));
    c->split = k;
    c->share = f;
    c->runtime_share = f;
    c->off = off;
    terms_clean(in, k, f, &c->terms);
    c->predicted = terms_min(&c->terms, &c->binding);
    if (isinf(c->predicted)) {
        c->predicted = 0.0; /* nothing costs anything: no information, not infinite speed */
    }
}

/* Remote work a candidate causes per delivered sample: network bytes first,
 * then worker CPU. Used to break ties towards the cheaper plan. */
static int cheaper(const disp_pl_input_t *in, const disp_pl_cand_t *x, const disp_pl_cand_t *y)
{
    if (x->share != y->share) {
        return x->share > y->share;
    }
    double bx = (1.0 - x->share) * wire_bytes(in, x->split);
    double by = (1.0 - y->share) * wire_bytes(in, y->split);
    if (bx != by) {
        return bx < by;
    }
    return x->split < y->split;
}

/* Candidate i beats the best so far: more than DISP_PL_TIE better, or
 * within it and cheaper. */
static int beats(const disp_pl_input_t *in, const disp_pl_cand_t *c, const disp_pl_cand_t *b)
{
    return c->predicted > b->predicted * (1.0 + DISP_PL_TIE) ||
           (c->predicted >= b->predicted * (1.0 - DISP_PL_TIE) && cheaper(in, c, b));
}

/* One candidate per K in [0, nunits] (each with its best F) under in,
 * appended to r; only compressible K when compress is set. */
static void add_splits(const disp_pl_input_t *in, disp_pl_result_t *r)
{
    for (uint32_t k = 0; k <= in->nunits; k++) {
        if (in->compress && !zipped(in, k)) {
            continue;
        }
        double runtime = 0.0;
        double f = in->nsteps > 0 ? best_step(in, k, &runtime) : best_share(in, k);
        disp_pl_cand_t *c = &r->cand[r->ncand++];
        fill_cand(in, k, f, 0, c);
        c->compress = in->compress;
        if (in->nsteps > 0) {
            c->runtime_share = runtime;
        }
    }
}

/* The best compressed candidate (index >= first), if it remotes anything
 * and beats the chosen uncompressed one by more than DISP_PL_TIE: the
 * codec costs CPU on both ends, so a tie keeps the plan without it. */
static uint32_t pick_compressed(const disp_pl_input_t *z, const disp_pl_result_t *r,
                                uint32_t first, uint32_t chosen)
{
    if (first >= r->ncand) {
        return chosen;
    }
    uint32_t best = first;
    for (uint32_t i = first + 1; i < r->ncand; i++) {
        if (beats(z, &r->cand[i], &r->cand[best])) {
            best = i;
        }
    }
    const disp_pl_cand_t *c = &r->cand[best];
    if (c->share < 1.0 && c->predicted > r->cand[chosen].predicted * (1.0 + DISP_PL_TIE)) {
        return best;
    }
    return chosen;
}

/* Compression was profiled at some boundary. */
static int has_codec(const disp_pl_input_t *in)
{
    for (uint32_t k = 1; k <= in->nunits; k++) {
        if (in->ratio[k] > DISP_PL_MIN_RATIO) {
            return 1;
        }
    }
    return 0;
}

/* The plan without the workers-needed hint. */
static void plan_core(const disp_pl_input_t *in0, disp_pl_result_t *r)
{
    memset(r, 0, sizeof(*r));
    disp_pl_input_t in = *in0;
    in.compress = 0;
    add_splits(&in, r);
    uint32_t off = r->ncand;
    fill_cand(&in, 0, 1.0, 1, &r->cand[r->ncand++]);
    r->local_rate = r->cand[off].predicted;

    uint32_t best = 0;
    for (uint32_t i = 1; i < r->ncand; i++) {
        if (beats(&in, &r->cand[i], &r->cand[best])) {
            best = i;
        }
    }
    /* A K whose best share is 1 is the "off" plan under another name. */
    if (r->cand[best].share >= 1.0) {
        best = off;
    }
    if (has_codec(&in)) {
        disp_pl_input_t z = in;
        z.compress = 1;
        uint32_t first = r->ncand;
        add_splits(&z, r);
        best = pick_compressed(&z, r, first, best);
    }
    double g = in.consumer_rate;
    if (g > 0.0 && r->local_rate >= (1.0 - DISP_PL_OFF_TOLERANCE) * g) {
        r->off_rule = best != off;
        best = off;
    }
    r->chosen = best;
}

/* ------------------------------------------------------------ workers-needed hint */

static double rate_with_extra(const disp_pl_input_t *in, uint32_t cls, uint32_t extra)
{
    disp_pl_input_t x = *in;
    disp_pl_result_t r;
    x.classes[cls].workers += extra;
    plan_core(&x, &r);
    return r.cand[r.chosen].predicted;
}

/* The smallest number of extra workers of the reference class (the one
 * with most workers: "of the measured speed") after which adding more no
 * longer helps, i.e. the rate is within DISP_PL_TIE of what unlimited
 * workers reach. The rate never falls as workers are added (every term is
 * non-decreasing in them), so a binary search applies. */
static void workers_hint(const disp_pl_input_t *in0, disp_pl_result_t *r)
{
    const disp_pl_cand_t *c = &r->cand[r->chosen];
    if (c->binding == DISP_BIND_CONSUMER || c->binding == DISP_BIND_NETWORK ||
        c->binding == DISP_BIND_NONE) {
        return;
    }
    disp_pl_input_t in = *in0;
    uint32_t cls = 0;
    for (uint32_t i = 1; i < in.nclasses; i++) {
        if (in.classes[i].workers > in.classes[cls].workers) {
            cls = i;
        }
    }
    if (in.nclasses == 0 || in.classes[cls].workers == 0) {
        /* Nothing measured: assume workers like the client. */
        if (in.nclasses == DISP_PL_MAX_CLASSES) {
            return;
        }
        cls = in.nclasses++;
        memset(&in.classes[cls], 0, sizeof(in.classes[cls]));
        in.classes[cls].cores = in.client_cores;
        r->hint_estimated = 1;
    }
    /* The extra workers are on no listed machine: each on its own, never
     * on a machine whose CPUs are already counted. */
    r->hint_new_machines = in.nmachines > 0;
    double now = c->predicted;
    double limit = rate_with_extra(&in, cls, DISP_PL_MAX_EXTRA_WORKERS);
    if (!(limit > now * (1.0 + DISP_PL_TIE))) {
        r->hint_estimated = 0;
        r->hint_new_machines = 0;
        return;
    }
    uint32_t lo = 1;
    uint32_t hi = DISP_PL_MAX_EXTRA_WORKERS;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (rate_with_extra(&in, cls, mid) >= limit * (1.0 - DISP_PL_TIE)) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    r->workers_needed = lo;
    r->lifted_rate = rate_with_extra(&in, cls, lo);
}

static void explain(const disp_pl_input_t *in, disp_pl_result_t *r)
{
    const disp_pl_cand_t *c = &r->cand[r->chosen];
    if (c->off && r->off_rule) {
        snprintf(r->reason, sizeof(r->reason),
                 "off: the client alone reaches %.0f of the consumer's %.0f samples/s "
                 "(within %.0f %%)",
                 r->local_rate, in->consumer_rate, DISP_PL_OFF_TOLERANCE * 100);
    } else if (c->off && total_workers(in) == 0) {
        snprintf(r->reason, sizeof(r->reason), "off: no live worker");
    } else if (c->off) {
        snprintf(r->reason, sizeof(r->reason),
                 "off: offloading does not beat the client alone (%.0f samples/s)",
                 r->local_rate);
    } else {
        snprintf(r->reason, sizeof(r->reason),
                 "split %u%s, local share %.3f: %.0f samples/s predicted (client alone %.0f), "
                 "bound by %s",
                 c->split, c->compress ? " +zstd" : "", c->share, c->predicted, r->local_rate,
                 disp_bind_name(c->binding));
    }
}

int disp_planner_plan(const disp_pl_input_t *in, disp_pl_result_t *ret)
{
    disp_pl_input_t c;
    int rc = sanitize(in, &c);
    if (rc != 0) {
        return rc;
    }
    disp_pl_result_t r;
    plan_core(&c, &r);
    workers_hint(&c, &r);
    explain(&c, &r);
    *ret = r;
    return 0;
}

/* ------------------------------------------------------------ FastFlow */

/* FastFlow's utils.calculate_ratio_local_optimal, with an unlimited
 * consumer handled explicitly instead of through infinities. */
double disp_ff_ratio_local(double gthp, double lthp, double rthp, double pcycle, double dcycle,
                           double num_workers)
{
    double remote = rthp * num_workers;
    if (!(lthp + remote > 0.0)) {
        return 1.0;
    }
    if (isinf(gthp) || lthp + remote < gthp) {
        return lthp / (lthp + remote);
    }
    double dc_ratio = pcycle > 0.0 ? dcycle / pcycle : 0.0;
    double ideal_off = gthp - lthp;
    double decode_off = ideal_off + ideal_off * dc_ratio;
    double off_data = lthp > remote ? (remote + decode_off) / 2.0 : fmax(remote, decode_off);
    double ratio = (gthp - off_data) / gthp;
    return ratio < 0.0 ? 0.0 : fmin(ratio, 1.0);
}

int disp_planner_fastflow(const disp_pl_input_t *in0, disp_ff_result_t *ret)
{
    disp_pl_input_t in;
    int rc = sanitize(in0, &in);
    if (rc != 0) {
        return rc;
    }
    disp_ff_result_t r;
    memset(&r, 0, sizeof(r));
    double p = in.client_cores;
    r.gthp = in.consumer_rate > 0.0 ? in.consumer_rate : INFINITY;
    r.pcycle = client_all(&in);
    double local = r.pcycle > 0.0 ? p / r.pcycle : INFINITY;
    r.lthp = fmin(r.gthp, local);
    r.chosen = -1;
    r.split = 0;
    r.share = 1.0;

    /* Sluice batches on the client and its messages are already batched, so
     * "element" and "batch" are the same cut (all units remote); workers read
     * their own copy of the data, so FastFlow's "middle" (read locally, ship
     * raw data out and results back) has no Sluice equivalent. */
    for (int i = 0; i < DISP_FF__COUNT; i++) {
        disp_ff_cand_t *c = &r.cand[i];
        c->applicable = i != DISP_FF_MIDDLE;
        if (!c->applicable) {
            continue;
        }
        c->split = in.nunits;
        c->cycles = client_after(&in, in.nunits);
        double recv = c->cycles > 0.0 ? p / c->cycles : INFINITY;
        double remote = fmin(remote_cpu(&in, in.nunits), remote_net(&in, in.nunits));
        c->rthp = fmin(r.gthp, fmin(recv, remote));
        if (isinf(c->rthp)) {
            c->rthp = 0.0;
        }
        double overhead = isfinite(r.lthp) && r.pcycle > 0.0
                              ? r.lthp * (1.0 - c->cycles / r.pcycle)
                              : 0.0;
        c->score = c->rthp + overhead;
    }
    int bottleneck = isinf(r.gthp) ? isfinite(local) : r.gthp > r.lthp * DISP_FF_BOTTLENECK;
    if (!bottleneck || total_workers(&in) == 0) {
        snprintf(r.reason, sizeof(r.reason),
                 total_workers(&in) == 0 ? "no offloading: no live worker"
                                         : "no offloading: the consumer is not %.1fx faster "
                                           "than the local pipeline",
                 DISP_FF_BOTTLENECK);
    } else {
        int best = -1;
        for (int i = 0; i < DISP_FF__COUNT; i++) {
            if (r.cand[i].applicable && (best < 0 || r.cand[i].score > r.cand[best].score)) {
                best = i;
            }
        }
        r.chosen = best;
        r.dcycle = r.cand[best].cycles;
        /* FastFlow measures rthp with one worker and scales by the worker
         * count; ours is already the sum over workers. */
        r.ratio_local = disp_ff_ratio_local(r.gthp, r.lthp, r.cand[best].rthp, r.pcycle,
                                            r.dcycle, 1.0);
        r.split = r.cand[best].split;
        r.share = r.ratio_local;
        snprintf(r.reason, sizeof(r.reason), "fastflow: %s offloading, ratio_local %.3f",
                 disp_ff_cand_name((disp_ff_cand_e)best), r.ratio_local);
    }
    /* The runtime realizes ratio_local in whole splits: predict that. */
    r.realized_share = disp_planner_realized_share(&in, r.share);
    disp_pl_terms_t t;
    terms_clean(&in, r.split, r.realized_share, &t);
    r.predicted = terms_min(&t, &r.binding);
    if (isinf(r.predicted)) {
        r.predicted = 0.0;
    }
    *ret = r;
    return 0;
}
