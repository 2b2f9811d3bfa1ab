/* Worker tasks (worker/tasks.c) on a real image folder, without RPC: jobs and
 * splits are fed as the control thread would, and messages are taken as the
 * Fetch stream would. Checks exactly-once per split, bytes equal to a local
 * pipeline run, failures, revocation, dropping on a broken stream, and the
 * output-buffer bound. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/jobcap.h"
#include "common/base/clock.h"
#include "common/base/log.h"
#include "common/engine/pipeline.h"
#include "common/base/rng.h"
#include "common/data/source.h"
#include "common/sample/codec.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_worker.h"
#include "worker/tasks.h"

#define NIMG 24 /* 23 good + 1 corrupt */

static char g_root[FX_TMPDIR_LEN];
static uint64_t g_count, g_fp;

static const char SPEC_CROP[] =
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"shuffle\": true, "
    "\"seed\": 7},"
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 32},"
    "  {\"op\": \"flip\", \"p\": 0.5},"
    "  {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5], \"std\": [0.25, 0.25, 0.25]},"
    "  {\"op\": \"to_chw\"}],"
    " \"batch_size\": 4, \"epochs\": 3}";

/* Decode only: 300x300x3 u8 = 270 KB per sample, for the buffer bound. */
static const char SPEC_BIG[] =
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"shuffle\": false},"
    " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": 2}";

static void make_dataset(void)
{
    ck_assert_int_eq(fx_mkdtemp(g_root), 0);
    char path[512];
    snprintf(path, sizeof(path), "%s/train", g_root);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof(path), "%s/train/class_%d", g_root, c);
        ck_assert_int_eq(mkdir(path, 0755), 0);
    }
    for (int i = 0; i < NIMG - 1; i++) {
        snprintf(path, sizeof(path), "%s/train/class_%d/img_%02d.jpg", g_root, i % 2, i);
        fx_jpeg_opts_t o = {.width = 300, .height = 300 - (uint32_t)i, .seed = (uint32_t)i};
        ck_assert_int_eq(fx_make_jpeg_file(path, &o), 0);
    }
    snprintf(path, sizeof(path), "%s/train/class_1/zz_bad.jpg", g_root);
    const char junk[] = "\xff\xd8\xff\xe0 this is not really a jpeg at all";
    ck_assert_int_eq(fx_write_file(path, junk, sizeof(junk)), 0);

    sl_source_t *src = NULL;
    char err[256];
    ck_assert_int_eq(sl_source_open(g_root, SL_SRC_IMAGEFOLDER, "train", &src, err, sizeof(err)),
                     0);
    g_count = sl_source_count(src);
    g_fp = sl_source_fingerprint(src);
    sl_source_free(src);
    ck_assert_uint_eq(g_count, NIMG);
}

static void setup(void)
{
    sl_log_set_level(LOG_ERR);
    make_dataset();
}

static void teardown(void) { fx_rmtree(g_root); }

static wk_tasks_t *new_tasks(size_t buffer_bytes)
{
    wk_tasks_opts_t o = {.data_root = g_root,
                         .threads = 2,
                         .buffer_bytes = buffer_bytes,
                         .max_message_bytes = 1 << 20};
    wk_tasks_t *t = wk_tasks_new(&o);
    ck_assert_ptr_nonnull(t);
    return t;
}

static void add_job(wk_tasks_t *t, uint64_t id, const char *spec, uint64_t fp, uint64_t n)
{
    Sluice__JobSpec js = SLUICE__JOB_SPEC__INIT;
    js.job_id = id;
    js.spec_json = (char *)spec;
    js.source_fingerprint = fp;
    js.num_samples = n;
    wk_tasks_add_job(t, &js);
}

static void assign(wk_tasks_t *t, uint64_t job, uint64_t split, uint64_t epoch, uint64_t b,
                   uint64_t e, uint32_t stage_to)
{
    Sluice__SplitAssignment a = SLUICE__SPLIT_ASSIGNMENT__INIT;
    a.job_id = job;
    a.split_id = split;
    a.epoch = epoch;
    a.begin = b;
    a.end = e;
    a.stage_to = stage_to;
    a.worker_id = 1;
    a.assignment = job * 1000 + split; /* the dispatcher's hand-out id */
    wk_tasks_assign(t, &a);
}

static int not_loading(const wk_job_info_t *r) { return r->state != WK_JOB_LOADING; }

static int started(const wk_job_info_t *r) { return r->samples_done > 0; }

static int nothing_inflight(const wk_job_info_t *r) { return r->inflight == 0; }

