/* test_planner: dispatcher/planner/planner.c on synthetic profiles whose best plan
 * is worked out by hand in the comments (client CPU-bound, link-bound, no
 * stall, worker-bound with the workers-needed hint, heterogeneous workers,
 * no workers) plus FastFlow's Algorithm 1.
 *
 * The common profile: two units, decode (10 ms) and normalize (2 ms), no
 * read cost; 100 KB encoded, 150 KB after decode, 600 KB after normalize
 * (float32); receiving costs 1 ns per byte; the client has 4 cores.
 * So a = 0.012 s (everything locally) and
 *   b(0) = 0.012 + 1e-4 = 0.0121   (> a: shipping raw bytes never pays)
 *   b(1) = 0.002 + 1.5e-4 = 0.00215
 *   b(2) = 0.0006
 * and the client alone does 4 / 0.012 = 333.33 samples/s. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <jansson.h>

#include "client/lib/profile.h"
#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "dispatcher/config.h"
#include "dispatcher/disp.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/planner/first_plan.h"
#include "dispatcher/planner/link_cache.h"
#include "dispatcher/planner/planner.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures_planner.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"

static void base(disp_pl_input_t *in) { fx_pl_base(in, 4); }

static void add_class(disp_pl_input_t *in, uint32_t workers, double cores, double speed,
                      double bandwidth)
{
    disp_pl_class_t *c = &in->classes[in->nclasses++];
    memset(c, 0, sizeof(*c));
    c->workers = workers;
    c->cores = cores;
    c->profiled = 1;
    c->read_sec = in->read_sec / speed;
    for (uint32_t u = 0; u < in->nunits; u++) {
        c->unit_sec[u] = in->unit_sec[u] / speed;
    }
    c->bandwidth = bandwidth;
}

#define NEAR(x, want, tol) ck_assert_msg(fabs((x) - (want)) <= (tol), "%s = %.6f, want %.6f", #x, \
                                         (double)(x), (double)(want))

static const disp_pl_cand_t *chosen(const disp_pl_result_t *r) { return &r->cand[r->chosen]; }

/* Terms at fixed points, straight from the formula. */
START_TEST(test_terms)
{
    disp_pl_input_t in;
    base(&in);
    add_class(&in, 4, 8, 1.0, 1.25e9);
    disp_pl_terms_t t;
    disp_planner_terms(&in, 2, 0.5, &t);
    /* client = 4 / (0.5 * 0.012 + 0.5 * 0.0006) = 634.92 */
    NEAR(t.client, 4.0 / 0.0063, 1e-6);
    /* workers = 32 / 0.012 / 0.5 = 5333.3; network = 5e9 / 600e3 / 0.5 = 16666.7 */
    NEAR(t.worker, 32.0 / 0.012 / 0.5, 1e-6);
    NEAR(t.network, 5e9 / 600e3 / 0.5, 1e-6);
    ck_assert(isinf(t.consumer));
    disp_bind_e b;
    NEAR(disp_planner_predict(&in, 2, 0.5, &b), 4.0 / 0.0063, 1e-6);
    ck_assert_int_eq(b, DISP_BIND_CLIENT_CPU);
    /* F = 1: no remote term at all. */
    disp_planner_terms(&in, 2, 1.0, &t);
    ck_assert(isinf(t.worker) && isinf(t.network));
    NEAR(t.client, 4.0 / 0.012, 1e-9);
}
END_TEST

/* Worker-bound: 4 workers x 8 cores, 10 Gbit/s links.
 * K=2: R = min(32/0.012, 4*1.25e9/600e3) = 2666.67;
 *      F* = (4 - R b) / (4 + R (a - b)) = 2.4 / 34.4 = 0.069767;
 *      T = R / (1 - F*) = 2866.67 (client and workers balance).
 * K=1: R = 3200, F* < 0 -> F = 0, T = 4 / 0.00215 = 1860.47.
 * K=0: b > a -> F = 1 (the "off" plan, 333.33).
 * Best: K=2, bound by the workers (remote named at a balance point).
 * Hint: with n workers at K=2 the client-bound limit 4/0.0006 = 6666.67 is
 * reached when n * 8 / 0.012 >= 6666.67, n = 10; n = 9 gives 6033 (< 99 %):
 * 6 more workers. */
START_TEST(test_worker_bound_and_hint)
{
    disp_pl_input_t in;
    base(&in);
    add_class(&in, 4, 8, 1.0, 1.25e9);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert_uint_eq(r.ncand, 4); /* K = 0, 1, 2 and off */
    ck_assert_uint_eq(r.cand[0].split, 0);
    NEAR(r.cand[0].share, 1.0, 1e-12);
    NEAR(r.cand[1].share, 0.0, 1e-12);
    NEAR(r.cand[1].predicted, 4.0 / 0.00215, 1e-6);
    ck_assert_int_eq(r.cand[1].binding, DISP_BIND_CLIENT_CPU);
    NEAR(r.cand[2].share, 2.4 / 34.4, 1e-9);
    NEAR(r.cand[2].predicted, 2866.6667, 1e-3);
    ck_assert(r.cand[3].off);
    NEAR(r.local_rate, 333.3333, 1e-3);
    ck_assert_uint_eq(chosen(&r)->split, 2);
    ck_assert_int_eq(chosen(&r)->binding, DISP_BIND_WORKER_CPU);
    ck_assert_int_eq(r.off_rule, 0);
    ck_assert_uint_eq(r.workers_needed, 6);
    ck_assert_int_eq(r.hint_estimated, 0);
    NEAR(r.lifted_rate, 6666.6667, 1e-3);
}
END_TEST

/* Client CPU-bound: 100 workers, links unmeasured (no limit).
 * K=2: R = 800/0.012 = 66667 -> F = 0, T = 4/0.0006 = 6666.67 (client).
 * K=1: F = 0, T = 1860.47. Best K=2, F=0, bound by the client; more
 * workers cannot help. */
START_TEST(test_client_cpu_bound)
{
    disp_pl_input_t in;
    base(&in);
    add_class(&in, 100, 8, 1.0, 0);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert_uint_eq(chosen(&r)->split, 2);
    NEAR(chosen(&r)->share, 0.0, 1e-12);
    NEAR(chosen(&r)->predicted, 6666.6667, 1e-3);
    ck_assert_int_eq(chosen(&r)->binding, DISP_BIND_CLIENT_CPU);
    ck_assert_uint_eq(r.workers_needed, 0);
}
END_TEST

/* Link-bound: 100 workers but the client's ingress is 1 Gbit/s (1.25e8 B/s).
 * K=2: R = 1.25e8/600e3 = 208.33, F* = 3.875/6.375 = 0.607843, T = 531.25.
 * K=1: R = 1.25e8/150e3 = 833.33, F* = (4 - 1.791667)/(4 + 8.208333)
 *      = 0.180887, T = 833.33 / 0.819113 = 1017.36.
 * Best K=1 (ship the smaller uint8 crop, normalize locally), bound by the
 * network; workers would not help. */
START_TEST(test_link_bound)
{
    disp_pl_input_t in;
    base(&in);
    add_class(&in, 100, 8, 1.0, 1.25e9);
    in.client_bandwidth = 1.25e8;
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    NEAR(r.cand[2].predicted, 531.25, 1e-6);
    ck_assert_uint_eq(chosen(&r)->split, 1);
    NEAR(chosen(&r)->share, 2.208333333 / 12.208333333, 1e-6);
    NEAR(chosen(&r)->predicted, 1.25e8 / 150e3 / (1.0 - 2.208333333 / 12.208333333), 1e-3);
    ck_assert_int_eq(chosen(&r)->binding, DISP_BIND_NETWORK);
    ck_assert_uint_eq(r.workers_needed, 0);
}
END_TEST

/* Compression (planner.h). A heavy first unit (50 ms decode + crop, uint8
 * out) and a light second (1 ms, float32 out) on a 1-core client: locally
 * 1 / 0.051 = 19.6 samples/s. The codec measured on the client: ratio 2.5
 * after unit 0 (compress 0.5 ms, decompress 0.3 ms), 1.6 after unit 1. */
static void zbase(disp_pl_input_t *in, int with_codec)
{
    memset(in, 0, sizeof(*in));
    in->nunits = 2;
    in->unit_sec[0] = 0.050;
    in->unit_sec[1] = 0.001;
    in->bytes[0] = 100e3;
    in->bytes[1] = 150e3;
    in->bytes[2] = 600e3;
    in->recv_sec_per_byte = 1e-9;
    in->client_cores = 1;
    if (with_codec) {
        in->ratio[1] = 2.5;
        in->compress_sec[1] = 0.0005;
        in->decompress_sec[1] = 0.0003;
        in->ratio[2] = 1.6;
        in->compress_sec[2] = 0.002;
        in->decompress_sec[2] = 0.001;
    }
}

static const disp_pl_cand_t *find_cand(const disp_pl_result_t *r, uint32_t k, int compress)
{
    for (uint32_t i = 0; i < r->ncand; i++) {
        if (!r->cand[i].off && r->cand[i].split == k && r->cand[i].compress == compress) {
            return &r->cand[i];
        }
    }
    return NULL;
}

/* Link-bound: 100 Mbit/s of client ingress, 100 fast workers. Uncompressed,
 * K = 1 carries 1.25e7 / 150e3 = 83.3 samples/s at F = 0; with
 * b(1) = 0.001 + 150e-6 = 0.00115 and a = 0.051, F* = (1 - 83.3 b) /
 * (1 + 83.3 (a - b)) = 0.1755 and 101 samples/s. Compressed, the wire
 * carries 60 KB: 208.3 samples/s at F = 0 (2.5x), b = 0.001 + 60e-6 +
 * 0.0003 = 0.00136, F* = 0.0632, 222 samples/s, still network-bound. */
START_TEST(test_compress_link_bound)
{
    disp_pl_input_t in;
    zbase(&in, 1);
    add_class(&in, 100, 8, 1.0, 1.25e9);
    in.client_bandwidth = 1.25e7;
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    const disp_pl_cand_t *c = chosen(&r);
    ck_assert_int_eq(c->compress, 1);
    ck_assert_uint_eq(c->split, 1);
    ck_assert_int_eq(c->binding, DISP_BIND_NETWORK);
    const disp_pl_cand_t *u = find_cand(&r, 1, 0);
    ck_assert_ptr_nonnull(u);
    /* The link's limit at F = 0, compressed over uncompressed: the ratio. */
    NEAR(c->terms.network * (1.0 - c->share), 1.25e7 / 60e3, 1e-6);
    NEAR(u->terms.network * (1.0 - u->share), 1.25e7 / 150e3, 1e-6);
    double b = 0.001 + 60e-6 + 0.0003;
    double rr = 1.25e7 / 60e3;
    double fstar = (1.0 - rr * b) / (1.0 + rr * (0.051 - b));
    NEAR(c->share, fstar, 1e-9);
    NEAR(c->predicted, rr / (1.0 - fstar), 1e-6);
    ck_assert(c->predicted > 2.0 * u->predicted);
    /* Explained: a compressed row per compressible K, the reason says so. */
    ck_assert_uint_eq(r.ncand, 3 + 1 + 2);
    ck_assert_ptr_nonnull(find_cand(&r, 2, 1));
    ck_assert_ptr_null(find_cand(&r, 0, 1));
    ck_assert_ptr_nonnull(strstr(r.reason, "split 1 +zstd"));
    /* disp_planner_predict with compress set prices the compressed plan. */
    disp_pl_input_t z = in;
    z.compress = 1;
    NEAR(disp_planner_predict(&z, 1, c->share, NULL), c->predicted, 1e-6);
}
END_TEST

/* Worker-CPU-bound with the same ratios: one 1-core worker half the
 * client's speed on a fast link. Uncompressed K = 1 costs it 0.1 s; the
 * codec adds 0.5 ms x 2 (its speed relative to the client): never better. */
