/* test_dispatcher_idle: an idle client asks for work (GetAssignmentRequest.idle,
 * dispatcher/core/jobs.h disp_jobs_client_idle). It gets a PENDING remote split
 * nobody holds, one per call, never one a worker holds, nothing for offload
 * "all"; and every split is still acknowledged exactly once when idle calls
 * interleave at random with worker deaths, retries, heartbeats and acks.
 * The job table and the GetAssignment handler run directly, on a fake clock. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "dispatcher/config.h"
#include "dispatcher/disp.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/core/registry.h"
#include "tests/unit/fixtures_jobs.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"

#define SPEC_FMT                                                                             \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8},"      \
    " {\"op\": \"flip\"}, {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5],"               \
    " \"std\": [0.2, 0.2, 0.2]}],"                                                           \
    " \"batch_size\": 4, \"epochs\": %u, \"offload\": %s}"

#define FIXED_03 "{\"split\": 2, \"local_share\": 0.3}"

static const disp_limits_t LIM = {
    .split_size = 10,
    .max_splits_per_worker = 2,
    .max_client_splits = 16,
    .max_jobs = 3,
    .worker_timeout_ms = 1000,
    .client_timeout_ms = 5000,
};

typedef fx_jobs_t env_t;

static disp_job_t *submit(env_t *e, uint64_t n, unsigned epochs, const char *offload)
{
    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, epochs, offload);
    return fx_jobs_submit(e, spec, n);
}

static uint64_t pending_of(disp_job_t *job)
{
    uint64_t p = 0, a = 0, k = 0;
    disp_job_counts(job, &p, &a, &k, NULL);
    return p;
}

/* Every ASSIGNED split of the live epochs is on exactly its owner's list,
 * and no id is on two lists (the client's and the workers'). */
static void check_owners(disp_job_t *job)
{
    for (uint32_t k = 0; k < job->nep; k++) {
        const disp_epoch_t *ep = &job->ep[k];
        for (uint32_t i = 0; i < job->nsplits; i++) {
            uint64_t id = ep->epoch * job->nsplits + i;
            int lists = 0, on_owner = 0;
            for (uint32_t c = 0; c < job->nclient; c++) {
                if (job->client_ids[c] == id) {
                    lists++;
                    on_owner |= ep->splits[i].owner == 0;
                }
            }
            for (size_t w = 0; w < job->njw; w++) {
                for (uint32_t c = 0; c < job->jw[w].n; c++) {
                    if (job->jw[w].ids[c] == id) {
                        lists++;
                        on_owner |= ep->splits[i].owner == job->jw[w].worker_id;
                    }
                }
            }
            if (ep->splits[i].state == DISP_SPLIT_ASSIGNED) {
                ck_assert_msg(lists == 1 && on_owner, "split %llu on %d lists",
                              (unsigned long long)id, lists);
            } else {
                ck_assert_int_eq(lists, 0);
            }
        }
    }
}

/* ------------------------------------------------------------ the rule */

