/* sluice-dispatcher: configuration, start-up, the main loop, shutdown.
 * main() is the sequence of steps, each a function below: parse_config,
 * block_signals, open_state (state, journal, status history), start_rpc,
 * start_http, announce (the listening line, READY=1), run_loop, shut_down.
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
#include "dispatcher/core/jobs.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/service/service.h"
#include "dispatcher/status/status.h"
#include "dispatcher/core/tenants.h"

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

/* Everything main sets up; shut_down takes it down in reverse. Static (in
 * main): the config and the state are large and live for the whole run. */
typedef struct dmain_s {
    disp_config_t cfg;
    char cfgpath[4096];
    sigset_t sigs;
    disp_t d;
    int have_state;
    disp_status_t *status;
    char token[SL_SECRET_MAX];
    char http_token[SL_SECRET_MAX];
    sl_rpc_security_t sec;
    int rpc_inited;
    sl_rpc_server_t *srv;
    sl_httpd_t *http;
    char grpc_addr[ADDR_MAX];
    char http_addr[ADDR_MAX];
    char summary[256]; /* the last STATUS= line sent */
} dmain_t;

/* Flags and --config: 0 to run, 1 after --help / --version, -EINVAL on a
 * usage error (already printed). */
static int parse_config(dmain_t *m, int argc, char **argv)
{
    char err[1024];
    int rc = sl_conf_man_main(&disp_conf_table, &disp_man_page, argc, argv);
    if (rc != 0) {
        return rc;
    }
    rc = sl_conf_parse_args(&disp_conf_table, &m->cfg, argc, argv, m->cfgpath,
                                sizeof(m->cfgpath), err, sizeof(err));
    if (rc == 1) {
        return 1;
    }
    char jdir[SL_CONF_STR_MAX];
    if (rc != 0 || disp_config_check(&m->cfg, err, sizeof(err)) != 0 ||
        disp_config_journal_dir(m->cfg.journal, jdir, sizeof(jdir), err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-dispatcher: %s\n", err);
        return -EINVAL;
    }
    memcpy(m->cfg.journal, jdir, sizeof(jdir)); /* from here on: a directory or "" */
    sl_log_set_level(m->cfg.log_level);
    return 0;
}

/* Before any thread exists, so that every thread inherits the mask. */
static int block_signals(dmain_t *m)
{
    sigemptyset(&m->sigs);
    sigaddset(&m->sigs, SIGTERM);
    sigaddset(&m->sigs, SIGINT);
    sigaddset(&m->sigs, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &m->sigs, NULL) != 0 || signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        int e = errno != 0 ? errno : EINVAL;
        SL_ERR("cannot set up signals: %s", strerror(e));
        return -e;
    }
    return 0;
}

/* The state, the jobs the journal holds, and the status history. */
static int open_state(dmain_t *m)
{
    char err[1024] = "";
    int rc = disp_init(&m->d, &m->cfg, disp_id_seed(), disp_now_ms());
    if (rc != 0) {
        SL_ERR("cannot initialise state: %s", strerror(-rc));
        return rc;
    }
    m->have_state = 1;
    /* One line either way: a hand-started dispatcher without a journal
     * loses every job when restarted, and should say so up front. */
    if (m->cfg.journal[0] == '\0') {
        SL_NOTICE("journal: none: a restart loses every job (--journal DIR keeps them)");
    } else {
        SL_NOTICE("journal: %s", m->cfg.journal);
    }
    if (m->cfg.journal[0] != '\0') {
        rc = disp_jstate_open(&m->d, m->cfg.journal, disp_now_ms(), err, sizeof(err));
        if (rc != 0) {
            /* A corrupt journal is never silently dropped: that would lose
             * every job. The operator decides (move it aside, restore). */
            SL_ERR("journal \"%s\": refusing to start: %s", m->cfg.journal, err);
            fprintf(stderr, "sluice-dispatcher: journal \"%s\": %s\n", m->cfg.journal, err);
            return rc;
        }
    }
    m->status = disp_status_new(&m->d, disp_now_ms());
    if (m->status == NULL) {
        SL_ERR("cannot initialise status: out of memory");
        return -ENOMEM;
    }
    return 0;
}

/* The dispatcher's service and GetStatus, bound and serving. */
static int start_rpc(dmain_t *m)
{
    char err[1024];
    int rc = security_from(&m->cfg, &m->sec, m->token, sizeof(m->token), m->http_token,
                           sizeof(m->http_token), err, sizeof(err));
    if (rc != 0) {
        SL_ERR("%s", err);
        return rc;
    }
    sl_rpc_init();
    m->rpc_inited = 1;
    sl_rpc_server_opts_t ropts = {
        .listen = m->cfg.listen,
        .handler_threads = (unsigned)m->cfg.rpc_threads,
        .security = &m->sec,
        .max_recv_bytes = DISP_MAX_REQUEST_BYTES,
        .max_queued_bytes = DISP_MAX_QUEUED_BYTES,
    };
    m->srv = sl_rpc_server_new(&ropts, err, sizeof(err));
    if (m->srv == NULL) {
        SL_ERR("grpc server: %s", err);
        return -EINVAL;
    }
    rc = disp_service_add(&m->d, m->srv);
    if (rc == 0) {
        rc = disp_status_add_rpc(m->status, m->srv);
    }
    if (rc != 0) {
        SL_ERR("grpc server: cannot register methods: %s", strerror(-rc));
        return rc;
    }
    size_t ntenants = 0;
    rc = disp_tenants_apply(&m->d, m->srv, &ntenants, err, sizeof(err));
    if (rc != 0) {
        SL_ERR("%s", err);
        return rc;
    }
    if (ntenants > 0) {
        SL_NOTICE("%zu tenant(s) from %s", ntenants, m->cfg.tenants_file);
    }
    rc = sl_rpc_server_start(m->srv, m->grpc_addr, sizeof(m->grpc_addr), err, sizeof(err));
    if (rc != 0) {
        SL_ERR("grpc server on %s: %s", m->cfg.listen, err);
    }
    return rc;
}