START_TEST(test_compress_worker_bound)
{
    disp_pl_input_t in;
    zbase(&in, 1);
    add_class(&in, 1, 1, 0.5, 1.25e9);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert_int_eq(chosen(&r)->compress, 0);
    ck_assert_int_eq(chosen(&r)->binding, DISP_BIND_WORKER_CPU);
    const disp_pl_cand_t *z = find_cand(&r, 1, 1);
    ck_assert_ptr_nonnull(z);
    /* Worker term at F = 0: 1 / (0.1 + 0.0005 * 2). */
    disp_pl_input_t zin = in;
    zin.compress = 1;
    disp_pl_terms_t t;
    disp_planner_terms(&zin, 1, 0.0, &t);
    NEAR(t.worker, 1.0 / 0.101, 1e-9);
    ck_assert(z->predicted <= chosen(&r)->predicted);
}
END_TEST

/* An older client sends no ratios: the link-bound input plans as before,
 * with no compressed candidate. */
START_TEST(test_compress_absent)
{
    disp_pl_input_t in;
    zbase(&in, 0);
    add_class(&in, 100, 8, 1.0, 1.25e9);
    in.client_bandwidth = 1.25e7;
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert_uint_eq(r.ncand, 3 + 1);
    ck_assert_int_eq(chosen(&r)->compress, 0);
    ck_assert_uint_eq(chosen(&r)->split, 1);
    ck_assert_ptr_null(strstr(r.reason, "zstd"));
    /* A ratio at or below DISP_PL_MIN_RATIO, or at boundary 0, counts as none. */
    in.ratio[0] = 3.0;
    in.ratio[1] = 1.04;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert_uint_eq(r.ncand, 3 + 1);
    ck_assert_int_eq(chosen(&r)->compress, 0);
}
END_TEST

/* No stall: a consumer at 300/s is within 10 % of the client alone
 * (333.33): off, although offloading would predict more. */
START_TEST(test_no_stall_off)
{
    disp_pl_input_t in;
    base(&in);
    add_class(&in, 4, 8, 1.0, 1.25e9);
    in.consumer_rate = 300;
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert(chosen(&r)->off);
    ck_assert_uint_eq(chosen(&r)->split, 0);
    NEAR(chosen(&r)->share, 1.0, 1e-12);
    ck_assert_int_eq(r.off_rule, 0); /* off was also the best: min(300, 333) everywhere */
    NEAR(chosen(&r)->predicted, 300, 1e-9);
    ck_assert_int_eq(chosen(&r)->binding, DISP_BIND_CONSUMER);

    /* 360/s: local 333 is within 10 % (>= 324), so still off -- by the rule,
     * since offloading would reach 360. */
    in.consumer_rate = 360;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert(chosen(&r)->off);
    ck_assert_int_eq(r.off_rule, 1);
    ck_assert_int_eq(chosen(&r)->binding, DISP_BIND_CLIENT_CPU);
}
END_TEST

/* Consumer at 1000/s: K=2 could do 2867. Target 1050 (5 % headroom):
 * F = (4/1050 - 0.0006) / 0.0114 = 0.281537 keeps the most work local;
 * K=1 reaches it too but only with F = 0.168479: K=2 wins the tie by
 * its larger local share. Nothing stalls. */
START_TEST(test_consumer_bound_largest_share)
{
    disp_pl_input_t in;
    base(&in);
    add_class(&in, 4, 8, 1.0, 1.25e9);
    in.consumer_rate = 1000;
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    NEAR(r.cand[1].share, (4.0 / 1050 - 0.00215) / 0.00985, 1e-9);
    ck_assert_uint_eq(chosen(&r)->split, 2);
    NEAR(chosen(&r)->share, (4.0 / 1050 - 0.0006) / 0.0114, 1e-9);
    NEAR(chosen(&r)->predicted, 1000, 1e-9);
    ck_assert_int_eq(chosen(&r)->binding, DISP_BIND_CONSUMER);
    ck_assert_uint_eq(r.workers_needed, 0);
    ck_assert_int_eq(r.off_rule, 0);
}
END_TEST

/* Heterogeneous: 2 workers x 4 cores at full speed and 2 at half speed.
 * K=2: R = 8/0.012 + 8/0.024 = 1000, F* = 3.4/15.4, T = 1283.33.
 * K=1: R = 8/0.010 + 8/0.020 = 1200, F* = 1.42/15.82, T = 1318.33.
 * Best K=1, bound by the workers. The reference class for the hint is the
 * first of the equally large ones (the fast one): at K=2 the client limit
 * 6666.67 needs 333.33 (3 + n) >= 6666.67, n = 17 (n = 16 gives 6350). */
START_TEST(test_heterogeneous)
{
    disp_pl_input_t in;
    base(&in);
    add_class(&in, 2, 4, 1.0, 0);
    add_class(&in, 2, 4, 0.5, 0);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    NEAR(r.cand[2].predicted, 1000.0 / (1.0 - 3.4 / 15.4), 1e-6);
    ck_assert_uint_eq(chosen(&r)->split, 1);
    NEAR(chosen(&r)->share, 1.42 / 15.82, 1e-9);
    NEAR(chosen(&r)->predicted, 1200.0 / (1.0 - 1.42 / 15.82), 1e-6);
    ck_assert_int_eq(chosen(&r)->binding, DISP_BIND_WORKER_CPU);
    ck_assert_uint_eq(r.workers_needed, 17);
    NEAR(r.lifted_rate, 6666.6667, 1e-3);

    /* An unprofiled class costs what the client measured. */
    in.classes[1].profiled = 0;
    disp_pl_terms_t t;
    disp_planner_terms(&in, 2, 0.0, &t);
    NEAR(t.worker, 16.0 / 0.012, 1e-6);
}
END_TEST

/* No workers: off, and the hint assumes client-speed workers (4 cores,
 * 333.33/s each at K=2): 20 reach the client limit of 6666.67. */
START_TEST(test_no_workers)
{
    disp_pl_input_t in;
    base(&in);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert(chosen(&r)->off);
    NEAR(chosen(&r)->predicted, 333.3333, 1e-3);
    ck_assert_int_eq(chosen(&r)->binding, DISP_BIND_CLIENT_CPU);
    ck_assert_uint_eq(r.workers_needed, 20);
    ck_assert_int_eq(r.hint_estimated, 1);
    ck_assert(strstr(r.reason, "no live worker") != NULL);
}
END_TEST

/* Garbage in: NaN/negative numbers are zero, bad shapes are refused. */
START_TEST(test_bad_inputs)
{
    disp_pl_input_t in;
    disp_pl_result_t r;
    base(&in);
    in.nunits = 0;
    ck_assert_int_eq(disp_planner_plan(&in, &r), -EINVAL);
    base(&in);
    in.nunits = DISP_PL_MAX_UNITS + 1;
    ck_assert_int_eq(disp_planner_plan(&in, &r), -EINVAL);
    base(&in);
    in.nclasses = DISP_PL_MAX_CLASSES + 1;
    ck_assert_int_eq(disp_planner_plan(&in, &r), -EINVAL);
    base(&in);
    add_class(&in, 4, 8, 1.0, 1.25e9);
    in.unit_sec[0] = NAN;
    in.recv_sec_per_byte = -1;
    in.consumer_rate = INFINITY;
    in.classes[0].cores = NAN;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    for (uint32_t i = 0; i < r.ncand; i++) {
        ck_assert(isfinite(r.cand[i].predicted));
        ck_assert(r.cand[i].share >= 0.0 && r.cand[i].share <= 1.0);
    }
    /* Everything zero: no information, predictions are 0, not infinite. */
    memset(&in, 0, sizeof(in));
    in.nunits = 1;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    ck_assert(isfinite(chosen(&r)->predicted));
}
END_TEST

/* FastFlow's ratio formula, by hand from utils.calculate_ratio_local_optimal. */
START_TEST(test_ff_ratio)
{
    /* lthp + rthp < gthp: 400 / 700. */
    NEAR(disp_ff_ratio_local(1000, 400, 300, 1, 0.5, 1), 400.0 / 700.0, 1e-12);
    /* ideal_off 600, decode_off 900, lthp < remote: off_data = 900 -> 0.1 */
    NEAR(disp_ff_ratio_local(1000, 400, 800, 1, 0.5, 1), 0.1, 1e-12);
    /* lthp > remote: off_data = (200 + 150) / 2 = 175 -> 325 / 500 */
    NEAR(disp_ff_ratio_local(500, 400, 200, 1, 0.5, 1), 0.65, 1e-12);
    /* unlimited consumer: lthp / (lthp + remote) */
    NEAR(disp_ff_ratio_local(INFINITY, 100, 100, 1, 0.5, 3), 0.25, 1e-12);
    /* never negative */
    NEAR(disp_ff_ratio_local(100, 10, 5000, 1, 0.5, 1), 0.0, 1e-12);
}
END_TEST

/* FastFlow on the worker-bound profile, unlimited consumer:
 * lthp = 333.33, element rthp = min(4/0.0006, 2666.67) = 2666.67,
 * ratio = 333.33 / 3000 = 0.1111 at K = 2 (all units remote).
 * Sluice predicts (2, 0.1111): client 4 / (0.1111*0.012 + 0.8889*0.0006)
 * = 2142.86 -- below the planner's own 2866.67 at F* = 0.0698. */
START_TEST(test_fastflow)
{
    disp_pl_input_t in;
    base(&in);
    add_class(&in, 4, 8, 1.0, 1.25e9);
    disp_ff_result_t f;
    ck_assert_int_eq(disp_planner_fastflow(&in, &f), 0);
    ck_assert(isinf(f.gthp));
    NEAR(f.lthp, 333.3333, 1e-3);
    NEAR(f.pcycle, 0.012, 1e-12);
    ck_assert_int_eq(f.cand[DISP_FF_MIDDLE].applicable, 0);
    NEAR(f.cand[DISP_FF_ELEMENT].rthp, 2666.6667, 1e-3);
    NEAR(f.cand[DISP_FF_ELEMENT].cycles, 0.0006, 1e-12);
    /* score = rthp + lthp (1 - cycles / pcycle) */
    NEAR(f.cand[DISP_FF_ELEMENT].score, 2666.6667 + 333.3333 * 0.95, 1e-3);
    ck_assert_int_eq(f.chosen, DISP_FF_ELEMENT); /* ties with "batch": first wins */
    ck_assert_uint_eq(f.split, 2);
    NEAR(f.share, 1.0 / 9.0, 1e-9);
    NEAR(f.predicted, 4.0 / (0.012 / 9.0 + 0.0006 * 8.0 / 9.0), 1e-6);
    ck_assert_int_eq(f.binding, DISP_BIND_CLIENT_CPU);

    /* No CPU bottleneck (consumer 400 <= 1.3 x 333): no offloading. */
    in.consumer_rate = 400;
    ck_assert_int_eq(disp_planner_fastflow(&in, &f), 0);
    ck_assert_int_eq(f.chosen, -1);
    NEAR(f.share, 1.0, 1e-12);
    NEAR(f.predicted, 333.3333, 1e-3);

    /* Consumer 1000: rthp = 1000, lthp + rthp >= gthp, dc_ratio 0.05,
     * decode_off = 700, off_data = max(1000, 700) -> ratio 0. */
    in.consumer_rate = 1000;
    ck_assert_int_eq(disp_planner_fastflow(&in, &f), 0);
    ck_assert_int_eq(f.chosen, DISP_FF_ELEMENT);
    NEAR(f.share, 0.0, 1e-12);
}
END_TEST


/* ------------------------------------------------------------ in the dispatcher */

/* ------------------------------------------------------------ whole splits (runtime F) */

/* Scenario A in miniature: one 3.5 ms unit, 150 KB out, 1 ns/B to
 * receive; two workers of 0.5 cores at client speed, so R = 285.7/s at
 * K = 1; an epoch of two splits, 256 + 144 positions, so the runtime's
 * shares are 0, 0.36 and 1. */
