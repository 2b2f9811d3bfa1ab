/* test_planner_service: the planner inside the dispatcher, through its
 * service functions and planner jobs (dispatcher/planner/planner_job.h):
 * SubmitJob plans and re-plans as workers come and go, PlanJob plans
 * without a job (auto and fixed), a client's probed links come back to it,
 * the codec choice reaches the workers, and ranks sharing a node. What a
 * running job's reports change: test_planner_replan.c. The fixture is
 * fixtures_planner.h's pinned inputs (FX_PIN_SPEC). */
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
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "plan"), "version")), 1);
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
    ck_assert_int_eq(disp_svc_submit_job(d, &req, &sresp, &a, now, err, sizeof(err)), SL_RPC_OK);
    ck_assert_str_eq(sresp.plan->mode, "auto(all: no profile)");
    ck_assert_ptr_null(sresp.explain);
    disp_arena_free(&a);
    fx_disp_destroy(d);
    free(d);
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
    ck_assert_int_eq(disp_svc_get_plan_context(d, &creq, &cresp, &a, now + 1500, err, sizeof(err)),
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
    ck_assert_int_eq(disp_svc_get_plan_context(d, &creq, &again, &a, now + 3000, err, sizeof(err)),
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
        ck_assert_msg(disp_svc_submit_job(d, &req, &resp, &a, now, err, sizeof(err)) == SL_RPC_OK,
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

int main(void)
{
    sl_log_set_level(LOG_WARNING);
    Suite *s = suite_create("planner_service");
    TCase *td = tcase_create("dispatcher");
    tcase_set_timeout(td, 60);
    tcase_add_test(td, test_dispatcher_replan);
    tcase_add_test(td, test_dispatcher_plan_job);
    tcase_add_test(td, test_dispatcher_links_roundtrip);
    tcase_add_test(td, test_dispatcher_assign_compress);
    tcase_add_test(td, test_dispatcher_node_ranks);
    tcase_add_test(td, test_dispatcher_plan_job_fixed);
    suite_add_tcase(s, td);
    return fx_run_suite(s, 0);
}
