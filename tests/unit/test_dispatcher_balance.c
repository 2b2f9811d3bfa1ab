/* test_dispatcher_balance: data-aware balancing in simulated time.
 *
 * The dispatcher's split cut, assignment by predicted finish and stealing
 * (dispatcher/core/splits.c and assign.c, the real code) hand splits to
 * simulated workers of unequal speed over a skewed data set (10 % of the
 * samples cost 6-10x); the workers heartbeat as worker/control.c does
 * (every 500 ms, and 30 ms after a split finished), the client acks a
 * split 10 ms after its last sample. Time is the fake clock's, so epoch
 * times are deterministic: the test asserts that cost-cut splits end the
 * epoch sooner than count-cut ones, which a timed test on this shared host
 * could not. scripts/bench-skew measures the same on a real emulated
 * cluster (docs/benchmarks.md).
 * SIM_VERBOSE=1 prints each set's epoch times and the dispatcher's info
 * log (steals), SIM_TRACE=1 every split a worker finished or dropped. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "common/base/log.h"
#include "common/order/ranks.h"
#include "common/base/rng.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/core/registry.h"
#include "tests/unit/fixtures.h"

#define SPEC_FMT                                                                             \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": %u},"           \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}],"     \
    " \"batch_size\": 4, \"epochs\": 1, \"offload\": \"all\"}"

#define NSAMPLES 400
#define MAXQ 32
#define HB_MS 500
#define EARLY_HB_MS 30
#define ACK_DELAY_MS 10
#define MAX_SIM_MS 120000

typedef struct simw_s {
    uint64_t id;
    double speed;        /* cost units per ms */
    uint64_t q[MAXQ];    /* told splits in order; q[0] runs */
    uint64_t aid[MAXQ];
    uint32_t nq;
    double left;         /* cost units left of q[0] */
    uint64_t done[MAXQ]; /* finished since the last heartbeat */
    uint64_t done_aid[MAXQ];
    uint32_t ndone;
    int64_t next_hb;
} simw_t;

typedef struct ack_s {
    uint64_t id;
    int64_t at;
} ack_t;

typedef struct sim_s {
    disp_registry_t reg;
    disp_jobs_t js;
    disp_job_t *job;
    int64_t now;
    const float *truth; /* per sample index */
    uint64_t order[NSAMPLES];
    simw_t w[4];
    size_t nw;
    ack_t acks[256];
    size_t nacks;
} sim_t;

/* True cost of a split: its positions through the epoch's order. */
static double split_truth(sim_t *s, uint64_t id)
{
    uint64_t b = 0, e = 0;
    ck_assert_ptr_nonnull(disp_job_split(s->job, id, NULL, &b, &e));
    double c = 0;
    for (uint64_t p = b; p < e; p++) {
        c += s->truth[s->order[p]];
    }
    return c;
}

static int told(const simw_t *w, uint64_t id)
{
    for (uint32_t k = 0; k < w->nq; k++) {
        if (w->q[k] == id) {
            return 1;
        }
    }
    return 0;
}

static void drop(simw_t *w, uint32_t k)
{
    memmove(&w->q[k], &w->q[k + 1], (w->nq - k - 1) * sizeof(w->q[0]));
    memmove(&w->aid[k], &w->aid[k + 1], (w->nq - k - 1) * sizeof(w->aid[0]));
    w->nq--;
}

static void start_next(sim_t *s, simw_t *w)
{
    w->left = w->nq > 0 ? split_truth(s, w->q[0]) : 0;
}

