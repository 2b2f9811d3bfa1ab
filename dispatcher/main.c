/* sluice-dispatcher: configuration, start-up, the main loop, shutdown.
 *
 * Signals: SIGTERM, SIGINT and SIGHUP are blocked in every thread (before
 * gRPC or the http thread exist) and taken synchronously by the main loop
 * with sigtimedwait, which doubles as the 100 ms tick timer. There is no
 * asynchronous handler at all, so nothing runs in signal context. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/base/version.h"
#include "common/http/httpd.h"
#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "common/base/sdnotify.h"
#include "common/base/secret.h"
#include "common/spec/spec.h"
#include "dispatcher/config.h"
#include "dispatcher/disp.h"
#include "dispatcher/jobs.h"
#include "dispatcher/journal_state.h"
#include "dispatcher/service.h"
#include "dispatcher/status.h"

#define SHUTDOWN_GRACE_MS 2000
/* What a peer can make the dispatcher hold (docs/limits.md). The largest
 * legitimate request is a SubmitJob/PlanJob: the spec (SL_SPEC_MAX_BYTES),
 * the planner's profiles (kilobytes) and up to DISP_MAX_SAMPLE_COSTS packed
 * floats; 4 MiB covers the rest. Everything else is tiny. Replies (a large
 * /status document) keep SL_RPC_DEFAULT_MAX_MSG. */
#define DISP_MAX_REQUEST_BYTES \
    ((size_t)DISP_MAX_SAMPLE_COSTS * sizeof(float) + SL_SPEC_MAX_BYTES + (4u << 20))
/* Unary requests waiting for a handler thread: room for three of the
 * largest (handlers take milliseconds, so the queue is normally empty);
 * before, 64 queued x 64 MiB could pin 4 GiB. */
#define DISP_MAX_QUEUED_BYTES (3 * DISP_MAX_REQUEST_BYTES)
#define ADDR_MAX 300

/* systemd (Type=notify) is told; without $NOTIFY_SOCKET this is a no-op. A
 * failure is worth a warning, never an exit: the daemon works regardless. */
static void notify(const char *state)
{
    char err[256];
    if (sl_sdnotify(state, err, sizeof(err)) < 0) {
        SL_WARN("sd_notify: %s", err);
    }
}

static void notify_status(const char *prefix, const char *grpc, const char *http,
                          const char *summary)
{
    char err[256];
    if (sl_sdnotifyf(err, sizeof(err), "%sSTATUS=grpc %s, http %s: %s", prefix, grpc, http,
                     summary) < 0) {
        SL_WARN("sd_notify: %s", err);
    }
}

static void reload(const char *path, disp_config_t *cfg)
{
    char err[1024];
    if (path[0] == '\0') {
        SL_NOTICE("SIGHUP: no --config file to reload");
        return;
    }
    if (sl_conf_reload(&disp_conf_table, cfg, path, err, sizeof(err)) != 0) {
        SL_ERR("SIGHUP: reload failed, keeping the running settings: %s", err);
        return;
    }
    sl_log_set_level(cfg->log_level);
    SL_NOTICE("SIGHUP: reloaded %s", path);
}

/* cfg's security keys -> sec (paths point into cfg; tokens read into the
 * caller's buffers, "" when not configured). */
static int security_from(const disp_config_t *cfg, sl_rpc_security_t *sec, char *token,
                         size_t toklen, char *http_token, size_t httplen, char *err,
                         size_t errlen)
{
    token[0] = '\0';
    http_token[0] = '\0';
    sec->tls_cert = cfg->tls_cert[0] != '\0' ? cfg->tls_cert : NULL;
    sec->tls_key = cfg->tls_key[0] != '\0' ? cfg->tls_key : NULL;
    sec->tls_ca = cfg->tls_ca[0] != '\0' ? cfg->tls_ca : NULL;
    sec->token = NULL;
    if (cfg->token_file[0] != '\0') {
        int rc = sl_secret_read(cfg->token_file, token, toklen, err, errlen);
        if (rc != 0) {
            return rc;
        }
        sec->token = token;
    }
    if (cfg->http_token_file[0] != '\0') {
        return sl_secret_read(cfg->http_token_file, http_token, httplen, err, errlen);
    }
    return 0;
}

static int loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strncmp(addr, "localhost:", 10) == 0 ||
           strncmp(addr, "[::1]:", 6) == 0;
}

/* Waits for a signal or the next tick; returns the signal or 0. */
static int wait_signal(const sigset_t *set, int64_t wait_ms)
{
    if (wait_ms < 0) {
        wait_ms = 0;
    }
    struct timespec ts = {.tv_sec = wait_ms / 1000, .tv_nsec = (wait_ms % 1000) * 1000000};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig > 0 ? sig : 0;
}

/* No mallopt() here: the dispatcher's messages are small and its RSS was
 * 14 MB with and without M_MMAP_THRESHOLD / M_ARENA_MAX (docs/limits.md
 * "Allocator settings"). */