static void steps_input(disp_pl_input_t *in, double client_cores)
{
    memset(in, 0, sizeof(*in));
    in->nunits = 1;
    in->unit_sec[0] = 3.5e-3;
    in->bytes[0] = 100e3;
    in->bytes[1] = 150e3;
    in->recv_sec_per_byte = 1e-9;
    in->client_cores = client_cores;
    add_class(in, 2, 0.5, 1.0, 0.0);
    in->nsteps = 2;
    in->step_share[0] = 0.0;
    in->step_share[1] = 0.36;
    in->step_share[2] = 1.0;
}

/* F* = 0.17 continuous (345/s) is not something the runtime can do: with
 * two splits it keeps none local, 286/s. The 0.36 step would make the
 * 0.25-core client the bottleneck (184/s), so F = 0 is right. */
START_TEST(test_steps_small_share_rounds_to_zero)
{
    disp_pl_input_t in;
    disp_pl_result_t r;
    steps_input(&in, 0.25);
    in.nsteps = 0;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    const disp_pl_cand_t *c = &r.cand[1];
    NEAR(c->share, (0.25 - 285.714 * 0.15e-3) / (0.25 + 285.714 * 3.35e-3), 1e-3);
    NEAR(c->predicted, 344.9, 0.5);
    ck_assert(c->runtime_share == c->share);

    steps_input(&in, 0.25);
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    c = chosen(&r);
    ck_assert_uint_eq(c->split, 1);
    NEAR(c->share, 0.0, 0.0);
    NEAR(c->runtime_share, 0.0, 0.0);
    NEAR(c->predicted, 1.0 / 3.5e-3, 0.01);
    ck_assert_int_eq(c->binding, DISP_BIND_WORKER_CPU);
}
END_TEST

/* A 1-core client: the 0.36 step (446/s, workers bind) beats F = 0
 * (286/s); the runtime is handed 1/2, which keeps exactly one of the two
 * splits -- the short second one, 144 of 400 positions. */
START_TEST(test_steps_pick_and_runtime_share)
{
    disp_pl_input_t in;
    disp_pl_result_t r;
    steps_input(&in, 1.0);
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    const disp_pl_cand_t *c = chosen(&r);
    ck_assert_uint_eq(c->split, 1);
    NEAR(c->share, 0.36, 1e-12);
    NEAR(c->runtime_share, 0.5, 1e-12);
    NEAR(c->predicted, (1.0 / 3.5e-3) / 0.64, 0.01);
    ck_assert_int_eq(disp_plan_split_is_local(0, c->runtime_share), 0);
    ck_assert_int_eq(disp_plan_split_is_local(1, c->runtime_share), 1);
    /* The prediction is the model at the realized share. */
    NEAR(c->predicted, disp_planner_predict(&in, 1, 0.36, NULL), 1e-9);
}
END_TEST

/* j / n keeps exactly j of n splits for every n the planner lists, even
 * where j / n * n rounds below j. */
START_TEST(test_steps_runtime_rule_exact)
{
    for (uint32_t n = 1; n <= DISP_PL_MAX_STEPS; n++) {
        for (uint32_t j = 0; j <= n; j++) {
            uint32_t local = 0;
            for (uint32_t i = 0; i < n; i++) {
                local += (uint32_t)disp_plan_split_is_local(i, (double)j / (double)n);
            }
            ck_assert_msg(local == j, "n %u j %u: %u local", n, j, local);
        }
    }
}
END_TEST

/* A consumer that binds: the largest step that still reaches it with
 * client headroom (as the continuous rule), not the first. */
START_TEST(test_steps_consumer)
{
    disp_pl_input_t in;
    disp_pl_result_t r;
    steps_input(&in, 1.0);
    in.nsteps = 4;
    for (uint32_t j = 0; j <= 4; j++) {
        in.step_share[j] = j / 4.0;
    }
    /* F = 0.5: min(350, client 548, workers 571); F = 0.75: min(350,
     * client 375.6 >= 1.05 * 350, workers 1143). Client alone 286: not off. */
    in.consumer_rate = 350;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    NEAR(chosen(&r)->share, 0.75, 1e-12);
    ck_assert_int_eq(chosen(&r)->binding, DISP_BIND_CONSUMER);
    /* 400/s: only F = 0.5 reaches it. */
    in.consumer_rate = 400;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    NEAR(chosen(&r)->share, 0.5, 1e-12);
    NEAR(chosen(&r)->predicted, 400, 1e-9);
}
END_TEST

/* Broken ladders: too many steps is continuous; NaN, negative, falling or
 * > 1 values are cleaned, and every share stays in [0, 1]. FastFlow's
 * ratio is predicted at what the runtime makes of it. */
START_TEST(test_steps_bad_and_fastflow)
{
    disp_pl_input_t in;
    disp_pl_result_t r;
    disp_pl_result_t cont;
    steps_input(&in, 0.25);
    in.nsteps = DISP_PL_MAX_STEPS + 1;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    in.nsteps = 0;
    ck_assert_int_eq(disp_planner_plan(&in, &cont), 0);
    NEAR(chosen(&r)->share, chosen(&cont)->share, 0.0);

    steps_input(&in, 1.0);
    in.nsteps = 4;
    in.step_share[0] = NAN;
    in.step_share[1] = 0.9;
    in.step_share[2] = 0.2; /* falls: taken as 0.9 */
    in.step_share[3] = 7.0; /* > 1: 1 */
    in.step_share[4] = -1;  /* the top is 1 whatever it says */
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    for (uint32_t i = 0; i < r.ncand; i++) {
        ck_assert(r.cand[i].share >= 0.0 && r.cand[i].share <= 1.0);
        ck_assert(r.cand[i].runtime_share >= 0.0 && r.cand[i].runtime_share <= 1.0);
        ck_assert(isfinite(r.cand[i].predicted));
    }
    NEAR(disp_planner_realized_share(&in, 0.5), 0.9, 0.0);
    NEAR(disp_planner_realized_share(&in, 0.74), 0.9, 0.0);
    NEAR(disp_planner_realized_share(&in, 0.75), 1.0, 0.0);
    NEAR(disp_planner_realized_share(&in, NAN), 1.0, 0.0);

    disp_ff_result_t ff;
    steps_input(&in, 0.25);
    ck_assert_int_eq(disp_planner_fastflow(&in, &ff), 0);
    ck_assert(ff.chosen >= 0);
    ck_assert(ff.share > 0.0 && ff.share < 0.5); /* its ratio, kept as FastFlow says */
    NEAR(ff.realized_share, 0.0, 0.0);             /* ... which keeps no split local */
    NEAR(ff.predicted, disp_planner_predict(&in, ff.split, 0.0, NULL), 1e-9);
}
END_TEST

/* The per-sample overhead the client measured (sample_sec) is charged to
 * local and received samples alike: the client's limit falls and the
 * balance point moves towards the workers, F* = (P - R (b + c)) /
 * (P + R (a - b)). */
START_TEST(test_sample_overhead)
{
    disp_pl_input_t in;
    disp_pl_result_t r;
    steps_input(&in, 0.25);
    in.nsteps = 0;
    in.sample_sec = 0.3e-3;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    const disp_pl_cand_t *c = &r.cand[1];
    double R = 1.0 / 3.5e-3;
    NEAR(c->share, (0.25 - R * 0.45e-3) / (0.25 + R * 3.35e-3), 1e-9);
    disp_pl_terms_t t;
    disp_planner_terms(&in, 1, 0.0, &t);
    NEAR(t.client, 0.25 / 0.45e-3, 1e-6);
    disp_planner_terms(&in, 0, 1.0, &t);
    NEAR(t.client, 0.25 / 3.8e-3, 1e-6); /* local samples pay it too */
    /* Broken values count as 0. */
    in.sample_sec = NAN;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    NEAR(r.cand[1].share, (0.25 - R * 0.15e-3) / (0.25 + R * 3.35e-3), 1e-9);
    in.sample_sec = -1;
    disp_planner_terms(&in, 1, 0.0, &t);
    NEAR(t.client, 0.25 / 0.15e-3, 1e-6);
}
END_TEST

/* ------------------------------------------------------------ per-node share (#8) */

/* Two ranks of a two-rank job on one node: each rank's plan is the node's
 * plan halved (same K and F), so the two add up to the node. */
START_TEST(test_rank_share_adds_up)
{
    disp_pl_input_t node;
    steps_input(&node, 1.0);
    node.nsteps = 0;
    node.client_bandwidth = 40e6;
    node.classes[0].bandwidth = 30e6;
    disp_pl_input_t rank = node;
    disp_planner_rank_share(&rank, 2, 2);
    NEAR(rank.client_cores, 0.5, 1e-12);
    NEAR(rank.client_bandwidth, 20e6, 1e-6);
    NEAR(rank.classes[0].cores, 0.25, 1e-12);
    NEAR(rank.classes[0].bandwidth, 15e6, 1e-6);
    ck_assert_uint_eq(rank.classes[0].workers, 2);
    disp_pl_result_t rn;
    disp_pl_result_t rr;
    ck_assert_int_eq(disp_planner_plan(&node, &rn), 0);
    ck_assert_int_eq(disp_planner_plan(&rank, &rr), 0);
    ck_assert_uint_eq(chosen(&rr)->split, chosen(&rn)->split);
    NEAR(chosen(&rr)->share, chosen(&rn)->share, 1e-9);
    NEAR(2 * chosen(&rr)->predicted, chosen(&rn)->predicted, 1e-6);

    /* World 3, two of them here: half the node, a third of the workers. */
    rank = node;
    disp_planner_rank_share(&rank, 2, 3);
    NEAR(rank.client_cores, 0.5, 1e-12);
    NEAR(rank.classes[0].cores, 0.5 / 3, 1e-12);
    NEAR(rank.classes[0].bandwidth, 10e6, 1e-6);
    /* 0 and 1 leave the inputs whole. */
    rank = node;
    disp_planner_rank_share(&rank, 0, 1);
    ck_assert(memcmp(&rank, &node, sizeof(rank)) == 0);
}
END_TEST

/* A job through the dispatcher's service functions: SubmitJob with
 * PlannerInputs plans before the first epoch; a second worker re-plans
 * (version 2, a smaller local share) and the new share reaches only splits
 * never handed out; handed-out splits keep their split point; every split
 * of every epoch is acknowledged exactly once across the re-plans. */

/* Local splits that were never handed out follow the share rule. */
static void check_unplanned_follow(disp_job_t *job)
{
    for (uint32_t k = 0; k < job->nep; k++) {
        for (uint32_t i = 0; i < job->nsplits; i++) {
            const disp_split_t *s = &job->ep[k].splits[i];
            if (s->state == DISP_SPLIT_PENDING && !s->planned) {
                ck_assert_int_eq(s->local, disp_plan_split_is_local(i, job->plan.local_share));
            }
        }
    }
}