START_TEST(test_idle_takes_pending_remote)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    disp_job_t *job = submit(&e, 200, 1, FIXED_03); /* 20 splits, 6 local */
    uint64_t w = fx_jobs_add_worker(&e, "a:1");
    disp_jw_t *jw = disp_job_jw(job, w);
    ck_assert_ptr_nonnull(jw);
    ck_assert_uint_eq(jw->n, 2);
    uint64_t held[2] = {jw->ids[0], jw->ids[1]};
    ck_assert_uint_eq(job->nclient, 6);
    uint64_t pending = pending_of(job);
    ck_assert_uint_eq(pending, 12);

    /* Without the request nothing changes (an older client). */
    disp_jobs_assign(&e.js, job, e.now);
    ck_assert_uint_eq(job->nclient, 6);

    ck_assert_int_eq(disp_jobs_client_idle(&e.js, job, e.now), 1);
    ck_assert_uint_eq(job->nclient, 7); /* one per call */
    ck_assert_uint_eq(pending_of(job), pending - 1);
    uint64_t id = job->client_ids[6];
    ck_assert(id != held[0] && id != held[1]);
    disp_split_t *s = disp_job_split(job, id, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->local, 0); /* a remote split of the plan */
    ck_assert_int_eq(s->state, DISP_SPLIT_ASSIGNED);
    ck_assert_uint_eq(s->owner, 0);
    ck_assert_int_eq(s->planned, 1); /* its split point is fixed now */
    /* The oldest pending one: the first remote split after the held two. */
    for (uint32_t i = 0; i < job->nsplits; i++) {
        disp_split_t *t = &job->ep[0].splits[i];
        if (t->state == DISP_SPLIT_PENDING) {
            ck_assert_uint_gt(job->ep[0].epoch * job->nsplits + i, id);
        }
    }
    /* The worker keeps what it holds. */
    jw = disp_job_jw(job, w);
    ck_assert_uint_eq(jw->n, 2);
    ck_assert_uint_eq(jw->ids[0], held[0]);
    ck_assert_uint_eq(jw->ids[1], held[1]);
    ck_assert_uint_eq(job->client_helped_total, 1);
    check_owners(job);

    /* Acked by the client like any of its splits; the worker's slot is
     * untouched, so it gets the next pending one when it frees a slot. */
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &id, 1, e.now), 1);
    ck_assert_uint_eq(disp_jobs_ack(&e.js, job, &held[0], 1, e.now), 1);
    jw = disp_job_jw(job, w);
    ck_assert_uint_eq(jw->n, 2);
    ck_assert(jw->ids[1] != id);
    check_owners(job);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_idle_never_takes_held)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    disp_job_t *job = submit(&e, 40, 1, "{\"split\": 2, \"local_share\": 0.25}"); /* 1 local */
    uint64_t w1 = fx_jobs_add_worker(&e, "a:1");
    uint64_t w2 = fx_jobs_add_worker(&e, "b:1");
    ck_assert_uint_eq(disp_job_jw(job, w1)->n + disp_job_jw(job, w2)->n, 3);
    ck_assert_uint_eq(pending_of(job), 0);
    ck_assert_uint_eq(job->nclient, 1);
    /* Every remote split is held: the idle client gets nothing. */
    ck_assert_int_eq(disp_jobs_client_idle(&e.js, job, e.now), 0);
    ck_assert_uint_eq(job->nclient, 1);
    ck_assert_uint_eq(disp_job_jw(job, w1)->n + disp_job_jw(job, w2)->n, 3);

    /* A split returned to the queue (its worker was lost) goes to a worker
     * with room before the client: workers have their pick first. */
    uint64_t w3 = fx_jobs_add_worker(&e, "c:1");
    ck_assert_ptr_null(disp_job_jw(job, w3)); /* nothing was left for it */
    disp_jobs_worker_lost(&e.js, w1, e.now);
    ck_assert_int_eq(disp_jobs_client_idle(&e.js, job, e.now), 0);
    ck_assert_uint_eq(job->nclient, 1);
    ck_assert_uint_eq(disp_job_jw(job, w2)->n + disp_job_jw(job, w3)->n, 3);
    ck_assert_uint_eq(pending_of(job), 0);
    check_owners(job);
    fx_jobs_free(&e);
}
END_TEST

START_TEST(test_idle_offload_all_and_caps)
{
    env_t e;
    fx_jobs_init(&e, &LIM);
    /* "all": the user asked for every split remote; the client keeps off. */
    disp_job_t *all = submit(&e, 200, 1, "\"all\"");
    (void)fx_jobs_add_worker(&e, "a:1");
    ck_assert_uint_gt(pending_of(all), 0);
    ck_assert_int_eq(disp_jobs_client_idle(&e.js, all, e.now), 0);
    ck_assert_uint_eq(all->nclient, 0);
    /* So did a fixed K:0. */
    disp_job_t *k0 = submit(&e, 200, 1, "{\"split\": 1, \"local_share\": 0}");
    ck_assert_uint_gt(pending_of(k0), 0);
    ck_assert_int_eq(disp_jobs_client_idle(&e.js, k0, e.now), 0);
    ck_assert_uint_eq(k0->nclient, 0);

    /* K:F: the client helps, up to max_client_splits, across epochs: taking
     * the first epoch's last pending split opens the next epoch. */
    disp_job_t *job = submit(&e, 100, 3, FIXED_03); /* 10 splits, 3 local */
    ck_assert_uint_eq(job->nep, 1);
    int given = 0;
    while (disp_jobs_client_idle(&e.js, job, e.now) == 1) {
        given++;
        check_owners(job);
        ck_assert_uint_le(job->nclient, LIM.max_client_splits);
    }
    ck_assert_uint_eq(job->nclient, LIM.max_client_splits);
    ck_assert_uint_eq(job->nep, 2);
    ck_assert_uint_eq((uint64_t)given, job->client_helped_total);
    ck_assert_int_gt(given, 7 - 2); /* more than the first epoch's pending remote ones */
    fx_jobs_free(&e);
}
END_TEST

