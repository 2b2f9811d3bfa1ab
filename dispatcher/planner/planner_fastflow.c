/* planner_fastflow: FastFlow's policy (its local ratio and its three
 * candidate cuts) over the planner's model, for offload fastflow
 * (planner.h disp_planner_fastflow). Every function here is pure. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dispatcher/planner/planner_impl.h"

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
    int rc = disp_pl_sanitize(in0, &in);
    if (rc != 0) {
        return rc;
    }
    disp_ff_result_t r;
    memset(&r, 0, sizeof(r));
    double p = in.client_cores;
    r.gthp = in.consumer_rate > 0.0 ? in.consumer_rate : INFINITY;
    r.pcycle = disp_pl_client_all(&in);
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
        c->cycles = disp_pl_client_after(&in, in.nunits);
        double recv = c->cycles > 0.0 ? p / c->cycles : INFINITY;
        double remote = fmin(disp_pl_remote_cpu(&in, in.nunits),
                             disp_pl_remote_net(&in, in.nunits));
        c->rthp = fmin(r.gthp, fmin(recv, remote));
        if (isinf(c->rthp)) {
            c->rthp = 0.0;
        }
        double overhead = isfinite(r.lthp) && r.pcycle > 0.0 ? r.lthp * (1.0 - c->cycles / r.pcycle)
                                                             : 0.0;
        c->score = c->rthp + overhead;
    }
    int bottleneck = isinf(r.gthp) ? isfinite(local) : r.gthp > r.lthp * DISP_FF_BOTTLENECK;
    if (!bottleneck || disp_pl_total_workers(&in) == 0) {
        snprintf(r.reason, sizeof(r.reason),
                 disp_pl_total_workers(&in) == 0
                     ? "no offloading: no live worker"
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
        r.ratio_local = disp_ff_ratio_local(r.gthp, r.lthp, r.cand[best].rthp, r.pcycle, r.dcycle,
                                            1.0);
        r.split = r.cand[best].split;
        r.share = r.ratio_local;
        snprintf(r.reason, sizeof(r.reason), "fastflow: %s offloading, ratio_local %.3f",
                 disp_ff_cand_name((disp_ff_cand_e)best), r.ratio_local);
    }
    /* The runtime realizes ratio_local in whole splits: predict that. */
    r.realized_share = disp_planner_realized_share(&in, r.share);
    disp_pl_terms_t t;
    disp_pl_terms_clean(&in, r.split, r.realized_share, &t);
    r.predicted = disp_pl_terms_min(&t, &r.binding);
    if (isinf(r.predicted)) {
        r.predicted = 0.0;
    }
    *ret = r;
    return 0;
}