START_TEST(test_dispatcher_replan)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    Sluice__SubmitJobRequest req;
    fx_pin_request(&pin, &req);
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_int_eq(disp_svc_submit_job(d, &req, &resp, &a, now, err, sizeof(err)), SL_RPC_OK);
    ck_assert_ptr_nonnull(resp.explain);
    ck_assert_uint_eq(resp.explain->n_candidates, 5); /* K = 0..3 and off */
    ck_assert_str_eq(resp.plan->mode, "auto");
    ck_assert(resp.plan->predicted_samples_per_sec > 300);
    ck_assert_uint_eq(resp.plan->version, 1);
    double share1 = resp.plan->local_share;
    ck_assert(share1 > 0.45 && share1 < 0.55);
    uint32_t split1 = resp.plan->split;
    ck_assert(split1 >= 1);
    uint64_t jid = resp.job_id;
    disp_arena_free(&a);

    pthread_mutex_lock(&d->mu);
    disp_job_t *job = disp_jobs_find(&d->jobs, jid);
    ck_assert_ptr_nonnull(job->planner);
    check_unplanned_follow(job);
    json_t *j = disp_planner_status_json(job);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "plan"), "version")),
                     1);
    json_decref(j);
    /* The profiles are cached by (spec hash, host). */
    const disp_hprof_t *cached[4];
    ck_assert_uint_eq(disp_pcache_list(d->pcache, 42, now, cached, 4), 2);
    /* Nothing changed: no re-plan. */
    disp_planner_tick(d, now + 100);
    ck_assert_uint_eq(job->plan.version, 1);

    /* A split handed out now keeps split1 whatever comes later. */
    uint64_t held = job->client_ids[0];
    pthread_mutex_unlock(&d->mu);

    uint64_t w2 = fx_disp_register(d, "127.0.0.1:10", 2, 0, now + 200);
    ck_assert_uint_ne(w1, w2);
    pthread_mutex_lock(&d->mu);
    disp_planner_tick(d, now + 300);
    ck_assert_uint_eq(job->plan.version, 2);
    ck_assert(job->plan.local_share < share1 - 0.1);
    ck_assert_uint_eq(job->planner->replans, 1);
    check_unplanned_follow(job);
    /* Force a different split point: new hand-outs get it, old ones not. */
    job->plan.split = split1 == 3 ? 2 : 3;
    disp_jobs_replan(&d->jobs, job, now + 300);
    uint64_t epoch = 0;
    const disp_split_t *hs = disp_job_split(job, held, &epoch, NULL, NULL);
    ck_assert_ptr_nonnull(hs);
    ck_assert_int_eq(hs->planned, 1);
    ck_assert_uint_eq(hs->stage_to, split1);
    pthread_mutex_unlock(&d->mu);

    /* Acknowledge everything, re-planning (a worker lost, one joining)
     * along the way: every split of every epoch exactly once. */
    uint64_t acked = 0;
    int64_t t = now + 400;
    for (int round = 0; round < 10000; round++) {
        pthread_mutex_lock(&d->mu);
        if (job->state != DISP_JOB_ACTIVE) {
            pthread_mutex_unlock(&d->mu);
            break;
        }
        if (round == 5) {
            disp_jobs_worker_lost(&d->jobs, w2, t);
        }
        uint64_t ids[512];
        size_t n = 0;
        for (uint32_t k = 0; k < job->nclient && n < 512; k++) {
            ids[n++] = job->client_ids[k];
        }
        for (size_t w = 0; w < job->njw; w++) {
            for (uint32_t k = 0; k < job->jw[w].n && n < 512; k++) {
                ids[n++] = job->jw[w].ids[k];
            }
        }
        acked += disp_jobs_ack(&d->jobs, job, ids, n, t);
        acked += disp_jobs_ack(&d->jobs, job, ids, n, t); /* repeats count nothing */
        pthread_mutex_unlock(&d->mu);
        if (round == 8) {
            (void)fx_disp_register(d, "127.0.0.1:11", 2, 0, t);
        }
        pthread_mutex_lock(&d->mu);
        disp_planner_tick(d, t);
        check_unplanned_follow(job);
        pthread_mutex_unlock(&d->mu);
        t += 100;
    }
    ck_assert_int_eq(job->state, DISP_JOB_FINISHED);
    ck_assert_uint_eq(acked, 3 * 20);
    /* A report's per-sample overhead goes into the cached client profile,
     * and GetPlanContext hands it to the next job's client. */
    Sluice__ReportRatesRequest rr = SLUICE__REPORT_RATES_REQUEST__INIT;
    rr.job_secret = (char *)FX_JOB_SECRET;
    rr.overhead_cpu_sec_per_sample = 1e-3;
    rr.delivered_per_sec = 0.3 * job->plan.predicted; /* slow, but steady */
    pthread_mutex_lock(&d->mu);
    disp_planner_on_rates(d, job, &rr, t);
    ck_assert(job->planner->have_sample_sec);
    double fixed = job->planner->measured_sample_sec;
    ck_assert(fixed > 0.5e-3 && fixed <= 1e-3);
    /* A stalled window (a batch held open, nothing delivered) reports far
     * more overhead per sample; the job re-plans with it, the cache keeps
     * the steady figure for the next job. */
    Sluice__ReportRatesRequest stall = rr;
    stall.overhead_cpu_sec_per_sample = 5e-3;
    stall.delivered_per_sec = 0.4 * rr.delivered_per_sec;
    disp_planner_on_rates(d, job, &stall, t);
    ck_assert(job->planner->measured_sample_sec > 4e-3);
    ck_assert(!disp_pjob_steady(job->planner));
    /* A peer's nonsense rate is no window at all: not steady, and the
     * average it is judged against stays a number. */
    stall.delivered_per_sec = NAN;
    disp_planner_on_rates(d, job, &stall, t);
    ck_assert(!disp_pjob_steady(job->planner));
    ck_assert(isfinite(job->planner->rate_avg));
    stall.delivered_per_sec = INFINITY;
    disp_planner_on_rates(d, job, &stall, t);
    ck_assert(!disp_pjob_steady(job->planner));
    ck_assert(isfinite(job->planner->rate_avg));
    pthread_mutex_unlock(&d->mu);
    Sluice__PlanContextRequest creq = SLUICE__PLAN_CONTEXT_REQUEST__INIT;
    Sluice__PlanContextResponse cresp = SLUICE__PLAN_CONTEXT_RESPONSE__INIT;
    creq.spec_hash = 42;
    ck_assert_int_eq(disp_svc_get_plan_context(d, &creq, &cresp, &a, t, err, sizeof(err)),
                     SL_RPC_OK);
    int seen = 0;
    for (size_t i = 0; i < cresp.n_cached; i++) {
        if (strcmp(cresp.cached[i]->host, "client test") == 0) {
            NEAR(cresp.cached[i]->sample_overhead_sec, fixed, 1e-15);
            /* The cost model too: a fixed-plan job's client sizes splits by it. */
            const double coef[SL_COST_NPARAM] = FX_PIN_COEF;
            ck_assert_uint_eq(cresp.cached[i]->n_cost_model_coef, SL_COST_NPARAM);
            for (int k = 0; k < SL_COST_NPARAM; k++) {
                NEAR(cresp.cached[i]->cost_model_coef[k], coef[k], 0.0);
            }
            seen = 1;
        } else {
            NEAR(cresp.cached[i]->sample_overhead_sec, 0.0, 0.0); /* workers: none */
        }
    }
    ck_assert(seen);
    disp_arena_free(&a);

    /* Unit costs the job measured under load replace the cached client
     * profile's: only units matched by name with enough samples. */
    Sluice__StageStat st[4];
    Sluice__StageStat *pst[4] = {&st[0], &st[1], &st[2], &st[3]};
    const char *sn[4] = {"decode_jpeg+center_crop", "flip", "no such unit", "normalize"};
    const uint64_t ss[4] = {DISP_PCACHE_MIN_UNIT_SAMPLES, DISP_PCACHE_MIN_UNIT_SAMPLES - 1, 500,
                            500};
    const double sc[4] = {13e-3, 13e-3, 13e-3, 1e3}; /* the last: no unit costs 1000 s */
    for (int u = 0; u < 4; u++) {
        sluice__stage_stat__init(&st[u]);
        st[u].name = (char *)sn[u];
        st[u].cpu_sec_per_sample = sc[u];
        st[u].samples = ss[u];
    }
    rr.n_stages = 4;
    rr.stages = pst;
    pthread_mutex_lock(&d->mu);
    disp_planner_on_rates(d, job, &rr, t + 1);
    pthread_mutex_unlock(&d->mu);
    Sluice__PlanContextResponse cresp2 = SLUICE__PLAN_CONTEXT_RESPONSE__INIT;
    ck_assert_int_eq(disp_svc_get_plan_context(d, &creq, &cresp2, &a, t + 1, err, sizeof(err)),
                     SL_RPC_OK);
    seen = 0;
    for (size_t i = 0; i < cresp2.n_cached; i++) {
        const Sluice__HostProfile *hp = cresp2.cached[i];
        ck_assert_uint_eq(hp->n_units, 3);
        if (strcmp(hp->host, "client test") == 0) {
            NEAR(hp->units[0]->cpu_sec_per_sample, 13e-3, 1e-15); /* measured */
            NEAR(hp->units[1]->cpu_sec_per_sample, 0.01e-3, 1e-15); /* too few samples */
            NEAR(hp->units[2]->cpu_sec_per_sample, 0.05e-3, 1e-15); /* absurd; unknown name */
            seen = 1;
        } else {
            NEAR(hp->units[0]->cpu_sec_per_sample, 10e-3, 1e-15); /* workers: untouched */
        }
    }
    ck_assert(seen);
    disp_arena_free(&a);
    ck_assert(job->plan.version >= 3);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* PlanJob plans without creating a job; GetPlanContext lists workers and
 * hands back the cached profiles. */
START_TEST(test_dispatcher_plan_job)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    Sluice__SubmitJobRequest req;
    fx_pin_request(&pin, &req);
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_int_eq(disp_svc_plan_job(d, &req, &resp, &a, now, err, sizeof(err)), SL_RPC_OK);
    ck_assert_uint_eq(resp.job_id, 0);
    ck_assert_ptr_nonnull(resp.explain);
    ck_assert_ptr_nonnull(resp.explain->json);
    json_error_t je;
    json_t *j = json_loads(resp.explain->json, 0, &je);
    ck_assert_ptr_nonnull(j);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "candidates")), 5);
    json_decref(j);
    ck_assert_uint_eq(d->jobs.n, 0);
    disp_arena_free(&a);

    Sluice__PlanContextRequest creq = SLUICE__PLAN_CONTEXT_REQUEST__INIT;
    Sluice__PlanContextResponse cresp = SLUICE__PLAN_CONTEXT_RESPONSE__INIT;
    creq.spec_hash = 42;
    ck_assert_int_eq(disp_svc_get_plan_context(d, &creq, &cresp, &a, now, err, sizeof(err)),
                     SL_RPC_OK);
    ck_assert_uint_eq(cresp.n_workers, 1);
    ck_assert_uint_eq(cresp.workers[0]->worker_id, w1);
    ck_assert_uint_eq(cresp.n_cached, 2);
    ck_assert_int_eq(cresp.cached[0]->cached, 1);
    ck_assert_uint_eq(cresp.cached[0]->n_units, 3);
    disp_arena_free(&a);

    /* A profile for another pipeline is refused: plain PlanJob error. */
    pin.client.n_units = 2;
    ck_assert_int_eq(disp_svc_plan_job(d, &req, &resp, &a, now, err, sizeof(err)), -EINVAL);
    disp_arena_free(&a);
    /* ... while SubmitJob falls back to the unplanned "all". */
    Sluice__SubmitJobResponse sresp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    req.source_fingerprint = 99;
    ck_assert_int_eq(disp_svc_submit_job(d, &req, &sresp, &a, now, err, sizeof(err)),
                     SL_RPC_OK);
    ck_assert_str_eq(sresp.plan->mode, "auto(all: no profile)");
    ck_assert_ptr_null(sresp.explain);
    disp_arena_free(&a);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* A short job profiles a twentieth of its samples (at least 32), a long
 * one the default 200; the rank's share counts, and nothing overflows. */
START_TEST(test_profile_samples_for)
{
    ck_assert_uint_eq(cl_profile_samples_for(400, 1, 1), CL_PROFILE_MIN_SAMPLES);
    ck_assert_uint_eq(cl_profile_samples_for(400, 6, 1), 120);
    ck_assert_uint_eq(cl_profile_samples_for(4800, 1, 2), 120);
    ck_assert_uint_eq(cl_profile_samples_for(1281167, 90, 8), SL_PROFILE_DEFAULT_SAMPLES);
    ck_assert_uint_eq(cl_profile_samples_for(400, 1, 4), CL_PROFILE_MIN_SAMPLES);
    ck_assert_uint_eq(cl_profile_samples_for(0, 0, 0), CL_PROFILE_MIN_SAMPLES);
    ck_assert_uint_eq(cl_profile_samples_for(UINT64_MAX, UINT64_MAX, 1),
                      SL_PROFILE_DEFAULT_SAMPLES);
}
END_TEST

