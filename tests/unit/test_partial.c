/* test_partial: range-read bytes kept in the cache (common/remote/partial.h):
 * held ranges served, holes never; crash safety (bytes without a record, a
 * torn record, a record whose bytes were lost, a writer killed at a random
 * moment); what other processes kept; eviction; the budget's accounting. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/remote/cache.h"
#include "common/remote/partial.h"
#include "tests/unit/fixtures.h"

#define OBJ_SIZE ((uint64_t)3 << 20)

/* The object's byte at off: not periodic, so a misplaced range shows. */
static unsigned char obj_byte(uint64_t off)
{
    uint64_t x = off * 0x9e3779b97f4a7c15ULL;
    return (unsigned char)((x >> 29) ^ (x >> 47) ^ 1);
}

/* A memfd holding the whole object (what range GETs would return). */
static int obj_fd(void)
{
    int fd = memfd_create("obj", MFD_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    unsigned char *b = malloc(OBJ_SIZE);
    ck_assert_ptr_nonnull(b);
    for (uint64_t i = 0; i < OBJ_SIZE; i++) {
        b[i] = obj_byte(i);
    }
    ck_assert_int_eq(pwrite(fd, b, OBJ_SIZE, 0), (ssize_t)OBJ_SIZE);
    free(b);
    return fd;
}

/* Reads [off, off + len) through the entry: its rc; on 0 the bytes are
 * checked against the object's. */
static int read_check(sl_parts_t *t, sl_part_t *p, uint64_t off, uint64_t len)
{
    int out = memfd_create("out", MFD_CLOEXEC);
    ck_assert_int_ge(out, 0);
    int rc = sl_part_read(t, p, off, len, out, 0);
    if (rc == 0) {
        unsigned char *b = malloc(len);
        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(pread(out, b, len, (off_t)off), (ssize_t)len);
        uint64_t bad = len;
        for (uint64_t i = 0; i < len && bad == len; i++) {
            if (b[i] != obj_byte(off + i)) {
                bad = i;
            }
        }
        ck_assert_msg(bad == len, "byte %llu served wrong", (unsigned long long)(off + bad));
        free(b);
    }
    close(out);
    return rc;
}

typedef struct env_s {
    char dir[FX_TMPDIR_LEN];
    sl_cache_t *c;
    char key[SL_CACHE_KEY_MAX];
    char path[FX_TMPDIR_LEN + 128];
    int obj;
} env_t;

static void env_init(env_t *e, uint64_t budget)
{
    char err[256] = "";
    ck_assert_int_eq(fx_mkdtemp(e->dir), 0);
    ck_assert_int_eq(sl_cache_new(e->dir, budget, &e->c, err, sizeof(err)), 0);
    sl_cache_key("http://h/shard-0.tar", 7, e->key);
    char name[SL_CACHE_KEY_MAX];
    sl_part_name(e->key, name);
    snprintf(e->path, sizeof(e->path), "%s/shards/%s", e->dir, name);
    e->obj = obj_fd();
}

static void env_free(env_t *e)
{
    close(e->obj);
    sl_cache_free(e->c);
    fx_rmtree(e->dir);
}

/* A fresh table: what another process (or this one after a restart) sees. */
static sl_part_t *reopen(env_t *e, sl_parts_t **t, bool create)
{
    ck_assert_int_eq(sl_parts_new(e->c, t), 0);
    sl_part_t *p = NULL;
    int rc = sl_parts_get(*t, e->key, OBJ_SIZE, create, &p);
    ck_assert_msg(rc == 0, "get: %d", rc);
    return p;
}

START_TEST(test_partial_held_and_holes)
{
    env_t e;
    env_init(&e, (uint64_t)64 << 20);
    sl_parts_t *t;
    ck_assert_int_eq(sl_parts_new(e.c, &t), 0);
    sl_part_t *p;
    ck_assert_int_eq(sl_parts_get(t, e.key, OBJ_SIZE, false, &p), -ENOENT);
    ck_assert_int_eq(sl_parts_get(t, e.key, OBJ_SIZE, true, &p), 0);
    ck_assert_int_eq(read_check(t, p, 0, 100), -ENOENT);
    ck_assert_int_eq(sl_part_write(t, p, e.obj, 1000, 1000, 5000), 0);
    ck_assert_int_eq(sl_part_write(t, p, e.obj, 700000, 700000, 300000), 0);
    ck_assert_int_eq(sl_part_write(t, p, e.obj, OBJ_SIZE - 10, OBJ_SIZE - 10, 11), -EINVAL);
    ck_assert_int_eq(read_check(t, p, 1000, 5000), 0);
    ck_assert_int_eq(read_check(t, p, 2000, 100), 0);
    ck_assert_int_eq(read_check(t, p, 999, 10), -ENOENT);      /* one byte before */
    ck_assert_int_eq(read_check(t, p, 5990, 11), -ENOENT);     /* one byte after */
    ck_assert_int_eq(read_check(t, p, 1000, 700000), -ENOENT); /* across a hole */
    ck_assert_uint_eq(sl_part_held(t, p), 305000);

    /* The holes, in order, at most max bytes each. */
    uint64_t off, len;
    ck_assert(sl_part_missing(t, p, 0, 1 << 20, &off, &len));
    ck_assert_uint_eq(off, 0);
    ck_assert_uint_eq(len, 1000);
    ck_assert(sl_part_missing(t, p, 1000, 1 << 20, &off, &len));
    ck_assert_uint_eq(off, 6000);
    ck_assert_uint_eq(len, 694000);
    ck_assert(sl_part_missing(t, p, 1000000, 1 << 20, &off, &len));
    ck_assert_uint_eq(off, 1000000);
    ck_assert_uint_eq(len, 1 << 20);

    /* Budget: what it holds (blocks), not the object's size. */
    ck_assert_uint_lt(sl_cache_usage(e.c), OBJ_SIZE / 2);
    ck_assert_uint_ge(sl_cache_usage(e.c), 305000);

    /* Another process sees what this one kept, and adds to it. */
    sl_parts_t *t2;
    sl_part_t *p2 = reopen(&e, &t2, false);
    ck_assert_int_eq(read_check(t2, p2, 700000, 300000), 0);
    ck_assert_int_eq(sl_part_write(t2, p2, e.obj, 6000, 6000, 694000), 0);
    ck_assert_int_eq(read_check(t, p, 1000, 999000), 0); /* read from t: refreshed */

    /* Filled to the end: 1 when whole, then copied out whole. */
    int out = memfd_create("whole", MFD_CLOEXEC);
    ck_assert_int_eq(sl_part_copy_out(t, p, out), -ENOENT);
    uint64_t at = 0;
    int last = 0;
    while (sl_part_missing(t, p, at, 1 << 20, &off, &len)) {
        last = sl_part_write(t, p, e.obj, off, off, len);
        ck_assert_int_ge(last, 0);
        at = off + len;
    }
    ck_assert_int_eq(last, 1);
    ck_assert_int_eq(sl_part_copy_out(t, p, out), 0);
    struct stat st;
    ck_assert_int_eq(fstat(out, &st), 0);
    ck_assert_uint_eq((uint64_t)st.st_size, OBJ_SIZE);
    unsigned char b[4096];
    ck_assert_int_eq(pread(out, b, sizeof(b), 1 << 20), (ssize_t)sizeof(b));
    for (size_t i = 0; i < sizeof(b); i++) {
        ck_assert(b[i] == obj_byte((1 << 20) + i));
    }
    close(out);
    sl_part_remove(t, p);
    ck_assert_int_eq(access(e.path, F_OK), -1);
    sl_parts_release(t2, p2);
    sl_parts_free(t2);
    sl_parts_free(t);
    env_free(&e);
}
END_TEST

START_TEST(test_partial_crash_never_serves_what_is_not_held)
{
    env_t e;
    env_init(&e, (uint64_t)64 << 20);
    sl_parts_t *t;
    sl_part_t *p = reopen(&e, &t, true);
    ck_assert_int_eq(sl_part_write(t, p, e.obj, 0, 0, 4096), 0);
    ck_assert_int_eq(sl_part_write(t, p, e.obj, 100000, 100000, 50000), 0);
    sl_parts_release(t, p);
    sl_parts_free(t);

    int fd = open(e.path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    /* 1. A crash after the bytes, before their record: the object's own
     * bytes at 200000 with no record. */
    unsigned char b[8192];
    ck_assert_int_eq(pread(e.obj, b, sizeof(b), 200000), (ssize_t)sizeof(b));
    ck_assert_int_eq(pwrite(fd, b, sizeof(b), (off_t)(SL_PART_DATA + 200000)), (ssize_t)sizeof(b));
    /* 2. A torn record: half a slot at the end. */
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    uint64_t rec[5];
    ck_assert_int_eq(pread(fd, rec, sizeof(rec), (off_t)(SL_PART_DATA + OBJ_SIZE)),
                     (ssize_t)sizeof(rec));
    rec[0] = 300000; /* a record of bytes never written */
    ck_assert_int_eq(pwrite(fd, rec, 20, st.st_size), 20);
    /* 3. A record that outlived its bytes (a power cut): the second
     * range's bytes zeroed. */
    memset(b, 0, sizeof(b));
    ck_assert_int_eq(pwrite(fd, b, 4096, (off_t)(SL_PART_DATA + 120000)), 4096);
    close(fd);

    p = reopen(&e, &t, true);
    ck_assert_int_eq(read_check(t, p, 0, 4096), 0);            /* intact: served */
    ck_assert_int_eq(read_check(t, p, 200000, 8192), -ENOENT); /* no record */
    ck_assert_int_eq(read_check(t, p, 300000, 10), -ENOENT);   /* torn record */
    ck_assert_int_eq(read_check(t, p, 100000, 100), -ENOENT);  /* bytes lost */
    ck_assert_uint_eq(sl_part_held(t, p), 4096);
    /* A write after the torn slot lands in the next whole slot. */
    ck_assert_int_eq(sl_part_write(t, p, e.obj, 100000, 100000, 50000), 0);
    sl_parts_release(t, p);
    sl_parts_free(t);
    p = reopen(&e, &t, false);
    ck_assert_int_eq(read_check(t, p, 100000, 50000), 0);
    sl_parts_release(t, p);
    sl_parts_free(t);

    /* 4. A damaged header: not this object's entry. Not opened without
     * create; started over (nothing held) with it. */
    fd = open(e.path, O_RDWR);
    ck_assert_int_eq(pwrite(fd, "XXXX", 4, 0), 4);
    close(fd);
    ck_assert_int_eq(sl_parts_new(e.c, &t), 0);
    ck_assert_int_eq(sl_parts_get(t, e.key, OBJ_SIZE, false, &p), -ENOENT);
    ck_assert_int_eq(sl_parts_get(t, e.key, OBJ_SIZE, true, &p), 0);
    ck_assert_uint_eq(sl_part_held(t, p), 0);
    ck_assert_int_eq(read_check(t, p, 0, 4096), -ENOENT);
    sl_parts_release(t, p);
    sl_parts_free(t);
    env_free(&e);
}
END_TEST

/* A writer killed at random moments: whatever a later reader takes as held
 * is the object's bytes. */
START_TEST(test_partial_writer_killed)
{
    env_t e;
    env_init(&e, (uint64_t)64 << 20);
    srand((unsigned)time(NULL));
    uint64_t held = 0;
    for (int round = 0; round < 8; round++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            sl_parts_t *t;
            sl_part_t *p;
            if (sl_parts_new(e.c, &t) < 0 || sl_parts_get(t, e.key, OBJ_SIZE, true, &p) < 0) {
                _exit(1);
            }
            for (unsigned i = 0;; i++) {
                uint64_t off = ((uint64_t)i * 7919 * 4099) % (OBJ_SIZE - 70000);
                (void)sl_part_write(t, p, e.obj, off, off, 1 + (i * 7333) % 65536);
            }
        }
        struct timespec nap = {.tv_nsec = 1000000L * (5 + rand() % 30)};
        nanosleep(&nap, NULL);
        kill(pid, SIGKILL);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        sl_parts_t *t;
        sl_part_t *p = reopen(&e, &t, true);
        /* Every held span, read back whole. */
        uint64_t at = 0, off, len;
        while (at < OBJ_SIZE) {
            if (!sl_part_missing(t, p, at, OBJ_SIZE, &off, &len)) {
                ck_assert_int_eq(read_check(t, p, at, OBJ_SIZE - at), 0);
                break;
            }
            if (off > at) {
                ck_assert_int_eq(read_check(t, p, at, off - at), 0);
            }
            ck_assert_int_eq(read_check(t, p, off, 1), -ENOENT);
            at = off + len;
        }
        held = sl_part_held(t, p);
        sl_parts_release(t, p);
        sl_parts_free(t);
    }
    ck_assert_uint_gt(held, 0); /* the writers did keep something */
    env_free(&e);
}
END_TEST

START_TEST(test_partial_evicted)
{
    env_t e;
    env_init(&e, (uint64_t)6 << 20); /* OBJ_SIZE is half of it: allowed */
    sl_parts_t *t;
    sl_part_t *p = reopen(&e, &t, true);
    ck_assert_int_eq(sl_part_write(t, p, e.obj, 0, 0, 65536), 0);
    /* Evicted (an eviction pass unlinks it): nothing more is kept in the
     * unlinked file; the next get starts a new entry. */
    ck_assert_int_eq(unlink(e.path), 0);
    ck_assert_int_eq(sl_part_write(t, p, e.obj, 65536, 65536, 65536), -ESTALE);
    sl_parts_release(t, p);
    ck_assert_int_eq(sl_parts_get(t, e.key, OBJ_SIZE, true, &p), 0);
    ck_assert_uint_eq(sl_part_held(t, p), 0);
    ck_assert_int_eq(sl_part_write(t, p, e.obj, 0, 0, OBJ_SIZE), 1);
    ck_assert_int_eq(access(e.path, F_OK), 0);
    sl_parts_release(t, p);

    /* A partial entry counts in the budget and is evicted like any other,
     * least recently used: a second object of the same size kept whole
     * goes over 6 MiB (headers and records), so the older one goes. */
    struct timespec old[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
    ck_assert_int_eq(utimensat(AT_FDCWD, e.path, old, 0), 0);
    char k2[SL_CACHE_KEY_MAX], n2[SL_CACHE_KEY_MAX], path2[FX_TMPDIR_LEN + 128];
    sl_cache_key("http://h/other.tar", 1, k2);
    sl_part_name(k2, n2);
    snprintf(path2, sizeof(path2), "%s/shards/%s", e.dir, n2);
    ck_assert_int_eq(sl_parts_get(t, k2, OBJ_SIZE, true, &p), 0);
    for (uint64_t off = 0; off < OBJ_SIZE; off += 1 << 20) {
        ck_assert_int_ge(sl_part_write(t, p, e.obj, off, off, 1 << 20), 0);
    }
    ck_assert_int_eq(access(e.path, F_OK), -1);
    ck_assert_int_eq(access(path2, F_OK), 0);
    ck_assert_uint_le(sl_cache_usage(e.c), (uint64_t)6 << 20);
    sl_parts_release(t, p);
    sl_parts_free(t);
    env_free(&e);
}
END_TEST

/* An object larger than cache_bytes (a shard over half of it, read by
 * ranges every epoch): its entry keeps what fits, least recently used
 * entries going to make room, and the directory never goes over the
 * budget; past that a write keeps nothing (-ENOSPC), what is kept reads
 * right. */
START_TEST(test_partial_over_budget)
{
    env_t e;
    const uint64_t budget = (uint64_t)2 << 20; /* OBJ_SIZE is 3 MiB */
    env_init(&e, budget);
    char k2[SL_CACHE_KEY_MAX], p2[FX_TMPDIR_LEN + 128];
    sl_cache_key("http://h/old.tar", 1, k2);
    snprintf(p2, sizeof(p2), "%s/shards/%s", e.dir, k2);
    unsigned char *old = calloc(1, 256 << 10);
    ck_assert_ptr_nonnull(old);
    ck_assert_int_eq(fx_write_file(p2, old, 256 << 10), 0);
    free(old);
    struct timespec ancient[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
    ck_assert_int_eq(utimensat(AT_FDCWD, p2, ancient, 0), 0);
    sl_parts_t *t;
    sl_part_t *p = reopen(&e, &t, true);
    uint64_t kept = 0, step = 64 << 10;
    int rc = 0;
    for (uint64_t off = 0; off < OBJ_SIZE; off += step) {
        rc = sl_part_write(t, p, e.obj, off, off, step);
        ck_assert_msg(rc == 0 || rc == -ENOSPC, "write at %llu: %d", (unsigned long long)off, rc);
        kept += rc == 0 ? step : 0;
        ck_assert_uint_le(sl_cache_usage(e.c), budget);
    }
    ck_assert_int_eq(rc, -ENOSPC);
    ck_assert_uint_eq(sl_part_held(t, p), kept);
    ck_assert_uint_ge(kept, budget - budget / 8); /* most of the budget */
    ck_assert_int_eq(access(p2, F_OK), -1);       /* the older entry made room */
    ck_assert_int_eq(read_check(t, p, 0, kept), 0);
    ck_assert_int_eq(read_check(t, p, kept, 1), -ENOENT);
    sl_parts_release(t, p);
    sl_parts_free(t);
    env_free(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("partial");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_partial_held_and_holes);
    tcase_add_test(tc, test_partial_crash_never_serves_what_is_not_held);
    tcase_add_test(tc, test_partial_writer_killed);
    tcase_add_test(tc, test_partial_evicted);
    tcase_add_test(tc, test_partial_over_budget);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