/* The runner has run into the buffer bound: samples came back and it
 * submits no more. A runner sets inflight to 0 (under the job's lock) only
 * when it cannot submit: it takes a sample back and submits the next in
 * one hold of the lock. */
static int held_at_bound(const wk_job_info_t *r)
{
    return r->samples_done > 0 && r->inflight == 0;
}

static int one_split_done(const wk_job_info_t *r) { return r->splits_done >= 1; }

/* Waits until the job leaves LOADING. */
static wk_job_state_e wait_loaded(wk_tasks_t *t, uint64_t id)
{
    wk_job_state_e s = fx_job_info_wait(t, id, not_loading).state;
    ck_assert_msg(s != WK_JOB_LOADING, "job still loading");
    return s;
}

typedef struct seen_s {
    int count[3][NIMG]; /* per epoch, per position */
    int done_splits;
    int skipped;
} seen_t;

/* Takes messages until `splits` split_done messages arrived; checks each
 * sample against a local run of units [0, stage_to). */
static void consume(wk_job_t *job, seen_t *seen, int splits, const char *spec_json,
                    const uint32_t *stage_to_of_split)
{
    sl_spec_t spec;
    char err[512];
    ck_assert_int_eq(sl_spec_parse("t", spec_json, strlen(spec_json), &spec, err, sizeof(err)),
                     0);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, err, sizeof(err)), 0);
    sl_source_t *src = NULL;
    ck_assert_int_eq(sl_source_open(g_root, SL_SRC_IMAGEFOLDER, "train", &src, err, sizeof(err)),
                     0);
    uint64_t order[3][NIMG];
    for (int e = 0; e < 3; e++) {
        sl_epoch_order(spec.seed, (uint64_t)e, spec.shuffle, NIMG, order[e]);
    }
    sl_pipe_scratch_t scratch;
    sl_pipe_scratch_init(&scratch);

    while (seen->done_splits < splits) {
        wk_msg_t *m = NULL;
        ck_assert_int_eq(wk_job_next_msg(job, FX_WAIT_MS, &m), WK_NEXT_MSG);
        ck_assert_uint_le(m->batch.n_samples, spec.batch_size);
        ck_assert_uint_eq(m->batch.stage_to, stage_to_of_split[m->batch.split_id]);
        for (size_t i = 0; i < m->batch.n_samples; i++) {
            const Sluice__Sample *s = m->batch.samples[i];
            ck_assert_uint_lt(s->epoch, 3);
            ck_assert_uint_lt(s->position, NIMG);
            ck_assert_uint_eq(s->index, order[s->epoch][s->position]);
            ck_assert_int_eq(s->label, sl_source_label(src, s->index));
            seen->count[s->epoch][s->position]++;
            if (s->skip_reason[0] != '\0') {
                seen->skipped++;
                ck_assert_uint_eq(s->data.len, 0);
                ck_assert_ptr_nonnull(strstr(s->skip_detail, "zz_bad.jpg"));
                continue;
            }
            sl_tensor_t t;
            sl_tensor_init(&t);
            ck_assert_int_eq(sl_source_read(src, s->index, &t, err, sizeof(err)), 0);
            uint32_t stage_to = stage_to_of_split[m->batch.split_id];
            ck_assert_int_eq(sl_pipeline_run(p, 0, stage_to, s->epoch, s->index, &t, &scratch,
                                             NULL, err, sizeof(err)),
                             0);
            ck_assert_uint_eq(s->data.len, t.nbytes);
            ck_assert_uint_eq(s->dtype, t.dtype);
            ck_assert_uint_eq(s->layout, t.layout);
            ck_assert_uint_eq(s->h, t.h);
            ck_assert_uint_eq(s->w, t.w);
            ck_assert_uint_eq(s->c, t.c);
            ck_assert(memcmp(s->data.data, t.data, t.nbytes) == 0);
            sl_tensor_free(&t);
        }
        if (m->batch.split_done) {
            seen->done_splits++;
        }
        wk_job_note_sent(job, m);
        wk_msg_free(m);
    }
    sl_pipe_scratch_free(&scratch);
    sl_source_free(src);
    sl_pipeline_free(p);
}