/* The link cache (dispatcher/planner/link_cache.h): one entry per (client, class),
 * replaced in place, fresh for DISP_LINK_TTL_MS, the oldest evicted when
 * full; nonsense (no client, a key too long, a bandwidth that is not a
 * positive number) is not stored. */
START_TEST(test_link_cache)
{
    disp_lcache_t *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    const disp_link_t *got[DISP_LINK_MAX + 1];
    disp_lcache_put(c, "client a", "k1", 1e8, 2e-9, 1, 1000);
    disp_lcache_put(c, "client a", "", 5e7, 0.0, 2, 1000);
    disp_lcache_put(c, "client b", "k1", 3e8, 0.0, 1, 1000);
    disp_lcache_put(c, "client a", "k1", 2e8, NAN, 1, 2000); /* replaces; recv cleaned */
    ck_assert_uint_eq(disp_lcache_list(c, "client a", 2000, got, 8), 2);
    for (int i = 0; i < 2; i++) {
        if (strcmp(got[i]->class_key, "k1") == 0) {
            NEAR(got[i]->bandwidth, 2e8, 0.0);
            NEAR(got[i]->recv_cpu_per_byte, 0.0, 0.0);
        } else {
            ck_assert_str_eq(got[i]->class_key, "");
            ck_assert_uint_eq(got[i]->streams, 2);
        }
    }
    ck_assert_uint_eq(disp_lcache_list(c, "client c", 2000, got, 8), 0);
    ck_assert_uint_eq(disp_lcache_list(c, "", 2000, got, 8), 0);
    /* A job's fitted receive cost replaces the class entries' (their age
     * kept), not the ingress one's, not another client's; nonsense is
     * ignored. */
    disp_lcache_note_recv(c, "client a", 0.7e-9, 2500);
    disp_lcache_note_recv(c, "client a", NAN, 2500);
    disp_lcache_note_recv(c, "client a", -1.0, 2500);
    disp_lcache_note_recv(c, "", 0.1e-9, 2500);
    disp_lcache_note_recv(NULL, "client a", 0.1e-9, 2500);
    ck_assert_uint_eq(disp_lcache_list(c, "client a", 2500, got, 8), 2);
    for (int i = 0; i < 2; i++) {
        NEAR(got[i]->recv_cpu_per_byte, got[i]->class_key[0] != '\0' ? 0.7e-9 : 0.0, 0.0);
        ck_assert_int_eq(got[i]->stored_ms, got[i]->class_key[0] != '\0' ? 2000 : 1000);
    }
    ck_assert_uint_eq(disp_lcache_list(c, "client b", 2500, got, 8), 1);
    NEAR(got[0]->recv_cpu_per_byte, 0.0, 0.0);
    /* Expiry: the ingress (stored at 1000) goes, the replaced class entry
     * (2000) is still fresh a millisecond before its own end. */
    ck_assert_uint_eq(disp_lcache_list(c, "client a", 1000 + DISP_LINK_TTL_MS, got, 8), 1);
    ck_assert_uint_eq(disp_lcache_list(c, "client a", 2000 + DISP_LINK_TTL_MS, got, 8), 0);
    char long_key[DISP_LINK_KEY_MAX + 8];
    memset(long_key, 'x', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    disp_lcache_put(c, "client d", "k", 0.0, 0.0, 1, 3000);
    disp_lcache_put(c, "client d", "k", -1.0, 0.0, 1, 3000);
    disp_lcache_put(c, "client d", "k", INFINITY, 0.0, 1, 3000);
    disp_lcache_put(c, "client d", long_key, 1e8, 0.0, 1, 3000);
    disp_lcache_put(c, long_key, "k", 1e8, 0.0, 1, 3000);
    disp_lcache_put(c, "", "k", 1e8, 0.0, 1, 3000);
    ck_assert_uint_eq(disp_lcache_list(c, "client d", 3000, got, 8), 0);
    /* Full: every new link evicts the oldest. */
    for (int i = 0; i < DISP_LINK_MAX + 10; i++) {
        char key[32];
        snprintf(key, sizeof(key), "k%d", i);
        disp_lcache_put(c, "client e", key, 1e8 + i, 0.0, 1, 10000 + i);
    }
    ck_assert_uint_eq(disp_lcache_list(c, "client e", 20000, got, DISP_LINK_MAX + 1),
                      DISP_LINK_MAX);
    ck_assert_uint_eq(disp_lcache_list(c, "client a", 20000, got, 8), 0);
    for (size_t i = 0; i < DISP_LINK_MAX; i++) {
        ck_assert(got[i]->bandwidth >= 1e8 + 10); /* k0..k9, the oldest, went */
    }
    free(c);
}
END_TEST

/* A client's probed links come back to it (and only to it) from
 * GetPlanContext after its job was planned; links it sent as cached are
 * not stored again. */
START_TEST(test_dispatcher_links_roundtrip)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    pin.in.client_host = "client test";
    pin.cls.bandwidth_bytes_per_sec = 1.25e8;
    pin.in.recv_cpu_sec_per_byte = 3e-10;
    pin.in.client_bandwidth = 1.2e8;
    pin.in.client_ingress_streams = 2;
    Sluice__SubmitJobRequest req;
    fx_pin_request(&pin, &req);
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_int_eq(disp_svc_plan_job(d, &req, &resp, &a, now, err, sizeof(err)), SL_RPC_OK);
    disp_arena_free(&a);

    Sluice__PlanContextRequest creq = SLUICE__PLAN_CONTEXT_REQUEST__INIT;
    Sluice__PlanContextResponse cresp = SLUICE__PLAN_CONTEXT_RESPONSE__INIT;
    creq.spec_hash = 42;
    creq.client_host = "client test";
    ck_assert_int_eq(disp_svc_get_plan_context(d, &creq, &cresp, &a, now + 1500, err,
                                               sizeof(err)),
                     SL_RPC_OK);
    ck_assert_uint_eq(cresp.n_links, 2);
    for (size_t i = 0; i < cresp.n_links; i++) {
        const Sluice__LinkProbe *l = cresp.links[i];
        NEAR(l->age_sec, 1.5, 1e-9);
        if (l->class_key[0] == '\0') {
            NEAR(l->bandwidth_bytes_per_sec, 1.2e8, 0.0);
            ck_assert_uint_eq(l->streams, 2);
        } else {
            ck_assert_str_eq(l->class_key, pin.cls.key);
            NEAR(l->bandwidth_bytes_per_sec, 1.25e8, 0.0);
            NEAR(l->recv_cpu_sec_per_byte, 3e-10, 0.0);
        }
    }
    disp_arena_free(&a);
    /* Another client, or an older one (no host): nothing. */
    Sluice__PlanContextResponse other = SLUICE__PLAN_CONTEXT_RESPONSE__INIT;
    creq.client_host = "client elsewhere";
    ck_assert_int_eq(disp_svc_get_plan_context(d, &creq, &other, &a, now, err, sizeof(err)),
                     SL_RPC_OK);
    ck_assert_uint_eq(other.n_links, 0);
    disp_arena_free(&a);

    /* Links the client took from the cache are not stored again: the
     * entry keeps its bandwidth and its age. */
    pin.in.links_cached = 1;
    pin.cls.bandwidth_bytes_per_sec = 9e9;
    ck_assert_int_eq(disp_svc_plan_job(d, &req, &resp, &a, now + 2000, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
    Sluice__PlanContextResponse again = SLUICE__PLAN_CONTEXT_RESPONSE__INIT;
    creq.client_host = "client test";
    ck_assert_int_eq(disp_svc_get_plan_context(d, &creq, &again, &a, now + 3000, err,
                                               sizeof(err)),
                     SL_RPC_OK);
    ck_assert_uint_eq(again.n_links, 2);
    for (size_t i = 0; i < again.n_links; i++) {
        NEAR(again.links[i]->age_sec, 3.0, 1e-9);
        ck_assert(again.links[i]->bandwidth_bytes_per_sec < 2e8);
    }
    disp_arena_free(&a);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* Drift: counted from 3 s after the plan, due after 10 s of > 15 %; a
 * re-plan that changes nothing doubles the window; the measured consumer
 * rate and client unit costs feed the next plan. */
/* The planner's codec choice reaches the workers: a link-bound job (the
 * client takes in 9.6 KB/s, 50 samples/s of the 192-byte crop) whose
 * client measured ratio 2.5 after the crop is planned compressed, and the
 * worker's first assignment of every split says compress (fixed with
 * stage_to). The same job without codec numbers (an older client) is not. */
static void heartbeat_compress(int with_codec)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    double ratio[4] = {1.0, 2.5, 2.5, 1.6};
    double zsec[4] = {0.0, 1e-5, 1e-5, 4e-5};
    pin.in.client_bandwidth = 9600;
    if (with_codec) {
        pin.in.n_codec_ratio = 4;
        pin.in.codec_ratio = ratio;
        pin.in.n_codec_compress_sec_per_sample = 4;
        pin.in.codec_compress_sec_per_sample = zsec;
        pin.in.n_codec_decompress_sec_per_sample = 4;
        pin.in.codec_decompress_sec_per_sample = zsec;
    }
    Sluice__SubmitJobRequest req;
    fx_pin_request(&pin, &req);
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_int_eq(disp_svc_submit_job(d, &req, &resp, &a, now, err, sizeof(err)), SL_RPC_OK);
    ck_assert_str_eq(resp.plan->mode, "auto");
    ck_assert_int_eq(resp.plan->compress, with_codec);
    ck_assert(resp.plan->split >= 1 && resp.plan->local_share < 1.0);
    uint32_t split = resp.plan->split;
    const Sluice__PlanExplain *e = resp.explain;
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->candidates[e->chosen]->compress, with_codec);
    ck_assert_uint_eq(e->n_candidates, with_codec ? 5 + 3 : 5); /* K = 1..3 compressible */
    disp_arena_free(&a);

    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse hresp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    hreq.version = SL_PROTOCOL_VERSION;
    hreq.worker_id = w1;
    ck_assert_int_eq(disp_svc_heartbeat(d, &hreq, &hresp, &a, now + 100, err, sizeof(err)), 0);
    ck_assert_uint_gt(hresp.n_assign, 0);
    for (size_t i = 0; i < hresp.n_assign; i++) {
        ck_assert_uint_eq(hresp.assign[i]->stage_to, split);
        ck_assert_int_eq(hresp.assign[i]->compress, with_codec);
    }
    disp_arena_free(&a);
    fx_disp_destroy(d);
    free(d);
}

START_TEST(test_dispatcher_assign_compress)
{
    heartbeat_compress(1);
    heartbeat_compress(0);
}
END_TEST

START_TEST(test_drift)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    sl_spec_t spec;
    char err[512];
    ck_assert_int_eq(
        sl_spec_parse("t", FX_PIN_SPEC, strlen(FX_PIN_SPEC), &spec, err, sizeof(err)), 0);
    disp_pjob_t *pj = NULL;
    ck_assert_int_eq(disp_pjob_new(&pin.in, &spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
    disp_plan_t plan;
    ck_assert_int_eq(disp_plan_compute(&spec, &plan, err, sizeof(err)), 0);
    disp_pjob_plan(pj, &d->reg, &plan, now, "submit");
    double pred = plan.predicted;
    ck_assert(pred > 300);

    Sluice__ReportRatesRequest r = SLUICE__REPORT_RATES_REQUEST__INIT;

    r.job_secret = (char *)FX_JOB_SECRET;
    r.delivered_per_sec = pred * 0.5;
    char why[160];
    /* Within the warm-up: nothing. */
    disp_pjob_rates(pj, &r, now + 1000);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1000, why, sizeof(why)), 0);
    /* Drifting from 3.5 s on; not yet 10 s of it at 13 s. */
    for (int64_t t = now + 3500; t <= now + 13000; t += 500) {
        disp_pjob_rates(pj, &r, t);
        ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, t, why, sizeof(why)), 0);
    }
    /* A good report in between restarts the count. */
    r.delivered_per_sec = pred * 0.9;
    disp_pjob_rates(pj, &r, now + 13200);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 13200, why, sizeof(why)), 0);
    r.delivered_per_sec = pred * 0.5;
    int64_t t = now + 13500;
    for (; t < now + 23500; t += 500) {
        disp_pjob_rates(pj, &r, t);
        ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, t, why, sizeof(why)), 0);
    }
    disp_pjob_rates(pj, &r, t);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, t, why, sizeof(why)), 2);
    ck_assert(strstr(why, "drift") != NULL);

    /* Re-plan with what was measured: a consumer at 100/s binds. */
    r.consumer_rate = 100;
    Sluice__StageStat st = SLUICE__STAGE_STAT__INIT;
    Sluice__StageStat *pst = &st;
    st.name = "normalize";
    st.cpu_sec_per_sample = 0.5e-3; /* 10x the profile */
    st.samples = 500;
    r.n_stages = 1;
    r.stages = &pst;
    /* The client's measured overhead per sample, minus what the model
     * already charges under the plan measured (read for the local share,
     * per-byte receive for the rest), becomes sample_sec. */
    uint32_t k0 = pj->plan_split;
    double f0 = pj->plan_share;
    double known = f0 * pj->input.read_sec +
                   (1.0 - f0) * pj->input.recv_sec_per_byte * pj->input.bytes[k0];
    r.overhead_cpu_sec_per_sample = known + 0.2e-3;
    disp_pjob_rates(pj, &r, t);
    disp_plan_t before = plan;
    const disp_plan_t orig = plan;
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    NEAR(pj->input.sample_sec, 0.2e-3, 1e-12);
    /* Below what the model counts: no overhead, never negative. */
    pj->plan_split = 0; /* as if K = 0, F = 0 was measured: 100 KB at 1 ns/B */
    pj->plan_share = 0.0;
    r.overhead_cpu_sec_per_sample = 0.5 * 100e3 * 1e-9;
    r.recv_cpu_sec_per_byte = pj->input.recv_sec_per_byte; /* the client repeats its probe's */
    disp_pjob_rates(pj, &r, t);
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    NEAR(pj->input.sample_sec, 0.0, 0.0);
    /* ... and the per-byte receive cost is fitted to it: the job received
     * 100 KB a sample on 50 us, 0.5 ns/B, and the client's repeated probe
     * figure does not undo that. */
    ck_assert(pj->recv_fitted);
    NEAR(pj->recv_sec_per_byte, 0.5e-9, 1e-18);
    NEAR(pj->input.recv_sec_per_byte, 0.5e-9, 1e-18);
    /* Once the plan charges the fitted cost, the same overhead fits it
     * again: no drift downwards. */
    pj->plan_split = 0;
    pj->plan_share = 0.0;
    disp_pjob_rates(pj, &r, t);
    NEAR(pj->recv_sec_per_byte, 0.5e-9, 1e-18);
    /* Never below a copy's worth, even when the overhead is all but 0. */
    r.overhead_cpu_sec_per_sample = 1e-9;
    disp_pjob_rates(pj, &r, t);
    NEAR(pj->recv_sec_per_byte, DISP_PJ_MIN_RECV_SEC_PER_BYTE, 1e-18);
    /* Not from a mostly local plan: 30 % received would magnify any error
     * of the local part sevenfold into the per-byte cost. */
    pj->recv_fitted = 0;
    pj->recv_sec_per_byte = 1e-9;
    pj->input.recv_sec_per_byte = 1e-9;
    pj->plan_share = 0.7;
    r.overhead_cpu_sec_per_sample = 1e-12;
    r.recv_cpu_sec_per_byte = 1e-9;
    disp_pjob_rates(pj, &r, t);
    ck_assert(!pj->recv_fitted);
    NEAR(pj->recv_sec_per_byte, 1e-9, 0.0);
    pj->plan_share = 0.0;
    /* A peer's NaN or absurd value: ignored or bounded. */
    r.overhead_cpu_sec_per_sample = NAN;
    disp_pjob_rates(pj, &r, t);
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    NEAR(pj->input.sample_sec, 0.0, 0.0);
    r.overhead_cpu_sec_per_sample = 1e300;
    disp_pjob_rates(pj, &r, t);
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    ck_assert(pj->input.sample_sec <= 1.0);
    r.overhead_cpu_sec_per_sample = 1e-12; /* 0 would mean "unknown": the last one stays */
    disp_pjob_rates(pj, &r, t);
    before = orig;
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    ck_assert(fabs(pj->input.unit_sec[2] - 0.5e-3) < 1e-12);
    ck_assert(fabs(pj->input.consumer_rate - 100) < 1e-9);
    ck_assert(fabs(plan.predicted - 100) < 1e-9);
    ck_assert_str_eq(plan.binding, "consumer");
    disp_pjob_replanned(pj, 2, &before, &plan);
    ck_assert_int_eq(pj->drift_window_ms, DISP_REPLAN_DRIFT_MS); /* it changed: reset */
    disp_pjob_replanned(pj, 2, &plan, &plan);
    ck_assert_int_eq(pj->drift_window_ms, 2 * DISP_REPLAN_DRIFT_MS); /* nothing changed */
    disp_pjob_replanned(pj, 1, &plan, &plan);
    ck_assert_int_eq(pj->drift_window_ms, DISP_REPLAN_DRIFT_MS);

    /* A client's HostProfile overhead is cleaned like every number. */
    disp_hprof_t hp;
    pin.client.sample_overhead_sec = NAN;
    disp_hprof_from_pb(&pin.client, &hp);
    NEAR(hp.overhead_sec, 0.0, 0.0);
    pin.client.sample_overhead_sec = -3;
    disp_hprof_from_pb(&pin.client, &hp);
    NEAR(hp.overhead_sec, 0.0, 0.0);
    pin.client.sample_overhead_sec = 1e9;
    disp_hprof_from_pb(&pin.client, &hp);
    ck_assert(hp.overhead_sec <= 1.0);
    pin.client.sample_overhead_sec = 0;
    /* And its cost model: exactly SL_COST_NPARAM finite coefficients, else
     * none (an older peer's 4 included). */
    disp_hprof_from_pb(&pin.client, &hp);
    ck_assert_uint_eq(hp.ncoef, SL_COST_NPARAM);
    pin.client.n_cost_model_coef = 4;
    disp_hprof_from_pb(&pin.client, &hp);
    ck_assert_uint_eq(hp.ncoef, 0);
    pin.client.n_cost_model_coef = SL_COST_NPARAM;
    pin.coef[2] = NAN;
    disp_hprof_from_pb(&pin.client, &hp);
    ck_assert_uint_eq(hp.ncoef, 0);
    pin.coef[2] = 8e-3;

    /* Stale reports: the cached client profile's overhead stands in. */
    pj->client.overhead_sec = 0.1e-3;
    disp_pjob_plan(pj, &d->reg, &plan, t + DISP_REPLAN_RATES_MAX_AGE_MS + 1, why);
    NEAR(pj->input.sample_sec, 0.1e-3, 1e-15);

    /* A worker joining is due at once. */
    (void)fx_disp_register(d, "127.0.0.1:10", 2, 0, t);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, t, why, sizeof(why)), 1);
    disp_pjob_plan(pj, &d->reg, &plan, t, why);
    /* It is not in the client's classes: it counts at the largest class's speed. */
    ck_assert_uint_eq(pj->input.nclasses, 2);
    ck_assert_uint_eq(pj->input.classes[1].workers, 1);
    ck_assert(fabs(pj->input.classes[1].unit_sec[0] - 10e-3) < 1e-12);
    disp_pjob_free(pj);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* A client that could not read its CPU budget (source "unknown") reports
 * what it measured (ReportRates.measured_cpu_budget): more than 25 % off
 * the plan's budget re-plans at once -- no warm-up, no drift window --, the
 * plans use it from then on (the client's ReportRates.cpu_budget no longer
 * overwrites it), at most once per DISP_REPLAN_BUDGET_MIN_MS. A client
 * with a readable cgroup sends 0: nothing changes. */
