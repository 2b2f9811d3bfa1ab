/* test_remote: common/remote without a network: URL canonical forms and the
 * remote_roots allow-list (the SSRF rules), the SigV4 signer against AWS's
 * published vectors, S3 request building and credentials, and the shard
 * cache's crash safety, LRU eviction and budget, the range reader's index
 * entries (a damaged one is refused, never served). The servers (nginx, an S3
 * server) are in tests/integration/test_remote_sources.sh. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/remote/cache.h"
#include "common/remote/hedge.h"
#include "common/remote/remote.h"
#include "common/remote/rread.h"
#include "common/remote/s3.h"
#include "common/remote/s3_list.h"
#include "common/remote/sigv4.h"
#include "common/remote/url.h"
#include "tests/unit/fixtures.h"

static void canon_eq(const char *in, const char *want)
{
    char out[SL_URL_MAX], err[256] = "";
    int rc = sl_url_canonical(in, out, sizeof(out), err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", in, err);
    ck_assert_str_eq(out, want);
}

static void canon_fails(const char *in, int want_rc, const char *want_err)
{
    char out[SL_URL_MAX], err[256] = "";
    int rc = sl_url_canonical(in, out, sizeof(out), err, sizeof(err));
    ck_assert_msg(rc == want_rc, "%s: rc %d (%s), want %d", in, rc, err, want_rc);
    ck_assert_msg(strstr(err, want_err) != NULL, "%s: '%s' lacks '%s'", in, err, want_err);
}

START_TEST(test_url_canonical)
{
    canon_eq("HTTP://Data.Example.COM:80/a/b.tar", "http://data.example.com/a/b.tar");
    canon_eq("https://h:443/x", "https://h/x");
    canon_eq("https://h:8443/x", "https://h:8443/x");
    canon_eq("http://h", "http://h/");
    canon_eq("http://h/%61%62c", "http://h/abc");
    canon_eq("http://h/a b", "http://h/a%20b");
    canon_eq("http://h/s-{000..009}.tar", "http://h/s-{000..009}.tar");
    canon_eq("S3://Bucket/k/x.tar", "s3://bucket/k/x.tar");
    canon_eq("http://[::1]:8080/x", "http://[::1]:8080/x");
    canon_eq("http://h/a..b/.x", "http://h/a..b/.x"); /* dots inside names are names */
}
END_TEST

START_TEST(test_url_refused)
{
    canon_fails("http://h/a/../b", -EPERM, "'..' segment");
    canon_fails("http://h/a/%2e%2E/b", -EPERM, "'..' segment");
    canon_fails("http://h/a/./b", -EPERM, "'.' segment");
    canon_fails("http://h/..", -EPERM, "'..' segment");
    canon_fails("http://allowed.com@evil.com/x", -EINVAL, "userinfo");
    canon_fails("http://h/x?y=1", -EINVAL, "query");
    canon_fails("http://h/x#f", -EINVAL, "fragment");
    canon_fails("http://h/a%2fb", -EINVAL, "encoded '/'");
    canon_fails("http://h/a%zz", -EINVAL, "percent-escape");
    canon_fails("http://h/a%00b", -EINVAL, "byte 0x00");
    canon_fails("http://h/a\\b", -EINVAL, "byte 0x5c");
    canon_fails("http://h:99999/x", -EINVAL, "bad port");
    canon_fails("http://h:/x", -EINVAL, "bad port");
    canon_fails("http://h%2e/x", -EINVAL, "not allowed in a host");
    canon_fails("http:///x", -EINVAL, "empty host");
    canon_fails("ftp://h/x", -EINVAL, "not an http");
    ck_assert(!sl_url_is_url("data/x.tar"));
    ck_assert(!sl_url_is_url("file:///etc/passwd"));
    ck_assert(sl_url_is_url("HTTPS://x/"));
}
END_TEST

static bool allowed(const sl_roots_t *r, const char *url)
{
    sl_url_t u;
    char err[256];
    if (sl_url_parse(url, &u, err, sizeof(err)) < 0) {
        return false;
    }
    return sl_roots_allow(r, &u);
}

