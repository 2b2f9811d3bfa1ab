/* test_client_open: the public C API's ways in and what a local job reports
 * (client/lib/sluice.h), on a real imagefolder:
 *  - sluice_open_json: a spec as text, errors naming the caller's name and
 *    the field, never a file;
 *  - first_epoch and the seed override: a job of one epoch started at epoch
 *    e delivers exactly (indices, labels, bytes) epoch e of a longer job;
 *    another epoch or seed does not; bad values refused naming the option;
 *  - sluice_recent_skips: the most recent skipped samples with path and
 *    reason, in the order they were skipped;
 *  - sluice_epoch_counts / sluice_job_counts: what iterating the job
 *    delivers (batches and samples), for one and several ranks, drop_last,
 *    both rank paddings; sluice_describe counts the same without running;
 *  - sluice_class_name: an imagefolder's class directories in label order;
 *  - sluice_version is SL_VERSION. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/sha256.h"
#include "client/lib/client_impl.h"
#include "client/lib/sluice.h"
#include "common/base/jobcap.h"
#include "common/base/log.h"
#include "common/base/version.h"
#include "tests/unit/fixtures.h"

#define NIMG 12
#define SPEC_FMT                                                                             \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 3},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resized_crop\", \"size\": 8},"\
    " {\"op\": \"flip\"}], \"batch_size\": 5, \"epochs\": %u}"

static char g_root[FX_TMPDIR_LEN];

static void setup(void)
{
    sl_log_set_level(LOG_CRIT);
    ck_assert_int_eq(fx_mkdtemp(g_root), 0);
    ck_assert_int_eq(fx_make_imagefolder(g_root, NIMG, 24, 16), 0);
}

static void teardown(void) { fx_rmtree(g_root); }

/* One delivered sample: where it came from and a hash of its bytes. */
typedef struct {
    uint64_t epoch, index;
    int32_t label;
    char sha[65];
} seen_t;