/* One heartbeat of w: report, take revocations and new assignments. */
static void heartbeat(sim_t *s, simw_t *w)
{
    disp_worker_t *dw = disp_registry_live(&s->reg, w->id);
    ck_assert_ptr_nonnull(dw);
    disp_split_ref_t prog[MAXQ], sent[MAXQ];
    disp_progress_t p = {.in_progress = prog, .sent = sent};
    for (uint32_t k = 0; k < w->nq; k++) {
        prog[p.n_in_progress++] = (disp_split_ref_t){s->job->id, w->q[k], w->aid[k]};
    }
    for (uint32_t k = 0; k < w->ndone; k++) {
        sent[p.n_sent++] = (disp_split_ref_t){s->job->id, w->done[k], w->done_aid[k]};
    }
    w->ndone = 0;
    dw->last_heartbeat_ms = s->now;
    (void)disp_jobs_worker_progress(&s->js, dw, &p, s->now);
    disp_jw_t *jw = disp_job_jw(s->job, w->id);
    for (uint32_t r = 0; jw != NULL && r < jw->nrevoked; r++) {
        for (uint32_t k = 0; k < w->nq; k++) {
            if (w->q[k] == jw->revoked[r]) {
                if (getenv("SIM_TRACE") != NULL) {
                    fprintf(stderr, "t=%lld w%llu revoked split %llu (pos %u, left %.1f)\n",
                            (long long)(s->now - 100000), (unsigned long long)w->id,
                            (unsigned long long)w->q[k], k, w->left);
                }
                drop(w, k);
                if (k == 0) {
                    start_next(s, w); /* the running one is abandoned */
                }
                break;
            }
        }
    }
    for (uint32_t k = 0; jw != NULL && k < jw->n; k++) {
        if (disp_an_to_send(jw->sent[k]) && !told(w, jw->ids[k])) {
            ck_assert_uint_lt(w->nq, MAXQ);
            w->q[w->nq] = jw->ids[k];
            w->aid[w->nq] = jw->aid[k];
            if (w->nq++ == 0) {
                start_next(s, w);
            }
        }
    }
    disp_jobs_worker_sent(&s->js, dw);
    w->next_hb = s->now + HB_MS;
}

static void step(sim_t *s)
{
    s->now++;
    for (size_t i = 0; i < s->nw; i++) {
        simw_t *w = &s->w[i];
        if (w->nq == 0) {
            continue;
        }
        w->left -= w->speed;
        if (w->left > 0) {
            continue;
        }
        ck_assert_uint_lt(w->ndone, MAXQ);
        ck_assert_uint_lt(s->nacks, sizeof(s->acks) / sizeof(s->acks[0]));
        if (getenv("SIM_TRACE") != NULL) {
            fprintf(stderr, "t=%lld w%llu done split %llu\n", (long long)(s->now - 100000),
                    (unsigned long long)w->id, (unsigned long long)w->q[0]);
        }
        w->done[w->ndone] = w->q[0];
        w->done_aid[w->ndone++] = w->aid[0];
        s->acks[s->nacks++] = (ack_t){w->q[0], s->now + ACK_DELAY_MS};
        drop(w, 0);
        start_next(s, w);
        if (w->next_hb > s->now + EARLY_HB_MS) {
            w->next_hb = s->now + EARLY_HB_MS;
        }
    }
    for (size_t k = 0; k < s->nacks;) {
        if (s->acks[k].at <= s->now) {
            (void)disp_jobs_ack(&s->js, s->job, &s->acks[k].id, 1, s->now);
            s->acks[k] = s->acks[--s->nacks];
        } else {
            k++;
        }
    }
    for (size_t i = 0; i < s->nw; i++) {
        if (s->w[i].next_hb <= s->now) {
            heartbeat(s, &s->w[i]);
        }
    }
    s->job->last_client_ms = s->now;
    if (s->now % 100 == 0) {
        disp_jobs_assign_all(&s->js, s->now);
    }
}

/* Epoch time in simulated ms of one job over truth, the dispatcher cutting
 * by `predicted` (NULL: by count). */
