/* The prefix cache's in-progress markers (common/remote/pclaim.h) and
 * their use by lookups (pcache.h): a second lookup of a claimed key waits
 * and reads the claimer's entry; a claimer that fails lets a waiter compute;
 * the claim of a dead process blocks no one; a stuck holder's deadline and
 * the waiter's own bound end a wait. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/base/clock.h"
#include "common/pcache/pcache.h"
#include "common/remote/pclaim.h"
#include "common/remote/cache.h"
#include "tests/unit/fixtures.h"

#define ERRLEN 512

static const char SPEC[] =
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 64},"
    " {\"op\": \"flip\"}]}";

/* One job's cache of SPEC over the store, one thread. */
static sl_pcache_t *open_pc(sl_cache_t *store)
{
    sl_spec_t s;
    char err[ERRLEN] = "";
    ck_assert_int_eq(sl_spec_parse("t.json", SPEC, strlen(SPEC), &s, err, sizeof(err)), 0);
    sl_pcache_t *pc = NULL;
    ck_assert_int_eq(sl_pcache_new(store, &s, 77, 1, &pc, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(pc);
    sl_spec_clear(&s);
    return pc;
}

static sl_cache_t *open_store(char *dir)
{
    char err[ERRLEN] = "";
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    sl_cache_t *store = NULL;
    ck_assert_int_eq(sl_cache_open(dir, SL_CACHE_NS_SAMPLES, 1 << 24, &store, err, sizeof(err)), 0);
    return store;
}

static void image(sl_tensor_t *t, uint8_t seed)
{
    ck_assert_int_eq(sl_tensor_reshape(t, SL_DT_U8, SL_LAYOUT_HWC, 48, 64, 3), 0);
    for (size_t i = 0; i < t->nbytes; i++) {
        t->data[i] = (uint8_t)(seed + i / 97);
    }
}

/* Claim files (".claim-*") under dir/samples. */
static int claim_files(const char *dir)
{
    char p[FX_TMPDIR_LEN + 16];
    snprintf(p, sizeof(p), "%s/samples", dir);
    DIR *d = opendir(p);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        n += strncmp(de->d_name, ".claim-", 7) == 0;
    }
    closedir(d);
    return n;
}

/* A lookup on its own thread (a second job of the same prefix). */
typedef struct lookup_s {
    sl_pcache_t *pc;
    uint64_t index;
    sl_tensor_t out;
    int rc;
    atomic_int done;
    pthread_t th;
} lookup_t;

static void *lookup_main(void *arg)
{
    lookup_t *l = arg;
    l->rc = sl_pcache_get(l->pc, 0, l->index, &l->out);
    atomic_store(&l->done, 1);
    return NULL;
}

static void lookup_start(lookup_t *l, sl_pcache_t *pc, uint64_t index)
{
    memset(l, 0, sizeof(*l));
    l->pc = pc;
    l->index = index;
    sl_tensor_init(&l->out);
    ck_assert_int_eq(pthread_create(&l->th, NULL, lookup_main, l), 0);
}

static int lookup_join(lookup_t *l)
{
    pthread_join(l->th, NULL);
    sl_tensor_free(&l->out);
    return l->rc;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

START_TEST(test_claim_release)
{
    char dir[FX_TMPDIR_LEN];
    sl_cache_t *store = open_store(dir);
    int dfd = sl_cache_dir_fd(store);
    sl_pclaim_t a, b;
    sl_pclaim_init(&a);
    sl_pclaim_init(&b);
    sl_pclaim_holder_t h;
    ck_assert_int_eq(sl_pclaim_try(dfd, "k1", 5000, &a, &h), 0);
    ck_assert_int_ge(a.fd, 0);
    /* A second claimer in this process (another open file) finds it busy
     * and reads who holds it and until when. */
    ck_assert_int_eq(sl_pclaim_try(dfd, "k1", 5000, &b, &h), -EBUSY);
    ck_assert_int_lt(b.fd, 0);
    ck_assert_int_eq(h.pid, getpid());
    ck_assert(!sl_pclaim_expired(&h));
    ck_assert_int_eq(sl_pclaim_try(dfd, "k2", 5000, &b, NULL), 0); /* another key */
    ck_assert_int_eq(claim_files(dir), 2);
    sl_pclaim_release(dfd, &a);
    ck_assert_int_lt(a.fd, 0);
    sl_pclaim_release(dfd, &a); /* nothing held: no-op */
    ck_assert_int_eq(claim_files(dir), 1);
    ck_assert_int_eq(sl_pclaim_try(dfd, "k1", 5000, &a, NULL), 0);       /* free again */
    ck_assert_int_eq(sl_pclaim_try(dfd, "k3", 5000, &a, NULL), -EINVAL); /* a already holds */
    sl_pclaim_release(dfd, &a);
    sl_pclaim_release(dfd, &b);
    ck_assert_int_eq(claim_files(dir), 0); /* released claims leave nothing */
    /* The pause between looks: a quarter of the wait, within bounds. */
    ck_assert_int_eq(sl_pclaim_backoff_us(0), 50);
    ck_assert_int_eq(sl_pclaim_backoff_us(4000), 1000);
    ck_assert_int_eq(sl_pclaim_backoff_us(1000000), 2000);
    sl_cache_free(store);
    fx_rmtree(dir);
}
END_TEST

/* Job A misses and claims; job B's lookup of the same sample waits, and
 * when A stores the entry B reads it: one computation, B's hit counted
 * as waited. */
START_TEST(test_waiter_gets_entry)
{
    char dir[FX_TMPDIR_LEN];
    sl_cache_t *store = open_store(dir);
    sl_pcache_t *a = open_pc(store), *b = open_pc(store);
    sl_tensor_t t, got;
    sl_tensor_init(&t);
    sl_tensor_init(&got);
    image(&t, 9);
    ck_assert_int_eq(sl_pcache_get(a, 0, 5, &got), -ENOENT); /* A computes 5 */
    ck_assert_int_eq(claim_files(dir), 1);
    lookup_t l;
    lookup_start(&l, b, 5);
    sleep_ms(150);
    ck_assert_int_eq(atomic_load(&l.done), 0); /* B waits for A */
    ck_assert_int_eq(sl_pcache_put(a, 0, 5, &t), 0);
    ck_assert_int_eq(lookup_join(&l), 0);
    ck_assert_int_eq(claim_files(dir), 0);
    sl_pcache_stats_t sa, sb;
    sl_pcache_stats(a, &sa);
    sl_pcache_stats(b, &sb);
    ck_assert_uint_eq(sa.misses, 1);
    ck_assert_uint_eq(sb.misses, 0);
    ck_assert_uint_eq(sb.hits, 1);
    ck_assert_uint_eq(sb.waited, 1);
    ck_assert_uint_eq(sb.claim_timeouts, 0);
    /* The entry B read is A's. */
    ck_assert_int_eq(sl_pcache_get(b, 0, 5, &got), 0);
    ck_assert(got.nbytes == t.nbytes && memcmp(got.data, t.data, t.nbytes) == 0);
    sl_pcache_stats(b, &sb);
    ck_assert_uint_eq(sb.waited, 1); /* a plain hit does not wait */
    sl_tensor_free(&t);
    sl_tensor_free(&got);
    sl_pcache_free(a);
    sl_pcache_free(b);
    sl_cache_free(store);
    fx_rmtree(dir);
}
END_TEST

/* A claimer whose sample fails releases without an entry: the waiter
 * claims the key and computes it, and a third lookup waits for it. */
START_TEST(test_claimer_fails)
{
    char dir[FX_TMPDIR_LEN];
    sl_cache_t *store = open_store(dir);
    sl_pcache_t *a = open_pc(store), *b = open_pc(store), *c = open_pc(store);
    sl_tensor_t t, got;
    sl_tensor_init(&t);
    sl_tensor_init(&got);
    image(&t, 4);
    ck_assert_int_eq(sl_pcache_get(a, 0, 8, &got), -ENOENT);
    lookup_t lb;
    lookup_start(&lb, b, 8);
    sleep_ms(100);
    ck_assert_int_eq(atomic_load(&lb.done), 0);
    sl_pcache_release(a, 0);                     /* A's sample failed */
    ck_assert_int_eq(lookup_join(&lb), -ENOENT); /* B computes it now, claimed */
    ck_assert_int_eq(claim_files(dir), 1);
    lookup_t lc;
    lookup_start(&lc, c, 8);
    sleep_ms(100);
    ck_assert_int_eq(atomic_load(&lc.done), 0); /* C waits for B */
    ck_assert_int_eq(sl_pcache_put(b, 0, 8, &t), 0);
    ck_assert_int_eq(lookup_join(&lc), 0);
    sl_pcache_stats_t sb, sc;
    sl_pcache_stats(b, &sb);
    sl_pcache_stats(c, &sc);
    ck_assert_uint_eq(sb.misses, 1);
    ck_assert_uint_eq(sb.waited, 0);
    ck_assert_uint_eq(sc.hits, 1);
    ck_assert_uint_eq(sc.waited, 1);
    ck_assert_int_eq(claim_files(dir), 0);
    sl_tensor_free(&t);
    sl_tensor_free(&got);
    sl_pcache_free(a);
    sl_pcache_free(b);
    sl_pcache_free(c);
    sl_cache_free(store);
    fx_rmtree(dir);
}
END_TEST

/* The claim of a process that died holding it (its file still there,
 * naming its pid) blocks no one: the next lookup claims it at once. So
 * does a file that names a live pid but whose lock no one holds. */
START_TEST(test_stale_dead_pid)
{
    char dir[FX_TMPDIR_LEN];
    sl_cache_t *store = open_store(dir);
    sl_pcache_t *pc = open_pc(store);
    sl_tensor_t got;
    sl_tensor_init(&got);
    char key[SL_CACHE_KEY_MAX];
    /* The key of index 3: what a lookup claims (the entry's name). */
    ck_assert_int_eq(sl_pcache_get(pc, 0, 3, &got), -ENOENT);
    char p[FX_TMPDIR_LEN + 16];
    snprintf(p, sizeof(p), "%s/samples", dir);
    DIR *d = opendir(p);
    struct dirent *de;
    key[0] = '\0';
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, ".claim-", 7) == 0) {
            snprintf(key, sizeof(key), "%s", de->d_name + 7);
        }
    }
    closedir(d);
    ck_assert_str_ne(key, "");
    sl_pcache_release(pc, 0);
    ck_assert_int_eq(claim_files(dir), 0);

    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        sl_pclaim_t c;
        sl_pclaim_init(&c);
        _exit(sl_pclaim_try(sl_cache_dir_fd(store), key, 60000, &c, NULL) == 0 ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(claim_files(dir), 1); /* the dead claimer's file */
    char path[FX_TMPDIR_LEN + 100];
    snprintf(path, sizeof(path), "%s/.claim-%s", p, key);
    char buf[128] = "";
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
    fclose(f);
    char want[32];
    snprintf(want, sizeof(want), "pid %d ", (int)child);
    ck_assert_ptr_nonnull(strstr(buf, want));

    double t0 = sl_mono_sec();
    ck_assert_int_eq(sl_pcache_get(pc, 0, 3, &got), -ENOENT); /* claimed by us */
    ck_assert_double_lt(sl_mono_sec() - t0, 2.0);             /* not its 60 s */
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
    fclose(f);
    snprintf(want, sizeof(want), "pid %d ", (int)getpid());
    ck_assert_ptr_nonnull(strstr(buf, want)); /* taken over */
    sl_pcache_release(pc, 0);
    ck_assert_int_eq(claim_files(dir), 0); /* and removed on release */

    /* Unlocked, naming a live pid (init) and a far deadline: not a claim. */
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "pid 1 deadline_ms 99999999999999\n");
    fclose(f);
    t0 = sl_mono_sec();
    ck_assert_int_eq(sl_pcache_get(pc, 0, 3, &got), -ENOENT);
    ck_assert_double_lt(sl_mono_sec() - t0, 2.0);
    sl_pcache_stats_t st;
    sl_pcache_stats(pc, &st);
    ck_assert_uint_eq(st.claim_timeouts, 0);
    ck_assert_uint_eq(st.waited, 0);
    sl_tensor_free(&got);
    sl_pcache_free(pc); /* releases the thread's claim */
    ck_assert_int_eq(claim_files(dir), 0);
    sl_cache_free(store);
    fx_rmtree(dir);
}
END_TEST

