/* test_dispatcher_locality: the split hand-out prefers a worker's cached
 * splits (dispatcher/core/locality.h), through the RPC handlers called as
 * plain functions. Two equal workers run a 2-epoch job of an unshuffled
 * spec; each reports its delivered splits `cached`; in the second epoch the
 * workers' heartbeats come in the other order, so the speed pick alone
 * would hand each worker the other's splits. With locality nearly every
 * second-epoch split goes to the worker that ran it in the first; a
 * shuffled spec (no locality: its samples move between splits) and splits
 * reported uncached show the hand-out as it was -- the test's check fails
 * there. Workers that registered a cache budget hold a split from its
 * hand-out on. Both workers keep getting work either way (the speed pick
 * stays). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/core/locality.h"
#include "dispatcher/disp.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"

/* 200 samples in splits of 10: 20 splits an epoch. */
#define NSAMPLES 200
#define NSPLITS 20
#define SPEC_FMT                                                                                   \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"shuffle\": %s,"               \
    " \"seed\": 1}, \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 8},"    \
    " {\"op\": \"flip\"}], \"batch_size\": 4, \"epochs\": 2, \"offload\": \"all\"}"

static uint64_t submit(disp_t *d, int shuffle)
{
    char spec[1024];
    snprintf(spec, sizeof(spec), SPEC_FMT, shuffle ? "true" : "false");
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.spec_json = spec;
    req.spec_name = "l.json";
    req.num_samples = NSAMPLES;
    req.source_fingerprint = 9;
    ck_assert_msg(disp_svc_submit_job(d, &req, &resp, &a, 1000, err, sizeof(err)) == SL_RPC_OK,
                  "%s", err);
    uint64_t id = resp.job_id;
    disp_arena_free(&a);
    return id;
}

static void ack(disp_t *d, uint64_t job, const uint64_t *ids, size_t n, int64_t now)
{
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    Sluice__AckSplitsResponse resp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.job_id = job;
    req.split_ids = (uint64_t *)ids;
    req.n_split_ids = n;
    ck_assert_int_eq(disp_svc_ack_splits(d, &req, &resp, &a, now, err, sizeof(err)), SL_RPC_OK);
    disp_arena_free(&a);
}

/* What a worker holds between heartbeats: the splits of the last reply. */
typedef struct wk_s {
    uint64_t id;
    uint64_t split[8], aid[8];
    size_t n;
} wk_t;

/* One heartbeat of w: everything it held is reported sent (cached or not)
 * and acknowledged by the client; the reply's new splits are recorded in
 * owner[epoch][idx]. Returns how many it got. */
static size_t beat(disp_t *d, uint64_t job, wk_t *w, int cached, int64_t now,
                   uint64_t owner[2][NSPLITS])
{
    Sluice__SplitAssignment sent[8], *psent[8];
    for (size_t i = 0; i < w->n; i++) {
        sluice__split_assignment__init(&sent[i]);
        sent[i].job_id = job;
        sent[i].split_id = w->split[i];
        sent[i].assignment = w->aid[i];
        sent[i].cached = cached;
        psent[i] = &sent[i];
    }
    Sluice__HeartbeatRequest req = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse resp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    uint64_t known[1] = {job};
    req.version = SL_PROTOCOL_VERSION;
    req.worker_id = w->id;
    req.known_jobs = known;
    req.n_known_jobs = 1;
    req.sent = psent;
    req.n_sent = w->n;
    disp_arena_t a = {0};
    char err[256] = "";
    ck_assert_int_eq(disp_svc_heartbeat(d, &req, &resp, &a, now, err, sizeof(err)), 0);
    uint64_t done[8];
    size_t ndone = w->n;
    memcpy(done, w->split, w->n * sizeof(*done));
    w->n = 0;
    for (size_t i = 0; i < resp.n_assign && w->n < 8; i++) {
        const Sluice__SplitAssignment *s = resp.assign[i];
        w->split[w->n] = s->split_id;
        w->aid[w->n] = s->assignment;
        w->n++;
        ck_assert_uint_lt(s->epoch, 2);
        owner[s->epoch][s->split_id % NSPLITS] = w->id;
    }
    size_t got = w->n;
    disp_arena_free(&a);
    if (ndone > 0) {
        ack(d, job, done, ndone, now);
    }
    return got;
}

/* Runs the job to its end; returns how many second-epoch splits went to the
 * worker that ran them in the first, and the splits each worker got in
 * the second epoch. */
static uint64_t register_worker(disp_t *d, const char *addr, uint64_t cache_bytes)
{
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    Sluice__RegisterWorkerResponse resp = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[256] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.address = (char *)addr;
    req.threads = 2;
    req.cache_bytes = cache_bytes;
    ck_assert_int_eq(disp_svc_register_worker(d, &req, &resp, &a, 1000, err, sizeof(err)), 0);
    disp_arena_free(&a);
    return resp.worker_id;
}

/* budget: the workers' registered cache_bytes (0: none, so only their
 * `cached` reports say what they hold). */
