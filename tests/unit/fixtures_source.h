/* The source suites' shared tree helpers (test_source.c, test_source_folder.c):
 * a fresh temp dir per test holding the data root and a directory beyond
 * it, files, directories and symlinks made in it, and "images" that are
 * small deterministic fakes (sources do not decode). Every helper asserts;
 * the fixture runs in the forked test process. */
#ifndef TESTS_UNIT_FIXTURES_SOURCE_H
#define TESTS_UNIT_FIXTURES_SOURCE_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/data/source.h"
#include "tests/unit/fixtures.h"

/* Per-test temp dir: TMP/root is the data root, TMP/outside lies beyond it. */
static char g_tmp[128];
static char g_root[256];

static inline void fxs_setup(void)
{
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/sl_test_source_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_tmp));
    snprintf(g_root, sizeof(g_root), "%s/root", g_tmp);
    ck_assert_int_eq(mkdir(g_root, 0755), 0);
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/outside", g_tmp);
    ck_assert_int_eq(mkdir(p, 0755), 0);
}

static inline void fxs_teardown(void) { fx_rmtree(g_tmp); }

/* Absolute path of rel under the root (or under tmp when rel starts "@"). */
static inline void at(char *out, size_t len, const char *rel)
{
    if (rel[0] == '@') {
        snprintf(out, len, "%s/%s", g_tmp, rel + 1);
    } else {
        snprintf(out, len, "%s/%s", g_root, rel);
    }
}

static inline void t_mkdir(const char *rel)
{
    char p[PATH_MAX];
    at(p, sizeof(p), rel);
    ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s: %s", p, strerror(errno));
}

static inline void t_write(const char *rel, const void *data, size_t len)
{
    char p[PATH_MAX];
    at(p, sizeof(p), rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ck_assert_msg(fd >= 0, "open %s: %s", p, strerror(errno));
    ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static inline void t_symlink(const char *target, const char *rel)
{
    char p[PATH_MAX];
    at(p, sizeof(p), rel);
    ck_assert_msg(symlink(target, p) == 0, "symlink %s: %s", p, strerror(errno));
}

/* Deterministic fake image bytes: length and content from a seed. */
static inline size_t fake_len(unsigned seed) { return 50 + (seed * 37) % 300; }

static inline void fake_fill(unsigned seed, unsigned char *buf)
{
    size_t n = fake_len(seed);
    for (size_t i = 0; i < n; i++) {
        buf[i] = (unsigned char)(seed * 131 + i * 7);
    }
    buf[0] = 0xff; /* looks like a JPEG SOI, for the eye */
    buf[1] = 0xd8;
}

static inline void t_fake(const char *rel, unsigned seed)
{
    unsigned char buf[400];
    fake_fill(seed, buf);
    t_write(rel, buf, fake_len(seed));
}

static inline void check_read(const sl_source_t *src, uint64_t i, unsigned seed)
{
    unsigned char want[400];
    char err[256] = "";
    sl_tensor_t t;
    sl_tensor_init(&t);
    fake_fill(seed, want);
    int rc = sl_source_read(src, i, &t, err, sizeof(err));
    ck_assert_msg(rc == 0, "read %s: %d %s", sl_source_name(src, i), rc, err);
    ck_assert_int_eq(t.dtype, SL_DT_BYTES);
    ck_assert_uint_eq(t.nbytes, fake_len(seed));
    ck_assert_uint_eq(t.h, fake_len(seed));
    ck_assert_uint_eq(t.w, 1);
    ck_assert_uint_eq(t.c, 1);
    ck_assert_mem_eq(t.data, want, fake_len(seed));
    /* The head of it: the first bytes, or all of a shorter sample. */
    ck_assert_int_eq(sl_source_read_head(src, i, 10, &t, err, sizeof(err)), 0);
    ck_assert_uint_eq(t.nbytes, 10);
    ck_assert_mem_eq(t.data, want, 10);
    ck_assert_int_eq(sl_source_read_head(src, i, 100000, &t, err, sizeof(err)), 0);
    ck_assert_uint_eq(t.nbytes, fake_len(seed));
    ck_assert_mem_eq(t.data, want, fake_len(seed));
    ck_assert_int_eq(sl_source_read_head(src, i, 0, &t, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(sl_source_read_head(src, sl_source_count(src), 10, &t, err, sizeof(err)),
                     -ERANGE);
    sl_tensor_free(&t);
}

static inline int read_rc(const sl_source_t *src, uint64_t i, char *err, size_t errlen)
{
    sl_tensor_t t;
    sl_tensor_init(&t);
    int rc = sl_source_read(src, i, &t, err, errlen);
    sl_tensor_free(&t);
    return rc;
}

static inline sl_source_t *open_ok(sl_source_type_e type, const char *path)
{
    sl_source_t *src = NULL;
    char err[512] = "";
    int rc = sl_source_open(g_root, type, path, &src, err, sizeof(err));
    ck_assert_msg(rc == 0, "open %s: %d %s", path, rc, err);
    ck_assert_ptr_nonnull(src);
    return src;
}

static inline int open_fail(sl_source_type_e type, const char *path, char *err, size_t errlen)
{
    sl_source_t *src = NULL;
    err[0] = '\0';
    int rc = sl_source_open(g_root, type, path, &src, err, errlen);
    ck_assert_ptr_null(src);
    ck_assert_msg(rc < 0, "open %s unexpectedly succeeded", path);
    return rc;
}

#endif
