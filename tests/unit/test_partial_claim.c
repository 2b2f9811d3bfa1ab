/* test_partial_claim: two processes of one host reading the same range of
 * a remote object at once fetch it once (common/remote/partial.c's range
 * claims, pclaim.h): the second waits for the first's bytes in the shared
 * partial entry. A real HTTP exchange over loopback with libcurl: an
 * in-test server (one thread per connection) answers HEAD and range GETs
 * slowly enough that the two reads overlap, and counts the GETs. A holder
 * killed mid-fetch does not hold the other up past its wait. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/base/clock.h"
#include "common/remote/pfill.h"
#include "common/remote/remote.h"
#include "common/remote/rread.h"
#include "tests/unit/fixtures.h"

#define OBJ_SIZE ((uint64_t)1 << 20)
/* A GET's answer waits this long: the other process starts meanwhile. */
#define GET_DELAY_MS 300

static unsigned char obj_byte(uint64_t off)
{
    uint64_t x = off * 0x9e3779b97f4a7c15ULL;
    return (unsigned char)((x >> 29) ^ (x >> 47) ^ 1);
}

typedef struct srv_s {
    int lfd;
    int port;
    atomic_int gets;
    atomic_int heads;
    atomic_long delay_ms; /* before a GET's answer */
} srv_t;

typedef struct conn_s {
    srv_t *s;
    int fd;
} conn_t;

static void send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) {
            return; /* the client went away */
        }
        p += k;
        n -= (size_t)k;
    }
}

/* One request, then the connection closes. */
static void *serve_conn(void *arg)
{
    conn_t c = *(conn_t *)arg;
    free(arg);
    char req[4096] = "";
    size_t n = 0;
    while (n < sizeof(req) - 1 && strstr(req, "\r\n\r\n") == NULL) {
        ssize_t k = recv(c.fd, req + n, sizeof(req) - 1 - n, 0);
        if (k <= 0) {
            break;
        }
        n += (size_t)k;
        req[n] = '\0';
    }
    req[n] = '\0';
    const char *common = "ETag: \"v1\"\r\nLast-Modified: Mon, 07 Dec 2026 00:00:00 GMT\r\n"
                         "Accept-Ranges: bytes\r\nConnection: close\r\n";
    char hdr[512];
    unsigned long long a = 0, b = 0;
    const char *range = strstr(req, "Range: bytes=");
    if (strncmp(req, "HEAD ", 5) == 0) {
        atomic_fetch_add(&c.s->heads, 1);
        int h = snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\n%sContent-Length: %llu\r\n\r\n",
                         common, (unsigned long long)OBJ_SIZE);
        send_all(c.fd, hdr, (size_t)h);
    } else if (range != NULL && sscanf(range, "Range: bytes=%llu-%llu", &a, &b) == 2 && a <= b &&
               b < OBJ_SIZE) {
        atomic_fetch_add(&c.s->gets, 1);
        long ms = atomic_load(&c.s->delay_ms);
        struct timespec nap = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        nanosleep(&nap, NULL);
        int h = snprintf(hdr, sizeof(hdr),
                         "HTTP/1.1 206 Partial Content\r\n%sContent-Range: bytes %llu-%llu/%llu\r\n"
                         "Content-Length: %llu\r\n\r\n",
                         common, a, b, (unsigned long long)OBJ_SIZE, b - a + 1);
        send_all(c.fd, hdr, (size_t)h);
        unsigned char *body = malloc(b - a + 1);
        for (unsigned long long i = a; body != NULL && i <= b; i++) {
            body[i - a] = obj_byte(i);
        }
        if (body != NULL) {
            send_all(c.fd, body, b - a + 1);
        }
        free(body);
    } else {
        fprintf(stderr, "bad request: %s\n", req);
        const char *bad =
            "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        send_all(c.fd, bad, strlen(bad));
    }
    close(c.fd);
    return NULL;
}

static void *serve(void *arg)
{
    srv_t *s = arg;
    for (;;) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) {
            return NULL; /* closed: the test ends */
        }
        conn_t *c = malloc(sizeof(*c));
        pthread_t th;
        if (c == NULL) {
            close(fd);
            continue;
        }
        *c = (conn_t){s, fd};
        if (pthread_create(&th, NULL, serve_conn, c) != 0) {
            close(fd);
            free(c);
            continue;
        }
        pthread_detach(th);
    }
}

static void srv_start(srv_t *s, pthread_t *th)
{
    memset(s, 0, sizeof(*s));
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(s->lfd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(s->lfd, 16), 0);
    ck_assert_int_eq(getsockname(s->lfd, (struct sockaddr *)&sa, &sl), 0);
    s->port = ntohs(sa.sin_port);
    atomic_store(&s->delay_ms, GET_DELAY_MS);
    ck_assert_int_eq(pthread_create(th, NULL, serve, s), 0);
}

static void srv_stop(srv_t *s, pthread_t th)
{
    shutdown(s->lfd, SHUT_RDWR);
    close(s->lfd);
    pthread_join(th, NULL);
}

typedef struct env_s {
    char dir[FX_TMPDIR_LEN];
    char roots[64];
    char url[96];
    uint64_t tag;
} env_t;

