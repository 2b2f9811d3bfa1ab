/* planner: see planner.h for the model. The search: the best local share
 * for each split point, the candidates and the chosen plan (with or without
 * a codec), the workers-needed hint and the explanation. The model itself is
 * planner_model.c's, FastFlow planner_fastflow.c's. Every function here is
 * pure. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dispatcher/planner/planner_impl.h"
#include "dispatcher/planner/whatif_ingress.h"

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
    if (disp_pl_client_shares(in)) {
        return best_share_grid(in, k);
    }
    double a = disp_pl_client_all(in);
    double b = disp_pl_client_after(in, k);
    double p = in->client_cores;
    double r = fmin(disp_pl_remote_cpu(in, k), disp_pl_remote_net(in, k));
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
    disp_pl_terms_clean(in, k, fstar, &t);
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
        disp_pl_terms_clean(in, k, f, &t);
        double p = disp_pl_terms_min(&t, NULL);
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
        disp_pl_terms_clean(in, k, in->step_share[j], &t);
        pred[j] = disp_pl_terms_min(&t, NULL);
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
    if (disp_pl_sanitize(in, &c) != 0 || c.nsteps == 0) {
        return f;
    }
    /* disp_plan_split_is_local keeps floor(n F) splits (same epsilon). */
    double j = floor(f * (double)c.nsteps + 1e-9);
    return c.step_share[(uint32_t)fmin(j, (double)c.nsteps)];
}

