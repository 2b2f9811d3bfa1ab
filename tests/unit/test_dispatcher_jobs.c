/* test_dispatcher_jobs: the dispatcher's split logic without sockets --
 * the job table (dispatcher/core/jobs.h) and registry.c driven with a fake
 * clock (the RPC handlers over them: test_dispatcher_svc.c). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "common/base/log.h"
#include "common/order/ranks.h"
#include "common/rpc/rpc.h"
#include "dispatcher/config.h"
#include "dispatcher/disp.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/planner/plan.h"
#include "dispatcher/core/registry.h"
#include "dispatcher/service/service.h"
#include "dispatcher/status/status.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_jobs.h"
#include "tests/unit/fixtures_disp.h"

#define SPEC_FMT                                                                                   \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"                  \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8},"             \
    " {\"op\": \"flip\"}, {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5],"                      \
    " \"std\": [0.2, 0.2, 0.2]}],"                                                                 \
    " \"batch_size\": 4, \"epochs\": %u, \"offload\": %s}"

/* A registry and job table with small limits and a fake clock. */
typedef fx_jobs_t env_t;

static const disp_limits_t LIM = {
    .split_size = 10,
    .max_splits_per_worker = 2,
    .max_client_splits = 4,
    .max_jobs = 3,
    .worker_timeout_ms = 1000,
    .client_timeout_ms = 5000,
};

static int try_submit(env_t *e, uint64_t n, unsigned epochs, const char *offload, disp_job_t **ret,
                      char *err, size_t errlen)
{
    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, epochs, offload);
    disp_submit_t sub = {.spec_json = spec,
                         .spec_len = strlen(spec),
                         .spec_name = "t.json",
                         .num_samples = n,
                         .fingerprint = 7,
                         .client_id = "c"};
    return disp_jobs_submit(&e->js, &sub, e->now, ret, err, errlen);
}

static disp_job_t *submit(env_t *e, uint64_t n, unsigned epochs, const char *offload)
{
    disp_job_t *job = NULL;
    char err[512] = "";
    int rc = try_submit(e, n, epochs, offload, &job, err, sizeof(err));
    ck_assert_msg(rc == 0, "submit: %d %s", rc, err);
    return job;
}

/* Keeps every live worker alive at e->now except skip. */
static void beat_all(env_t *e, uint64_t skip)
{
    for (size_t i = 0; i < e->reg.n; i++) {
        if (e->reg.workers[i]->id != skip) {
            e->reg.workers[i]->last_heartbeat_ms = e->now;
        }
    }
}

/* The periodic tick, as disp_tick does it. */
static void tick(env_t *e)
{
    uint64_t lost[16];
    size_t n = disp_registry_expire(&e->reg, e->now, LIM.worker_timeout_ms, lost, 16);
    for (size_t i = 0; i < n; i++) {
        disp_jobs_worker_lost(&e->js, lost[i], e->now);
    }
    (void)disp_jobs_expire(&e->js, e->now);
    disp_jobs_assign_all(&e->js, e->now);
}

static uint32_t jw_n(disp_job_t *job, uint64_t wid)
{
    disp_jw_t *jw = disp_job_jw(job, wid);
    return jw != NULL ? jw->n : 0;
}

static disp_split_t *split_of(disp_job_t *job, uint64_t id)
{
    return disp_job_split(job, id, NULL, NULL, NULL);
}

static uint64_t counts_pending(disp_job_t *job)
{
    uint64_t p = 0, a = 0, k = 0;
    disp_job_counts(job, &p, &a, &k, NULL);
    return p;
}

/* ------------------------------------------------------------ tests */

