/* The prefix cache's store (common/pcache/pcache.h) on the sample namespace
 * of the shard cache (common/remote/cache.h): round trips, bad entries
 * never served, the shared budget, store errors counted. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/pcache/pcache.h"
#include "common/remote/cache.h"
#include "tests/unit/fixtures.h"

#define ERRLEN 512

static const char SPEC[] =
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 64},"
    " {\"op\": \"flip\"}]}";

static sl_pcache_t *open_pc(sl_cache_t *store, const char *json, uint64_t fp)
{
    sl_spec_t s;
    char err[ERRLEN] = "";
    ck_assert_int_eq(sl_spec_parse("t.json", json, strlen(json), &s, err, sizeof(err)), 0);
    sl_pcache_t *pc = NULL;
    ck_assert_int_eq(sl_pcache_new(store, &s, fp, 2, &pc, err, sizeof(err)), 0);
    sl_spec_clear(&s);
    return pc;
}

/* A smooth uint8 image (compresses) of w x h x 3, seeded. */
static void image(sl_tensor_t *t, uint32_t w, uint32_t h, uint8_t seed)
{
    ck_assert_int_eq(sl_tensor_reshape(t, SL_DT_U8, SL_LAYOUT_HWC, h, w, 3), 0);
    for (size_t i = 0; i < t->nbytes; i++) {
        t->data[i] = (uint8_t)(seed + i / 97);
    }
}

static void assert_equal(const sl_tensor_t *a, const sl_tensor_t *b)
{
    ck_assert_int_eq(a->dtype, b->dtype);
    ck_assert_int_eq(a->layout, b->layout);
    ck_assert_uint_eq(a->h, b->h);
    ck_assert_uint_eq(a->w, b->w);
    ck_assert_uint_eq(a->c, b->c);
    ck_assert_uint_eq(a->nbytes, b->nbytes);
    ck_assert(memcmp(a->data, b->data, a->nbytes) == 0);
}

/* The one file under dir/samples (the test writes one entry). */
static void only_entry(const char *dir, char *out, size_t outlen)
{
    char p[FX_TMPDIR_LEN + 16];
    snprintf(p, sizeof(p), "%s/samples", dir);
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] != '.') {
            ck_assert_int_lt(snprintf(out, outlen, "%s/%.200s", p, de->d_name), (int)outlen);
            n++;
        }
    }
    closedir(d);
    ck_assert_int_eq(n, 1);
}