static uint32_t run(int shuffle, int cached, uint64_t budget, uint32_t got2[2], uint64_t *ret_held)
{
    disp_t *d = fx_disp_new(1000);
    wk_t w[2] = {{.id = register_worker(d, "127.0.0.1:1", budget)},
                 {.id = register_worker(d, "127.0.0.1:2", budget)}};
    uint64_t job = submit(d, shuffle);
    uint64_t owner[2][NSPLITS] = {{0}};
    int64_t now = 1000;
    for (int round = 0; round < 200; round++) {
        /* The second epoch started: the heartbeats come the other way round. */
        int second = 0;
        for (uint32_t i = 0; i < NSPLITS; i++) {
            second |= owner[1][i] != 0;
        }
        now += 10;
        for (int k = 0; k < 2; k++) {
            (void)beat(d, job, &w[second ? 1 - k : k], cached, now, owner);
        }
    }
    uint32_t same = 0;
    got2[0] = got2[1] = 0;
    for (uint32_t i = 0; i < NSPLITS; i++) {
        ck_assert_msg(owner[0][i] != 0 && owner[1][i] != 0, "split %u never given", i);
        same += owner[0][i] == owner[1][i];
        got2[owner[1][i] == w[1].id]++;
    }
    disp_job_t *j = disp_jobs_find(&d->jobs, job);
    ck_assert_ptr_nonnull(j);
    *ret_held = j->loc_held;
    fx_disp_destroy(d);
    free(d);
    return same;
}

START_TEST(test_second_epoch_follows_the_cache)
{
    uint32_t got[2];
    uint64_t held = 0;
    uint32_t same = run(0, 1, 0, got, &held);
    /* The first splits of epoch 2 go out while epoch 1's last ones run (not
     * reported yet): those few may land anywhere. */
    ck_assert_msg(same >= NSPLITS - 4, "%u of %u second-epoch splits on their cache", same,
                  NSPLITS);
    ck_assert_uint_ge(held, same - 4);
    ck_assert_msg(got[0] >= NSPLITS / 4 && got[1] >= NSPLITS / 4, "second epoch: %u / %u", got[0],
                  got[1]);
}
END_TEST

/* Workers that registered a cache budget hold a split from its hand-out:
 * no report needed, and every second-epoch split follows. */
START_TEST(test_held_from_the_hand_out)
{
    uint32_t got[2];
    uint64_t held = 0;
    uint32_t same = run(0, 0, 1u << 30, got, &held);
    ck_assert_msg(same == NSPLITS, "%u of %u second-epoch splits on their cache", same, NSPLITS);
    ck_assert_uint_ge(held, NSPLITS);
    ck_assert(got[0] >= NSPLITS / 4 && got[1] >= NSPLITS / 4);
    /* Shuffled: nothing held. */
    same = run(1, 0, 1u << 30, got, &held);
    ck_assert_uint_eq(held, 0);
}
END_TEST

/* The same run without locality: the check above would fail. */
START_TEST(test_without_locality)
{
    uint32_t got[2];
    uint64_t held = 0;
    uint32_t same = run(1, 1, 0, got, &held); /* shuffled: nothing to prefer */
    ck_assert_msg(same < NSPLITS - 4, "shuffled: %u of %u on the same worker", same, NSPLITS);
    ck_assert_uint_eq(held, 0);
    same = run(0, 0, 0, got, &held); /* nothing reported cached, no budget */
    ck_assert_msg(same < NSPLITS - 4, "uncached: %u of %u on the same worker", same, NSPLITS);
    ck_assert_uint_eq(held, 0);
    ck_assert(got[0] >= NSPLITS / 4 && got[1] >= NSPLITS / 4);
}
END_TEST

START_TEST(test_applies)
{
    disp_job_t job;
    memset(&job, 0, sizeof(job));
    job.nsplits = 4;
    job.spec.shuffle = false;
    ck_assert_int_eq(disp_loc_applies(&job), 1);
    job.plan.cache_off = 1; /* the planner decided against caching */
    ck_assert_int_eq(disp_loc_applies(&job), 0);
    job.plan.cache_off = 0;
    job.spec.cache = SL_CACHE_OFF;
    ck_assert_int_eq(disp_loc_applies(&job), 0);
    job.spec.cache = SL_CACHE_AUTO;
    job.spec.shuffle = true;
    ck_assert_int_eq(disp_loc_applies(&job), 0);
    job.spec.shuffle = false;
    job.nsplits = DISP_LOC_MAX_SPLITS + 1;
    ck_assert_int_eq(disp_loc_applies(&job), 0);
    /* Bits beyond a bitmap, or no bitmap: not held. */
    disp_jw_t jw;
    memset(&jw, 0, sizeof(jw));
    ck_assert_int_eq(disp_loc_holds(&jw, 0), 0);
    ck_assert_int_eq(disp_loc_holds(NULL, 0), 0);
    uint8_t bits[1] = {0x05};
    jw.held = bits;
    jw.held_bits = 3;
    ck_assert_int_eq(disp_loc_holds(&jw, 0), 1);
    ck_assert_int_eq(disp_loc_holds(&jw, 1), 0);
    ck_assert_int_eq(disp_loc_holds(&jw, 2), 1);
    ck_assert_int_eq(disp_loc_holds(&jw, 7), 0);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_CRIT);
    Suite *s = suite_create("dispatcher_locality");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_applies);
    tcase_add_test(tc, test_second_epoch_follows_the_cache);
    tcase_add_test(tc, test_without_locality);
    tcase_add_test(tc, test_held_from_the_hand_out);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