START_TEST(test_split_creation)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    disp_job_t *job = submit(&e, 95, 3, "\"all\"");
    ck_assert_uint_eq(job->nsplits, 10);
    ck_assert_uint_eq(job->epochs, 3);
    ck_assert_uint_eq(job->plan.split, 3); /* decode+center_crop fused: 3 units */
    ck_assert_uint_eq(job->plan.nunits, 3);
    ck_assert_double_eq(job->plan.local_share, 0.0);
    ck_assert_str_eq(job->plan.mode, "all");
    /* Only epoch 0 exists until it is fully assigned. */
    ck_assert_uint_eq(job->nep, 1);
    ck_assert_uint_eq(counts_pending(job), 10);
    uint64_t ep = 9, b = 9, en = 9;
    ck_assert_ptr_nonnull(disp_job_split(job, 0, &ep, &b, &en));
    ck_assert_uint_eq(ep, 0);
    ck_assert_uint_eq(b, 0);
    ck_assert_uint_eq(en, 10);
    ck_assert_ptr_nonnull(disp_job_split(job, 9, &ep, &b, &en));
    ck_assert_uint_eq(b, 90);
    ck_assert_uint_eq(en, 95);                                     /* the last split is short */
    ck_assert_ptr_null(disp_job_split(job, 10, NULL, NULL, NULL)); /* epoch 1 not yet */
    /* No worker and the timeout has not passed since start: nothing moves. */
    e.now += 500;
    tick(&e);
    ck_assert_uint_eq(counts_pending(job), 10);
    ck_assert_uint_eq(job->nclient, 0);
    /* auto behaves as all and says so. */
    disp_job_t *j2 = submit(&e, 5, 1, "\"auto\"");
    ck_assert_str_eq(j2->plan.mode, "auto(all: no profile)");
    ck_assert_uint_eq(j2->plan.split, 3);
    ck_assert_uint_eq(j2->nsplits, 1);
    disp_job_t *j3 = submit(&e, 5, 1, "\"off\"");
    ck_assert_uint_eq(j3->plan.split, 0);
    ck_assert_double_eq(j3->plan.local_share, 1.0);
    /* off: every split is the client's at once, no worker needed. */
    ck_assert_uint_eq(j3->nclient, 1);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_local_share_rule)
{
    for (uint64_t i = 0; i < 100; i++) {
        ck_assert_int_eq(disp_plan_split_is_local(i, 0.0), 0);
        ck_assert_int_eq(disp_plan_split_is_local(i, 1.0), 1);
        ck_assert_int_eq(disp_plan_split_is_local(i, 0.25), i % 4 == 3);
        ck_assert_int_eq(disp_plan_split_is_local(i, 0.5), i % 2 == 1);
    }
    int n = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        n += disp_plan_split_is_local(i, 0.3);
    }
    ck_assert_int_eq(n, 300);

    env_t e;
    fx_jobs_init(&e, &LIM);
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    /* Fixed plan: spec split 1 sits inside the fused decode+crop unit and
     * moves to its end (unit 1). */
    disp_job_t *job = submit(&e, 400, 1, "{\"split\": 1, \"local_share\": 0.25}");
    ck_assert_str_eq(job->plan.mode, "fixed");
    ck_assert_uint_eq(job->plan.split, 1);
    ck_assert_double_eq(job->plan.local_share, 0.25);
    /* The client holds local splits 3, 7, 11, 15 (its cap is 4). */
    ck_assert_uint_eq(job->nclient, 4);
    for (uint32_t k = 0; k < 4; k++) {
        ck_assert_uint_eq(job->client_ids[k], 3 + 4 * k);
        ck_assert_int_eq(split_of(job, job->client_ids[k])->local, 1);
    }
    /* The worker gets the first non-local splits, never a local one. */
    ck_assert_uint_eq(jw_n(job, w1), 2);
    disp_jw_t *jw = disp_job_jw(job, w1);
    ck_assert_uint_eq(jw->ids[0], 0);
    ck_assert_uint_eq(jw->ids[1], 1);
    /* Acking a local split hands the client the next one (19). */
    uint64_t id = 3;
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &id, 1, e.now), 1);
    ck_assert_uint_eq(job->nclient, 4);
    ck_assert_uint_eq(job->client_ids[3], 19);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_assignment_caps)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    disp_job_t *job = submit(&e, 100, 1, "\"all\"");
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    uint64_t w2 = fx_jobs_add_worker(&e, "w2:1");
    /* w1 registered first and took 2 (its cap) before w2 existed. */
    ck_assert_uint_eq(jw_n(job, w1), 2);
    ck_assert_uint_eq(jw_n(job, w2), 2);
    ck_assert_uint_eq(counts_pending(job), 6);
    ck_assert_uint_eq(e.reg.workers[0]->outstanding, 2);
    /* Nothing changes without acks. */
    tick(&e);
    ck_assert_uint_eq(counts_pending(job), 6);
    /* An ack frees one slot at w2; the next split in order goes there. */
    disp_jw_t *jw2 = disp_job_jw(job, w2);
    uint64_t id = jw2->ids[0];
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &id, 1, e.now), 1);
    ck_assert_uint_eq(jw_n(job, w2), 2);
    ck_assert_uint_eq(jw2->ids[1], 4);
    ck_assert_uint_eq(counts_pending(job), 5);
    /* A third worker gets the least-loaded share first. */
    uint64_t w3 = fx_jobs_add_worker(&e, "w3:1");
    ck_assert_uint_eq(jw_n(job, w3), 2);
    ck_assert_uint_eq(counts_pending(job), 3);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_least_outstanding_over_jobs)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    uint64_t w2 = fx_jobs_add_worker(&e, "w2:1");
    /* Job A has one split: it goes to w1 (tie on everything, lowest id). */
    disp_job_t *a = submit(&e, 5, 1, "\"all\"");
    ck_assert_uint_eq(jw_n(a, w1), 1);
    /* Job B's first split goes to w2: same count in B, fewer over all jobs. */
    disp_job_t *b = submit(&e, 10, 1, "\"all\"");
    ck_assert_uint_eq(jw_n(b, w2), 1);
    ck_assert_uint_eq(jw_n(b, w1), 0);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_worker_loss_reassigns)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    disp_job_t *job = submit(&e, 100, 1, "\"all\"");
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    uint64_t w2 = fx_jobs_add_worker(&e, "w2:1");
    ck_assert_uint_eq(disp_job_jw(job, w1)->ids[0], 0);
    ck_assert_uint_eq(disp_job_jw(job, w1)->ids[1], 1);
    /* Ack w2's work so it has room for what w1 drops. */
    uint64_t acks[2] = {disp_job_jw(job, w2)->ids[0], disp_job_jw(job, w2)->ids[1]};
    e.now += 600;
    beat_all(&e, 0);
    e.now += 600;
    beat_all(&e, w1); /* w1 falls silent */
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, acks, 2, e.now), 2);
    ck_assert_uint_eq(jw_n(job, w2), 2); /* refilled with 4, 5 */
    ck_assert_uint_eq(disp_job_jw(job, w2)->ids[0], 4);
    disp_jobs_ack(&e.js, job, disp_job_jw(job, w2)->ids, 2, e.now);
    /* Now w2 holds 6, 7. Let w1 expire. */
    e.now += 500;
    beat_all(&e, w1);
    tick(&e);
    ck_assert_ptr_null(disp_registry_live(&e.reg, w1));
    ck_assert_ptr_null(disp_job_jw(job, w1));
    ck_assert_uint_eq(job->reassigned_total, 2);
    ck_assert_uint_eq(e.js.splits_reassigned_total, 2);
    /* 0 and 1 went to the front of the queue: after acks at w2 they come
     * first, before 8. */
    disp_jw_t *jw2 = disp_job_jw(job, w2);
    disp_jobs_ack(&e.js, job, jw2->ids, 2, e.now);
    jw2 = disp_job_jw(job, w2);
    ck_assert_uint_eq(jw2->n, 2);
    ck_assert_uint_eq(jw2->ids[0], 0);
    ck_assert_uint_eq(jw2->ids[1], 1);
    ck_assert_uint_eq(split_of(job, 0)->owner, w2);
    /* A lost worker's heartbeat gets nothing; its register makes a new id. */
    disp_worker_t *w = NULL;
    int is_new = 0;
    ck_assert_int_eq(disp_registry_register(&e.reg, "w1:1", "h", 4, w1, e.now, &w, &is_new), 0);
    ck_assert_uint_ne(w->id, w1);
    ck_assert_int_eq(is_new, 1);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_retry)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    disp_job_t *job = submit(&e, 100, 1, "{\"split\": 4, \"local_share\": 0.5}");
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    uint64_t w2 = fx_jobs_add_worker(&e, "w2:1");
    /* Odd splits are the client's (1, 3, 5, 7 within its cap); remote ones
     * are even: w1 has 0, 2; w2 has 4, 6; 8 waits. */
    ck_assert_uint_eq(job->nclient, 4);
    ck_assert_uint_eq(disp_job_jw(job, w1)->ids[1], 2);
    ck_assert_uint_eq(disp_job_jw(job, w2)->ids[0], 4);
    ck_assert_uint_eq(job->plan.split, 3); /* spec split 4 = all 3 units */
    /* Retry 2 (w1's stream broke) plus ids that must be ignored: a client
     * split and a nonsense id. */
    uint64_t r[3] = {2, 1, 999999};
    ck_assert_uint_eq(disp_jobs_retry(&e.js, job, r, 3, 0, e.now), 1);
    disp_jw_t *jw1 = disp_job_jw(job, w1);
    ck_assert_uint_eq(jw1->nrevoked, 1);
    ck_assert_uint_eq(jw1->revoked[0], 2);
    ck_assert_uint_eq(job->reassigned_total, 1);
    /* Nobody else has room, so w1 gets it back rather than letting it wait;
     * it went to the front, ahead of 8. */
    disp_split_t *s2 = split_of(job, 2);
    ck_assert_uint_eq(s2->state, DISP_SPLIT_ASSIGNED);
    ck_assert_uint_eq(s2->owner, w1);
    ck_assert_uint_eq(s2->avoid, w1);
    ck_assert_uint_eq(split_of(job, 8)->state, DISP_SPLIT_PENDING);
    ck_assert_uint_eq(split_of(job, 1)->owner, 0);
    ck_assert_uint_eq(split_of(job, 1)->state, DISP_SPLIT_ASSIGNED);
    /* An ack at w2 lets 8 go there; a retry of an acked split is ignored. */
    uint64_t a = 4;
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &a, 1, e.now), 1);
    ck_assert_uint_eq(split_of(job, 8)->owner, w2);
    ck_assert_uint_eq(disp_jobs_retry(&e.js, job, &a, 1, 0, e.now), 0);
    /* A retry of a split that is both acked and retried in one request:
     * the ack (applied first by the service) wins. */
    a = 6;
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &a, 1, e.now), 1);
    ck_assert_uint_eq(disp_jobs_retry(&e.js, job, &a, 1, 0, e.now), 0);
    ck_assert_uint_eq(job->reassigned_total, 1);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_retry_prefers_other_worker)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    disp_job_t *job = submit(&e, 30, 1, "\"all\"");
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    uint64_t w2 = fx_jobs_add_worker(&e, "w2:1");
    /* 3 splits: w1 has 0, 1; w2 has 2 and room for one more. */
    ck_assert_uint_eq(jw_n(job, w1), 2);
    ck_assert_uint_eq(jw_n(job, w2), 1);
    uint64_t r = 0;
    ck_assert_uint_eq(disp_jobs_retry(&e.js, job, &r, 1, 0, e.now), 1);
    /* w1 now has fewer splits than w2, but 0 came from w1: w2 gets it. */
    ck_assert_uint_eq(split_of(job, 0)->owner, w2);
    ck_assert_uint_eq(jw_n(job, w1), 1);
    ck_assert_uint_eq(jw_n(job, w2), 2);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_acks_epochs_finish)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    disp_job_t *job = submit(&e, 30, 3, "\"all\"");
    ck_assert_uint_eq(job->nsplits, 3);
    /* w1 holds 0, 1; split 2 pending: epoch 1 does not exist yet. */
    ck_assert_uint_eq(job->nep, 1);
    uint64_t a[2] = {0, 1};
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, a, 2, e.now), 2);
    /* w1 took 2 and then epoch 0 was fully assigned -> epoch 1 created and
     * its first split (id 3) handed out too. */
    ck_assert_uint_eq(job->nep, 2);
    ck_assert_uint_eq(disp_job_jw(job, w1)->ids[0], 2);
    ck_assert_uint_eq(disp_job_jw(job, w1)->ids[1], 3);
    /* Repeated and stale acks change nothing. */
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, a, 2, e.now), 0);
    uint64_t future = 8; /* epoch 2: not created */
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &future, 1, e.now), 0);
    /* Epoch 1 fully assigned but epoch 0 unacked: no third epoch. */
    uint64_t a2[2] = {3, 4};
    /* Ack 3 then 4 (4 was handed out after 3's ack). */
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &a2[0], 1, e.now), 1);
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &a2[1], 1, e.now), 1);
    ck_assert_uint_eq(job->nep, 2); /* epochs 0 and 1; split 2 of epoch 0 still out */
    ck_assert_uint_eq(job->ep[0].epoch, 0);
    ck_assert_uint_eq(job->ep[1].epoch, 1);
    uint64_t two = 2;
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &two, 1, e.now), 1);
    /* Epoch 0 done and freed; epoch 1 fully assigned -> epoch 2 created. */
    ck_assert_uint_eq(job->ep[0].epoch, 1);
    ck_assert_uint_eq(job->nep, 2);
    ck_assert_ptr_null(split_of(job, 0));
    /* Ack everything left until finished. */
    for (int guard = 0; guard < 20 && job->state == DISP_JOB_ACTIVE; guard++) {
        disp_jw_t *jw = disp_job_jw(job, w1);
        ck_assert_ptr_nonnull(jw);
        ck_assert_uint_gt(jw->n, 0);
        uint64_t id = jw->ids[0];
        disp_jobs_ack(&e.js, job, &id, 1, e.now);
    }
    ck_assert_int_eq(job->state, DISP_JOB_FINISHED);
    ck_assert_uint_eq(job->acked_total, 9);
    ck_assert_uint_eq(job->nep, 0);
    ck_assert_uint_eq(e.reg.workers[0]->outstanding, 0);
    ck_assert_uint_eq(e.js.splits_acked_total, 9);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_no_worker_fallback)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    disp_job_t *job = submit(&e, 100, 1, "\"all\"");
    /* Within worker_timeout of start-up, workers may still come. */
    e.now += 999;
    tick(&e);
    ck_assert_uint_eq(job->nclient, 0);
    /* Then the client gets remote splits, up to its cap, in order. */
    e.now += 1;
    tick(&e);
    ck_assert_uint_eq(job->nclient, 4);
    ck_assert_uint_eq(job->client_ids[0], 0);
    ck_assert_uint_eq(split_of(job, 0)->owner, 0);
    /* A worker that joins takes the rest; the client keeps what it has. */
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    ck_assert_uint_eq(jw_n(job, w1), 2);
    uint64_t c[4] = {0, 1, 2, 3};
    disp_jobs_ack(&e.js, job, c, 4, e.now);
    ck_assert_uint_eq(job->nclient, 0); /* a worker is live again: no fallback */
    /* The worker dies: after it was silent a whole timeout, its splits and
     * the rest go to the client again. */
    e.now += 1000;
    tick(&e);
    ck_assert_ptr_null(disp_registry_live(&e.reg, w1));
    ck_assert_uint_eq(job->nclient, 4);
    ck_assert_uint_eq(job->client_ids[0], 4); /* the lost splits first */
    ck_assert_uint_eq(job->client_ids[1], 5);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_all_workers_refuse)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    disp_job_t *job = submit(&e, 50, 1, "\"all\"");
    ck_assert_uint_eq(jw_n(job, w1), 2);
    ck_assert_int_eq(disp_jobs_worker_refused(&e.js, job, w1, "fingerprint 8 != 7", e.now), 0);
    /* Banned: nothing for w1, its splits and the rest go to the client. */
    ck_assert_uint_eq(jw_n(job, w1), 0);
    ck_assert_int_eq(disp_job_jw(job, w1)->banned, 1);
    ck_assert_uint_eq(job->nclient, 4);
    ck_assert_uint_eq(job->client_ids[0], 0);
    ck_assert_ptr_nonnull(strstr(job->worker_failure, "fingerprint"));
    /* Another worker can still take the job. */
    uint64_t w2 = fx_jobs_add_worker(&e, "w2:1");
    ck_assert_uint_eq(jw_n(job, w2), 1); /* splits 4 is all that is left */
    ck_assert_int_eq(job->state, DISP_JOB_ACTIVE);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_client_timeout_and_close)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    uint64_t w1 = fx_jobs_add_worker(&e, "w1:1");
    disp_job_t *job = submit(&e, 50, 1, "\"all\"");
    uint64_t id = job->id;
    ck_assert_uint_eq(e.reg.workers[0]->outstanding, 2);
    ck_assert_uint_eq(e.js.nopen, 1);
    e.now += 4999;
    beat_all(&e, 0);
    tick(&e);
    ck_assert_int_eq(job->state, DISP_JOB_ACTIVE);
    e.now += 1;
    beat_all(&e, 0);
    tick(&e);
    ck_assert_int_eq(job->state, DISP_JOB_CLOSED);
    ck_assert_ptr_nonnull(strstr(job->close_reason, "client silent"));
    ck_assert_uint_eq(e.reg.workers[0]->outstanding, 0);
    ck_assert_uint_eq(e.js.nopen, 0);
    ck_assert_uint_eq(e.js.split_slots, 0);
    ck_assert_ptr_null(disp_job_jw(job, w1));
    /* Kept for /status, then dropped. */
    ck_assert_ptr_eq(disp_jobs_find(&e.js, id), job);
    e.now += DISP_CLOSED_LINGER_MS;
    beat_all(&e, 0);
    tick(&e);
    ck_assert_ptr_null(disp_jobs_find(&e.js, id));
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_submit_errors)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    disp_job_t *job = NULL;
    char err[512] = "";
    /* A bad spec: the parser's own message, naming the spec name. */
    disp_submit_t sub = {.spec_json = "{\"source\": 3}",
                         .spec_len = 13,
                         .spec_name = "x.json",
                         .num_samples = 10};
    ck_assert_int_eq(disp_jobs_submit(&e.js, &sub, e.now, &job, err, sizeof(err)), -EINVAL);
    sl_spec_t spec;
    char want[512] = "";
    ck_assert_int_ne(sl_spec_parse("x.json", "{\"source\": 3}", 13, &spec, want, sizeof(want)), 0);
    ck_assert_str_eq(err, want);
    sub.spec_name = NULL;
    ck_assert_int_eq(disp_jobs_submit(&e.js, &sub, e.now, &job, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strncmp(err, "<rpc>", 5) == 0, "%s", err);
    /* num_samples 0 and absurd sample counts. */
    ck_assert_int_eq(try_submit(&e, 0, 1, "\"all\"", &job, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "num_samples"));
    ck_assert_int_eq(try_submit(&e, 1ull << 40, 1, "\"all\"", &job, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "split_size"));
    /* max_jobs = 3. */
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(try_submit(&e, 10, 1, "\"all\"", &job, err, sizeof(err)), 0);
    }
    ck_assert_int_eq(try_submit(&e, 10, 1, "\"all\"", &job, err, sizeof(err)), -ENOSPC);
    ck_assert_ptr_nonnull(strstr(err, "max_jobs"));
    /* Closing one makes room. */
    disp_jobs_close(&e.js, e.js.jobs[0], "test", e.now);
    ck_assert_int_eq(try_submit(&e, 10, 1, "\"all\"", &job, err, sizeof(err)), 0);
    fx_jobs_free(&e);
}
END_TEST