START_TEST(test_round_trip)
{
    char dir[FX_TMPDIR_LEN], err[ERRLEN] = "";
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    sl_cache_t *store;
    ck_assert_int_eq(sl_cache_open(dir, SL_CACHE_NS_SAMPLES, 1 << 24, &store, err, sizeof(err)), 0);
    sl_pcache_t *pc = open_pc(store, SPEC, 77);
    ck_assert_ptr_nonnull(pc);
    ck_assert_uint_eq(sl_pcache_prefix(pc), 2); /* decode, resize */
    sl_tensor_t a, b, r;
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    sl_tensor_init(&r);
    image(&a, 64, 48, 3);
    ck_assert_int_eq(sl_pcache_get(pc, 0, 5, &b), -ENOENT);
    ck_assert_int_eq(sl_pcache_put(pc, 1, 5, &a), 0);
    ck_assert_int_eq(sl_pcache_get(pc, 0, 5, &b), 0);
    assert_equal(&a, &b);
    ck_assert_int_eq(sl_pcache_get(pc, 0, 6, &b), -ENOENT); /* another sample */
    /* Floats and incompressible records come back the same. */
    ck_assert_int_eq(sl_tensor_reshape(&r, SL_DT_RECORD, SL_LAYOUT_HWC, 1000, 1, 1), 0);
    for (size_t i = 0; i < r.nbytes; i++) {
        r.data[i] = (uint8_t)(i * 2654435761u >> 13);
    }
    ck_assert_int_eq(sl_pcache_put(pc, 0, 7, &r), 0);
    ck_assert_int_eq(sl_pcache_get(pc, 1, 7, &b), 0);
    assert_equal(&r, &b);
    sl_pcache_stats_t st;
    sl_pcache_stats(pc, &st);
    ck_assert_uint_eq(st.hits, 2);
    ck_assert_uint_eq(st.misses, 2);
    ck_assert_uint_eq(st.corrupt, 0);
    /* The two hits were timed (the planner's read-back cost): their sums
     * agree with the bytes read (sum b^2 >= (sum b)^2 / n). */
    ck_assert_uint_gt(st.read_ns, 0);
    ck_assert(st.read_bytes_sq >= (double)st.bytes_read * (double)st.bytes_read / 2.0 * 0.999);
    ck_assert(st.read_bytes_ns > 0.0);
    ck_assert_uint_gt(st.bytes_written, 1000);
    ck_assert_uint_lt(st.bytes_written, a.nbytes); /* the pixels compressed */
    /* Another source (fingerprint) or another prefix never sees it. */
    sl_pcache_t *other = open_pc(store, SPEC, 78);
    ck_assert_int_eq(sl_pcache_get(other, 0, 5, &b), -ENOENT);
    sl_pcache_free(other);
    other = open_pc(store,
                    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
                    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 32},"
                    " {\"op\": \"flip\"}]}",
                    77);
    ck_assert_int_eq(sl_pcache_get(other, 0, 5, &b), -ENOENT);
    sl_pcache_free(other);
    /* Keyed by the contents of a file the prefix reads (a tokenize's ranks,
     * sl_pipeline_content_hash): other contents never see it, the same
     * contents do, and entries of the unmixed key are not theirs. */
    uint8_t sha1[32], sha2[32];
    memset(sha1, 1, sizeof(sha1));
    memset(sha2, 2, sizeof(sha2));
    sl_pcache_t *k1 = open_pc(store, SPEC, 77);
    sl_pcache_key_content(k1, sha1);
    ck_assert_int_eq(sl_pcache_get(k1, 0, 5, &b), -ENOENT);
    ck_assert_int_eq(sl_pcache_put(k1, 0, 9, &a), 0);
    sl_pcache_t *k2 = open_pc(store, SPEC, 77);
    sl_pcache_key_content(k2, sha2);
    ck_assert_int_eq(sl_pcache_get(k2, 0, 9, &b), -ENOENT);
    sl_pcache_free(k2);
    k2 = open_pc(store, SPEC, 77);
    sl_pcache_key_content(k2, sha1);
    ck_assert_int_eq(sl_pcache_get(k2, 0, 9, &b), 0);
    assert_equal(&a, &b);
    ck_assert_int_eq(sl_pcache_get(pc, 0, 9, &b), -ENOENT);
    sl_pcache_stats(k2, &st);
    ck_assert_uint_eq(st.corrupt, 0);
    sl_pcache_free(k1);
    sl_pcache_free(k2);
    /* "cache": "off" or a random first unit: nothing to cache. */
    ck_assert_ptr_null(open_pc(store,
                               "{\"source\": {\"type\": \"imagefolder\", \"path\": \"t\"},"
                               " \"stages\": [{\"op\": \"decode_jpeg\"}], \"cache\": \"off\"}",
                               1));
    ck_assert_ptr_null(open_pc(store,
                               "{\"source\": {\"type\": \"imagefolder\", \"path\": \"t\"},"
                               " \"stages\": [{\"op\": \"decode_jpeg\"},"
                               " {\"op\": \"random_resized_crop\", \"size\": 8}]}",
                               1));
    sl_pcache_free(pc);
    sl_cache_free(store);
    sl_tensor_free(&a);
    sl_tensor_free(&b);
    sl_tensor_free(&r);
    fx_rmtree(dir);
}
END_TEST

/* Edits the one entry's file with how, then expects a counted miss, the
 * file gone, and a put + get to work again. */