/* A holder that never finishes: a waiter gives up after its own bound,
 * and at once when the holder's deadline has passed; each computes
 * unclaimed (counted in claim_timeouts and misses). */
START_TEST(test_deadline)
{
    char dir[FX_TMPDIR_LEN];
    sl_cache_t *store = open_store(dir);
    sl_pcache_t *a = open_pc(store), *b = open_pc(store);
    sl_tensor_t got;
    sl_tensor_init(&got);
    ck_assert_int_eq(sl_pcache_get(a, 0, 1, &got), -ENOENT); /* A holds 1 (10 s) */
    sl_pcache_set_claim_ms(b, 300);
    double t0 = sl_mono_sec();
    ck_assert_int_eq(sl_pcache_get(b, 0, 1, &got), -ENOENT);
    double waited = sl_mono_sec() - t0;
    ck_assert_double_ge(waited, 0.29);
    ck_assert_double_lt(waited, 5.0);
    sl_pcache_stats_t sb;
    sl_pcache_stats(b, &sb);
    ck_assert_uint_eq(sb.claim_timeouts, 1);
    ck_assert_uint_eq(sb.misses, 1);
    ck_assert_uint_eq(sb.waited, 0);
    sl_pcache_release(a, 0);

    /* A's claim of 2 says 20 ms; B (its own bound 10 s) arrives later. */
    sl_pcache_set_claim_ms(a, 20);
    sl_pcache_set_claim_ms(b, SL_PCLAIM_WAIT_MS);
    ck_assert_int_eq(sl_pcache_get(a, 0, 2, &got), -ENOENT);
    sleep_ms(60);
    t0 = sl_mono_sec();
    ck_assert_int_eq(sl_pcache_get(b, 0, 2, &got), -ENOENT);
    ck_assert_double_lt(sl_mono_sec() - t0, 2.0);
    sl_pcache_stats(b, &sb);
    ck_assert_uint_eq(sb.claim_timeouts, 2);

    /* Claims off: no wait, no claim. */
    sl_pcache_set_claim_ms(b, 0);
    t0 = sl_mono_sec();
    ck_assert_int_eq(sl_pcache_get(b, 0, 2, &got), -ENOENT);
    ck_assert_double_lt(sl_mono_sec() - t0, 2.0);
    sl_pcache_stats(b, &sb);
    ck_assert_uint_eq(sb.claim_timeouts, 2);
    ck_assert_uint_eq(sb.misses, 3);
    sl_tensor_free(&got);
    sl_pcache_free(a);
    sl_pcache_free(b);
    ck_assert_int_eq(claim_files(dir), 0);
    sl_cache_free(store);
    fx_rmtree(dir);
}
END_TEST