static int try_submit_costs(env_t *e, uint64_t n, unsigned epochs, const char *offload,
                            const float *costs, size_t ncosts, disp_job_t **ret, char *err,
                            size_t errlen)
{
    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, epochs, offload);
    disp_submit_t sub = {.spec_json = spec,
                         .spec_len = strlen(spec),
                         .spec_name = "t.json",
                         .num_samples = n,
                         .fingerprint = 7,
                         .client_id = "c",
                         .costs = costs,
                         .ncosts = ncosts};
    return disp_jobs_submit(&e->js, &sub, e->now, ret, err, errlen);
}

/* A heartbeat from a random live worker reporting a random subset of its
 * splits in progress, some sent, the rest gone; sometimes it is leaving. */
static void random_heartbeat(env_t *e, disp_job_t *job)
{
    disp_jw_t *jw = &job->jw[rand() % job->njw];
    disp_worker_t *ww = disp_registry_live(&e->reg, jw->worker_id);
    if (ww != NULL) {
        disp_split_ref_t prog[8], sent[8];
        disp_progress_t p = {.in_progress = prog, .sent = sent};
        for (uint32_t k = 0; k < jw->n && k < 8; k++) {
            int r = rand() % 4;
            /* The right hand-out, none (an older worker), or a stale
             * one (which counts as not reported). */
            int which = rand() % 8;
            uint64_t aid = which == 0 ? 0 : which == 1 ? jw->aid[k] + 1000 : jw->aid[k];
            if (r < 2) {
                prog[p.n_in_progress++] = (disp_split_ref_t){job->id, jw->ids[k], aid};
            } else if (r == 2) {
                sent[p.n_sent++] = (disp_split_ref_t){job->id, jw->ids[k], aid};
            }
        }
        p.leaving = rand() % 20 == 0;
        ww->leaving |= p.leaving;
        ww->last_heartbeat_ms = e->now;
        (void)disp_jobs_worker_progress(&e->js, ww, &p, e->now);
        if (ww->leaving && p.n_in_progress == 0) {
            (void)disp_jobs_worker_left(&e->js, ww->id, e->now);
            disp_registry_leave(&e->reg, ww, e->now);
        } else {
            disp_jobs_worker_sent(&e->js, ww);
        }
    }
}