static int64_t run_epoch(const float *truth, const float *predicted, int steal,
                         const double *speeds, size_t nw, unsigned seed)
{
    sim_t *s = calloc(1, sizeof(*s));
    ck_assert_ptr_nonnull(s);
    s->now = 100000;
    s->truth = truth;
    disp_limits_t lim = {
        .split_size = 0,
        .cost_splits = predicted != NULL,
        .steal = steal,
        .max_splits_per_worker = 4,
        .max_client_splits = 64,
        .max_jobs = 4,
        .worker_timeout_ms = 5000,
        .client_timeout_ms = 60000,
    };
    ck_assert_int_eq(disp_registry_init(&s->reg, 16, 1, s->now), 0);
    ck_assert_int_eq(disp_jobs_init(&s->js, &s->reg, &lim, 1), 0);
    s->nw = nw;
    for (size_t i = 0; i < nw; i++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "w%zu:1", i);
        disp_worker_t *dw = NULL;
        int is_new = 0;
        ck_assert_int_eq(disp_registry_register(&s->reg, addr, "h", 4, 0, s->now, &dw, &is_new),
                         0);
        s->w[i].id = dw->id;
        s->w[i].speed = speeds[i];
        s->w[i].next_hb = s->now + 1 + (int64_t)i * 7; /* not in lock step */
    }
    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, seed);
    disp_submit_t sub = {.spec_json = spec, .spec_len = strlen(spec), .spec_name = "t.json",
                         .num_samples = NSAMPLES, .fingerprint = 7, .client_id = "c",
                         .costs = predicted, .ncosts = predicted != NULL ? NSAMPLES : 0};
    char err[512] = "";
    ck_assert_msg(disp_jobs_submit(&s->js, &sub, s->now, &s->job, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert(predicted != NULL ? s->job->costs != NULL : s->job->costs == NULL);
    ck_assert_uint_eq(s->job->positions, NSAMPLES);
    sl_rank_order(&s->job->spec, 0, NSAMPLES, s->order, s->order);
    int64_t t0 = s->now;
    disp_jobs_assign_all(&s->js, s->now);
    while (s->job->state == DISP_JOB_ACTIVE && s->now - t0 < MAX_SIM_MS) {
        step(s);
    }
    ck_assert_int_eq(s->job->state, DISP_JOB_FINISHED);
    ck_assert_uint_eq(s->job->acked_total, s->job->nsplits);
    int64_t ms = s->now - t0;
    ck_assert_uint_eq(s->js.split_moves_refused, 0); /* disp_split_move: never refused */
    disp_jobs_destroy(&s->js);
    disp_registry_destroy(&s->reg);
    free(s);
    return ms;
}

/* The shape of scripts/make-dataset's sets: 300-800 px a side, 5 % of
 * the images 1500-2500 px, and with `skewed` 10 % with 6-10x the pixels
 * on top (the largest cost ~100x the median, as the files of the bench-skew
 * set: 50 KB to 18.6 MB, median 167 KB). Cost: a fixed part plus one per
 * megapixel; without `skewed` every sample costs the same. The prediction
 * is off by up to +-15 % per sample (the cost model's error target). */
static void make_costs(unsigned seed, int skewed, float *truth, float *predicted)
{
    sl_rng_t r;
    sl_rng_init(&r, seed, 0, 0, 99);
    for (size_t i = 0; i < NSAMPLES; i++) {
        double c = 1.0;
        if (skewed) {
            int large = sl_rng_uniform(&r) < 0.05;
            double lo = large ? 1500 : 300, span = large ? 1000 : 500;
            double mpix = (lo + span * sl_rng_uniform(&r)) * (lo + span * sl_rng_uniform(&r)) / 1e6;
            if (sl_rng_uniform(&r) < 0.10) {
                mpix *= 6.0 + 4.0 * sl_rng_uniform(&r);
            }
            c = 0.1 + mpix / 0.4; /* a median sample costs ~1 */
        }
        truth[i] = (float)c;
        predicted[i] = (float)(c * (0.85 + 0.3 * sl_rng_uniform(&r)));
    }
}

typedef struct totals_s {
    double count, cost, cost_steal, ideal;
} totals_t;

static totals_t run_sets(int skewed, const double *speeds, size_t nw)
{
    totals_t t = {0};
    float truth[NSAMPLES], predicted[NSAMPLES];
    for (unsigned seed = 1; seed <= 5; seed++) {
        make_costs(seed, skewed, truth, predicted);
        double sum = 0, speed = 0;
        for (size_t i = 0; i < NSAMPLES; i++) {
            sum += truth[i];
        }
        for (size_t i = 0; i < nw; i++) {
            speed += speeds[i];
        }
        int64_t a = run_epoch(truth, NULL, 0, speeds, nw, seed);
        int64_t b = run_epoch(truth, predicted, 0, speeds, nw, seed);
        int64_t c = run_epoch(truth, predicted, 1, speeds, nw, seed);
        /* Nobody beats the work over the summed speed. */
        ck_assert_int_ge(a, (int64_t)(sum / speed));
        ck_assert_int_ge(b, (int64_t)(sum / speed));
        ck_assert_int_ge(c, (int64_t)(sum / speed));
        if (getenv("SIM_VERBOSE") != NULL) {
            fprintf(stderr, "  seed %u: count %lld cost %lld cost+steal %lld ideal %.0f\n", seed,
                    (long long)a, (long long)b, (long long)c, sum / speed);
        }
        t.count += (double)a;
        t.cost += (double)b;
        t.cost_steal += (double)c;
        t.ideal += sum / speed;
    }
    fprintf(stderr,
            "balance sim (%s, %zu workers, 5 sets): epoch ms count %.0f, cost %.0f (%.2fx), "
            "cost+steal %.0f (%.2fx), ideal %.0f\n",
            skewed ? "skewed" : "uniform", nw, t.count / 5, t.cost / 5, t.cost / t.count,
            t.cost_steal / 5, t.cost_steal / t.count, t.ideal / 5);
    return t;
}

/* Scenario of scripts/bench-skew: a 0.2- and a 0.6-CPU worker (cost units
 * of ~3 ms of CPU: an average sample of the skewed set takes ~5 ms). */
static const double HETERO[2] = {0.2 / 3.0, 0.6 / 3.0};
static const double EQUAL[2] = {0.4 / 3.0, 0.4 / 3.0};

START_TEST(test_skewed_heterogeneous)
{
    totals_t t = run_sets(1, HETERO, 2);
    ck_assert_msg(t.cost < 0.92 * t.count, "cost cut %.0f vs count %.0f", t.cost, t.count);
    ck_assert_msg(t.cost_steal < 0.92 * t.count, "cost+steal %.0f vs count %.0f", t.cost_steal,
                  t.count);
    ck_assert_msg(t.cost_steal < 1.06 * t.ideal, "cost+steal %.0f vs ideal %.0f", t.cost_steal,
                  t.ideal);
}
END_TEST

START_TEST(test_skewed_equal_workers)
{
    totals_t t = run_sets(1, EQUAL, 2);
    ck_assert_msg(t.cost_steal < 0.98 * t.count, "cost+steal %.0f vs count %.0f", t.cost_steal,
                  t.count);
}
END_TEST

/* Control: without skew the cut has nothing to balance and must not cost
 * anything; stealing still takes the slow worker's last queued split. */
START_TEST(test_uniform)
{
    totals_t t = run_sets(0, HETERO, 2);
    ck_assert_msg(t.cost < 1.02 * t.count, "cost %.0f vs count %.0f", t.cost, t.count);
    ck_assert_msg(t.cost_steal < 0.9 * t.count, "cost+steal %.0f vs count %.0f", t.cost_steal,
                  t.count);
}
END_TEST

int main(void)
{
    sl_log_set_level(getenv("SIM_VERBOSE") != NULL ? LOG_INFO : LOG_ERR);
    Suite *s = suite_create("dispatcher_balance");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_skewed_heterogeneous);
    tcase_add_test(tc, test_skewed_equal_workers);
    tcase_add_test(tc, test_uniform);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