START_TEST(test_splits_exactly_once)
{
    wk_tasks_t *t = new_tasks(256u << 20);
    add_job(t, 5, SPEC_CROP, g_fp, g_count);
    /* Assignments may arrive while the job is still loading. */
    assign(t, 5, 1, 0, 0, 10, 4);
    assign(t, 5, 2, 0, 10, NIMG, 4);
    assign(t, 5, 3, 1, 3, 3, 4);    /* empty split: just split_done */
    assign(t, 5, 4, 1, 0, NIMG, 2); /* partial: decode+crop and flip remote */
    assign(t, 5, 5, 2, 0, NIMG, 0); /* nothing remote: encoded bytes */
    ck_assert_int_eq(wait_loaded(t, 5), WK_JOB_READY);

    wk_job_t *job = NULL;
    char why[256];
    ck_assert_int_eq(wk_tasks_attach(t, 5, NULL, 1000, &job, why, sizeof(why)), WK_ATTACH_OK);
    /* A second stream for the same job is refused while the first is attached. */
    wk_job_t *job2 = NULL;
    ck_assert_int_eq(wk_tasks_attach(t, 5, NULL, 100, &job2, why, sizeof(why)), WK_ATTACH_BUSY);

    seen_t seen;
    memset(&seen, 0, sizeof(seen));
    const uint32_t stage_to[6] = {0, 4, 4, 4, 2, 0};
    consume(job, &seen, 5, SPEC_CROP, stage_to);
    for (int p = 0; p < NIMG; p++) {
        ck_assert_int_eq(seen.count[0][p], 1);
        ck_assert_int_eq(seen.count[1][p], 1);
        ck_assert_int_eq(seen.count[2][p], 1);
    }
    ck_assert_int_eq(seen.skipped, 2); /* the corrupt file, twice; its bytes travel in epoch 2 */

    /* Unit stats reach reports when the runner pauses (or once a second). */
    wk_tasks_report_t rep;
    for (int64_t until = sl_mono_ms() + FX_WAIT_MS;; usleep(2000)) {
        ck_assert_int_eq(wk_tasks_report(t, &rep), 0);
        if ((rep.n_units > 0 && rep.units[0].samples >= 2 * (NIMG - 1)) ||
            sl_mono_ms() >= until) {
            break;
        }
        wk_tasks_report_free(&rep);
    }
    ck_assert_uint_eq(rep.n_known, 1);
    ck_assert_uint_eq(rep.n_splits, 0);
    ck_assert_uint_eq(rep.n_failed, 0);
    ck_assert_uint_eq(rep.buffered_bytes, 0);
    /* Every split went out whole: reported sent (job-qualified) until a
     * heartbeat carrying them succeeds. */
    ck_assert_uint_eq(rep.n_sent, 5);
    for (size_t i = 0; i < rep.n_sent; i++) {
        ck_assert_uint_eq(rep.sent[i].job_id, 5);
    }
    wk_tasks_report_done(t, &rep);
    ck_assert_uint_ge(rep.n_units, 2);
    int found = 0;
    for (size_t i = 0; i < rep.n_units; i++) {
        if (strcmp(rep.units[i].name, "decode_jpeg+center_crop") == 0) {
            found = 1;
            ck_assert_uint_ge(rep.units[i].samples, 2 * (NIMG - 1));
            ck_assert(rep.units[i].cpu_sec > 0);
            ck_assert_uint_eq(rep.units[i].out_bytes / rep.units[i].samples, 32 * 32 * 3);
        }
    }
    ck_assert(found);
    wk_tasks_report_free(&rep);
    ck_assert_int_eq(wk_tasks_report(t, &rep), 0);
    ck_assert_uint_eq(rep.n_sent, 0);
    wk_tasks_report_free(&rep);

    wk_job_detach(job, 0, NULL);
    wk_tasks_close_job(t, 5);
    /* Worker-wide totals outlive the job. */
    wk_totals_t tot;
    wk_tasks_totals(t, &tot);
    ck_assert_uint_eq(tot.jobs, 1);
    ck_assert_uint_eq(tot.samples_done, 3 * NIMG);
    ck_assert_uint_eq(tot.samples_skipped, 2);
    ck_assert_uint_eq(tot.splits_done, 5);
    ck_assert_uint_ge(tot.msgs_sent, 5);
    wk_tasks_free(t);
}
END_TEST

/* Job capabilities: a Fetch without the secret whose hash the dispatcher
 * sent is refused before it takes the job's one stream slot. */
