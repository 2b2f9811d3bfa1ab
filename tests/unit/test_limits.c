/* test_limits: the limits on peer-controlled sizes (docs/limits.md) that no
 * module's own suite covers: open jobs per client (dispatcher
 * max_jobs_per_client), ids per dispatcher call (DISP_MAX_IDS_PER_CALL) and
 * the status HTTP server's header and body bounds (common/http/httpd.c). The
 * other rows of docs/limits.md name their tests. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/base/addr.h"
#include "common/http/httpd.h"
#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "dispatcher/config.h"
#include "dispatcher/disp.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"

/* ------------------------------------------------------------ jobs per client */

static const char SPEC[] =
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
    " \"stages\": [{\"op\": \"decode_jpeg\"}], \"offload\": \"all\"}";

static int submit(disp_t *d, const char *client, uint64_t *ret_id, char *err, size_t errlen)
{
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = (char *)SPEC;
    req.num_samples = 10;
    req.client_id = (char *)client;
    err[0] = '\0';
    /* The status the client would see. */
    int code = sl_rpc_status_from_errno(disp_svc_submit_job(d, &req, &resp, &a, 1000, err, errlen));
    if (code == SL_RPC_OK) {
        *ret_id = resp.job_id;
    }
    disp_arena_free(&a);
    return code;
}

START_TEST(test_jobs_per_client)
{
    disp_config_t cfg;
    char err[1024];
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    ck_assert_int_eq(cfg.max_jobs_per_client, 16); /* the shipped default */
    cfg.max_jobs_per_client = 2;
    disp_t d;
    ck_assert_int_eq(disp_init(&d, &cfg, 1, 1000), 0);
    uint64_t a1 = 0, a2 = 0, id = 0;
    ck_assert_int_eq(submit(&d, "host-a", &a1, err, sizeof(err)), SL_RPC_OK);
    ck_assert_int_eq(submit(&d, "host-a", &a2, err, sizeof(err)), SL_RPC_OK);
    ck_assert_int_eq(submit(&d, "host-a", &id, err, sizeof(err)), SL_RPC_RESOURCE_EXHAUSTED);
    ck_assert_msg(strstr(err, "max_jobs_per_client = 2") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "\"host-a\"") != NULL, "%s", err);
    /* Another client is not affected. */
    ck_assert_int_eq(submit(&d, "host-b", &id, err, sizeof(err)), SL_RPC_OK);
    /* A closed job frees its slot. */
    Sluice__CloseJobRequest creq = SLUICE__CLOSE_JOB_REQUEST__INIT;
    creq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__CloseJobResponse cresp = SLUICE__CLOSE_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    creq.version = SL_PROTOCOL_VERSION;
    creq.job_id = a1;
    ck_assert_int_eq(disp_svc_close_job(&d, &creq, &cresp, &a, 1000, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
    ck_assert_int_eq(submit(&d, "host-a", &id, err, sizeof(err)), SL_RPC_OK);
    /* Control characters in a client id never reach the message raw. */
    ck_assert_int_eq(submit(&d, "x\x1b[2J", &id, err, sizeof(err)), SL_RPC_OK);
    ck_assert_int_eq(submit(&d, "x\x1b[2J", &id, err, sizeof(err)), SL_RPC_OK);
    ck_assert_int_eq(submit(&d, "x\x1b[2J", &id, err, sizeof(err)), SL_RPC_RESOURCE_EXHAUSTED);
    ck_assert_ptr_null(strchr(err, '\x1b'));
    fx_disp_destroy(&d);

    /* 0: only max_jobs. */
    cfg.max_jobs_per_client = 0;
    cfg.max_jobs = 3;
    ck_assert_int_eq(disp_init(&d, &cfg, 1, 1000), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(submit(&d, "host-a", &id, err, sizeof(err)), SL_RPC_OK);
    }
    ck_assert_int_eq(submit(&d, "host-b", &id, err, sizeof(err)), SL_RPC_RESOURCE_EXHAUSTED);
    ck_assert_msg(strstr(err, "max_jobs = 3") != NULL, "%s", err);
    fx_disp_destroy(&d);
}
END_TEST

/* Repeated id fields: DISP_MAX_IDS_PER_CALL per list, checked before the
 * mutex is taken (a peer cannot hold it for an unbounded walk). */
START_TEST(test_ids_per_call)
{
    disp_config_t cfg;
    char err[1024];
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    disp_t d;
    ck_assert_int_eq(disp_init(&d, &cfg, 1, 1000), 0);
    size_t n = DISP_MAX_IDS_PER_CALL + 1;
    uint64_t *ids = calloc(n, sizeof(*ids));
    ck_assert_ptr_nonnull(ids);
    disp_arena_t a = {0};

    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse hresp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    hreq.version = SL_PROTOCOL_VERSION;
    hreq.n_known_jobs = n;
    hreq.known_jobs = ids;
    ck_assert_int_eq(sl_rpc_status_from_errno(
                         disp_svc_heartbeat(&d, &hreq, &hresp, &a, 1000, err, sizeof(err))),
                     SL_RPC_INVALID_ARGUMENT);
    disp_arena_free(&a);
    hreq.n_known_jobs = n - 1; /* at the limit: fine (unknown worker: register again) */
    ck_assert_int_eq(disp_svc_heartbeat(&d, &hreq, &hresp, &a, 1000, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
    /* The prefix cache's per-job counters (docs/cache.md): as bounded, and
     * refused before any is read (the entries here are NULL). */
    Sluice__CacheStats **cs = calloc(n, sizeof(*cs));
    ck_assert_ptr_nonnull(cs);
    hreq.n_known_jobs = 0;
    hreq.n_job_cache = n;
    hreq.job_cache = cs;
    ck_assert_int_eq(sl_rpc_status_from_errno(
                         disp_svc_heartbeat(&d, &hreq, &hresp, &a, 1000, err, sizeof(err))),
                     SL_RPC_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err, "job_cache"));
    disp_arena_free(&a);
    hreq.n_job_cache = 0;
    hreq.job_cache = NULL;
    free(cs);

    uint64_t id = 0;
    ck_assert_int_eq(submit(&d, "c", &id, err, sizeof(err)), SL_RPC_OK);
    Sluice__AckSplitsRequest areq = SLUICE__ACK_SPLITS_REQUEST__INIT;
    areq.job_secret = (char *)FX_JOB_SECRET;
    Sluice__AckSplitsResponse aresp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    areq.version = SL_PROTOCOL_VERSION;
    areq.job_id = id;
    areq.n_split_ids = n;
    areq.split_ids = ids;
    ck_assert_int_eq(sl_rpc_status_from_errno(
                         disp_svc_ack_splits(&d, &areq, &aresp, &a, 1000, err, sizeof(err))),
                     SL_RPC_INVALID_ARGUMENT);
    disp_arena_free(&a);
    areq.n_split_ids = 0;
    areq.n_retry_split_ids = n;
    areq.retry_split_ids = ids;
    ck_assert_int_eq(sl_rpc_status_from_errno(
                         disp_svc_ack_splits(&d, &areq, &aresp, &a, 1000, err, sizeof(err))),
                     SL_RPC_INVALID_ARGUMENT);
    disp_arena_free(&a);
    free(ids);
    fx_disp_destroy(&d);
}
END_TEST

/* ------------------------------------------------------------ http */

static void route_ok(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    (void)ctx;
    (void)query;
    resp->body = strdup("ok\n");
    resp->len = resp->body != NULL ? 3 : 0;
}

/* Sends req (len bytes) to addr and returns the HTTP status of the reply,
 * 0 when the server closed without one. */
static int http_exchange(const char *addr, const char *req, size_t len)
{
    char host[64];
    unsigned port = 0;
    ck_assert_int_eq(sl_addr_split(addr, host, sizeof(host), &port, NULL, 0), 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    ck_assert_int_eq(inet_pton(AF_INET, host, &sa.sin_addr), 1);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (n <= 0) {
            break; /* the server may close before reading it all */
        }
        off += (size_t)n;
    }
    char buf[512];
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
        if (got == sizeof(buf) - 1 || memchr(buf, '\n', got) != NULL) {
            break;
        }
    }
    close(fd);
    buf[got] = '\0';
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
        status = 0;
    }
    return status;
}