static sl_remote_t *remote_new(env_t *e)
{
    sl_remote_conf_t conf = {.roots = e->roots, .cache_dir = e->dir, .cache_bytes = 64 << 20};
    sl_remote_t *r = NULL;
    char err[256] = "";
    ck_assert_msg(sl_remote_new(&conf, &r, err, sizeof(err)) == 0, "%s", err);
    return r;
}

/* The object's validator, as a job's open learns it (one HEAD). */
static void env_init(env_t *e, const srv_t *s)
{
    ck_assert_int_eq(fx_mkdtemp(e->dir), 0);
    snprintf(e->roots, sizeof(e->roots), "http://127.0.0.1:%d/", s->port);
    snprintf(e->url, sizeof(e->url), "http://127.0.0.1:%d/d/shard-0.tar", s->port);
    sl_remote_t *r = remote_new(e);
    sl_rread_t *rr = NULL;
    sl_remote_obj_t o;
    char err[256] = "";
    ck_assert_msg(sl_rread_open(r, e->url, 0, &rr, &o, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(o.size, OBJ_SIZE);
    e->tag = o.tag;
    sl_rread_close(rr);
    sl_remote_free(r);
}

/* A child: waits for the go byte, reads [off, off + len) through the
 * partial entry and checks the bytes. Exit 0 when right. */
static void reader(const env_t *e, int go_fd, uint64_t off, uint64_t len)
{
    sl_remote_t *r = remote_new((env_t *)e);
    char c;
    if (read(go_fd, &c, 1) != 1) {
        _exit(3);
    }
    int fd = memfd_create("out", MFD_CLOEXEC);
    char err[256] = "";
    int rc = sl_remote_read_part(r, e->url, e->tag, OBJ_SIZE, off, len, fd, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "reader: %d %s\n", rc, err);
        _exit(1);
    }
    unsigned char *b = malloc(len);
    if (b == NULL || pread(fd, b, len, (off_t)off) != (ssize_t)len) {
        _exit(2);
    }
    for (uint64_t i = 0; i < len; i++) {
        if (b[i] != obj_byte(off + i)) {
            _exit(4);
        }
    }
    sl_remote_free(r);
    _exit(0);
}

static pid_t spawn_reader(const env_t *e, int go_fd, uint64_t off, uint64_t len)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        reader(e, go_fd, off, len);
    }
    return pid;
}

static int exit_code(pid_t pid)
{
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Two processes read the same sample's range at the same moment: one GET. */
START_TEST(test_two_processes_one_get)
{
    srv_t s;
    pthread_t th;
    srv_start(&s, &th);
    env_t e;
    env_init(&e, &s);
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t a = spawn_reader(&e, go[0], 200000, 50000);
    pid_t b = spawn_reader(&e, go[0], 200000, 50000);
    ck_assert_int_eq(write(go[1], "gg", 2), 2);
    ck_assert_int_eq(exit_code(a), 0);
    ck_assert_int_eq(exit_code(b), 0);
    ck_assert_msg(atomic_load(&s.gets) == 1, "%d range GETs of one range", atomic_load(&s.gets));
    /* A range overlapping it: only its hole goes over the link. */
    pid_t c = spawn_reader(&e, go[0], 240000, 20000);
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    ck_assert_int_eq(exit_code(c), 0);
    ck_assert_int_eq(atomic_load(&s.gets), 2);
    close(go[0]);
    close(go[1]);
    srv_stop(&s, th);
    fx_rmtree(e.dir);
}
END_TEST

/* A holder killed while its GET is in flight: its lock dies with it, the
 * waiter fetches the range itself at once, not after its whole wait. */
START_TEST(test_killed_holder_releases)
{
    srv_t s;
    pthread_t th;
    srv_start(&s, &th);
    atomic_store(&s.delay_ms, 2500); /* within the hedge's first delay */
    env_t e;
    env_init(&e, &s);
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t a = spawn_reader(&e, go[0], 0, 4096);
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    while (atomic_load(&s.gets) < 1) {
        struct timespec nap = {.tv_nsec = 1000000L};
        nanosleep(&nap, NULL);
    }
    pid_t b = spawn_reader(&e, go[0], 0, 4096);
    atomic_store(&s.delay_ms, 0);
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    struct timespec nap = {.tv_nsec = 200000000L}; /* b is waiting on a's claim */
    nanosleep(&nap, NULL);
    ck_assert_int_eq(atomic_load(&s.gets), 1);
    double t0 = sl_mono_sec();
    kill(a, SIGKILL);
    ck_assert_int_eq(exit_code(a), 128 + SIGKILL);
    ck_assert_int_eq(exit_code(b), 0);
    ck_assert_double_lt(sl_mono_sec() - t0, 2.0); /* not its whole 3 s wait */
    ck_assert_int_eq(atomic_load(&s.gets), 2);
    close(go[0]);
    close(go[1]);
    srv_stop(&s, th);
    fx_rmtree(e.dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("partial_claim");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_two_processes_one_get);
    tcase_add_test(tc, test_killed_holder_releases);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