static disp_pjob_t *budget_pjob(disp_t *d, fx_pin_t *pin, const char *source, double measured,
                                disp_plan_t *plan, int64_t now)
{
    sl_spec_t *spec = malloc(sizeof(*spec));
    char err[512];
    ck_assert_ptr_nonnull(spec);
    ck_assert_int_eq(
        sl_spec_parse("t", FX_PIN_SPEC, strlen(FX_PIN_SPEC), spec, err, sizeof(err)), 0);
    pin->in.client_cpu_budget_source = (char *)source;
    pin->in.client_cpu_budget_measured = measured;
    if (measured > 0) {
        pin->in.client_cpu_budget = measured; /* as the client sends it */
    }
    disp_pjob_t *pj = NULL;
    ck_assert_int_eq(disp_pjob_new(&pin->in, spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
    ck_assert_int_eq(disp_plan_compute(spec, plan, err, sizeof(err)), 0);
    disp_pjob_plan(pj, &d->reg, plan, now, "submit");
    sl_spec_clear(spec);
    free(spec);
    return pj;
}

static const char *budget_json(const disp_pjob_t *pj, const char *key, char *buf, size_t len)
{
    json_t *j = disp_pjob_json(pj, NULL);
    ck_assert_ptr_nonnull(j);
    json_t *v = json_object_get(json_object_get(j, "inputs"), key);
    if (json_is_string(v)) {
        snprintf(buf, len, "%s", json_string_value(v));
    } else if (json_is_number(v)) {
        snprintf(buf, len, "%.3f", json_number_value(v));
    } else {
        snprintf(buf, len, "%s", json_is_null(v) ? "null" : "?");
    }
    json_decref(j);
    return buf;
}

START_TEST(test_budget_measured)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    disp_plan_t plan;
    char why[160];
    char buf[64];
    disp_pjob_t *pj = budget_pjob(d, &pin, "unknown", 0, &plan, now);
    NEAR(pj->input.client_cores, 2.0, 0.0);
    double share2 = plan.local_share;
    ck_assert(share2 > 0.2);
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_source", buf, sizeof(buf)), "unknown");
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_measured", buf, sizeof(buf)), "null");
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_from", buf, sizeof(buf)), "client");

    Sluice__ReportRatesRequest r = SLUICE__REPORT_RATES_REQUEST__INIT;
    r.job_secret = (char *)FX_JOB_SECRET;
    r.delivered_per_sec = plan.predicted;
    r.cpu_budget = 2;
    /* Not measured, or within 25 %: nothing. */
    disp_pjob_rates(pj, &r, now + 1000);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1000, why, sizeof(why)), 0);
    r.measured_cpu_budget = 2.4;
    disp_pjob_rates(pj, &r, now + 1000);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1000, why, sizeof(why)), 0);
    /* A quarter of a CPU, 1.1 s into the job: due now. */
    r.measured_cpu_budget = 0.25;
    disp_pjob_rates(pj, &r, now + 1100);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1100, why, sizeof(why)), 3);
    ck_assert_msg(strstr(why, "cpu budget measured: 2.00 -> 0.25") != NULL, "%s", why);
    disp_plan_t before = plan;
    disp_pjob_plan(pj, &d->reg, &plan, now + 1100, why);
    disp_pjob_replanned(pj, 3, &before, &plan);
    NEAR(pj->input.client_cores, 0.25, 1e-12);
    ck_assert_msg(plan.local_share < share2, "share %.3f -> %.3f", share2, plan.local_share);
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_from", buf, sizeof(buf)), "measured");
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_measured", buf, sizeof(buf)), "0.250");
    /* The client keeps sending its nominal 2: the measured one stays. */
    r.measured_cpu_budget = 0.28;
    disp_pjob_rates(pj, &r, now + 2100);
    NEAR(pj->client_budget, 0.25, 1e-12);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 2100, why, sizeof(why)), 0);
    /* Any later plan takes the latest measurement. */
    disp_pjob_plan(pj, &d->reg, &plan, now + 2100, "drift");
    NEAR(pj->input.client_cores, 0.28, 1e-12);
    /* Twice as much, but within DISP_REPLAN_BUDGET_MIN_MS of the last
     * budget re-plan: not yet; then due. */
    r.measured_cpu_budget = 0.6;
    disp_pjob_rates(pj, &r, now + 2500);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 2500, why, sizeof(why)), 0);
    disp_pjob_rates(pj, &r, now + 1100 + DISP_REPLAN_BUDGET_MIN_MS);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1100 + DISP_REPLAN_BUDGET_MIN_MS,
                                          why, sizeof(why)),
                     3);
    /* Nonsense is not believed. */
    r.measured_cpu_budget = NAN;
    disp_pjob_rates(pj, &r, now + 4000);
    NEAR(pj->budget_measured, 0.6, 1e-12);
    r.measured_cpu_budget = 1e300;
    disp_pjob_rates(pj, &r, now + 4000);
    ck_assert(pj->budget_measured <= DISP_PJ_MAX_BUDGET);
    disp_pjob_free(pj);

    /* The profile pass's estimate came with the inputs: already in use. */
    pj = budget_pjob(d, &pin, "unknown", 0.3, &plan, now);
    NEAR(pj->input.client_cores, 0.3, 1e-12);
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_from", buf, sizeof(buf)), "measured");
    r.cpu_budget = 0.3;
    r.measured_cpu_budget = 0.32;
    disp_pjob_rates(pj, &r, now + 1000);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1000, why, sizeof(why)), 0);
    disp_pjob_free(pj);

    /* A readable cgroup: the client measures nothing (0), its budget
     * reports set the budget as before, and no budget re-plan happens. */
    pin.in.client_cpu_budget = 2;
    pj = budget_pjob(d, &pin, "cgroup", 0, &plan, now);
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_source", buf, sizeof(buf)), "cgroup");
    r.cpu_budget = 1.5;
    r.measured_cpu_budget = 0;
    disp_pjob_rates(pj, &r, now + 1000);
    NEAR(pj->client_budget, 1.5, 0.0);
    ck_assert_int_eq(disp_pjob_replan_due(pj, &d->reg, now + 1000, why, sizeof(why)), 0);
    disp_pjob_free(pj);
    /* An older client: no source at all. */
    pj = budget_pjob(d, &pin, NULL, 0, &plan, now);
    ck_assert_str_eq(budget_json(pj, "client_cpu_budget_source", buf, sizeof(buf)), "null");
    disp_pjob_free(pj);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* Per-node planning: ranks 0 and 1 of a three-rank job submitted from
 * host "gpu-a", rank 2 from "gpu-b". Once the tick has counted them, the
 * two on gpu-a are each planned with half its budget (pin: 2 cores), the
 * one on gpu-b with all of its, and every rank with a third of the
 * workers; /status shows both numbers. */