/* Each worker's outstanding = the sum over its job lists, active ones
 * capped, delivered ones awaiting acks on top; a departed worker keeps only
 * what it delivered. */
static void check_workers(const env_t *e, disp_job_t *job)
{
    for (size_t i = 0; i < e->reg.n; i++) {
        disp_worker_t *ww = e->reg.workers[i];
        if (ww->state != DISP_WORKER_LOST) {
            ck_assert_uint_eq(ww->outstanding, jw_n(job, ww->id));
            /* Active ones capped; delivered ones await acks on top. */
            ck_assert_uint_le(ww->outstanding, 2 * LIM.max_splits_per_worker);
            disp_jw_t *jl = disp_job_jw(job, ww->id);
            uint32_t active = 0;
            for (uint32_t k = 0; jl != NULL && k < jl->n; k++) {
                active += jl->sent[k] != DISP_AN_DELIVERED;
            }
            ck_assert_uint_le(active, LIM.max_splits_per_worker);
        }
        if (ww->state == DISP_WORKER_LEFT) {
            /* A departed worker keeps only what it delivered. */
            disp_jw_t *jl = disp_job_jw(job, ww->id);
            for (uint32_t k = 0; jl != NULL && k < jl->n; k++) {
                ck_assert_uint_eq(jl->sent[k], DISP_AN_DELIVERED);
            }
        }
    }
}