START_TEST(test_attach_needs_the_secret)
{
    wk_tasks_t *t = new_tasks(256u << 20);
    Sluice__JobSpec js = SLUICE__JOB_SPEC__INIT;
    uint8_t hash[SL_JOBCAP_HASH];
    sl_jobcap_hash("owner-secret-0123456789", hash);
    js.job_id = 6;
    js.spec_json = (char *)SPEC_CROP;
    js.source_fingerprint = g_fp;
    js.num_samples = g_count;
    js.secret_sha256.data = hash;
    js.secret_sha256.len = sizeof(hash);
    wk_tasks_add_job(t, &js);
    ck_assert_int_eq(wait_loaded(t, 6), WK_JOB_READY);
    wk_job_t *job = NULL;
    char why[256];
    ck_assert_int_eq(wk_tasks_attach(t, 6, NULL, 100, &job, why, sizeof(why)), WK_ATTACH_DENIED);
    ck_assert_int_eq(wk_tasks_attach(t, 6, "wrong-secret-0123456789", 100, &job, why,
                                     sizeof(why)),
                     WK_ATTACH_DENIED);
    /* The owner gets the slot at once: the refusals never held it. */
    ck_assert_int_eq(wk_tasks_attach(t, 6, "owner-secret-0123456789", 100, &job, why,
                                     sizeof(why)),
                     WK_ATTACH_OK);
    wk_job_t *job2 = NULL;
    ck_assert_int_eq(wk_tasks_attach(t, 6, "wrong-secret-0123456789", 100, &job2, why,
                                     sizeof(why)),
                     WK_ATTACH_DENIED); /* not BUSY: says nothing about the stream */
    wk_job_detach(job, 0, NULL);
    wk_tasks_free(t);
}
END_TEST

START_TEST(test_failures_and_validation)
{
    wk_tasks_t *t = new_tasks(256u << 20);
    add_job(t, 1, SPEC_CROP, g_fp ^ 1, g_count);          /* fingerprint differs */
    add_job(t, 2, SPEC_CROP, g_fp, g_count + 1);          /* count differs */
    add_job(t, 3, "{\"source\": 42}", g_fp, g_count);     /* malformed spec */
    add_job(t, 4, SPEC_CROP, g_fp, g_count);              /* fine */
    ck_assert_int_eq(wait_loaded(t, 1), WK_JOB_FAILED);
    ck_assert_int_eq(wait_loaded(t, 2), WK_JOB_FAILED);
    ck_assert_int_eq(wait_loaded(t, 3), WK_JOB_FAILED);
    ck_assert_int_eq(wait_loaded(t, 4), WK_JOB_READY);
    ck_assert_ptr_nonnull(strstr(fx_job_info(t, 1).reason, "fingerprint"));
    ck_assert_ptr_nonnull(strstr(fx_job_info(t, 3).reason, "invalid job spec"));

    /* Invalid assignments are ignored. */
    assign(t, 4, 10, 0, 0, NIMG + 1, 5); /* past the end */
    assign(t, 4, 11, 0, 5, 4, 5);        /* begin > end */
    assign(t, 4, 12, 0, 0, 4, 5);        /* stage_to > units (4) */
    assign(t, 99, 13, 0, 0, 4, 5);       /* unknown job */
    assign(t, 1, 14, 0, 0, 4, 5);        /* failed job */
    wk_tasks_report_t rep;
    ck_assert_int_eq(wk_tasks_report(t, &rep), 0);
    ck_assert_uint_eq(rep.n_known, 4);
    ck_assert_uint_eq(rep.n_failed, 3);
    ck_assert_uint_eq(rep.n_splits, 0);
    ck_assert_ptr_nonnull(strstr(rep.failure, "job 1:"));
    ck_assert_ptr_nonnull(strstr(rep.failure, "job 3:"));
    wk_tasks_report_free(&rep);

    char why[512];
    wk_job_t *job = NULL;
    ck_assert_int_eq(wk_tasks_attach(t, 1, NULL, 100, &job, why, sizeof(why)), WK_ATTACH_FAILED);
    ck_assert_ptr_nonnull(strstr(why, "fingerprint"));
    ck_assert_int_eq(wk_tasks_attach(t, 77, NULL, 200, &job, why, sizeof(why)), WK_ATTACH_NOT_FOUND);

    /* Closing a failed job removes it from the reports. */
    wk_tasks_close_job(t, 1);
    ck_assert_int_eq(wk_tasks_report(t, &rep), 0);
    ck_assert_uint_eq(rep.n_known, 3);
    ck_assert_uint_eq(rep.n_failed, 2);
    wk_tasks_report_free(&rep);
    wk_tasks_free(t);
}
END_TEST

