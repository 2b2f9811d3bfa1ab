/* test_planner: dispatcher/planner/planner.c on synthetic profiles whose best plan
 * is worked out by hand in the comments (client CPU-bound, link-bound, no
 * stall, worker-bound with the workers-needed hint, heterogeneous workers,
 * no workers); FastFlow's Algorithm 1 is test_planner_fastflow.c.
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

static const disp_pl_cand_t *chosen(const disp_pl_result_t *r) { return &r->cand[r->chosen]; }

/* Terms at fixed points, straight from the formula. */
START_TEST(test_terms)
{
    disp_pl_input_t in;
    base(&in);
    fx_pl_add_class(&in, 4, 8, 1.0, 1.25e9);
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
    fx_pl_add_class(&in, 4, 8, 1.0, 1.25e9);
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
    fx_pl_add_class(&in, 100, 8, 1.0, 0);
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
    fx_pl_add_class(&in, 100, 8, 1.0, 1.25e9);
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
    fx_pl_add_class(&in, 100, 8, 1.0, 1.25e9);
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
    fx_pl_add_class(&in, 1, 1, 0.5, 1.25e9);
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
    fx_pl_add_class(&in, 100, 8, 1.0, 1.25e9);
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
    fx_pl_add_class(&in, 4, 8, 1.0, 1.25e9);
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
    fx_pl_add_class(&in, 4, 8, 1.0, 1.25e9);
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
    fx_pl_add_class(&in, 2, 4, 1.0, 0);
    fx_pl_add_class(&in, 2, 4, 0.5, 0);
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
    fx_pl_add_class(&in, 4, 8, 1.0, 1.25e9);
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
    fx_pl_add_class(in, 2, 0.5, 1.0, 0.0);
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

/* A fixed plan gets the diagnosis auto's choice gets (issue #38 2e): the
 * worker-bound case above, evaluated at K = 2, F = 0 ("all"): workers
 * 32 / 0.012 = 2666.67 bind (the client allows 6666.67), 6 more workers
 * lift it to 6666.67; "off" (K = 0, F = 1) is the client alone, which more
 * workers cannot help. */
START_TEST(test_evaluate_fixed_plan)
{
    disp_pl_input_t in;
    base(&in);
    fx_pl_add_class(&in, 4, 8, 1.0, 1.25e9);
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

/* What-if per class: the rate with k more or fewer workers, what binds,
 * and how many the job wants -- the workers-needed hint's count in total
 * when short of workers, fewer than it has when over-provisioned, none for
 * a plan that runs everything locally. */
START_TEST(test_whatif)
{
    disp_pl_input_t in;
    base(&in);
    fx_pl_add_class(&in, 4, 8, 1.0, 1.25e9);
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
    fx_pl_add_class(&many, 100, 8, 1.0, 1.25e9);
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
    tcase_add_test(tc, test_steps_small_share_rounds_to_zero);
    tcase_add_test(tc, test_steps_pick_and_runtime_share);
    tcase_add_test(tc, test_steps_runtime_rule_exact);
    tcase_add_test(tc, test_steps_consumer);
    tcase_add_test(tc, test_steps_bad_and_fastflow);
    tcase_add_test(tc, test_rank_share_adds_up);
    tcase_add_test(tc, test_sample_overhead);
    tcase_add_test(tc, test_whatif);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