/* ------------------------------------------------------------ random interleavings */

/* Random workers dying, joining, leaving, retries, heartbeats, acks and idle
 * requests: an idle request gives only a split nobody held, and every split
 * of every epoch is acknowledged exactly once. */
static void random_run(unsigned seed, int steal)
{
    env_t e;
    disp_limits_t lim = LIM;
    lim.max_client_splits = 4;
    lim.steal = steal;
    fx_jobs_init(&e, &lim);
    srand(seed);
    const unsigned epochs = 4;
    disp_job_t *job = submit(&e, 237, epochs, FIXED_03);
    uint64_t total = (uint64_t)job->nsplits * epochs;
    uint8_t *acked = calloc(total, 1);
    uint8_t *held = calloc(total, 1);
    ck_assert_ptr_nonnull(acked);
    ck_assert_ptr_nonnull(held);
    uint64_t w[3] = {fx_jobs_add_worker(&e, "a:1"), fx_jobs_add_worker(&e, "b:1"), fx_jobs_add_worker(&e, "c:1")};
    uint64_t nacked = 0, helped = 0;
    for (int step = 0; step < 20000 && job->state == DISP_JOB_ACTIVE; step++) {
        e.now += 10;
        int ev = rand() % 100;
        if (ev < 3) {
            disp_worker_t *ww = disp_registry_live(&e.reg, w[rand() % 3]);
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
        } else if (ev < 10 && job->njw > 0) {
            disp_jw_t *jw = &job->jw[rand() % job->njw];
            if (jw->n > 0) {
                uint64_t id = jw->ids[rand() % jw->n];
                uint64_t wid = rand() % 2 ? jw->worker_id : 0;
                disp_jobs_retry(&e.js, job, &id, 1, wid, e.now);
            }
        } else if (ev < 18 && job->njw > 0) {
            disp_jw_t *jw = &job->jw[rand() % job->njw];
            disp_worker_t *ww = disp_registry_live(&e.reg, jw->worker_id);
            if (ww != NULL) {
                disp_split_ref_t prog[8], sent[8];
                disp_progress_t p = {.in_progress = prog, .sent = sent};
                for (uint32_t k = 0; k < jw->n && k < 8; k++) {
                    int r = rand() % 4;
                    if (r < 2) {
                        prog[p.n_in_progress++] = (disp_split_ref_t){job->id, jw->ids[k],
                                                                     jw->aid[k]};
                    } else if (r == 2) {
                        sent[p.n_sent++] = (disp_split_ref_t){job->id, jw->ids[k], jw->aid[k]};
                    }
                }
                p.leaving = rand() % 20 == 0;
                ww->leaving |= p.leaving;
                ww->last_heartbeat_ms = e.now;
                (void)disp_jobs_worker_progress(&e.js, ww, &p, e.now);
                if (ww->leaving && p.n_in_progress == 0) {
                    (void)disp_jobs_worker_left(&e.js, ww->id, e.now);
                    disp_registry_leave(&e.reg, ww, e.now);
                } else {
                    disp_jobs_worker_sent(&e.js, ww);
                }
            }
        } else if (ev < 30) {
            /* The client is idle: what it gets was held by nobody. */
            memset(held, 0, total);
            for (uint32_t c = 0; c < job->nclient; c++) {
                held[job->client_ids[c]] = 1;
            }
            for (size_t i = 0; i < job->njw; i++) {
                for (uint32_t c = 0; c < job->jw[i].n; c++) {
                    held[job->jw[i].ids[c]] = 1;
                }
            }
            uint32_t before = job->nclient;
            if (disp_jobs_client_idle(&e.js, job, e.now) == 1) {
                helped++;
                uint32_t fresh = 0;
                for (uint32_t c = 0; c < job->nclient; c++) {
                    uint64_t id = job->client_ids[c];
                    ck_assert_int_eq(acked[id], 0);
                    fresh += !held[id];
                }
                /* One new remote split (the follow-up assignment may add
                 * local ones of a new epoch too, never a held one). */
                ck_assert_uint_ge(fresh, 1);
                ck_assert_uint_eq(fresh, job->nclient - before);
            }
        } else {
            nacked += (uint64_t)fx_jobs_ack_random(&e, job, acked, total);
        }
        fx_jobs_beat_random(&e, w, 3, LIM.worker_timeout_ms);
        job->last_client_ms = e.now;
        uint64_t lost[16];
        size_t nl = disp_registry_expire(&e.reg, e.now, LIM.worker_timeout_ms, lost, 16);
        for (size_t i = 0; i < nl; i++) {
            disp_jobs_worker_lost(&e.js, lost[i], e.now);
        }
        disp_jobs_assign_all(&e.js, e.now);
        check_owners(job);
        for (size_t i = 0; i < e.reg.n; i++) {
            disp_worker_t *ww = e.reg.workers[i];
            if (ww->state != DISP_WORKER_LOST) {
                disp_jw_t *jl = disp_job_jw(job, ww->id);
                ck_assert_uint_eq(ww->outstanding, jl != NULL ? jl->n : 0);
            }
        }
        ck_assert_uint_le(job->nclient, lim.max_client_splits);
        ck_assert_uint_le(job->nep, 2);
    }
    ck_assert_int_eq(job->state, DISP_JOB_FINISHED);
    ck_assert_uint_eq(nacked, total);
    for (uint64_t i = 0; i < total; i++) {
        ck_assert_int_eq(acked[i], 1);
    }
    ck_assert_uint_gt(helped, 0); /* the request did run */
    ck_assert_uint_eq(helped, job->client_helped_total);
    free(acked);
    free(held);
    fx_jobs_free(&e);
}