/* No claim file can be made (the directory is gone): lookups miss and
 * compute unclaimed, without waiting. */
START_TEST(test_no_claim_dir)
{
    char dir[FX_TMPDIR_LEN];
    sl_cache_t *store = open_store(dir);
    sl_pcache_t *a = open_pc(store), *b = open_pc(store);
    char p[FX_TMPDIR_LEN + 16];
    snprintf(p, sizeof(p), "%s/samples", dir);
    fx_rmtree(p);
    sl_tensor_t got;
    sl_tensor_init(&got);
    ck_assert_int_eq(sl_pcache_get(a, 0, 1, &got), -ENOENT);
    double t0 = sl_mono_sec();
    ck_assert_int_eq(sl_pcache_get(b, 0, 1, &got), -ENOENT);
    ck_assert_double_lt(sl_mono_sec() - t0, 2.0);
    sl_pcache_stats_t sb;
    sl_pcache_stats(b, &sb);
    ck_assert_uint_eq(sb.claim_timeouts, 0);
    sl_tensor_free(&got);
    sl_pcache_free(a);
    sl_pcache_free(b);
    sl_cache_free(store);
    fx_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pclaim");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_claim_release);
    tcase_add_test(tc, test_waiter_gets_entry);
    tcase_add_test(tc, test_claimer_fails);
    tcase_add_test(tc, test_stale_dead_pid);
    tcase_add_test(tc, test_deadline);
    tcase_add_test(tc, test_no_claim_dir);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