START_TEST(test_roots)
{
    sl_roots_t r;
    char err[256] = "";
    ck_assert_int_eq(sl_roots_parse(" http://Data.Example:80/shards/ , s3://bkt/train,"
                                    "https://cdn.example/x",
                                    &r, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(r.n, 3);
    ck_assert(allowed(&r, "http://data.example/shards/a.tar"));
    ck_assert(allowed(&r, "HTTP://DATA.EXAMPLE/shards/sub/a.tar"));
    ck_assert(allowed(&r, "http://data.example/%73hards/a.tar")); /* %73 = 's' */
    ck_assert(!allowed(&r, "http://data.example/shards"));        /* the root ends with '/' */
    ck_assert(!allowed(&r, "http://data.example/shards/../etc/passwd"));
    ck_assert(!allowed(&r, "http://data.example/shards/%2e%2e/secret"));
    ck_assert(!allowed(&r, "http://data.example:8080/shards/a.tar"));
    ck_assert(!allowed(&r, "https://data.example/shards/a.tar"));
    ck_assert(!allowed(&r, "http://data.example.evil/shards/a.tar"));
    ck_assert(!allowed(&r, "http://data.example@evil/shards/a.tar"));
    ck_assert(!allowed(&r, "http://169.254.169.254/latest/meta-data/"));
    ck_assert(allowed(&r, "s3://bkt/train"));
    ck_assert(allowed(&r, "s3://bkt/train/x.tar"));
    ck_assert(!allowed(&r, "s3://bkt/training/x.tar")); /* a '/' boundary, not a prefix */
    ck_assert(!allowed(&r, "s3://bkt2/train/x.tar"));
    ck_assert(allowed(&r, "https://cdn.example/x/y"));
    sl_roots_free(&r);

    ck_assert_int_eq(sl_roots_parse("", &r, err, sizeof(err)), 0);
    ck_assert(!allowed(&r, "http://data.example/shards/a.tar"));
    sl_roots_free(&r);
    ck_assert_int_eq(sl_roots_parse("http://ok/,/local/path", &r, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "remote_roots: '/local/path'") != NULL, "%s", err);
}
END_TEST

/* AWS's SigV4 test suite (get-vanilla, get-vanilla-query-order-key-case)
 * and the S3 documentation's GET Object example. */
START_TEST(test_sigv4_vectors)
{
    char auth[1024];
    sl_sigv4_hdr_t h[] = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
    sl_sigv4_req_t r = {.access_key = "AKIDEXAMPLE",
                        .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                        .region = "us-east-1",
                        .service = "service",
                        .amz_date = "20150830T123600Z",
                        .method = "GET",
                        .path = "/",
                        .query = "",
                        .hdrs = h,
                        .nhdrs = 2,
                        .payload_sha256 = SL_SIGV4_EMPTY_SHA256};
    ck_assert_int_eq(sl_sigv4_authorization(&r, auth, sizeof(auth)), 0);
    ck_assert_str_eq(auth,
                     "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
                     "aws4_request, SignedHeaders=host;x-amz-date, "
                     "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
    r.query = "Param2=value2&Param1=value1";
    ck_assert_int_eq(sl_sigv4_authorization(&r, auth, sizeof(auth)), 0);
    ck_assert_msg(strstr(auth,
                         "Signature="
                         "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500") !=
                      NULL,
                  "%s", auth);

    sl_sigv4_hdr_t s3h[] = {{"host", "examplebucket.s3.amazonaws.com"},
                            {"range", "bytes=0-9"},
                            {"x-amz-content-sha256", SL_SIGV4_EMPTY_SHA256},
                            {"x-amz-date", "20130524T000000Z"}};
    sl_sigv4_req_t s3 = {.access_key = "AKIAIOSFODNN7EXAMPLE",
                         .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                         .region = "us-east-1",
                         .service = "s3",
                         .amz_date = "20130524T000000Z",
                         .method = "GET",
                         .path = "/test.txt",
                         .query = "",
                         .hdrs = s3h,
                         .nhdrs = 4,
                         .payload_sha256 = SL_SIGV4_EMPTY_SHA256};
    ck_assert_int_eq(sl_sigv4_authorization(&s3, auth, sizeof(auth)), 0);
    ck_assert_str_eq(auth,
                     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                     "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                     "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    /* A wrong secret gives another signature (what the server refuses). */
    s3.secret_key = "wrong";
    ck_assert_int_eq(sl_sigv4_authorization(&s3, auth, sizeof(auth)), 0);
    ck_assert(strstr(auth, "f0e8bdb87c96") == NULL);
    s3.amz_date = "2013";
    ck_assert_int_eq(sl_sigv4_authorization(&s3, auth, sizeof(auth)), -EINVAL);
}
END_TEST

/* A fake environment for sl_s3_conf_load. */
static const char *const *g_env;
static const char *fake_env(const char *name)
{
    for (size_t i = 0; g_env[i] != NULL; i += 2) {
        if (strcmp(g_env[i], name) == 0) {
            return g_env[i + 1];
        }
    }
    return NULL;
}

START_TEST(test_s3_conf_and_request)
{
    char dir[FX_TMPDIR_LEN], path[256], err[256] = "";
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    snprintf(path, sizeof(path), "%s/creds", dir);
    const char *ini = "[default]\naws_access_key_id = AKIDDEF\naws_secret_access_key = s1\n"
                      "[other]\naws_access_key_id=AKIDOTHER\naws_secret_access_key=s2\n"
                      "aws_session_token = tok\n";
    ck_assert_int_eq(fx_write_file(path, ini, strlen(ini)), 0);

    sl_s3_conf_t c;
    const char *env1[] = {"AWS_SHARED_CREDENTIALS_FILE",
                          path,
                          "AWS_PROFILE",
                          "other",
                          "AWS_REGION",
                          "eu-west-1",
                          NULL};
    g_env = env1;
    ck_assert_int_eq(sl_s3_conf_load(&c, fake_env, err, sizeof(err)), 0);
    ck_assert(c.have_creds);
    ck_assert_str_eq(c.key_id, "AKIDOTHER");
    ck_assert_str_eq(c.token, "tok");
    ck_assert_str_eq(c.endpoint, "https://s3.eu-west-1.amazonaws.com");
    ck_assert(!c.path_style);

    sl_url_t u;
    ck_assert_int_eq(sl_url_parse("s3://my-bucket/train/a b.tar", &u, err, sizeof(err)), 0);
    char url[8192], hbuf[8192];
    const char *hdrs[SL_S3_MAX_HDRS + 1];
    ck_assert_int_eq(sl_s3_request(&c, &u, "GET", 1369353600L, "\"e1\"", NULL, url, sizeof(url),
                                   hbuf, sizeof(hbuf), hdrs),
                     0);
    ck_assert_str_eq(url, "https://my-bucket.s3.eu-west-1.amazonaws.com/train/a%20b.tar");
    bool auth = false, token = false, date = false;
    for (size_t i = 0; hdrs[i] != NULL; i++) {
        auth |= strncmp(hdrs[i],
                        "Authorization: AWS4-HMAC-SHA256 Credential=AKIDOTHER/20130524/"
                        "eu-west-1/s3/aws4_request, SignedHeaders=host;if-match;"
                        "x-amz-content-sha256;x-amz-date;x-amz-security-token, ",
                        150) == 0;
        token |= strcmp(hdrs[i], "x-amz-security-token: tok") == 0;
        date |= strcmp(hdrs[i], "x-amz-date: 20130524T000000Z") == 0;
    }
    ck_assert(auth && token && date);

    /* The environment wins over the file; a custom endpoint is path style. */
    const char *env2[] = {"AWS_SHARED_CREDENTIALS_FILE",
                          path,
                          "AWS_ACCESS_KEY_ID",
                          "AKIDENV",
                          "AWS_SECRET_ACCESS_KEY",
                          "s3",
                          "AWS_ENDPOINT_URL",
                          "HTTP://127.0.0.1:9000/",
                          NULL};
    g_env = env2;
    ck_assert_int_eq(sl_s3_conf_load(&c, fake_env, err, sizeof(err)), 0);
    ck_assert_str_eq(c.key_id, "AKIDENV");
    ck_assert_str_eq(c.region, "us-east-1");
    ck_assert_str_eq(c.endpoint, "http://127.0.0.1:9000");
    ck_assert(c.path_style);
    ck_assert_int_eq(sl_s3_request(&c, &u, "HEAD", 0, NULL, "list-type=2&prefix=a%2F", url,
                                   sizeof(url), hbuf, sizeof(hbuf), hdrs),
                     0);
    ck_assert_str_eq(url,
                     "http://127.0.0.1:9000/my-bucket/train/a%20b.tar?list-type=2&prefix=a%2F");

    /* Broken settings name the variable. */
    const char *env3[] = {"AWS_ENDPOINT_URL", "s3://nope", NULL};
    g_env = env3;
    ck_assert_int_eq(sl_s3_conf_load(&c, fake_env, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "AWS_ENDPOINT_URL") != NULL, "%s", err);
    const char *env4[] = {"SLUICE_S3_ADDRESSING_STYLE", "sideways", NULL};
    g_env = env4;
    ck_assert_int_eq(sl_s3_conf_load(&c, fake_env, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "SLUICE_S3_ADDRESSING_STYLE") != NULL, "%s", err);
    /* No credentials anywhere: unsigned requests. */
    const char *env5[] = {"HOME", dir, NULL};
    g_env = env5;
    ck_assert_int_eq(sl_s3_conf_load(&c, fake_env, err, sizeof(err)), 0);
    ck_assert(!c.have_creds);
    fx_rmtree(dir);
}
END_TEST

static int fill(sl_cache_t *c, const char *key, size_t n, char byte)
{
    sl_cache_fill_t f;
    bool hit;
    int fd = sl_cache_fill_begin(c, key, &f, &hit);
    ck_assert_int_ge(fd, 0);
    if (hit) {
        return fd;
    }
    char buf[4096];
    memset(buf, byte, sizeof(buf));
    for (size_t left = n; left > 0;) {
        size_t k = left < sizeof(buf) ? left : sizeof(buf);
        ck_assert_int_eq(write(f.tmp_fd, buf, k), (ssize_t)k);
        left -= k;
    }
    return sl_cache_fill_commit(c, &f);
}

START_TEST(test_cache)
{
    char dir[FX_TMPDIR_LEN], err[256] = "";
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    sl_cache_t *c;
    ck_assert_int_eq(sl_cache_new(dir, 10000, &c, err, sizeof(err)), 0);
    char k1[SL_CACHE_KEY_MAX], k2[SL_CACHE_KEY_MAX], k3[SL_CACHE_KEY_MAX];
    sl_cache_key("http://h/a.tar", 1, k1);
    sl_cache_key("http://h/a.tar", 2, k2); /* the same URL changed: another entry */
    sl_cache_key("http://h/b.tar", 1, k3);
    ck_assert_str_ne(k1, k2);
    ck_assert_int_eq(sl_cache_lookup(c, k1), -ENOENT);

    /* A partial fill is never served, and leaves nothing behind. */
    sl_cache_fill_t f;
    bool hit;
    ck_assert_int_eq(sl_cache_fill_begin(c, k1, &f, &hit), 0);
    ck_assert(!hit);
    ck_assert_int_eq(write(f.tmp_fd, "partial", 7), 7);
    ck_assert_int_eq(sl_cache_lookup(c, k1), -ENOENT);
    sl_cache_fill_abort(c, &f);
    ck_assert_int_eq(sl_cache_lookup(c, k1), -ENOENT);
    ck_assert_uint_eq(sl_cache_usage(c), 0);

    int fd = fill(c, k1, 4000, 'a');
    ck_assert_int_ge(fd, 0);
    struct timespec old[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
    ck_assert_int_eq(futimens(fd, old), 0); /* k1 is the least recently used */
    int fd2 = fill(c, k2, 4000, 'b');
    ck_assert_int_ge(fd2, 0);
    ck_assert_uint_eq(sl_cache_usage(c), 8000);
    /* A third entry goes over 10000: the oldest (k1) goes, its open fd
     * still reads every byte. */
    int fd3 = fill(c, k3, 4000, 'c');
    ck_assert_int_ge(fd3, 0);
    ck_assert_int_eq(sl_cache_lookup(c, k1), -ENOENT);
    ck_assert_uint_le(sl_cache_usage(c), 10000);
    char b[4000];
    ck_assert_int_eq(pread(fd, b, sizeof(b), 0), 4000);
    ck_assert(b[0] == 'a' && b[3999] == 'a');
    int again = sl_cache_lookup(c, k3);
    ck_assert_int_ge(again, 0);
    close(again);
    close(fd);
    close(fd2);
    close(fd3);

    /* A removed entry leaves no lock file behind, also when it was not there;
     * a fill after it works (its lock file made again). */
    char lockp[256];
    snprintf(lockp, sizeof(lockp), "%s/shards/.%s.lock", dir, k3);
    ck_assert_int_eq(access(lockp, F_OK), 0); /* made by its fill */
    ck_assert_int_eq(sl_cache_remove(c, k3), 0);
    ck_assert_int_eq(sl_cache_lookup(c, k3), -ENOENT);
    ck_assert_int_eq(access(lockp, F_OK), -1);
    ck_assert_int_eq(sl_cache_remove(c, k3), -ENOENT);
    ck_assert_int_eq(access(lockp, F_OK), -1);
    fd3 = fill(c, k3, 100, 'd');
    ck_assert_int_ge(fd3, 0);
    close(fd3);
    ck_assert_int_eq(sl_cache_remove(c, k3), 0);
    ck_assert_int_eq(access(lockp, F_OK), -1);

    /* A temporary a crashed filler left (old mtime) goes at the next pass. */
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s/shards/.tmp-crashed", dir);
    ck_assert_int_eq(fx_write_file(tmp, "x", 1), 0);
    struct timespec ancient[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
    ck_assert_int_eq(utimensat(AT_FDCWD, tmp, ancient, 0), 0);
    ck_assert_int_eq(sl_cache_evict(c, NULL), 0);
    ck_assert_int_eq(access(tmp, F_OK), -1);
    sl_cache_free(c);

    ck_assert_int_eq(sl_cache_new(dir, 0, &c, err, sizeof(err)), -EINVAL);
    ck_assert_int_lt(sl_cache_new("/proc/nope", 1, &c, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "cache_dir '/proc/nope'") != NULL, "%s", err);
    fx_rmtree(dir);
}
END_TEST

START_TEST(test_remote_refuses_before_fetching)
{
    char dir[FX_TMPDIR_LEN], err[512] = "", canon[SL_URL_MAX];
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    sl_remote_t *r;
    sl_remote_conf_t conf = {.roots = "http://127.0.0.1:1/ok/", .cache_dir = dir};
    ck_assert_int_eq(sl_remote_new(&conf, &r, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_remote_check(r, "HTTP://127.0.0.1:1/ok/%61.tar", canon, sizeof(canon), err,
                                     sizeof(err)),
                     0);
    ck_assert_str_eq(canon, "http://127.0.0.1:1/ok/a.tar");
    sl_remote_obj_t o;
    /* Port 1 refuses connections: had the URL been allowed, the error
     * would be a connection error, not -EPERM. */
    ck_assert_int_eq(sl_remote_open(r, "http://127.0.0.1:1/other/a.tar", 0, &o, err, sizeof(err)),
                     -EPERM);
    ck_assert_msg(strstr(err, "'http://127.0.0.1:1/other/a.tar' is outside remote_roots") != NULL &&
                      strstr(err, "--remote-roots") != NULL,
                  "%s", err);
    ck_assert_int_eq(sl_remote_check(NULL, "s3://b/k", canon, sizeof(canon), err, sizeof(err)),
                     -EPERM);
    ck_assert_msg(strstr(err, "none set") != NULL, "%s", err);
    char desc[1024];
    sl_remote_describe(r, desc, sizeof(desc));
    ck_assert_msg(strstr(desc, "remote_roots=http://127.0.0.1:1/ok/") != NULL, "%s", desc);
    sl_remote_free(r);

    conf.roots = "not a url";
    ck_assert_int_eq(sl_remote_new(&conf, &r, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "remote_roots: 'not a url'") != NULL, "%s", err);
    fx_rmtree(dir);
}
END_TEST

typedef struct seen_s {
    char keys[4][64];
    uint64_t sizes[4];
    int n;
} seen_t;

static int on_key(void *ctx, const char *key, uint64_t size, const char *etag)
{
    seen_t *s = ctx;
    (void)etag;
    if (s->n == 4) {
        return -E2BIG;
    }
    snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s", key);
    s->sizes[s->n++] = size;
    return 0;
}

START_TEST(test_s3_list)
{
    char q[512];
    ck_assert_int_eq(sl_s3_list_query("train/a b/", NULL, q, sizeof(q)), 0);
    ck_assert_str_eq(q, "list-type=2&prefix=train%2Fa%20b%2F");
    ck_assert_int_eq(sl_s3_list_query("p/", "1/x+y=", q, sizeof(q)), 0);
    ck_assert_str_eq(q, "continuation-token=1%2Fx%2By%3D&list-type=2&prefix=p%2F");
    ck_assert_int_eq(sl_s3_list_query("p/", NULL, q, 10), -ENAMETOOLONG);
    ck_assert_int_eq(sl_s3_list_query("", NULL, q, sizeof(q)), 0);
    ck_assert_str_eq(q, "list-type=2");

    const char *page = "<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name>"
                       "<Contents><Key>p/c/a&amp;b.jpg</Key><Size>12</Size>"
                       "<ETag>&quot;e1&quot;</ETag></Contents>"
                       "<Contents><Key>p/c/&#x41;.png</Key><Size>7</Size></Contents>"
                       "<IsTruncated>true</IsTruncated>"
                       "<NextContinuationToken>tok/1</NextContinuationToken></ListBucketResult>";
    seen_t s = {0};
    bool more = false;
    char tok[SL_S3_TOKEN_MAX];
    ck_assert_int_eq(sl_s3_list_parse(page, strlen(page), on_key, &s, &more, tok, sizeof(tok)), 0);
    ck_assert_int_eq(s.n, 2);
    ck_assert_str_eq(s.keys[0], "p/c/a&b.jpg");
    ck_assert_str_eq(s.keys[1], "p/c/A.png");
    ck_assert_uint_eq(s.sizes[0], 12);
    ck_assert(more);
    ck_assert_str_eq(tok, "tok/1");

    /* Broken answers are -EPROTO, not a silently short listing. */
    const char *bad[] = {
        "<Error><Code>AccessDenied</Code></Error>",
        "<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>x</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>k&bogus;</Key><Size>1</Size></Contents>"
        "</ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>1</Size>",
        "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        seen_t t = {0};
        ck_assert_msg(sl_s3_list_parse(bad[i], strlen(bad[i]), on_key, &t, &more, tok,
                                       sizeof(tok)) == -EPROTO,
                      "%s", bad[i]);
    }
}
END_TEST

/* An index entry as rread.c writes it: magic, size, tag, count, extents,
 * bytes. */
static size_t make_index(unsigned char *b, uint64_t size, uint64_t tag, const uint64_t *ext,
                         uint64_t n)
{
    uint64_t v[3] = {size, tag, n};
    memcpy(b, "SLRIDX1\n", 8);
    memcpy(b + 8, v, sizeof(v));
    size_t at = 32, bytes = 0;
    for (uint64_t i = 0; i < n; i++) {
        memcpy(b + at, &ext[2 * i], 16);
        at += 16;
        bytes += ext[2 * i + 1];
    }
    memset(b + at, 'x', bytes);
    return at + bytes;
}

START_TEST(test_rread_index_check)
{
    static unsigned char b[4096];
    const uint64_t good[] = {0, 512, 1024, 520};
    size_t n = make_index(b, 4096, 77, good, 2);
    ck_assert_int_eq(sl_rread_index_check(b, n, 4096, 77), 0);
    ck_assert_int_eq(sl_rread_index_check(b, 32, 4096, 77), -EINVAL);    /* cut after the head */
    ck_assert_int_eq(sl_rread_index_check(b, n - 1, 4096, 77), -EINVAL); /* a byte short */
    ck_assert_int_eq(sl_rread_index_check(b, n, 4097, 77), -EINVAL);     /* another size */
    ck_assert_int_eq(sl_rread_index_check(b, n, 4096, 78), -EINVAL);     /* another version */
    b[0] = 'X';
    ck_assert_int_eq(sl_rread_index_check(b, n, 4096, 77), -EINVAL); /* not an index */
    const uint64_t overlap[] = {0, 512, 500, 20};
    n = make_index(b, 4096, 77, overlap, 2);
    ck_assert_int_eq(sl_rread_index_check(b, n, 4096, 77), -EINVAL);
    const uint64_t past_end[] = {4000, 512};
    n = make_index(b, 4096, 77, past_end, 1);
    ck_assert_int_eq(sl_rread_index_check(b, n, 4096, 77), -EINVAL);
    const uint64_t empty[] = {0, 0};
    n = make_index(b, 4096, 77, empty, 1);
    ck_assert_int_eq(sl_rread_index_check(b, n, 4096, 77), -EINVAL);
    n = make_index(b, 4096, 77, good, 2);
    uint64_t huge = (uint64_t)1 << 40;
    memcpy(b + 24, &huge, 8); /* a count the entry cannot hold */
    ck_assert_int_eq(sl_rread_index_check(b, n, 4096, 77), -EINVAL);
}
END_TEST

START_TEST(test_hedge_delay)
{
    sl_hedge_lat_t *l;
    ck_assert_int_eq(sl_hedge_lat_new(&l), 0);
    ck_assert_int_eq(sl_hedge_delay_ms(l), SL_HEDGE_DEFAULT_MS); /* nothing measured */
    for (int i = 0; i < 60; i++) {
        sl_hedge_lat_add(l, 100);
    }
    ck_assert_int_eq(sl_hedge_delay_ms(l), 100);
    for (int i = 0; i < 4; i++) {
        sl_hedge_lat_add(l, 1000); /* the slowest 5 %: the p95 */
    }
    ck_assert_int_eq(sl_hedge_delay_ms(l), 1000);
    for (int i = 0; i < SL_HEDGE_WINDOW; i++) {
        sl_hedge_lat_add(l, 1); /* a fast link: bounded below */
    }
    ck_assert_int_eq(sl_hedge_delay_ms(l), SL_HEDGE_MIN_MS);
    for (int i = 0; i < SL_HEDGE_WINDOW; i++) {
        sl_hedge_lat_add(l, 60000); /* a stalling one: bounded above */
    }
    ck_assert_int_eq(sl_hedge_delay_ms(l), SL_HEDGE_MAX_MS);
    sl_hedge_lat_free(l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("remote");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_url_canonical);
    tcase_add_test(tc, test_url_refused);
    tcase_add_test(tc, test_roots);
    tcase_add_test(tc, test_sigv4_vectors);
    tcase_add_test(tc, test_s3_conf_and_request);
    tcase_add_test(tc, test_cache);
    tcase_add_test(tc, test_s3_list);
    tcase_add_test(tc, test_remote_refuses_before_fetching);
    tcase_add_test(tc, test_rread_index_check);
    tcase_add_test(tc, test_hedge_delay);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