/* /status, /metrics, /healthz and the dashboard, bound and serving. */
static int start_http(dmain_t *m)
{
    char err[1024];
    sl_httpd_opts_t hopts = {.listen = m->cfg.http,
                             .bearer_token = m->http_token,
                             .token_ok = disp_tenants_http_ok, /* tenants see their jobs */
                             .token_ctx = &m->d};
    if (m->http_token[0] == '\0' && !loopback(m->cfg.http)) {
        SL_WARN("http %s is not a loopback address and has no http_token_file: anyone who "
                "can reach it reads job and worker state",
                m->cfg.http);
    }
    m->http = sl_httpd_new(&hopts, err, sizeof(err));
    if (m->http == NULL) {
        SL_ERR("%s", err);
        return -EINVAL;
    }
    int rc = disp_status_add_routes(m->status, m->http);
    if (rc != 0) {
        SL_ERR("http: cannot add routes: %s", strerror(-rc));
        return rc;
    }
    rc = sl_httpd_start(m->http, m->http_addr, sizeof(m->http_addr), err, sizeof(err));
    if (rc != 0) {
        SL_ERR("%s", err);
    }
    return rc;
}

/* The one stdout line tests and scripts wait for, then systemd's READY=1. */
static void announce(dmain_t *m)
{
    printf("listening grpc=%s http=%s\n", m->grpc_addr, m->http_addr);
    fflush(stdout);
    SL_NOTICE("%s %s: grpc %s, http %s, split_size %lld, worker_timeout %lld ms",
              disp_conf_table.progname, SL_VERSION, m->grpc_addr, m->http_addr,
              m->cfg.split_size, m->cfg.worker_timeout_ms);
    disp_status_summary(&m->d, m->summary, sizeof(m->summary));
    notify_status("READY=1\n", m->grpc_addr, m->http_addr, m->summary);
}

/* Once a second: a status sample, and STATUS= only when the one-line summary
 * changed (systemd keeps the last one; a datagram a second for nothing is
 * noise). */
static void every_second(dmain_t *m, int64_t now)
{
    disp_status_sample(m->status, now);
    char cur[sizeof(m->summary)];
    disp_status_summary(&m->d, cur, sizeof(cur));
    if (strcmp(cur, m->summary) != 0) {
        memcpy(m->summary, cur, sizeof(m->summary));
        notify_status("", m->grpc_addr, m->http_addr, m->summary);
    }
}

/* SIGHUP: the tenants file again (tokens added or revoked take effect for
 * the next call); a file that does not load keeps the running set. */
static void reload_tenants(dmain_t *m)
{
    char err[1024];
    size_t n = 0;
    if (disp_tenants_apply(&m->d, m->srv, &n, err, sizeof(err)) != 0) {
        SL_ERR("SIGHUP: tenants not reloaded, keeping the running set: %s", err);
        return;
    }
    if (m->d.cfg.tenants_file[0] != '\0') {
        SL_NOTICE("SIGHUP: %zu tenant(s) from %s", n, m->d.cfg.tenants_file);
    }
}

/* Ticks, samples and signals until SIGTERM or SIGINT. */
static void run_loop(dmain_t *m)
{
    int64_t next_summary = disp_now_ms() + DISP_STATUS_SAMPLE_MS;
    int64_t next_tick = disp_now_ms() + DISP_TICK_MS;
    for (;;) {
        int sig = wait_signal(&m->sigs, next_tick - disp_now_ms());
        if (sig == SIGTERM || sig == SIGINT) {
            SL_NOTICE("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            notify("STOPPING=1\nSTATUS=shutting down");
            return;
        }
        if (sig == SIGHUP) {
            notify("RELOADING=1");
            reload(m->cfgpath, &m->cfg);
            reload_tenants(m);
            notify("READY=1");
        }
        int64_t now = disp_now_ms();
        if (now >= next_tick) {
            disp_tick(&m->d, now);
            next_tick = now + DISP_TICK_MS;
        }
        if (now >= next_summary) {
            every_second(m, now);
            next_summary = now + DISP_STATUS_SAMPLE_MS;
        }
    }
}

/* Whatever was set up, in reverse. http first: its callbacks read state that
 * outlives it; the status history after http and rpc, which both read it. */
static void shut_down(dmain_t *m)
{
    sl_httpd_free(m->http);
    if (m->srv != NULL) {
        sl_rpc_server_shutdown(m->srv, SHUTDOWN_GRACE_MS);
        sl_rpc_server_free(m->srv);
    }
    if (m->rpc_inited) {
        sl_rpc_shutdown();
    }
    disp_status_free(m->status);
    if (m->have_state) {
        disp_destroy(&m->d);
    }
}

/* No mallopt() here: the dispatcher's messages are small and its RSS was
 * 14 MB with and without M_MMAP_THRESHOLD / M_ARENA_MAX (docs/limits.md
 * "Allocator settings"). */
int main(int argc, char **argv)
{
    static dmain_t m;
    sl_log_set_name("sluice-dispatcher");
    int rc = parse_config(&m, argc, argv);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    int ret = 1;
    if (block_signals(&m) == 0 && open_state(&m) == 0 && start_rpc(&m) == 0 &&
        start_http(&m) == 0) {
        announce(&m);
        run_loop(&m);
        ret = 0;
    }
    shut_down(&m);
    return ret;
}