START_TEST(test_broken_stream_drops_and_revoke)
{
    /* Small buffer so the job cannot finish while nobody reads. */
    wk_tasks_t *t = new_tasks(1u << 20);
    add_job(t, 8, SPEC_BIG, g_fp, g_count);
    ck_assert_int_eq(wait_loaded(t, 8), WK_JOB_READY);
    assign(t, 8, 1, 0, 0, NIMG, 1);
    assign(t, 8, 2, 0, 0, 4, 1);
    wk_job_info_t r = fx_job_info_wait(t, 8, held_at_bound);
    ck_assert_uint_eq(r.inflight, 0);
    /* The bound: queued + partial stays within buffer_bytes plus one sample. */
    ck_assert_uint_le(r.buffered_bytes, (1u << 20) + 300 * 300 * 3 + 1024);
    ck_assert_uint_lt(r.samples_done, NIMG);
    ck_assert_uint_eq(r.splits_queued + r.splits_running, 2);

    /* Revoking split 2 removes it (nothing of it was started yet); a
     * revocation of another job's split 2 does not touch it. */
    wk_tasks_revoke(t, 9, 2);
    r = fx_job_info(t, 8);
    ck_assert_uint_eq(r.splits_queued + r.splits_running, 2);
    wk_tasks_revoke(t, 8, 2);
    r = fx_job_info(t, 8);
    ck_assert_uint_eq(r.splits_queued + r.splits_running, 1);

    wk_job_t *job = NULL;
    char why[256];
    ck_assert_int_eq(wk_tasks_attach(t, 8, NULL, 1000, &job, why, sizeof(why)), WK_ATTACH_OK);
    wk_msg_t *m = NULL;
    ck_assert_int_eq(wk_job_next_msg(job, 1000, &m), WK_NEXT_MSG);
    wk_msg_free(m);
    wk_job_detach(job, 1, "test: client went away");
    r = fx_job_info(t, 8);
    ck_assert_uint_eq(r.splits_queued + r.splits_running, 0);
    ck_assert_uint_eq(r.buffered_msgs, 0);
    ck_assert_uint_eq(r.streams_broken, 1);
    /* In-flight samples of the dropped split come back and are discarded. */
    r = fx_job_info_wait(t, 8, nothing_inflight);
    ck_assert_uint_eq(r.inflight, 0);
    ck_assert_uint_eq(r.buffered_bytes, 0);

    /* The same split re-assigned after the retry runs in full on a new stream. */
    assign(t, 8, 1, 0, 0, NIMG, 1);
    ck_assert_int_eq(wk_tasks_attach(t, 8, NULL, 1000, &job, why, sizeof(why)), WK_ATTACH_OK);
    seen_t seen;
    memset(&seen, 0, sizeof(seen));
    const uint32_t stage_to[2] = {0, 1};
    consume(job, &seen, 1, SPEC_BIG, stage_to);
    for (int p = 0; p < NIMG; p++) {
        ck_assert_int_eq(seen.count[0][p], 1);
    }
    /* Closing the job ends the stream's wait with CLOSED. */
    wk_tasks_close_job(t, 8);
    ck_assert_int_eq(wk_job_next_msg(job, 10, &m), WK_NEXT_CLOSED);
    wk_job_detach(job, 0, NULL);
    wk_tasks_free(t);
}
END_TEST

/* Whether (job, split) is listed, with its hand-out id echoed. */
static int has_ref(const wk_split_ref_t *refs, size_t n, uint64_t job, uint64_t split)
{
    for (size_t i = 0; i < n; i++) {
        if (refs[i].job_id == job && refs[i].split_id == split) {
            ck_assert_uint_eq(refs[i].assignment, job * 1000 + split);
            return 1;
        }
    }
    return 0;
}

/* Two jobs with the same split ids: reports and revocations are per job.
 * Then the SIGTERM path: drain refuses new splits, quiesce drops the rest,
 * and stop ends a stream OK where nothing was lost, UNAVAILABLE elsewhere. */