static void refused(void (*how)(const char *path))
{
    char dir[FX_TMPDIR_LEN], err[ERRLEN] = "", path[FX_TMPDIR_LEN + 300];
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    sl_cache_t *store;
    ck_assert_int_eq(sl_cache_open(dir, SL_CACHE_NS_SAMPLES, 1 << 24, &store, err, sizeof(err)), 0);
    sl_pcache_t *pc = open_pc(store, SPEC, 1);
    sl_tensor_t a, b;
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    image(&a, 40, 30, 9);
    ck_assert_int_eq(sl_pcache_put(pc, 0, 3, &a), 0);
    only_entry(dir, path, sizeof(path));
    how(path);
    ck_assert_int_eq(sl_pcache_get(pc, 0, 3, &b), -ENOENT);
    sl_pcache_stats_t st;
    sl_pcache_stats(pc, &st);
    ck_assert_uint_eq(st.corrupt, 1);
    ck_assert_uint_eq(st.hits, 0);
    ck_assert_int_eq(access(path, F_OK), -1);         /* removed */
    ck_assert_int_eq(sl_pcache_put(pc, 0, 3, &a), 0); /* replaced */
    ck_assert_int_eq(sl_pcache_get(pc, 0, 3, &b), 0);
    assert_equal(&a, &b);
    sl_pcache_free(pc);
    sl_cache_free(store);
    sl_tensor_free(&a);
    sl_tensor_free(&b);
    fx_rmtree(dir);
}

static void truncate_it(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(truncate(path, st.st_size - 5), 0);
}

static void truncate_header(const char *path) { ck_assert_int_eq(truncate(path, 40), 0); }

static void poke(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, off), 1);
    b ^= 0x5a;
    ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

static void flip_payload(const char *path) { poke(path, 100); }
static void other_magic(const char *path) { poke(path, 0); }
static void other_version(const char *path) { poke(path, 4); }
static void other_index(const char *path) { poke(path, 48); }

START_TEST(test_truncated) { refused(truncate_it); }
END_TEST
START_TEST(test_truncated_header) { refused(truncate_header); }
END_TEST
START_TEST(test_corrupt_payload) { refused(flip_payload); }
END_TEST
START_TEST(test_other_magic) { refused(other_magic); }
END_TEST
START_TEST(test_other_version) { refused(other_version); }
END_TEST
START_TEST(test_other_key) { refused(other_index); }
END_TEST

/* One budget: the sample entries get what the shards leave, oldest
 * evicted first, counted; the shards are never evicted for samples. */