START_TEST(test_dispatcher_node_ranks)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    uint64_t ids[3];
    char spec[1024];
    for (uint32_t rk = 0; rk < 3; rk++) {
        snprintf(spec, sizeof(spec), "%.*s, \"world_size\": 3, \"rank\": %u}",
                 (int)strlen(FX_PIN_SPEC) - 1, FX_PIN_SPEC, rk);
        Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
        req.job_secret = (char *)FX_JOB_SECRET;
        Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
        disp_arena_t a = {0};
        char err[1024] = "";
        req.version = SL_PROTOCOL_VERSION;
        req.spec_json = spec;
        req.num_samples = 200;
        req.source_fingerprint = 99;
        req.planner = &pin.in;
        req.client_id = rk < 2 ? "gpu-a" : "gpu-b";
        req.rank = rk;
        req.world_size = 3;
        req.job_name = "ddp";
        ck_assert_msg(disp_svc_submit_job(d, &req, &resp, &a, now, err, sizeof(err)) ==
                          SL_RPC_OK,
                      "%s", err);
        ids[rk] = resp.job_id;
        disp_arena_free(&a);
    }
    pthread_mutex_lock(&d->mu);
    disp_job_t *job[3];
    for (int k = 0; k < 3; k++) {
        job[k] = disp_jobs_find(&d->jobs, ids[k]);
        ck_assert_ptr_nonnull(job[k]->planner);
        /* Before the count: alone on its node, a third of the workers. */
        NEAR(job[k]->planner->input.client_cores, 2.0, 1e-12);
        NEAR(job[k]->planner->input.classes[0].cores, 2.0 / 3, 1e-12);
    }
    ck_assert_uint_eq(disp_planner_node_ranks(&d->jobs, job[0]), 2);
    ck_assert_uint_eq(disp_planner_node_ranks(&d->jobs, job[2]), 1);
    disp_planner_tick(d, now + 100);
    NEAR(job[0]->planner->input.client_cores, 1.0, 1e-12);
    NEAR(job[1]->planner->input.client_cores, 1.0, 1e-12);
    NEAR(job[2]->planner->input.client_cores, 2.0, 1e-12);
    ck_assert_uint_eq(job[0]->plan.version, 2); /* re-planned for the share */
    ck_assert_uint_eq(job[2]->plan.version, 1); /* nothing changed for it */
    ck_assert_str_eq(job[0]->planner->last_reason, "ranks on the client's node: 1 -> 2");
    /* A second tick changes nothing. */
    disp_planner_tick(d, now + 200);
    ck_assert_uint_eq(job[0]->plan.version, 2);
    json_t *j = disp_planner_status_json(job[1]);
    json_t *in = json_object_get(j, "inputs");
    NEAR(json_real_value(json_object_get(in, "client_cpu_budget")), 1.0, 1e-12);
    NEAR(json_real_value(json_object_get(in, "node_cpu_budget")), 2.0, 1e-12);
    ck_assert_int_eq(json_integer_value(json_object_get(in, "node_ranks")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(in, "world_size")), 3);
    json_decref(j);
    /* Rank 1 leaves: rank 0 has gpu-a to itself again. */
    disp_jobs_close(&d->jobs, job[1], "test", now + 300);
    disp_planner_tick(d, now + 400);
    NEAR(job[0]->planner->input.client_cores, 2.0, 1e-12);
    ck_assert_uint_eq(job[0]->plan.version, 3);
    pthread_mutex_unlock(&d->mu);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* The client's aggregate ingress probe needs two streams that worked:
 * fewer addresses, or workers that do not answer, give 0 ("not
 * measured"), within the deadline. The working case is
 * tests/integration/test_multirank_plan.sh (node_bandwidth). */
START_TEST(test_probe_aggregate_broken)
{
    const char *addrs[3] = {"127.0.0.1:1", "127.0.0.1:1", "not an address"};
    double recv = -1.0;
    NEAR(cl_probe_aggregate(addrs, 0, NULL, 500, &recv), 0.0, 0.0);
    NEAR(recv, 0.0, 0.0);
    recv = -1.0;
    NEAR(cl_probe_aggregate(addrs, 1, NULL, 500, &recv), 0.0, 0.0);
    NEAR(recv, 0.0, 0.0);
    recv = -1.0;
    NEAR(cl_probe_aggregate(addrs, 3, NULL, 500, &recv), 0.0, 0.0);
    NEAR(recv, 0.0, 0.0);
}
END_TEST

/* A fixed plan gets the diagnosis auto's choice gets (issue #38 2e): the
 * worker-bound case above, evaluated at K = 2, F = 0 ("all"): workers
 * 32 / 0.012 = 2666.67 bind (the client allows 6666.67), 6 more workers
 * lift it to 6666.67; "off" (K = 0, F = 1) is the client alone, which more
 * workers cannot help. */
START_TEST(test_evaluate_fixed_plan)
{
    disp_pl_input_t in;
    base(&in);
    add_class(&in, 4, 8, 1.0, 1.25e9);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_evaluate(&in, 2, 0.0, &r), 0);
    ck_assert_uint_eq(r.ncand, 2);
    ck_assert_uint_eq(r.chosen, 0);
    ck_assert_uint_eq(r.cand[0].split, 2);
    NEAR(r.cand[0].predicted, 32.0 / 0.012, 1e-6);
    ck_assert_int_eq(r.cand[0].binding, DISP_BIND_WORKER_CPU);
    ck_assert_uint_eq(r.workers_needed, 6);
    NEAR(r.lifted_rate, 6666.6667, 1e-3);
    NEAR(r.local_rate, 333.3333, 1e-3);
    ck_assert_ptr_nonnull(strstr(r.reason, "given plan: split 2"));
    ck_assert_int_eq(disp_planner_evaluate(&in, 0, 1.0, &r), 0);
    NEAR(r.cand[0].predicted, 333.3333, 1e-3);
    ck_assert_int_eq(r.cand[0].binding, DISP_BIND_CLIENT_CPU);
    ck_assert_uint_eq(r.workers_needed, 0);
    /* K past the pipeline is its end; F out of range is clamped. */
    ck_assert_int_eq(disp_planner_evaluate(&in, 9, -1.0, &r), 0);
    ck_assert_uint_eq(r.cand[0].split, 2);
    NEAR(r.cand[0].share, 0.0, 1e-12);
}
END_TEST

/* PlanJob for a fixed offload ("1:0.25", `sluice plan --offload 1:0.25`)
 * keeps that plan and diagnoses it: policy "fixed", the plan and "off",
 * a prediction and a binding resource. */
START_TEST(test_dispatcher_plan_job_fixed)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    Sluice__SubmitJobRequest req;
    fx_pin_request(&pin, &req);
    /* FX_PIN_SPEC with a fixed offload. */
    char spec[] = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"
                  " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8},"
                  " {\"op\": \"flip\"}, {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5],"
                  " \"std\": [0.2, 0.2, 0.2]}], \"batch_size\": 4, \"epochs\": 3, \"offload\": "
                  "{\"split\": 1, \"local_share\": 0.25}}";
    req.spec_json = spec;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    int rc = disp_svc_plan_job(d, &req, &resp, &a, now, err, sizeof(err));
    ck_assert_msg(rc == SL_RPC_OK, "PlanJob: %d %s", rc, err);
    ck_assert_ptr_nonnull(resp.plan);
    ck_assert_str_eq(resp.plan->mode, "fixed");
    ck_assert_uint_eq(resp.plan->split, 1);
    NEAR(resp.plan->local_share, 0.25, 1e-12);
    ck_assert(resp.plan->predicted_samples_per_sec > 0.0);
    ck_assert(resp.plan->binding != NULL && resp.plan->binding[0] != '\0');
    ck_assert_str_eq(resp.explain->policy, "fixed");
    ck_assert_uint_eq(resp.explain->n_candidates, 2);
    ck_assert_uint_eq(resp.explain->chosen, 0);
    ck_assert_ptr_nonnull(strstr(resp.explain->reason, "given plan: split 1"));
    disp_arena_free(&a);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* The per-sample overhead a running job measured enters the profile cache
 * only within DISP_PCACHE_OVERHEAD_MAX_X of the idle-core profile's local
 * sample cost (at least the floor): a training loop's CPU measured as
 * Sluice's (261 ms a sample, issue 39) is refused, a plausible one kept. */
START_TEST(test_pcache_overhead_bound)
{
    disp_pcache_t *c = disp_pcache_new();
    ck_assert_ptr_nonnull(c);
    disp_hprof_t p;
    memset(&p, 0, sizeof(p));
    snprintf(p.host, sizeof(p.host), "client gpu-node");
    p.nunits = 2;
    p.read_sec = 0.0001;
    p.units[0].cpu_sec_per_sample = 0.0006;
    p.units[1].cpu_sec_per_sample = 0.0003; /* 1 ms a local sample */
    p.samples = 64;
    disp_pcache_put(c, 7, &p, 1000);
    double bound = -1.0;
    ck_assert_int_eq(disp_pcache_note_overhead(c, 8, "client gpu-node", 0.0002, &bound), -ENOENT);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 7, "client gpu-node", 0.0009, &bound), 0);
    ck_assert(bound < 0.0); /* untouched when stored */
    ck_assert_int_eq(disp_pcache_note_overhead(c, 7, "client gpu-node", 0.261, &bound), -ERANGE);
    ck_assert(fabs(bound - 0.004) < 1e-9);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 7, "client gpu-node", NAN, &bound), -ERANGE);
    const disp_hprof_t *got[2];
    ck_assert_uint_eq(disp_pcache_list(c, 7, 2000, got, 2), 1);
    ck_assert(fabs(got[0]->overhead_sec - 0.0009) < 1e-12); /* the refused ones left it */
    /* A pipeline that costs next to nothing locally: the floor. */
    p.units[0].cpu_sec_per_sample = 0.0;
    p.units[1].cpu_sec_per_sample = 0.0;
    p.read_sec = 0.00001;
    disp_pcache_put(c, 9, &p, 1000);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 9, "client gpu-node", 0.0015, &bound), 0);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 9, "client gpu-node", 0.0025, &bound), -ERANGE);
    ck_assert(fabs(bound - DISP_PCACHE_OVERHEAD_FLOOR_SEC) < 1e-12);
    disp_pcache_free(c);
}
END_TEST