START_TEST(test_two_jobs_revoke_and_leave)
{
    wk_tasks_t *t = new_tasks(1u << 20);
    add_job(t, 8, SPEC_BIG, g_fp, g_count);
    add_job(t, 9, SPEC_BIG, g_fp, g_count);
    ck_assert_int_eq(wait_loaded(t, 8), WK_JOB_READY);
    ck_assert_int_eq(wait_loaded(t, 9), WK_JOB_READY);
    assign(t, 8, 1, 0, 0, NIMG, 1); /* fills the small buffer: stays in progress */
    assign(t, 8, 2, 0, 0, 4, 1);
    assign(t, 9, 1, 0, 0, 2, 1);    /* small: job 9 finishes it */
    assign(t, 9, 2, 0, 2, 4, 1);
    wk_tasks_report_t rep;
    ck_assert_int_eq(wk_tasks_report(t, &rep), 0);
    ck_assert(has_ref(rep.splits, rep.n_splits, 8, 1));
    ck_assert(has_ref(rep.splits, rep.n_splits, 8, 2));
    ck_assert(has_ref(rep.splits, rep.n_splits, 9, 1));
    ck_assert(has_ref(rep.splits, rep.n_splits, 9, 2));
    wk_tasks_report_free(&rep);

    /* Job 9's split 2 revoked: job 8's split 2 stays. */
    wk_tasks_revoke(t, 9, 2);
    ck_assert_int_eq(wk_tasks_report(t, &rep), 0);
    ck_assert(has_ref(rep.splits, rep.n_splits, 8, 2));
    ck_assert(!has_ref(rep.splits, rep.n_splits, 9, 2));
    wk_tasks_report_free(&rep);

    /* Job 9 streams its split 1 out whole: in progress until its last
     * message is noted sent, then sent (never neither). */
    wk_job_t *j9 = NULL;
    char why[256];
    ck_assert_int_eq(wk_tasks_attach(t, 9, NULL, 1000, &j9, why, sizeof(why)), WK_ATTACH_OK);
    seen_t seen;
    memset(&seen, 0, sizeof(seen));
    const uint32_t stage_to[3] = {0, 1, 1};
    consume(j9, &seen, 1, SPEC_BIG, stage_to);
    ck_assert_int_eq(wk_tasks_report(t, &rep), 0);
    ck_assert(!has_ref(rep.splits, rep.n_splits, 9, 1));
    ck_assert(has_ref(rep.sent, rep.n_sent, 9, 1));
    ck_assert(!has_ref(rep.sent, rep.n_sent, 8, 1));
    wk_tasks_report_free(&rep);

    /* Draining: new assignments are refused, running work continues. */
    wk_tasks_begin_drain(t);
    assign(t, 8, 3, 0, 0, 4, 1);
    ck_assert_int_eq(wk_tasks_report(t, &rep), 0);
    ck_assert(!has_ref(rep.splits, rep.n_splits, 8, 3));
    ck_assert(has_ref(rep.splits, rep.n_splits, 8, 1));
    wk_tasks_report_free(&rep);
    wk_job_t *j8 = NULL;
    ck_assert_int_eq(wk_tasks_attach(t, 8, NULL, 1000, &j8, why, sizeof(why)), WK_ATTACH_OK);

    /* Quiesce: nothing in progress any more; sent splits still reported. */
    wk_tasks_quiesce(t);
    ck_assert_int_eq(wk_tasks_report(t, &rep), 0);
    ck_assert_uint_eq(rep.n_splits, 0);
    ck_assert(has_ref(rep.sent, rep.n_sent, 9, 1));
    wk_tasks_report_free(&rep);
    ck_assert_uint_eq(fx_job_info(t, 8).buffered_msgs, 0);

    /* Stop: job 8 lost work (UNAVAILABLE), job 9 lost nothing (OK). */
    wk_tasks_stop(t);
    wk_msg_t *m = NULL;
    ck_assert_int_eq(wk_job_next_msg(j8, 10, &m), WK_NEXT_STOPPING);
    ck_assert_int_eq(wk_job_next_msg(j9, 10, &m), WK_NEXT_LEFT);
    wk_job_detach(j8, 0, NULL);
    wk_job_detach(j9, 0, NULL);
    wk_tasks_free(t);
}
END_TEST

/* The planner's codec choice (SplitAssignment.compress) on a job whose
 * spec leaves compression off: the split assigned with compress comes
 * compressed (delta + zstd for the uint8 decode) and decompresses to the
 * bytes of a local run; the split assigned without it comes raw. */