START_TEST(test_budget)
{
    char dir[FX_TMPDIR_LEN], err[ERRLEN] = "";
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    const uint64_t budget = 64 * 1024;
    sl_cache_t *shards, *store;
    ck_assert_int_eq(sl_cache_new(dir, budget, &shards, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_cache_open(dir, SL_CACHE_NS_SAMPLES, budget, &store, err, sizeof(err)), 0);
    /* 24 KiB of shards. */
    static uint8_t blob[24 * 1024];
    memset(blob, 'x', sizeof(blob));
    struct iovec iov = {.iov_base = blob, .iov_len = sizeof(blob)};
    char key[SL_CACHE_KEY_MAX];
    sl_cache_key("http://h/a.tar", 1, key);
    ck_assert_int_eq(sl_cache_put(shards, key, &iov, 1, NULL), 0);
    ck_assert_uint_eq(sl_cache_usage(shards), sizeof(blob));

    sl_pcache_t *pc = open_pc(store, SPEC, 1);
    sl_tensor_t a;
    sl_tensor_init(&a);
    ck_assert_int_eq(sl_tensor_reshape(&a, SL_DT_F32, SL_LAYOUT_HWC, 16, 16, 3), 0);
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < a.nbytes; i++) {
        x ^= x << 13; /* xorshift: 3 KiB that do not compress */
        x ^= x >> 7;
        x ^= x << 17;
        a.data[i] = (uint8_t)x;
    }
    for (uint64_t i = 0; i < 40; i++) {
        ck_assert_int_eq(sl_pcache_put(pc, 0, i, &a), 0);
    }
    sl_pcache_stats_t st;
    sl_pcache_stats(pc, &st);
    ck_assert_uint_gt(st.evictions, 0);
    ck_assert_uint_eq(st.evictions, sl_cache_evictions(store));
    /* Their bytes: whole entries, all of this handle's. */
    ck_assert_uint_eq(st.bytes_evicted, sl_cache_evicted_bytes(store));
    ck_assert_uint_ge(st.bytes_evicted, st.evictions * (st.bytes_written / 40));
    uint64_t entry = st.bytes_written / 40;
    /* Within the budget left by the shards, but for one pass's slack. */
    ck_assert_uint_le(sl_cache_usage(store), budget - sizeof(blob) + budget / 64 + entry);
    ck_assert_uint_eq(sl_cache_usage(shards), sizeof(blob));
    /* A stable part survives (new entries enter at the old end, ties by
     * name: the highest indices), the rest went. */
    ck_assert_int_eq(sl_pcache_get(pc, 0, 39, &a), 0);
    ck_assert_int_eq(sl_pcache_get(pc, 0, 0, &a), -ENOENT);
    /* An entry that was hit is used now: newer entries go before it. */
    for (uint64_t i = 100; i < 140; i++) {
        ck_assert_int_eq(sl_pcache_put(pc, 0, i, &a), 0);
    }
    ck_assert_int_eq(sl_pcache_get(pc, 0, 39, &a), 0);
    ck_assert_int_eq(sl_pcache_get(pc, 0, 100, &a), -ENOENT);
    sl_pcache_free(pc);
    sl_cache_free(store);
    sl_cache_free(shards);
    sl_tensor_free(&a);
    fx_rmtree(dir);
}
END_TEST

/* A store that fails (its directory gone) is counted, and the get misses. */
START_TEST(test_store_error)
{
    char dir[FX_TMPDIR_LEN], err[ERRLEN] = "", p[FX_TMPDIR_LEN + 16];
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    sl_cache_t *store;
    ck_assert_int_eq(sl_cache_open(dir, SL_CACHE_NS_SAMPLES, 1 << 20, &store, err, sizeof(err)), 0);
    snprintf(p, sizeof(p), "%s/samples", dir);
    ck_assert_int_eq(rmdir(p), 0);
    sl_pcache_t *pc = open_pc(store, SPEC, 1);
    sl_tensor_t a;
    sl_tensor_init(&a);
    image(&a, 8, 8, 1);
    ck_assert_int_lt(sl_pcache_put(pc, 0, 1, &a), 0);
    ck_assert_int_eq(sl_pcache_get(pc, 0, 1, &a), -ENOENT);
    sl_pcache_stats_t st;
    sl_pcache_stats(pc, &st);
    ck_assert_uint_eq(st.store_errors, 1);
    sl_pcache_free(pc);
    sl_cache_free(store);
    sl_tensor_free(&a);
    fx_rmtree(dir);
}
END_TEST

START_TEST(test_open_errors)
{
    char err[ERRLEN] = "";
    sl_cache_t *store;
    ck_assert_int_eq(sl_cache_open("/tmp", SL_CACHE_NS_SAMPLES, 0, &store, err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "cache_bytes"));
    ck_assert_int_eq(sl_cache_open("/proc/no/such", SL_CACHE_NS_SAMPLES, 10, &store, err,
                                   sizeof(err)),
                     -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "cache_dir '/proc/no/such'"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pcache");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_truncated_header);
    tcase_add_test(tc, test_corrupt_payload);
    tcase_add_test(tc, test_other_magic);
    tcase_add_test(tc, test_other_version);
    tcase_add_test(tc, test_other_key);
    tcase_add_test(tc, test_budget);
    tcase_add_test(tc, test_store_error);
    tcase_add_test(tc, test_open_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