static void fill_cand(const disp_pl_input_t *in, uint32_t k, double f, int off, disp_pl_cand_t *c)
{
    memset(c, 0, sizeof(*c));
    c->split = k;
    c->share = f;
    c->runtime_share = f;
    c->off = off;
    disp_pl_terms_clean(in, k, f, &c->terms);
    c->predicted = disp_pl_terms_min(&c->terms, &c->binding);
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
    double bx = (1.0 - x->share) * disp_pl_wire_bytes(in, x->split);
    double by = (1.0 - y->share) * disp_pl_wire_bytes(in, y->split);
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
        if (in->compress && !disp_pl_zipped(in, k)) {
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
static uint32_t pick_compressed(const disp_pl_input_t *z, const disp_pl_result_t *r, uint32_t first,
                                uint32_t chosen)
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

/* The rate with extra workers of class cls: the best plan's, or, for a
 * given plan (fixed non-NULL: disp_planner_evaluate), that plan's. */
static double rate_with_extra(const disp_pl_input_t *in, uint32_t cls, uint32_t extra,
                              const disp_pl_cand_t *fixed)
{
    disp_pl_input_t x = *in;
    x.classes[cls].workers += extra;
    if (fixed != NULL) {
        disp_pl_cand_t c;
        fill_cand(&x, fixed->split, fixed->share, fixed->off, &c);
        return c.predicted;
    }
    disp_pl_result_t r;
    plan_core(&x, &r);
    return r.cand[r.chosen].predicted;
}

/* The smallest number of extra workers of the reference class (the one
 * with most workers: "of the measured speed") after which adding more no
 * longer helps, i.e. the rate is within DISP_PL_TIE of what unlimited
 * workers reach. The rate never falls as workers are added (every term is
 * non-decreasing in them), so a binary search applies. */
static void workers_hint(const disp_pl_input_t *in0, disp_pl_result_t *r, int given)
{
    const disp_pl_cand_t *c = &r->cand[r->chosen];
    const disp_pl_cand_t *fixed = given ? c : NULL;
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
    double limit = rate_with_extra(&in, cls, DISP_PL_MAX_EXTRA_WORKERS, fixed);
    if (!(limit > now * (1.0 + DISP_PL_TIE))) {
        r->hint_estimated = 0;
        r->hint_new_machines = 0;
        return;
    }
    uint32_t lo = 1;
    uint32_t hi = DISP_PL_MAX_EXTRA_WORKERS;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (rate_with_extra(&in, cls, mid, fixed) >= limit * (1.0 - DISP_PL_TIE)) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    r->workers_needed = lo;
    r->lifted_rate = rate_with_extra(&in, cls, lo, fixed);
}

static void explain(const disp_pl_input_t *in, disp_pl_result_t *r)
{
    const disp_pl_cand_t *c = &r->cand[r->chosen];
    if (c->off && r->off_rule) {
        snprintf(r->reason, sizeof(r->reason),
                 "off: the client alone reaches %.0f of the consumer's %.0f samples/s "
                 "(within %.0f %%)",
                 r->local_rate, in->consumer_rate, DISP_PL_OFF_TOLERANCE * 100);
    } else if (c->off && disp_pl_total_workers(in) == 0) {
        snprintf(r->reason, sizeof(r->reason), "off: no live worker");
    } else if (c->off) {
        snprintf(r->reason, sizeof(r->reason),
                 "off: offloading does not beat the client alone (%.0f samples/s)", r->local_rate);
    } else {
        snprintf(r->reason, sizeof(r->reason),
                 "split %u%s, local share %.3f: %.0f samples/s predicted (client alone %.0f), "
                 "bound by %s",
                 c->split, c->compress ? " +zstd" : "", c->share, c->predicted, r->local_rate,
                 disp_bind_name(c->binding));
    }
}

/* Every worker the input counts runs on the client's machine. */
static int workers_all_shared(const disp_pl_input_t *in)
{
    uint32_t shared = 0;
    for (uint32_t m = 0; m < in->nmachines; m++) {
        for (uint32_t c = 0; in->machines[m].client && c < in->nclasses; c++) {
            shared += in->machines[m].workers[c];
        }
    }
    return shared > 0 && shared >= disp_pl_total_workers(in);
}

/* Why an all-local choice is all local (disp_pl_result_t.local_reason):
 * against the best everything-remote candidate (F = 0, K >= 1). */
static void local_why(const disp_pl_input_t *in, disp_pl_result_t *r)
{
    const disp_pl_cand_t *c = &r->cand[r->chosen];
    r->local_reason[0] = '\0';
    if (!(c->off || (c->split == 0 && c->share >= 1.0))) {
        return;
    }
    if (disp_pl_total_workers(in) == 0) {
        snprintf(r->local_reason, sizeof(r->local_reason), "no worker: none registered");
        return;
    }
    if (r->off_rule || (in->consumer_rate > 0.0 &&
                        r->local_rate >= (1.0 - DISP_PL_OFF_TOLERANCE) * in->consumer_rate)) {
        snprintf(r->local_reason, sizeof(r->local_reason),
                 "the client alone reaches the training loop's %.0f samples/s", in->consumer_rate);
        return;
    }
    /* Remote with some unit on the workers (K >= 1: at K = 0 they only
     * read, and the client still runs every unit). */
    disp_pl_cand_t best;
    fill_cand(in, 1, 0.0, 0, &best);
    for (uint32_t k = 2; k <= in->nunits; k++) {
        disp_pl_cand_t x;
        fill_cand(in, k, 0.0, 0, &x);
        if (x.predicted > best.predicted) {
            best = x;
        }
    }
    const char *what = workers_all_shared(in)              ? "workers share the client's host"
                       : best.binding == DISP_BIND_NETWORK ? "link too slow"
                                                           : "workers slower than the client";
    snprintf(r->local_reason, sizeof(r->local_reason),
             "%s: predicted %.0f samples/s remote (split %u, bound by %s) vs %.0f local", what,
             best.predicted, best.split, disp_bind_name(best.binding), r->local_rate);
}

int disp_planner_plan(const disp_pl_input_t *in, disp_pl_result_t *ret)
{
    disp_pl_input_t c;
    int rc = disp_pl_sanitize(in, &c);
    if (rc != 0) {
        return rc;
    }
    disp_pl_result_t r;
    plan_core(&c, &r);
    workers_hint(&c, &r, 0);
    explain(&c, &r);
    local_why(&c, &r);
    *ret = r;
    return 0;
}

int disp_planner_evaluate(const disp_pl_input_t *in, uint32_t k, double f, disp_pl_result_t *ret)
{
    disp_pl_input_t c;
    int rc = disp_pl_sanitize(in, &c);
    if (rc != 0) {
        return rc;
    }
    k = k <= c.nunits ? k : c.nunits;
    f = isfinite(f) ? fmin(fmax(f, 0.0), 1.0) : 1.0;
    disp_pl_result_t r;
    memset(&r, 0, sizeof(r));
    /* The given plan as the runtime realizes F (whole splits), then "off". */
    double realized = disp_planner_realized_share(&c, f);
    fill_cand(&c, k, realized, realized >= 1.0, &r.cand[0]);
    r.cand[0].runtime_share = f;
    fill_cand(&c, 0, 1.0, 1, &r.cand[1]);
    r.ncand = 2;
    r.local_rate = r.cand[1].predicted;
    r.chosen = 0;
    workers_hint(&c, &r, 1);
    const disp_pl_cand_t *g = &r.cand[0];
    snprintf(r.reason, sizeof(r.reason),
             "given plan: split %u, local share %.3f: %.0f samples/s predicted (client alone "
             "%.0f), bound by %s",
             g->split, g->share, g->predicted, r.local_rate, disp_bind_name(g->binding));
    *ret = r;
    return 0;
}

/* ------------------------------------------------------------ what-if */

/* in with n workers of class cls: added ones on no listed machine, removed
 * ones taken from the listed machines, the last first (a machine's count
 * above the class's would price CPUs no worker uses). */
static void with_workers(disp_pl_input_t *x, uint32_t cls, uint32_t n)
{
    x->classes[cls].workers = n;
    uint32_t listed = 0;
    for (uint32_t m = 0; m < x->nmachines; m++) {
        listed += x->machines[m].workers[cls];
    }
    for (uint32_t m = x->nmachines; m-- > 0 && listed > n;) {
        uint32_t *w = &x->machines[m].workers[cls];
        uint32_t take = *w < listed - n ? *w : listed - n;
        *w -= take;
        listed -= take;
    }
}

/* The rate (and binding) with n workers of class cls. */
static double rate_with(const disp_pl_input_t *in, uint32_t cls, uint32_t n,
                        const disp_pl_cand_t *fixed, disp_bind_e *ret_binding)
{
    disp_pl_input_t x = *in;
    with_workers(&x, cls, n);
    disp_pl_cand_t c;
    if (fixed != NULL) {
        fill_cand(&x, fixed->split, fixed->share, fixed->off, &c);
    } else {
        disp_pl_result_t r;
        plan_core(&x, &r);
        c = r.cand[r.chosen];
    }
    *ret_binding = c.binding;
    return c.predicted;
}

int disp_planner_whatif(const disp_pl_input_t *in, uint32_t cls, const disp_pl_cand_t *fixed,
                        disp_wi_curve_t *ret)
{
    static const int32_t deltas[DISP_WI_POINTS] = {-4, -2, -1, 0, 1, 2, 4, 8, 16};
    disp_pl_input_t c;
    int rc = disp_pl_sanitize(in, &c);
    if (rc != 0 || cls >= c.nclasses) {
        return rc != 0 ? rc : -EINVAL;
    }
    disp_wi_curve_t w;
    memset(&w, 0, sizeof(w));
    w.cls = cls;
    w.workers = c.classes[cls].workers;
    /* Added workers share the client's own link (whatif_ingress.h). */
    w.ingress = disp_wi_ingress(&c, &w.ingress_assumed);
    c.client_bandwidth = w.ingress;
    for (uint32_t i = 0; i < DISP_WI_POINTS; i++) {
        if (deltas[i] < 0 && (uint32_t)-deltas[i] > w.workers) {
            continue;
        }
        disp_wi_point_t *p = &w.p[w.npoints++];
        p->delta = deltas[i];
        p->workers = (uint32_t)((int64_t)w.workers + deltas[i]);
        p->predicted = rate_with(&c, cls, p->workers, fixed, &p->binding);
    }
    /* The rate never falls as workers are added (every term is
     * non-decreasing in them): the fewest that reach the limit by bisection,
     * bracketed by the curve's points first (each costs a plan: this runs
     * under the dispatcher's mutex), then by doubling past the last one. */
    disp_bind_e b;
    uint32_t top = w.workers + DISP_PL_MAX_EXTRA_WORKERS;
    double target = rate_with(&c, cls, top, fixed, &w.wanted_binding) * (1.0 - DISP_PL_TIE);
    uint32_t lo = 0;
    uint32_t hi = top;
    uint32_t i = 0;
    while (i < w.npoints && w.p[i].predicted < target) {
        lo = w.p[i++].workers + 1;
    }
    if (i < w.npoints) {
        hi = w.p[i].workers;
    } else {
        for (uint32_t step = 32; lo + step < top; step *= 2) {
            if (rate_with(&c, cls, lo + step, fixed, &b) >= target) {
                hi = lo + step;
                break;
            }
            lo += step + 1;
        }
    }
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (rate_with(&c, cls, mid, fixed, &b) >= target) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    w.wanted = lo;
    w.wanted_rate = rate_with(&c, cls, lo, fixed, &b);
    *ret = w;
    return 0;
}