/* Random workers dying, joining, leaving, retries, heartbeats and acks:
 * every split of every epoch is acknowledged exactly once. `balanced`:
 * cost-cut splits and stealing on. */
static void random_run(int balanced, unsigned seed)
{
    env_t e;
    disp_limits_t lim = LIM;
    lim.steal = balanced;
    fx_jobs_init(&e, &lim);
    srand(seed);
    const unsigned epochs = 4;
    float *costs = balanced ? fx_skewed_costs(237) : NULL;
    disp_job_t *job = NULL;
    char err[512] = "";
    ck_assert_int_eq(try_submit_costs(&e, 237, epochs, "{\"split\": 2, \"local_share\": 0.3}",
                                      costs, balanced ? 237 : 0, &job, err, sizeof(err)),
                     0);
    free(costs);
    ck_assert(balanced ? job->costs != NULL : job->costs == NULL);
    uint64_t total = (uint64_t)job->nsplits * epochs;
    uint8_t *acked = calloc(total, 1);
    ck_assert_ptr_nonnull(acked);
    uint64_t w[3] = {fx_jobs_add_worker(&e, "a:1"), fx_jobs_add_worker(&e, "b:1"),
                     fx_jobs_add_worker(&e, "c:1")};
    uint64_t nacked = 0;
    for (int step = 0; step < 20000 && job->state == DISP_JOB_ACTIVE; step++) {
        e.now += 10;
        int ev = rand() % 100;
        if (ev < 3) {
            /* Kill a random worker by silence (it is re-registered later). */
            int k = rand() % 3;
            disp_worker_t *ww = disp_registry_live(&e.reg, w[k]);
            if (ww != NULL) {
                ww->last_heartbeat_ms = e.now - LIM.worker_timeout_ms;
            }
        } else if (ev < 6) {
            int k = rand() % 3;
            if (disp_registry_live(&e.reg, w[k]) == NULL) {
                char addr[32];
                snprintf(addr, sizeof(addr), "n%d:1", step);
                w[k] = fx_jobs_add_worker(&e, addr);
            }
        } else if (ev < 12 && job->njw > 0) {
            /* Retry one of a worker's splits: an older client (no worker id),
             * or a stream to that worker broke (maybe a stale id too). */
            disp_jw_t *jw = &job->jw[rand() % job->njw];
            if (jw->n > 0) {
                uint64_t id = jw->ids[rand() % jw->n];
                uint64_t wid = rand() % 2 ? jw->worker_id : 0;
                if (rand() % 4 == 0) {
                    id = (id + 1) % total; /* someone else's, or not assigned */
                }
                disp_jobs_retry(&e.js, job, &id, 1, wid, e.now);
            }
        } else if (ev < 20 && job->njw > 0) {
            random_heartbeat(&e, job);
        } else {
            /* Ack something some owner holds (the client or a worker). */
            nacked += (uint64_t)fx_jobs_ack_random(&e, job, acked, total);
        }
        fx_jobs_beat_random(&e, w, 3, LIM.worker_timeout_ms);
        job->last_client_ms = e.now;
        tick(&e);
        check_workers(&e, job);
        ck_assert_uint_le(job->nclient, LIM.max_client_splits);
        ck_assert_uint_le(job->nep, 2);
    }
    ck_assert_int_eq(job->state, DISP_JOB_FINISHED);
    ck_assert_uint_eq(nacked, total);
    for (uint64_t i = 0; i < total; i++) {
        ck_assert_int_eq(acked[i], 1);
    }
    ck_assert_uint_eq(job->acked_total, total);
    free(acked);
    fx_jobs_free(&e);
}

START_TEST(test_random_exactly_once) { random_run(0, 12345); }
END_TEST

START_TEST(test_random_exactly_once_balanced)
{
    random_run(1, 12345);
    random_run(1, 777);
}
END_TEST

/* ------------------------------------------------------------ balancing */