START_TEST(test_assignment_compress)
{
    wk_tasks_t *t = new_tasks(256u << 20);
    add_job(t, 6, SPEC_BIG, g_fp, g_count);
    Sluice__SplitAssignment a = SLUICE__SPLIT_ASSIGNMENT__INIT;
    a.job_id = 6;
    a.split_id = 1;
    a.begin = 0;
    a.end = 6;
    a.stage_to = 1;
    a.worker_id = 1;
    a.assignment = 6001;
    a.compress = 1;
    wk_tasks_assign(t, &a);
    assign(t, 6, 2, 0, 6, 12, 1);
    ck_assert_int_eq(wait_loaded(t, 6), WK_JOB_READY);
    wk_job_t *job = NULL;
    char why[256];
    ck_assert_int_eq(wk_tasks_attach(t, 6, NULL, 1000, &job, why, sizeof(why)), WK_ATTACH_OK);

    sl_spec_t spec;
    char err[512];
    ck_assert_int_eq(sl_spec_parse("t", SPEC_BIG, strlen(SPEC_BIG), &spec, err, sizeof(err)), 0);
    ck_assert_int_eq(spec.compress, SL_COMPRESS_OFF);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, err, sizeof(err)), 0);
    sl_source_t *src = NULL;
    ck_assert_int_eq(sl_source_open(g_root, SL_SRC_IMAGEFOLDER, "train", &src, err, sizeof(err)),
                     0);
    sl_pipe_scratch_t scratch;
    sl_pipe_scratch_init(&scratch);
    sl_codec_t *z = sl_codec_new();
    ck_assert_ptr_nonnull(z);
    int done = 0;
    int samples[3] = {0, 0, 0};
    int zipped[3] = {0, 0, 0};
    while (done < 2) {
        wk_msg_t *m = NULL;
        ck_assert_int_eq(wk_job_next_msg(job, FX_WAIT_MS, &m), WK_NEXT_MSG);
        uint64_t sid = m->batch.split_id;
        ck_assert(sid == 1 || sid == 2);
        for (size_t i = 0; i < m->batch.n_samples; i++) {
            const Sluice__Sample *ps = m->batch.samples[i];
            sl_tensor_t want;
            sl_tensor_init(&want);
            ck_assert_int_eq(sl_source_read(src, ps->index, &want, err, sizeof(err)), 0);
            ck_assert_int_eq(sl_pipeline_run(p, 0, 1, ps->epoch, ps->index, &want, &scratch,
                                             NULL, err, sizeof(err)),
                             0);
            samples[sid]++;
            if (ps->codec == SL_CODEC_NONE) {
                ck_assert(ps->data.len == want.nbytes &&
                          memcmp(ps->data.data, want.data, want.nbytes) == 0);
            } else {
                ck_assert_uint_eq(ps->codec, SL_CODEC_ZSTD_DELTA);
                ck_assert_uint_eq(ps->raw_size, want.nbytes);
                uint8_t *raw = malloc(want.nbytes);
                ck_assert_ptr_nonnull(raw);
                uint32_t row, step;
                sl_codec_delta_geometry(ps->layout == SL_LAYOUT_CHW, ps->w, ps->c, &row, &step);
                struct iovec iov = {ps->data.data, ps->data.len};
                ck_assert_int_eq(sl_codec_decompress(z, SL_CODEC_ZSTD_DELTA, &iov, 1, raw,
                                                     want.nbytes, row, step, err, sizeof(err)),
                                 0);
                ck_assert(memcmp(raw, want.data, want.nbytes) == 0);
                free(raw);
                zipped[sid]++;
            }
            sl_tensor_free(&want);
        }
        done += m->batch.split_done ? 1 : 0;
        wk_job_note_sent(job, m);
        wk_msg_free(m);
    }
    ck_assert_int_eq(samples[1], 6);
    ck_assert_int_eq(samples[2], 6);
    ck_assert_int_eq(zipped[1], 6); /* smooth 300x300 decodes always shrink */
    ck_assert_int_eq(zipped[2], 0);
    sl_codec_free(z);
    sl_pipe_scratch_free(&scratch);
    sl_source_free(src);
    sl_pipeline_free(p);
    wk_job_detach(job, 0, NULL);
    wk_tasks_free(t);
}
END_TEST

START_TEST(test_stop_while_running)
{
    wk_tasks_t *t = new_tasks(1u << 20);
    add_job(t, 3, SPEC_BIG, g_fp, g_count);
    assign(t, 3, 1, 0, 0, NIMG, 1);
    ck_assert_int_eq(wait_loaded(t, 3), WK_JOB_READY);
    wk_job_t *job = NULL;
    char why[256];
    ck_assert_int_eq(wk_tasks_attach(t, 3, NULL, 1000, &job, why, sizeof(why)), WK_ATTACH_OK);
    ck_assert_uint_gt(fx_job_info_wait(t, 3, started).samples_done, 0);
    wk_tasks_stop(t);
    wk_msg_t *m = NULL;
    ck_assert_int_eq(wk_job_next_msg(job, 10, &m), WK_NEXT_STOPPING);
    ck_assert_int_eq(wk_tasks_attach(t, 3, NULL, 10, &job, why, sizeof(why)),
                     WK_ATTACH_SHUTTING_DOWN);
    wk_job_detach(job, 0, NULL);
    wk_tasks_free(t);
}
END_TEST