int main(int argc, char **argv)
{
    static disp_config_t cfg; /* static: large, and lives for the whole run */
    static disp_t d;
    char cfgpath[4096];
    char err[1024];
    int ret = 1;
    sl_rpc_server_t *srv = NULL;
    sl_httpd_t *http = NULL;
    disp_status_t *status = NULL;
    int have_state = 0;
    int rpc_inited = 0;

    sl_log_set_name("sluice-dispatcher");
    int rc = sl_conf_parse_args(&disp_conf_table, &cfg, argc, argv, cfgpath, sizeof(cfgpath), err,
                                sizeof(err));
    if (rc == 1) {
        return 0; /* --help / --version */
    }
    if (rc != 0 || disp_config_check(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-dispatcher: %s\n", err);
        return 2;
    }
    sl_log_set_level(cfg.log_level);

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0 || signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        SL_ERR("cannot set up signals: %s", strerror(errno));
        return 1;
    }

    rc = disp_init(&d, &cfg, disp_id_seed(), disp_now_ms());
    if (rc != 0) {
        SL_ERR("cannot initialise state: %s", strerror(-rc));
        return 1;
    }
    have_state = 1;
    if (cfg.journal[0] != '\0') {
        err[0] = '\0';
        rc = disp_jstate_open(&d, cfg.journal, disp_now_ms(), err, sizeof(err));
        if (rc != 0) {
            /* A corrupt journal is never silently dropped: that would lose
             * every job. The operator decides (move it aside, restore). */
            SL_ERR("journal \"%s\": refusing to start: %s", cfg.journal, err);
            fprintf(stderr, "sluice-dispatcher: journal \"%s\": %s\n", cfg.journal, err);
            goto out;
        }
    }
    status = disp_status_new(&d, disp_now_ms());
    if (status == NULL) {
        SL_ERR("cannot initialise status: out of memory");
        goto out;
    }

    static char token[SL_SECRET_MAX];
    static char http_token[SL_SECRET_MAX];
    sl_rpc_security_t sec = {0};
    if (security_from(&cfg, &sec, token, sizeof(token), http_token, sizeof(http_token), err,
                      sizeof(err)) != 0) {
        SL_ERR("%s", err);
        goto out;
    }
    sl_rpc_init();
    rpc_inited = 1;
    sl_rpc_server_opts_t ropts = {
        .listen = cfg.listen,
        .handler_threads = (unsigned)cfg.rpc_threads,
        .security = &sec,
        .max_recv_bytes = DISP_MAX_REQUEST_BYTES,
        .max_queued_bytes = DISP_MAX_QUEUED_BYTES,
    };
    srv = sl_rpc_server_new(&ropts, err, sizeof(err));
    if (srv == NULL) {
        SL_ERR("grpc server: %s", err);
        goto out;
    }
    rc = disp_service_add(&d, srv);
    if (rc == 0) {
        rc = disp_status_add_rpc(status, srv);
    }
    if (rc != 0) {
        SL_ERR("grpc server: cannot register methods: %s", strerror(-rc));
        goto out;
    }
    char grpc_addr[ADDR_MAX];
    rc = sl_rpc_server_start(srv, grpc_addr, sizeof(grpc_addr), err, sizeof(err));
    if (rc != 0) {
        SL_ERR("grpc server on %s: %s", cfg.listen, err);
        goto out;
    }

    sl_httpd_opts_t hopts = {.listen = cfg.http, .bearer_token = http_token};
    if (http_token[0] == '\0' && !loopback(cfg.http)) {
        SL_WARN("http %s is not a loopback address and has no http_token_file: anyone who "
                "can reach it reads job and worker state",
                cfg.http);
    }
    http = sl_httpd_new(&hopts, err, sizeof(err));
    if (http == NULL) {
        SL_ERR("%s", err);
        goto out;
    }
    rc = disp_status_add_routes(status, http);
    if (rc != 0) {
        SL_ERR("http: cannot add routes: %s", strerror(-rc));
        goto out;
    }
    char http_addr[ADDR_MAX];
    rc = sl_httpd_start(http, http_addr, sizeof(http_addr), err, sizeof(err));
    if (rc != 0) {
        SL_ERR("%s", err);
        goto out;
    }

    /* The one stdout line tests and scripts wait for. */
    printf("listening grpc=%s http=%s\n", grpc_addr, http_addr);
    fflush(stdout);
    SL_NOTICE("%s %s: grpc %s, http %s, split_size %lld, worker_timeout %lld ms",
              disp_conf_table.progname, SL_VERSION, grpc_addr, http_addr, cfg.split_size,
              cfg.worker_timeout_ms);
    char summary[256] = "";
    disp_status_summary(&d, summary, sizeof(summary));
    notify_status("READY=1\n", grpc_addr, http_addr, summary);
    int64_t next_summary = disp_now_ms() + DISP_STATUS_SAMPLE_MS;

    int64_t next_tick = disp_now_ms() + DISP_TICK_MS;
    for (;;) {
        int sig = wait_signal(&sigs, next_tick - disp_now_ms());
        if (sig == SIGTERM || sig == SIGINT) {
            SL_NOTICE("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            notify("STOPPING=1\nSTATUS=shutting down");
            break;
        }
        if (sig == SIGHUP) {
            notify("RELOADING=1");
            reload(cfgpath, &cfg);
            notify("READY=1");
        }
        int64_t now = disp_now_ms();
        if (now >= next_tick) {
            disp_tick(&d, now);
            next_tick = now + DISP_TICK_MS;
        }
        if (now >= next_summary) {
            disp_status_sample(status, now);
            /* STATUS= only when the one-line summary changed: systemd keeps
             * the last one, and a datagram per second for nothing is noise. */
            char cur[256];
            disp_status_summary(&d, cur, sizeof(cur));
            if (strcmp(cur, summary) != 0) {
                memcpy(summary, cur, sizeof(summary));
                notify_status("", grpc_addr, http_addr, summary);
            }
            next_summary = now + DISP_STATUS_SAMPLE_MS;
        }
    }
    ret = 0;
out:
    /* http first: its callbacks read state that outlives it. */
    sl_httpd_free(http);
    if (srv != NULL) {
        sl_rpc_server_shutdown(srv, SHUTDOWN_GRACE_MS);
        sl_rpc_server_free(srv);
    }
    if (rpc_inited) {
        sl_rpc_shutdown();
    }
    disp_status_free(status); /* after http and rpc: both read it */
    if (have_state) {
        disp_destroy(&d);
    }
    return ret;
}