START_TEST(test_idle_random_exactly_once)
{
    random_run(12345, 0);
    random_run(777, 1);
    random_run(4242, 1);
}
END_TEST

/* ------------------------------------------------------------ GetAssignment */

START_TEST(test_svc_idle_field)
{
    disp_t d;
    disp_config_t cfg;
    char err[1024] = "";
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    cfg.split_size = 10;
    cfg.max_splits_per_worker = 1;
    int64_t now = 50000;
    ck_assert_int_eq(disp_init(&d, &cfg, 100, now), 0);

    Sluice__RegisterWorkerRequest rreq = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    Sluice__RegisterWorkerResponse rresp = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
    disp_arena_t a = {0};
    rreq.version = SL_PROTOCOL_VERSION;
    rreq.address = "127.0.0.1:9";
    rreq.threads = 2;
    ck_assert_int_eq(disp_svc_register_worker(&d, &rreq, &rresp, &a, now, err, sizeof(err)), 0);
    uint64_t wid = rresp.worker_id;
    disp_arena_free(&a);

    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, 1u, "{\"split\": 2, \"local_share\": 0.5}");
    Sluice__SubmitJobRequest sreq = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    Sluice__SubmitJobResponse sresp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    sreq.version = SL_PROTOCOL_VERSION;
    sreq.job_secret = (char *)FX_JOB_SECRET;
    sreq.spec_json = spec;
    sreq.num_samples = 60; /* 6 splits: 3 local, 1 at the worker, 2 pending */
    sreq.source_fingerprint = 99;
    ck_assert_msg(disp_svc_submit_job(&d, &sreq, &sresp, &a, now, err, sizeof(err)) == 0, "%s",
                  err);
    uint64_t jid = sresp.job_id;
    disp_arena_free(&a);

    Sluice__GetAssignmentRequest g = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    g.version = SL_PROTOCOL_VERSION;
    g.job_id = jid;
    g.job_secret = (char *)FX_JOB_SECRET;
    size_t nclient[3] = {0};
    for (int round = 0; round < 3; round++) {
        g.idle = round > 0;
        Sluice__GetAssignmentResponse r = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
        ck_assert_int_eq(disp_svc_get_assignment(&d, &g, &r, &a, now, err, sizeof(err)), 0);
        ck_assert_uint_eq(r.n_splits, 4 + (size_t)round);
        for (size_t i = 0; i < r.n_splits; i++) {
            nclient[round] += r.splits[i]->worker_id == 0;
            ck_assert(r.splits[i]->worker_id == 0 || r.splits[i]->worker_id == wid);
        }
        disp_arena_free(&a);
    }
    ck_assert_uint_eq(nclient[0], 3);
    ck_assert_uint_eq(nclient[1], 4);
    ck_assert_uint_eq(nclient[2], 5);
    fx_disp_destroy(&d);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_ERR);
    Suite *s = suite_create("dispatcher_idle");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_idle_takes_pending_remote);
    tcase_add_test(tc, test_idle_never_takes_held);
    tcase_add_test(tc, test_idle_offload_all_and_caps);
    tcase_add_test(tc, test_idle_random_exactly_once);
    tcase_add_test(tc, test_svc_idle_field);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