static int seen_cmp(const void *a, const void *b)
{
    const seen_t *x = a, *y = b;
    if (x->epoch != y->epoch) {
        return x->epoch < y->epoch ? -1 : 1;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Runs a local job of the spec text with these options; returns how many
 * samples it delivered into out (sorted by epoch, index). */
static size_t run(unsigned epochs, sluice_options_t o, seen_t *out, size_t max)
{
    char spec[512];
    snprintf(spec, sizeof(spec), SPEC_FMT, epochs);
    o.data_root = g_root;
    o.threads = 2;
    sluice_job_t *job = NULL;
    char err[512] = "";
    ck_assert_msg(sluice_open_json(spec, strlen(spec), "t", &o, &job, err, sizeof(err)) == 0,
                  "%s", err);
    size_t n = 0;
    sluice_batch_t *b = NULL;
    int rc;
    while ((rc = sluice_next_batch(job, &b)) == 0) {
        for (uint32_t i = 0; i < b->n && n < max; i++, n++) {
            out[n].epoch = b->epoch;
            out[n].index = b->indices[i];
            out[n].label = b->labels[i];
            sl_sha256_hex(b->data + b->offsets[i], b->sizes[i], out[n].sha);
        }
        sluice_release_batch(job, b);
    }
    ck_assert_int_eq(rc, 1);
    sluice_stats_t st;
    sluice_get_stats(job, &st);
    ck_assert_uint_eq(st.first_epoch, o.first_epoch);
    ck_assert_uint_eq(st.epochs, epochs);
    ck_assert_str_eq(st.fallback, "");
    sluice_close(job);
    qsort(out, n, sizeof(*out), seen_cmp);
    return n;
}

static int same(const seen_t *a, const seen_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (a[i].epoch != b[i].epoch || a[i].index != b[i].index || a[i].label != b[i].label ||
            strcmp(a[i].sha, b[i].sha) != 0) {
            return 0;
        }
    }
    return 1;
}

START_TEST(test_first_epoch_is_that_epoch_of_a_longer_job)
{
    static seen_t all[3 * NIMG], one[NIMG], other[NIMG];
    sluice_options_t o = {0};
    ck_assert_uint_eq(run(3, o, all, 3 * NIMG), 3 * NIMG);
    /* Epochs 1 and 2 of the three-epoch job, one job each. */
    for (uint64_t e = 1; e <= 2; e++) {
        o.first_epoch = e;
        ck_assert_uint_eq(run(1, o, one, NIMG), NIMG);
        ck_assert_uint_eq(one[0].epoch, e);
        ck_assert_msg(same(one, all + e * NIMG, NIMG), "epoch %llu differs",
                      (unsigned long long)e);
    }
    /* Another epoch is another draw (crops and flips keyed by the epoch). */
    o.first_epoch = 0;
    ck_assert_uint_eq(run(1, o, other, NIMG), NIMG);
    int differ = 0;
    for (size_t i = 0; i < NIMG; i++) {
        differ += strcmp(other[i].sha, one[i].sha) != 0;
    }
    ck_assert_int_gt(differ, 0);
    /* The seed override replaces the spec's (3): seed 3 is the spec's run. */
    o.has_seed = 1;
    o.seed = 3;
    ck_assert_uint_eq(run(1, o, one, NIMG), NIMG);
    ck_assert(same(one, all, NIMG));
    o.seed = 4;
    ck_assert_uint_eq(run(1, o, one, NIMG), NIMG);
    ck_assert(!same(one, all, NIMG));
}
END_TEST

/* sluice_open_json's answer for this spec text and these options. */
static int open_fails(const char *spec, const sluice_options_t *o, char *err, size_t errlen)
{
    sluice_job_t *job = NULL;
    int rc = sluice_open_json(spec, spec != NULL ? strlen(spec) : 0, "my spec", o, &job, err,
                              errlen);
    if (rc == 0) {
        sluice_close(job);
    }
    return rc;
}

START_TEST(test_open_json_errors)
{
    char err[512];
    sluice_options_t o = {.data_root = g_root};
    char good[512];
    snprintf(good, sizeof(good), SPEC_FMT, 1u);
    ck_assert_int_eq(open_fails(good, &o, err, sizeof(err)), 0);
    /* The field, under the caller's name for the text. */
    const char *bad = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
                      " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\","
                      " \"size\": -3}]}";
    ck_assert_int_eq(open_fails(bad, &o, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "my spec:1: stages[1].size") != NULL, "%s", err);
    ck_assert_int_eq(open_fails("{\"source\": ", &o, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "my spec") != NULL, "%s", err);
    ck_assert_int_eq(open_fails(NULL, &o, err, sizeof(err)), -EINVAL);
    /* Not NUL-terminated: only len bytes are read. */
    char padded[600];
    snprintf(padded, sizeof(padded), "%sGARBAGE", good);
    sluice_job_t *job = NULL;
    ck_assert_int_eq(sluice_open_json(padded, strlen(good), NULL, &o, &job, err, sizeof(err)),
                     0);
    sluice_close(job);
    /* Too long: a spec error like any other. */
    size_t big = 2u << 20;
    char *huge = malloc(big + 1);
    ck_assert_ptr_nonnull(huge);
    memset(huge, ' ', big);
    huge[big] = '\0';
    ck_assert_int_eq(open_fails(huge, &o, err, sizeof(err)), -EINVAL);
    free(huge);

    /* The options that renumber or reseed. */
    o.first_epoch = SLUICE_MAX_EPOCHS; /* + 1 epoch is beyond */
    ck_assert_int_eq(open_fails(good, &o, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "first_epoch") != NULL, "%s", err);
    o.first_epoch = UINT64_MAX; /* must not wrap around */
    ck_assert_int_eq(open_fails(good, &o, err, sizeof(err)), -EINVAL);
    o.first_epoch = SLUICE_MAX_EPOCHS - 1;
    ck_assert_msg(open_fails(good, &o, err, sizeof(err)) == 0, "%s", err);
    o.first_epoch = 0;
    o.has_seed = 1;
    o.seed = (uint64_t)INT64_MAX + 1;
    ck_assert_int_eq(open_fails(good, &o, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "seed") != NULL, "%s", err);
    o.seed = (uint64_t)INT64_MAX;
    ck_assert_msg(open_fails(good, &o, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(sluice_version(), SL_VERSION);
}
END_TEST

/* The capability every rank of a multi-rank job derives alike: from
 * SLUICE_JOB_SECRET when set (too short: an error), else from the token. */
START_TEST(test_rank_job_secret)
{
    sluice_job_t *job = calloc(1, sizeof(*job));
    ck_assert_ptr_nonnull(job);
    char err[256], want[65];
    snprintf(job->job_name, sizeof(job->job_name), "shared");
    snprintf(job->token, sizeof(job->token), "team-token-0123456789");
    unsetenv("SLUICE_JOB_SECRET");
    ck_assert_int_eq(cl_ranks_job_secret(job, err, sizeof(err)), 0);
    sl_jobcap_derive("team-token-0123456789", "shared", want);
    ck_assert_str_eq(job->job_secret, want);
    setenv("SLUICE_JOB_SECRET", "launch-secret-0123456789", 1);
    ck_assert_int_eq(cl_ranks_job_secret(job, err, sizeof(err)), 0);
    sl_jobcap_derive("launch-secret-0123456789", "shared", want);
    ck_assert_str_eq(job->job_secret, want);
    setenv("SLUICE_JOB_SECRET", "short", 1);
    ck_assert_int_eq(cl_ranks_job_secret(job, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "SLUICE_JOB_SECRET"));
    unsetenv("SLUICE_JOB_SECRET");
    free(job);
}
END_TEST

START_TEST(test_recent_skips)
{
    /* NIMG good images and 70 that are not JPEGs: more than are kept. */
    char path[600];
    for (int i = 0; i < 70; i++) {
        snprintf(path, sizeof(path), "%s/train/a/zz%02d.jpg", g_root, i);
        ck_assert_int_eq(fx_write_file(path, "nope", 4), 0);
    }
    char spec[512];
    snprintf(spec, sizeof(spec), SPEC_FMT, 1u);
    sluice_options_t o = {.data_root = g_root, .threads = 2};
    sluice_job_t *job = NULL;
    char err[512] = "";
    ck_assert_msg(sluice_open_json(spec, strlen(spec), "t", &o, &job, err, sizeof(err)) == 0,
                  "%s", err);
    sluice_skip_t k[SLUICE_RECENT_SKIPS + 1];
    ck_assert_int_eq(sluice_recent_skips(job, k, SLUICE_RECENT_SKIPS), 0);
    sluice_batch_t *b = NULL;
    while (sluice_next_batch(job, &b) == 0) {
        sluice_release_batch(job, b);
    }
    sluice_stats_t st;
    sluice_get_stats(job, &st);
    ck_assert_uint_eq(st.skipped, 70);
    int n = sluice_recent_skips(job, k, SLUICE_RECENT_SKIPS + 1);
    ck_assert_int_eq(n, SLUICE_RECENT_SKIPS);
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(k[i].reason, "not_jpeg");
        ck_assert_msg(strncmp(k[i].path, "train/a/zz", 10) == 0, "%s", k[i].path);
        ck_assert_msg(strstr(k[i].detail, k[i].path) != NULL, "%s", k[i].detail);
        ck_assert_uint_eq(k[i].epoch, 0);
    }
    /* Counts by reason, the arrays sized by the library: every reason
     * once, not_jpeg's 70, each name fits sluice_skip_t.reason. */
    int nr = sluice_skip_counts(job, NULL, NULL, 0);
    ck_assert_int_ge(nr, 17);
    const char *names[128];
    uint64_t counts[128];
    ck_assert_int_le(nr, 128);
    ck_assert_int_eq(sluice_skip_counts(job, names, counts, 128), nr);
    uint64_t total = 0;
    for (int i = 0; i < nr; i++) {
        ck_assert_uint_lt(strlen(names[i]), sizeof(k[0].reason));
        total += counts[i];
        ck_assert(strcmp(names[i], "not_jpeg") != 0 || counts[i] == 70);
    }
    ck_assert_uint_eq(total, 70);
    ck_assert_int_eq(sluice_skip_counts(job, names, counts, 3), 3);
    /* A smaller array gets the newest ones: the tail of the same list. */
    sluice_skip_t last[2];
    ck_assert_int_eq(sluice_recent_skips(job, last, 2), 2);
    ck_assert_str_eq(last[0].path, k[n - 2].path);
    ck_assert_str_eq(last[1].path, k[n - 1].path);
    ck_assert_int_eq(sluice_recent_skips(job, last, 0), 0);
    sluice_close(job);
}
END_TEST

/* Opens spec (a SPEC_FMT-like text) locally: described (nothing runs) or
 * run to its end, counting what it delivers into *samples, *batches. */
static sluice_job_t *open_counted(const char *spec, sluice_options_t o, int describe,
                                  uint64_t *samples, uint64_t *batches)
{
    o.data_root = g_root;
    o.threads = 2;
    sluice_job_t *job = NULL;
    char err[512] = "";
    int rc = describe ? sluice_describe("t", spec, strlen(spec), &o, &job, err, sizeof(err))
                      : sluice_open_json(spec, strlen(spec), "t", &o, &job, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    *samples = *batches = 0;
    sluice_batch_t *b = NULL;
    while (!describe && (rc = sluice_next_batch(job, &b)) == 0) {
        *samples += b->n;
        (*batches)++;
        sluice_release_batch(job, b);
    }
    ck_assert_int_eq(rc, describe ? 0 : 1);
    return job;
}

START_TEST(test_counts_are_what_the_job_delivers)
{
    static const struct {
        unsigned world, rank, epochs;
        const char *extra; /* more top-level keys */
        uint64_t epoch_samples, epoch_batches;
    } k_cases[] = {
        {1, 0, 2, "", NIMG, 3},                         /* 5 + 5 + 2 */
        {1, 0, 2, ", \"drop_last\": true", 10, 2},      /* the 2 dropped */
        {5, 4, 1, "", 2, 1},                            /* floor(12 / 5) */
        {5, 4, 3, ", \"rank_padding\": \"pad\"", 3, 1}, /* ceil(12 / 5) */
        {2, 1, 1, ", \"drop_last\": true", 5, 1},       /* 6 positions */
    };
    for (size_t i = 0; i < sizeof(k_cases) / sizeof(k_cases[0]); i++) {
        char spec[600];
        snprintf(spec, sizeof(spec),
                 "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 3},"
                 " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": 5,"
                 " \"epochs\": %u%s}",
                 k_cases[i].epochs, k_cases[i].extra);
        sluice_options_t o = {.world_size = k_cases[i].world, .rank = k_cases[i].rank};
        for (int describe = 0; describe < 2; describe++) {
            uint64_t got_s, got_b, s, b;
            sluice_job_t *job = open_counted(spec, o, describe, &got_s, &got_b);
            ck_assert_int_eq(sluice_epoch_counts(job, SLUICE_EPOCH_FULL, &s, &b), 0);
            ck_assert_msg(s == k_cases[i].epoch_samples && b == k_cases[i].epoch_batches,
                          "case %zu: epoch %lu samples %lu batches", i, (unsigned long)s,
                          (unsigned long)b);
            ck_assert_int_eq(sluice_epoch_counts(job, 0, &s, &b), 0);
            ck_assert_uint_eq(s, k_cases[i].epoch_samples);
            ck_assert_int_eq(sluice_job_counts(job, &s, &b), 0);
            ck_assert_uint_eq(s, k_cases[i].epoch_samples * k_cases[i].epochs);
            ck_assert_uint_eq(b, k_cases[i].epoch_batches * k_cases[i].epochs);
            if (!describe) { /* exactly what the iteration delivered */
                ck_assert_msg(got_s == s && got_b == b, "case %zu: delivered %lu in %lu", i,
                              (unsigned long)got_s, (unsigned long)got_b);
            } else {
                sluice_batch_t *none = NULL;
                ck_assert_int_eq(sluice_next_batch(job, &none), -EINVAL);
                ck_assert_msg(strstr(sluice_last_error(job), "sluice_describe") != NULL, "%s",
                              sluice_last_error(job));
                char *st = NULL;
                size_t stlen = 0;
                ck_assert_int_eq(sluice_state_save(job, &st, &stlen), -EINVAL);
                sluice_stats_t stats;
                sluice_get_stats(job, &stats);
                ck_assert_uint_eq(stats.delivered, 0);
                ck_assert_uint_eq(stats.epochs, k_cases[i].epochs);
            }
            sluice_close(job);
        }
    }
    ck_assert_int_eq(sluice_epoch_counts(NULL, 0, NULL, NULL), -EINVAL);
    ck_assert_int_eq(sluice_job_counts(NULL, NULL, NULL), -EINVAL);
}
END_TEST

START_TEST(test_class_names)
{
    /* Classes are the sorted directories, an empty one included: "Zed" <
     * "a" < "b" in strcmp order, as torchvision sorts them. */
    char path[600], to[600];
    snprintf(path, sizeof(path), "%s/train/Zed", g_root);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/train/b", g_root);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/train/a/0000.jpg", g_root);
    snprintf(to, sizeof(to), "%s/train/b/x.jpg", g_root);
    ck_assert_int_eq(link(path, to), 0);
    char spec[512];
    snprintf(spec, sizeof(spec), SPEC_FMT, 1u);
    uint64_t s, b;
    for (int describe = 0; describe < 2; describe++) {
        sluice_job_t *job = open_counted(spec, (sluice_options_t){0}, describe, &s, &b);
        ck_assert_uint_eq(sluice_num_classes(job), 3);
        ck_assert_str_eq(sluice_class_name(job, 0), "Zed");
        ck_assert_str_eq(sluice_class_name(job, 1), "a");
        ck_assert_str_eq(sluice_class_name(job, 2), "b");
        ck_assert_ptr_null(sluice_class_name(job, 3));
        sluice_close(job);
    }
    ck_assert_uint_eq(sluice_num_classes(NULL), 0);
    ck_assert_ptr_null(sluice_class_name(NULL, 0));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_open");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_first_epoch_is_that_epoch_of_a_longer_job);
    tcase_add_test(tc, test_open_json_errors);
    tcase_add_test(tc, test_recent_skips);
    tcase_add_test(tc, test_rank_job_secret);
    tcase_add_test(tc, test_counts_are_what_the_job_delivers);
    tcase_add_test(tc, test_class_names);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