START_TEST(test_split_size_auto_rule)
{
    /* Two workers assumed when fewer are live: 2 * 4 * 2 = 16 splits. */
    ck_assert_uint_eq(disp_split_size_auto(400, 0, 4), 25);
    ck_assert_uint_eq(disp_split_size_auto(400, 2, 4), 25);
    ck_assert_uint_eq(disp_split_size_auto(3000, 4, 4), 94); /* ceil(3000 / 32) */
    ck_assert_uint_eq(disp_split_size_auto(400, 8, 4), DISP_AUTO_SPLIT_MIN);
    ck_assert_uint_eq(disp_split_size_auto(10, 2, 4), DISP_AUTO_SPLIT_MIN);
    ck_assert_uint_eq(disp_split_size_auto(1000000, 2, 4), DISP_AUTO_SPLIT_MAX);
    /* Above the ceiling only to stay within the per-epoch split bound. */
    uint64_t huge = (uint64_t)DISP_MAX_SPLITS_PER_EPOCH * 1000 + 1;
    ck_assert_uint_eq(disp_split_size_auto(huge, 2, 4), 1001);

    /* split_size 0 in the limits: each job gets the rule's size for the
     * workers live at its submission, and keeps it. */
    env_t e;
    disp_limits_t lim = LIM;
    lim.split_size = 0;
    fx_jobs_init(&e, &lim);
    fx_jobs_add_worker(&e, "a:1");
    fx_jobs_add_worker(&e, "b:1");
    fx_jobs_add_worker(&e, "c:1");
    disp_job_t *job = submit(&e, 400, 1, "\"all\"");
    ck_assert_uint_eq(job->split_size, disp_split_size_auto(400, 3, LIM.max_splits_per_worker));
    ck_assert_uint_eq(job->split_size, 34); /* ceil(400 / (3 * 2 * 2)) */
    ck_assert_uint_eq(job->nsplits, 12);
    uint64_t b = 0, en = 0;
    ck_assert_ptr_nonnull(disp_job_split(job, 11, NULL, &b, &en));
    ck_assert_uint_eq(b, 374);
    ck_assert_uint_eq(en, 400);
    fx_jobs_add_worker(&e, "d:1");
    ck_assert_uint_eq(job->split_size, 34);
    fx_jobs_free(&e);
}
END_TEST

static double range_cost(const float *c, uint64_t b, uint64_t en)
{
    double x = 0;
    for (uint64_t p = b; p < en; p++) {
        x += c[p];
    }
    return x;
}

START_TEST(test_cut_by_cost)
{
    uint64_t bounds[64];
    float even[10];
    for (int i = 0; i < 10; i++) {
        even[i] = 1;
    }
    disp_cut_by_cost(even, 10, 5, bounds);
    for (int i = 0; i <= 5; i++) {
        ck_assert_uint_eq(bounds[i], 2u * i);
    }
    /* All zero: an even cut. One split per position: each gets one. */
    float zero[10] = {0};
    disp_cut_by_cost(zero, 10, 3, bounds);
    ck_assert_uint_eq(bounds[1], 3);
    ck_assert_uint_eq(bounds[2], 6);
    ck_assert_uint_eq(bounds[3], 10);
    disp_cut_by_cost(even, 10, 10, bounds);
    for (int i = 0; i <= 10; i++) {
        ck_assert_uint_eq(bounds[i], (uint64_t)i);
    }
    /* One giant cost: no split is empty all the same. */
    float giant[10] = {0, 0, 0, 0, 1000, 0, 0, 0, 0, 0};
    disp_cut_by_cost(giant, 10, 4, bounds);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_lt(bounds[i], bounds[i + 1]);
    }
    /* Random costs: every cut within half the largest cost of its target. */
    srand(99);
    enum { N = 1000, S = 37 };
    static float rc[N];
    double total = 0, cmax = 0;
    for (int i = 0; i < N; i++) {
        rc[i] = (float)(rand() % 100) / 10.0f + (rand() % 10 == 0 ? 50.0f : 0.0f);
        total += rc[i];
        cmax = rc[i] > cmax ? rc[i] : cmax;
    }
    disp_cut_by_cost(rc, N, S, bounds);
    ck_assert_uint_eq(bounds[0], 0);
    ck_assert_uint_eq(bounds[S], N);
    for (int i = 1; i <= S; i++) {
        ck_assert_uint_lt(bounds[i - 1], bounds[i]);
        double prefix = range_cost(rc, 0, bounds[i]);
        ck_assert_msg(fabs(prefix - total * i / S) <= cmax / 2 + 1e-3, "cut %d at %g, target %g", i,
                      prefix, total * i / S);
    }
}
END_TEST

/* The costs of an epoch's splits in its order, as the test computes them. */
static void epoch_split_costs(disp_job_t *job, uint64_t epoch, const float *costs, double *out)
{
    uint64_t *order = malloc(job->num_samples * sizeof(*order));
    ck_assert_ptr_nonnull(order);
    sl_rank_order(&job->spec, epoch, job->num_samples, order, order);
    uint64_t expect_begin = 0;
    for (uint32_t i = 0; i < job->nsplits; i++) {
        uint64_t e = 0, b = 0, en = 0;
        ck_assert_ptr_nonnull(disp_job_split(job, epoch * job->nsplits + i, &e, &b, &en));
        ck_assert_uint_eq(e, epoch);
        ck_assert_uint_eq(b, expect_begin); /* contiguous, non-empty, cover the epoch */
        ck_assert_uint_gt(en, b);
        expect_begin = en;
        out[i] = 0;
        for (uint64_t p = b; p < en; p++) {
            out[i] += costs[order[p]];
        }
    }
    ck_assert_uint_eq(expect_begin, job->positions);
    free(order);
}