/* The prior for a spec new to a host: the overhead another spec's running
 * job measured there, the latest stored; never the spec's own entry,
 * another host's, a profile's unmeasured 0 or a stale entry. */
START_TEST(test_pcache_host_prior)
{
    disp_pcache_t *c = disp_pcache_new();
    ck_assert_ptr_nonnull(c);
    disp_hprof_t p;
    memset(&p, 0, sizeof(p));
    snprintf(p.host, sizeof(p.host), "client gpu-node");
    p.nunits = 1;
    p.units[0].cpu_sec_per_sample = 0.001;
    p.samples = 64;
    double prior = -1.0;
    disp_pcache_put(c, 1, &p, 1000);
    disp_pcache_put(c, 2, &p, 1000);
    snprintf(p.host, sizeof(p.host), "client other-node");
    disp_pcache_put(c, 3, &p, 1000);
    /* Profiles alone (idle-core, no overhead measured): no prior. */
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 2000, &prior), 0);
    double bound;
    ck_assert_int_eq(disp_pcache_note_overhead(c, 1, "client gpu-node", 0.0004, &bound), 0);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 3, "client other-node", 0.0030, &bound), 0);
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 2000, &prior), 1);
    ck_assert(fabs(prior - 0.0004) < 1e-12);
    /* Its own spec's entry is not a prior (its profile carries it). */
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 1, 2000, &prior), 0);
    /* The latest measured wins; a refused one changes nothing. */
    ck_assert_int_eq(disp_pcache_note_overhead(c, 2, "client gpu-node", 0.0006, &bound), 0);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 1, "client gpu-node", 0.261, &bound), -ERANGE);
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 2000, &prior), 1);
    ck_assert(fabs(prior - 0.0006) < 1e-12);
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 2, 2000, &prior), 1);
    ck_assert(fabs(prior - 0.0004) < 1e-12);
    /* Re-stored without an overhead: no longer a measured one. */
    snprintf(p.host, sizeof(p.host), "client gpu-node");
    disp_pcache_put(c, 2, &p, 3000);
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 3000, &prior), 1);
    ck_assert(fabs(prior - 0.0004) < 1e-12);
    /* Measured by a job too young (DISP_PRIOR_MIN_RUN_MS): its spec keeps
     * it, but no other spec takes it as a prior until a later note. */
    disp_pcache_not_prior(c, 1, "client gpu-node");
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 3000, &prior), 0);
    ck_assert_int_eq(disp_pcache_note_overhead(c, 1, "client gpu-node", 0.0004, &bound), 0);
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 3000, &prior), 1);
    disp_pcache_not_prior(c, 77, "client gpu-node"); /* no entry: nothing */
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 3000, &prior), 1);
    /* Stale after the cache's TTL. */
    ck_assert_int_eq(disp_pcache_host_prior(c, "client gpu-node", 9, 1000 + DISP_PCACHE_TTL_MS,
                                            &prior),
                     0);
    disp_pcache_free(c);
}
END_TEST

/* The first plan's overhead (first_plan.h): the spec's own cached figure,
 * else another spec's on this host, else the profiled one, else none; an
 * unknown (0, negative, NaN) candidate is skipped, never charged. */
START_TEST(test_first_overhead)
{
    double v = -1.0;
    ck_assert_int_eq(disp_first_overhead(0.0004, 0.0006, 0.0009, &v), DISP_OVH_CACHED);
    ck_assert(fabs(v - 0.0004) < 1e-12);
    ck_assert_int_eq(disp_first_overhead(0.0, 0.0006, 0.0009, &v), DISP_OVH_PRIOR);
    ck_assert(fabs(v - 0.0006) < 1e-12);
    ck_assert_int_eq(disp_first_overhead(NAN, -1.0, 0.0009, &v), DISP_OVH_PROFILED);
    ck_assert(fabs(v - 0.0009) < 1e-12);
    ck_assert_int_eq(disp_first_overhead(0.0, 0.0, INFINITY, &v), DISP_OVH_NONE);
    ck_assert(v == 0.0);
    ck_assert_str_eq(disp_ovh_src_name(DISP_OVH_NONE), "none");
    ck_assert_str_eq(disp_ovh_src_name(DISP_OVH_CACHED), "cached");
    ck_assert_str_eq(disp_ovh_src_name(DISP_OVH_PRIOR), "prior");
    ck_assert_str_eq(disp_ovh_src_name(DISP_OVH_PROFILED), "profiled");
    ck_assert_str_eq(disp_ovh_src_name(DISP_OVH_MEASURED), "measured");
    ck_assert_str_eq(disp_ovh_src_name((disp_ovh_src_e)99), "?");
}
END_TEST

/* The client's profiled overhead as the dispatcher takes it
 * (PlannerInputs.client_overhead_profiled_sec): kept when sane, 0 for a
 * broken one (NaN, infinite, negative), capped like any overhead. */
START_TEST(test_profiled_overhead_input)
{
    fx_pin_t pin;
    fx_pin_init(&pin, 1);
    sl_spec_t spec;
    char err[512];
    ck_assert_int_eq(sl_spec_parse("t", FX_PIN_SPEC, strlen(FX_PIN_SPEC), &spec, err, sizeof(err)),
                     0);
    const double sent[] = {0.0004, NAN, INFINITY, -0.001, 50.0};
    const double want[] = {0.0004, 0.0, 0.0, 0.0, 1.0};
    for (size_t i = 0; i < sizeof(sent) / sizeof(sent[0]); i++) {
        pin.in.client_overhead_profiled_sec = sent[i];
        disp_pjob_t *pj = NULL;
        ck_assert_int_eq(disp_pjob_new(&pin.in, &spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
        ck_assert_msg(fabs(pj->overhead_profiled_sec - want[i]) < 1e-12, "case %zu: %g", i,
                      pj->overhead_profiled_sec);
        disp_pjob_free(pj);
    }
    sl_spec_clear(&spec);
}
END_TEST

/* What-if per class: the rate with k more or fewer workers, what binds,
 * and how many the job wants -- the workers-needed hint's count in total
 * when short of workers, fewer than it has when over-provisioned, none for
 * a plan that runs everything locally. */
START_TEST(test_whatif)
{
    disp_pl_input_t in;
    base(&in);
    add_class(&in, 4, 8, 1.0, 1.25e9);
    disp_pl_result_t r;
    ck_assert_int_eq(disp_planner_plan(&in, &r), 0);
    disp_wi_curve_t w;
    ck_assert_int_eq(disp_planner_whatif(&in, 0, NULL, &w), 0);
    ck_assert_uint_eq(w.workers, 4);
    ck_assert_uint_eq(w.npoints, DISP_WI_POINTS); /* -4 .. +16: none below 0 */
    ck_assert_int_eq(w.p[0].delta, -4);
    ck_assert_uint_eq(w.p[0].workers, 0);
    NEAR(w.p[0].predicted, r.local_rate, 1e-6); /* no worker: the client alone */
    ck_assert_int_eq(w.p[3].delta, 0);
    NEAR(w.p[3].predicted, chosen(&r)->predicted, 1e-6);
    ck_assert_int_eq(w.p[3].binding, DISP_BIND_WORKER_CPU);
    for (uint32_t i = 1; i < w.npoints; i++) {
        ck_assert(w.p[i].predicted >= w.p[i - 1].predicted - 1e-9);
    }
    ck_assert_int_eq(w.p[w.npoints - 1].binding, DISP_BIND_CLIENT_CPU);
    ck_assert_uint_eq(w.wanted, 4 + r.workers_needed);
    NEAR(w.wanted_rate, r.lifted_rate, 1e-6);
    ck_assert_int_eq(w.wanted_binding, DISP_BIND_CLIENT_CPU);

    /* 100 of them: the same job wants as many as before, not 100. */
    disp_pl_input_t many;
    base(&many);
    add_class(&many, 100, 8, 1.0, 1.25e9);
    disp_wi_curve_t wm;
    ck_assert_int_eq(disp_planner_whatif(&many, 0, NULL, &wm), 0);
    ck_assert_uint_eq(wm.wanted, w.wanted);
    ck_assert_uint_eq(wm.p[0].workers, 96);

    /* A given plan that runs everything locally wants none. */
    ck_assert_int_eq(disp_planner_evaluate(&in, 0, 1.0, &r), 0);
    ck_assert_int_eq(disp_planner_whatif(&in, 0, &r.cand[0], &w), 0);
    ck_assert_uint_eq(w.wanted, 0);
    ck_assert_int_eq(disp_planner_whatif(&in, 1, NULL, &w), -EINVAL); /* no such class */
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_WARNING);
    Suite *s = suite_create("planner");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_terms);
    tcase_add_test(tc, test_worker_bound_and_hint);
    tcase_add_test(tc, test_evaluate_fixed_plan);
    tcase_add_test(tc, test_client_cpu_bound);
    tcase_add_test(tc, test_link_bound);
    tcase_add_test(tc, test_compress_link_bound);
    tcase_add_test(tc, test_compress_worker_bound);
    tcase_add_test(tc, test_compress_absent);
    tcase_add_test(tc, test_no_stall_off);
    tcase_add_test(tc, test_consumer_bound_largest_share);
    tcase_add_test(tc, test_heterogeneous);
    tcase_add_test(tc, test_no_workers);
    tcase_add_test(tc, test_bad_inputs);
    tcase_add_test(tc, test_ff_ratio);
    tcase_add_test(tc, test_fastflow);
    tcase_add_test(tc, test_steps_small_share_rounds_to_zero);
    tcase_add_test(tc, test_steps_pick_and_runtime_share);
    tcase_add_test(tc, test_steps_runtime_rule_exact);
    tcase_add_test(tc, test_steps_consumer);
    tcase_add_test(tc, test_steps_bad_and_fastflow);
    tcase_add_test(tc, test_rank_share_adds_up);
    tcase_add_test(tc, test_sample_overhead);
    tcase_add_test(tc, test_pcache_overhead_bound);
    tcase_add_test(tc, test_pcache_host_prior);
    tcase_add_test(tc, test_first_overhead);
    tcase_add_test(tc, test_profiled_overhead_input);
    tcase_add_test(tc, test_whatif);
    suite_add_tcase(s, tc);
    TCase *td = tcase_create("dispatcher");
    tcase_set_timeout(td, 60);
    tcase_add_test(td, test_dispatcher_replan);
    tcase_add_test(td, test_dispatcher_plan_job);
    tcase_add_test(td, test_link_cache);
    tcase_add_test(td, test_profile_samples_for);
    tcase_add_test(td, test_dispatcher_links_roundtrip);
    tcase_add_test(td, test_dispatcher_assign_compress);
    tcase_add_test(td, test_drift);
    tcase_add_test(td, test_budget_measured);
    tcase_add_test(td, test_dispatcher_node_ranks);
    tcase_add_test(td, test_probe_aggregate_broken);
    tcase_add_test(td, test_dispatcher_plan_job_fixed);
    suite_add_tcase(s, td);
    return fx_run_suite(s, 0);
}