START_TEST(test_http_header_and_body_bounds)
{
    char err[256];
    sl_httpd_opts_t o = {.listen = "127.0.0.1:0", .max_header_bytes = 2048,
                         .max_body_bytes = 1024, .timeout_sec = 5};
    sl_httpd_t *h = sl_httpd_new(&o, err, sizeof(err));
    ck_assert_msg(h != NULL, "%s", err);
    ck_assert_int_eq(sl_httpd_route(h, "/status", route_ok, NULL), 0);
    char addr[64];
    ck_assert_int_eq(sl_httpd_start(h, addr, sizeof(addr), err, sizeof(err)), 0);

    const char ok[] = "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    ck_assert_int_eq(http_exchange(addr, ok, strlen(ok)), 200);

    /* A header block over max_header_bytes: refused, never served. */
    size_t big = 16 * 1024;
    char *req = malloc(big + 256);
    ck_assert_ptr_nonnull(req);
    int n = snprintf(req, 256, "GET /status HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\nConnection: close\r\n\r\n", 24);
    int st = http_exchange(addr, req, (size_t)n + big + 23);
    ck_assert_msg(st == 0 || (st >= 400 && st < 500), "oversized header: status %d", st);

    /* A body over max_body_bytes: refused before any route runs. */
    n = snprintf(req, 256,
                 "POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n\r\n",
                 big);
    memset(req + n, 'b', big);
    st = http_exchange(addr, req, (size_t)n + big);
    ck_assert_msg(st == 0 || st == 413 || st == 400, "oversized body: status %d", st);
    free(req);

    /* Still serving. */
    ck_assert_int_eq(http_exchange(addr, ok, strlen(ok)), 200);
    sl_httpd_free(h);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_ERR); /* the dispatcher announces every job */
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_jobs_per_client);
    tcase_add_test(tc, test_ids_per_call);
    tcase_add_test(tc, test_http_header_and_body_bounds);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