START_TEST(test_cost_cut_splits)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    const uint64_t n = 200; /* 20 splits of 10 by count */
    float *costs = fx_skewed_costs(n);
    char err[512] = "";
    disp_job_t *cnt = NULL, *cost = NULL;
    ck_assert_int_eq(try_submit_costs(&e, n, 2, "\"all\"", NULL, 0, &cnt, err, sizeof(err)), 0);
    ck_assert_int_eq(try_submit_costs(&e, n, 2, "\"all\"", costs, n, &cost, err, sizeof(err)), 0);
    ck_assert_uint_eq(cost->nsplits, cnt->nsplits); /* same ids, other bounds */
    double total = 0;
    for (uint64_t i = 0; i < n; i++) {
        total += costs[i];
    }
    double target = total / cost->nsplits;
    double c_cnt[32], c_cost[32];
    /* The count cut's worst split: how skewed this shuffle is. */
    epoch_split_costs(cnt, 0, costs, c_cnt);
    double worst_cnt = 0, worst_cost = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
        /* Epoch 1 exists once epoch 0 has nothing pending: assign it all. */
        epoch_split_costs(cost, (uint64_t)epoch, costs, c_cost);
        for (uint32_t i = 0; i < cost->nsplits; i++) {
            ck_assert_msg(fabs(c_cost[i] - target) <= 8.0 + 1e-3, "split %u: %g vs %g", i,
                          c_cost[i], target);
            worst_cost = c_cost[i] > worst_cost ? c_cost[i] : worst_cost;
            worst_cnt = c_cnt[i] > worst_cnt ? c_cnt[i] : worst_cnt;
            /* The dispatcher's own per-split cost agrees. */
            uint32_t k = cost->ep[0].epoch == (uint64_t)epoch ? 0 : 1;
            ck_assert(fabs(cost->ep[k].cost[i] - c_cost[i]) < 1e-3);
        }
        if (epoch == 0) {
            uint64_t w = fx_jobs_add_worker(&e, "a:1"); /* takes splits; ack them all */
            (void)w;
            for (uint64_t id = 0; id < cost->nsplits; id++) {
                ck_assert_uint_eq(disp_jobs_ack(&e.js, cost, &id, 1, e.now), 1);
            }
            ck_assert_uint_eq(cost->ep[0].epoch, 1);
        }
    }
    ck_assert_msg(worst_cost < worst_cnt, "cost cut worst %g, count cut worst %g", worst_cost,
                  worst_cnt);

    /* Broken costs: wrong length, negative, not finite. */
    disp_job_t *bad = NULL;
    ck_assert_int_eq(try_submit_costs(&e, n, 1, "\"all\"", costs, n - 1, &bad, err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "sample_costs: 199 values for 200 samples"));
    costs[5] = -1;
    ck_assert_int_eq(try_submit_costs(&e, n, 1, "\"all\"", costs, n, &bad, err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "sample_costs[5]"));
    costs[5] = NAN;
    ck_assert_int_eq(try_submit_costs(&e, n, 1, "\"all\"", costs, n, &bad, err, sizeof(err)),
                     -EINVAL);
    costs[5] = INFINITY;
    ck_assert_int_eq(try_submit_costs(&e, n, 1, "\"all\"", costs, n, &bad, err, sizeof(err)),
                     -EINVAL);
    /* All zero says nothing: cut by count. */
    for (uint64_t i = 0; i < n; i++) {
        costs[i] = 0;
    }
    ck_assert_int_eq(try_submit_costs(&e, n, 1, "\"all\"", costs, n, &bad, err, sizeof(err)), 0);
    ck_assert_ptr_null(bad->costs);
    ck_assert_ptr_null(bad->ep[0].bounds);
    free(costs);
    fx_jobs_free(&e);
}
END_TEST

/* Predicted finish time, not split count, picks the worker: a worker
 * measured 10x faster takes both free splits before the slow one gets any. */
START_TEST(test_pick_by_speed)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    disp_job_t *job = submit(&e, 100, 1, "\"all\"");
    uint64_t wa = fx_jobs_add_worker(&e, "a:1");
    uint64_t wb = fx_jobs_add_worker(&e, "b:1");
    disp_jw_t *ja = disp_job_jw(job, wa);
    disp_jw_t *jb = disp_job_jw(job, wb);
    ck_assert_uint_eq(ja->n, 2);
    ck_assert_uint_eq(jb->n, 2);
    ja->done_cost = 1000; /* 1000 positions in 1 s ... */
    ja->busy_ms = 1000;
    jb->done_cost = 100; /* ... and 100 */
    jb->busy_ms = 1000;
    uint64_t ids[4] = {ja->ids[0], ja->ids[1], jb->ids[0], jb->ids[1]};
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, ids, 4, e.now), 4);
    ja = disp_job_jw(job, wa);
    jb = disp_job_jw(job, wb);
    ck_assert_uint_eq(ja->n, 2);
    ck_assert_uint_eq(ja->ids[0], 4); /* by count they would alternate */
    ck_assert_uint_eq(ja->ids[1], 5);
    /* The idle slow worker gets one; the next waits for the fast one, which
     * would finish it sooner even after its queue. */
    ck_assert_uint_eq(jb->n, 1);
    ck_assert_uint_eq(jb->ids[0], 6);
    ck_assert_int_eq(split_of(job, 7)->state, DISP_SPLIT_PENDING);
    uint64_t four = 4;
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &four, 1, e.now), 1);
    ja = disp_job_jw(job, wa);
    ck_assert_uint_eq(ja->n, 2);
    ck_assert_uint_eq(ja->ids[1], 7);
    ck_assert_uint_eq(jw_n(job, wb), 1);
    fx_jobs_free(&e);
}
END_TEST

/* Stealing: at the tail, the last queued split of the worker that would
 * finish last moves to an idle one, revoked at the first if it was told;
 * every split is still acknowledged once. Off: nothing moves. */
START_TEST(test_steal_tail)
{
    for (int told = 0; told < 3; told++) {
        env_t e;
        disp_limits_t lim = LIM;
        lim.steal = told < 2; /* round 2: stealing off */
        fx_jobs_init(&e, &lim);
        disp_job_t *job = submit(&e, 40, 1, "\"all\""); /* 4 splits */
        uint64_t wa = fx_jobs_add_worker(&e, "a:1");
        uint64_t wb = fx_jobs_add_worker(&e, "b:1");
        ck_assert_uint_eq(jw_n(job, wa), 2); /* 0, 1 */
        ck_assert_uint_eq(jw_n(job, wb), 2); /* 2, 3 */
        if (told) {
            disp_jobs_worker_sent(&e.js, disp_registry_live(&e.reg, wa));
        }
        uint64_t bdone[2] = {2, 3};
        ck_assert_uint_eq(disp_jobs_ack(&e.js, job, bdone, 2, e.now), 2);
        disp_jw_t *ja = disp_job_jw(job, wa);
        disp_jw_t *jb = disp_job_jw(job, wb);
        if (!lim.steal) {
            ck_assert_uint_eq(ja->n, 2);
            ck_assert_uint_eq(jb->n, 0);
            ck_assert_uint_eq(job->stolen_total, 0);
            fx_jobs_free(&e);
            continue;
        }
        ck_assert_uint_eq(job->stolen_total, 1);
        ck_assert_uint_eq(ja->n, 1);
        ck_assert_uint_eq(ja->ids[0], 0); /* the one it is running stays */
        ck_assert_uint_eq(jb->n, 1);
        ck_assert_uint_eq(jb->ids[0], 1);
        ck_assert(split_of(job, 1)->stolen);
        ck_assert_uint_eq(ja->nrevoked, told ? 1u : 0u); /* a NEW one was never told */
        if (told) {
            ck_assert_uint_eq(ja->revoked[0], 1);
        }
        /* Nothing more to gain: one split each. */
        disp_jobs_assign(&e.js, job, e.now);
        ck_assert_uint_eq(job->stolen_total, 1);
        /* The old owner's copy may still arrive first: acked once all the same. */
        uint64_t one = 1;
        ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &one, 1, e.now), 1);
        ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &one, 1, e.now), 0);
        ck_assert_uint_eq(jw_n(job, wb), 0);
        uint64_t zero = 0;
        ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &zero, 1, e.now), 1);
        ck_assert_int_eq(job->state, DISP_JOB_FINISHED);
        ck_assert_uint_eq(job->acked_total, 4);
        fx_jobs_free(&e);
    }
}
END_TEST