/* No job starves another on one worker (docs/protocol.md "No rank
 * starves"): job 10 holds every in-flight slot with 8 splits of work when
 * job 11 gets one split; job 11 must finish while job 10 still has at least
 * a split's worth left (first come, first served, 11 waited for all of 10).
 * Then a job whose buffer is full gives up its slots to the other. */
START_TEST(test_jobs_share_slots)
{
    enum { ASPLITS = 8 };
    ck_assert_uint_eq(wk_fair_share(4, 0), 4);
    ck_assert_uint_eq(wk_fair_share(4, 1), 4);
    ck_assert_uint_eq(wk_fair_share(4, 2), 2);
    ck_assert_uint_eq(wk_fair_share(4, 3), 2);
    ck_assert_uint_eq(wk_fair_share(4, 5), 1);
    ck_assert_uint_eq(wk_fair_share(2, 64), 1);
    wk_tasks_t *t = new_tasks(256u << 20);
    add_job(t, 10, SPEC_BIG, g_fp, g_count);
    for (uint64_t k = 1; k <= ASPLITS; k++) {
        assign(t, 10, k, 0, 0, NIMG, 1);
    }
    ck_assert_int_eq(wait_loaded(t, 10), WK_JOB_READY);
    ck_assert_uint_gt(fx_job_info_wait(t, 10, started).samples_done, 0);
    add_job(t, 11, SPEC_BIG, g_fp, g_count);
    assign(t, 11, 1, 0, 0, NIMG, 1);
    ck_assert_int_eq(wait_loaded(t, 11), WK_JOB_READY);
    wk_job_info_t b = fx_job_info_wait(t, 11, one_split_done);
    wk_job_info_t a = fx_job_info(t, 10);
    ck_assert_uint_eq(b.splits_done, 1);
    printf("jobs_share_slots: job 11 finished its %d samples when job 10 had done %" PRIu64
           " of %d\n",
           NIMG, a.samples_done, ASPLITS * NIMG);
    ck_assert_msg(a.samples_done <= (ASPLITS - 1) * NIMG,
                  "job 11 finished its %d samples only after job 10 had done %" PRIu64 " of %d",
                  NIMG, a.samples_done, ASPLITS * NIMG);
    wk_tasks_free(t);

    /* Job 20's buffer (1 MiB, 4 samples) fills: nobody drains it, yet job
     * 21 gets every slot and runs its splits to the end. */
    t = new_tasks(1u << 20);
    add_job(t, 20, SPEC_BIG, g_fp, g_count);
    assign(t, 20, 1, 0, 0, NIMG, 1);
    ck_assert_int_eq(wait_loaded(t, 20), WK_JOB_READY);
    add_job(t, 21, SPEC_BIG, g_fp, g_count);
    ck_assert_int_eq(wait_loaded(t, 21), WK_JOB_READY);
    wk_job_t *job = NULL;
    char why[256];
    ck_assert_int_eq(wk_tasks_attach(t, 21, NULL, 1000, &job, why, sizeof(why)), WK_ATTACH_OK);
    for (uint64_t k = 1; k <= 4; k++) {
        assign(t, 21, k, 0, 0, NIMG, 1);
    }
    int done = 0;
    while (done < 4) {
        wk_msg_t *m = NULL;
        ck_assert_int_eq(wk_job_next_msg(job, FX_WAIT_MS, &m), WK_NEXT_MSG);
        done += m->batch.split_done;
        wk_job_note_sent(job, m);
        wk_msg_free(m);
    }
    a = fx_job_info(t, 20);
    ck_assert_uint_lt(a.samples_done, NIMG); /* still held at its bound */
    ck_assert_uint_le(a.buffered_bytes, (1u << 20) + (1u << 20));
    wk_job_detach(job, 0, NULL);
    wk_tasks_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("worker_tasks");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_splits_exactly_once);
    tcase_add_test(tc, test_failures_and_validation);
    tcase_add_test(tc, test_attach_needs_the_secret);
    tcase_add_test(tc, test_broken_stream_drops_and_revoke);
    tcase_add_test(tc, test_two_jobs_revoke_and_leave);
    tcase_add_test(tc, test_stop_while_running);
    tcase_add_test(tc, test_assignment_compress);
    tcase_add_test(tc, test_jobs_share_slots);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