START_TEST(test_registry)
{
    disp_registry_t r;
    ck_assert_int_eq(disp_registry_init(&r, 2, 10, 0), 0);
    disp_worker_t *w = NULL;
    int is_new = 0;
    ck_assert_int_eq(disp_registry_register(&r, "a:1", "h", 1, 0, 0, &w, &is_new), 0);
    ck_assert_uint_eq(w->id, 10);
    /* A retried register with the same id and address: same worker. */
    ck_assert_int_eq(disp_registry_register(&r, "a:1", "h", 1, 10, 5, &w, &is_new), 0);
    ck_assert_uint_eq(w->id, 10);
    ck_assert_int_eq(is_new, 0);
    /* After a dispatcher restart a worker asks for its old id: granted. */
    ck_assert_int_eq(disp_registry_register(&r, "b:1", "h", 1, 500, 5, &w, &is_new), 0);
    ck_assert_uint_eq(w->id, 500);
    /* Full of live workers. */
    ck_assert_int_eq(disp_registry_register(&r, "c:1", "h", 1, 0, 5, &w, &is_new), -ENOSPC);
    ck_assert_int_eq(disp_registry_register(&r, "", "h", 1, 0, 5, &w, &is_new), -EINVAL);
    /* Expiry: both lost; the slot of a lost one can be reused. */
    uint64_t lost[4];
    ck_assert_uint_eq(disp_registry_expire(&r, 1005, 1000, lost, 4), 2);
    ck_assert_int_eq(disp_registry_no_workers(&r, 1005, 1000), 1); /* silent since 5 */
    ck_assert_int_eq(disp_registry_register(&r, "c:1", "h", 1, 0, 1006, &w, &is_new), 0);
    ck_assert_uint_eq(w->id, 501); /* never below an id seen */
    ck_assert_int_eq(disp_registry_no_workers(&r, 1006, 1000), 0);
    /* A lost id asked for again gets a new one. */
    ck_assert_uint_eq(disp_registry_expire(&r, 3000, 1000, lost, 4), 1);
    ck_assert_int_eq(disp_registry_register(&r, "c:1", "h", 1, 501, 3001, &w, &is_new), 0);
    ck_assert_uint_ne(w->id, 501);
    disp_registry_destroy(&r);
}
END_TEST

/* The registry's id index against a linear scan of its workers, through
 * random registrations (own ids, chosen ids colliding in the hash, retried
 * ones), losses, lingering entries removed and full-registry evictions. */
static disp_worker_t *scan(disp_registry_t *r, uint64_t id)
{
    for (size_t i = 0; i < r->n; i++) {
        if (r->workers[i]->id == id) {
            return r->workers[i];
        }
    }
    return NULL;
}

START_TEST(test_registry_index)
{
    disp_registry_t r;
    ck_assert_int_eq(disp_registry_init(&r, 300, 1, 0), 0);
    unsigned seed = 7;
    int64_t now = 0;
    uint64_t lost[512];
    for (int step = 0; step < 20000; step++) {
        now += rand_r(&seed) % 50;
        int op = rand_r(&seed) % 100;
        if (op < 60) {
            /* Chosen ids: some sequential, some multiples of a power of two
             * (the same low bits), some already present. */
            uint64_t want = 0;
            int kind = rand_r(&seed) % 4;
            if (kind == 1) {
                want = (uint64_t)(rand_r(&seed) % 64) << 20;
            } else if (kind == 2) {
                want = 1 + (uint64_t)(rand_r(&seed) % 2000);
            } else if (kind == 3 && r.n > 0) {
                want = r.workers[rand_r(&seed) % r.n]->id;
            }
            char addr[32];
            snprintf(addr, sizeof(addr), "w%d:1", rand_r(&seed) % 500);
            disp_worker_t *w = NULL;
            int is_new = 0;
            int rc = disp_registry_register(&r, addr, "h", 1, want, now, &w, &is_new);
            ck_assert(rc == 0 || rc == -ENOSPC);
            if (rc == 0) {
                ck_assert_ptr_eq(disp_registry_find(&r, w->id), w);
                w->last_heartbeat_ms = now;
            }
        } else if (op < 95 && r.n > 0) {
            disp_worker_t *w = r.workers[rand_r(&seed) % r.n];
            if (w->state == DISP_WORKER_LIVE) {
                w->last_heartbeat_ms = now;
            }
        } else {
            int64_t jump = rand_r(&seed) % 2 ? DISP_LOST_LINGER_MS : 2000;
            now += jump;
            disp_registry_expire(&r, now, 1000, lost, 512);
        }
        ck_assert_uint_le(r.n, r.cap);
        /* Every worker is found, and ids not present are not. */
        for (size_t i = 0; i < r.n; i++) {
            ck_assert_ptr_eq(disp_registry_find(&r, r.workers[i]->id), r.workers[i]);
        }
        for (int k = 0; k < 8; k++) {
            uint64_t id = (uint64_t)rand_r(&seed) % 4000;
            ck_assert_ptr_eq(disp_registry_find(&r, id), scan(&r, id));
        }
    }
    disp_registry_destroy(&r);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_ERR);
    Suite *s = suite_create("dispatcher_jobs");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_split_creation);
    tcase_add_test(tc, test_local_share_rule);
    tcase_add_test(tc, test_assignment_caps);
    tcase_add_test(tc, test_least_outstanding_over_jobs);
    tcase_add_test(tc, test_worker_loss_reassigns);
    tcase_add_test(tc, test_retry);
    tcase_add_test(tc, test_retry_prefers_other_worker);
    tcase_add_test(tc, test_acks_epochs_finish);
    tcase_add_test(tc, test_no_worker_fallback);
    tcase_add_test(tc, test_all_workers_refuse);
    tcase_add_test(tc, test_client_timeout_and_close);
    tcase_add_test(tc, test_submit_errors);
    tcase_add_test(tc, test_random_exactly_once);
    tcase_add_test(tc, test_random_exactly_once_balanced);
    tcase_add_test(tc, test_split_size_auto_rule);
    tcase_add_test(tc, test_cut_by_cost);
    tcase_add_test(tc, test_cost_cut_splits);
    tcase_add_test(tc, test_pick_by_speed);
    tcase_add_test(tc, test_steal_tail);
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_registry_index);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
