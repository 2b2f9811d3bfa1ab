/* sluice-worker: wiring only. main() is the sequence of steps, each a
 * function below: parse_config, block_signals, read_security, start_tasks,
 * start_rpc (Fetch, the planner's methods), open_control, start_http,
 * announce (the listening line, READY=1), start_registration (the dispatcher
 * conversation keeps retrying while the gRPC server already serves),
 * run_loop (then the drain, worker/drain.c), shut_down. Signals are blocked
 * in every thread and taken synchronously here with sigtimedwait, so
 * shutdown and reload run on the main thread, never in a signal handler. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/addr.h"
#include "common/base/clock.h"
#include "common/http/httpd.h"
#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "common/base/sdnotify.h"
#include "common/base/secret.h"
#include "proto/sluice.pb-c.h"
#include "common/plugin/plugin.h"
#include "common/remote/cache.h"
#include "common/remote/remote.h"
#include "worker/config.h"
#include "worker/control.h"
#include "worker/drain.h"
#include "worker/status.h"
#include "worker/stream.h"
#include "worker/tasks.h"
#include "worker/profile.h"

#define WK_SHUTDOWN_GRACE_MS 1000

enum { WK_EXIT_OK = 0, WK_EXIT_RUNTIME = 1, WK_EXIT_USAGE = 2 };

/* Advertise the bound address; a wildcard host is useless to a client, so it
 * becomes this host's name. */
static void default_advertise(const char *bound, char *out, size_t len)
{
    char host[256];
    char name[256];
    unsigned port = 0;
    if (sl_addr_split(bound, host, sizeof(host), &port, NULL, 0) == 0 &&
        (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) &&
        gethostname(name, sizeof(name)) == 0) {
        name[sizeof(name) - 1] = '\0';
        snprintf(out, len, "%s:%u", name, port);
        return;
    }
    snprintf(out, len, "%s", bound);
}

/* systemd (Type=notify) is told; without $NOTIFY_SOCKET a no-op. A failure
 * is worth a warning, never an exit. */
static void notify(const char *state)
{
    char err[256];
    if (sl_sdnotify(state, err, sizeof(err)) < 0) {
        SL_WARN("sd_notify: %s", err);
    }
}

/* systemd's STATUS= line follows the registration (once per change), so
 * `systemctl status sluice-worker` says whether the dispatcher has it. */
static void notify_registration(wk_control_t *ctl, wk_ctl_state_e *shown, const char *grpc,
                                const char *dispatcher)
{
    wk_control_status_t cs;
    wk_control_get_status(ctl, &cs);
    if (cs.state == *shown) {
        return;
    }
    *shown = cs.state;
    char err[256];
    int rc = 0;
    if (cs.state == WK_CTL_REGISTERED) {
        rc = sl_sdnotifyf(err, sizeof(err), "STATUS=grpc %s: registered with %s as worker %llu",
                          grpc, dispatcher, (unsigned long long)cs.worker_id);
    } else {
        rc = sl_sdnotifyf(err, sizeof(err), "STATUS=grpc %s: %s, dispatcher %s%s%.200s", grpc,
                          wk_ctl_state_name(cs.state), dispatcher,
                          cs.last_error[0] != '\0' ? ": " : "", cs.last_error);
    }
    if (rc < 0) {
        SL_WARN("sd_notify: %s", err);
    }
}

static void reload(const char *config_path, wk_config_t *cfg)
{
    if (config_path[0] == '\0') {
        SL_NOTICE("SIGHUP: no --config file; nothing to reload");
        return;
    }
    char err[512];
    int rc = sl_conf_reload(&wk_conf_table, cfg, config_path, err, sizeof(err));
    if (rc < 0) {
        SL_ERR("SIGHUP: reload failed, keeping the old settings: %s", err);
        return;
    }
    sl_log_set_level(cfg->log_level);
    SL_NOTICE("SIGHUP: reloaded '%s'", config_path);
}

/* Everything main sets up; shut_down takes it down in reverse. Static (in
 * main): the status callbacks read sctx and the addresses until the end. */
typedef struct wmain_s {
    wk_config_t cfg;
    char config_path[4096];
    unsigned threads;
    sigset_t sigs;
    char token[SL_SECRET_MAX];
    char http_token[SL_SECRET_MAX];
    sl_rpc_security_t sec;        /* the channel to the dispatcher */
    sl_rpc_security_t server_sec; /* our own server */
    sl_plugins_t *plugins; /* plugin_dir's stages; NULL = none */
    sl_remote_t *remote;   /* remote_roots + the shard cache (URL sources) */
    sl_cache_t *samples;   /* the prefix cache's store; NULL: no cache_dir set */
    wk_tasks_t *tasks;
    sl_rpc_server_t *srv;
    wk_profile_t *prof; /* planner: Profile and Probe */
    wk_control_t *ctl;
    wk_status_ctx_t sctx;
    sl_httpd_t *httpd;
    char grpc_addr[300];
    char http_addr[300];
    char advertise[300];
} wmain_t;

/* Flags and --config: 0 to run, 1 after --help / --version, -EINVAL on a
 * usage error (already printed). */
static int parse_config(wmain_t *m, int argc, char **argv)
{
    char err[1024];
    int rc = sl_conf_man_main(&wk_conf_table, &wk_man_page, argc, argv);
    if (rc != 0) {
        return rc;
    }
    rc = wk_config_parse(&m->cfg, argc, argv, m->config_path, sizeof(m->config_path), err,
                         sizeof(err));
    if (rc == 1) {
        return 1;
    }
    if (rc < 0) {
        fprintf(stderr, "sluice-worker: %s\n", err);
        return -EINVAL;
    }
    sl_log_set_level(m->cfg.log_level);
    m->threads = (unsigned)m->cfg.threads;
    if (m->threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        m->threads = n > 0 ? (unsigned)(n > 256 ? 256 : n) : 1;
    }
    return 0;
}

/* The signals we take synchronously are blocked before any thread exists, so
 * every thread inherits the mask. SIGPIPE is ignored (sockets). */
static void block_signals(wmain_t *m)
{
    sigemptyset(&m->sigs);
    sigaddset(&m->sigs, SIGTERM);
    sigaddset(&m->sigs, SIGINT);
    sigaddset(&m->sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &m->sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* One cluster token: the dispatcher checks it from us, we check it from
 * clients. Server side: cert+key turn TLS on, tls_ca then requires client
 * certificates. Channel to the dispatcher: tls_ca (or a cert) turns TLS on;
 * cert+key are presented as our client certificate. A file that cannot be
 * read is a usage error (already printed). */
static int read_security(wmain_t *m)
{
    const wk_config_t *cfg = &m->cfg;
    char err[1024];
    int rc = 0;
    if (cfg->token_file[0] != '\0') {
        rc = sl_secret_read(cfg->token_file, m->token, sizeof(m->token), err, sizeof(err));
    }
    if (rc == 0 && cfg->http_token_file[0] != '\0') {
        rc = sl_secret_read(cfg->http_token_file, m->http_token, sizeof(m->http_token), err,
                            sizeof(err));
    }
    if (rc != 0) {
        fprintf(stderr, "sluice-worker: %s\n", err);
        return rc;
    }
    m->sec = (sl_rpc_security_t){
        .tls_cert = cfg->tls_cert[0] != '\0' ? cfg->tls_cert : NULL,
        .tls_key = cfg->tls_key[0] != '\0' ? cfg->tls_key : NULL,
        .tls_ca = cfg->tls_ca[0] != '\0' ? cfg->tls_ca : NULL,
        .token = m->token[0] != '\0' ? m->token : NULL,
    };
    /* tls_ca alone: TLS to the dispatcher, a plaintext server of our own. */
    m->server_sec = m->sec;
    if (m->sec.tls_cert == NULL) {
        m->server_sec.tls_ca = NULL;
    }
    return 0;
}

/* The plugin_dir's stages, each file listed by a process of its own. */
static int scan_plugins(wmain_t *m)
{
    if (m->cfg.plugin_dir[0] == '\0') {
        return 0;
    }
    char err[1024];
    if (sl_plugins_scan(m->cfg.plugin_dir, NULL, (int)m->cfg.plugin_timeout_ms, &m->plugins,
                        err, sizeof(err)) < 0) {
        SL_ERR("%s", err);
        return -EINVAL;
    }
    for (size_t i = 0; i < m->plugins->n; i++) {
        const sl_plugin_info_t *pi = &m->plugins->v[i];
        SL_NOTICE("plugin %s %s (%s, sha256 %s)", pi->name, pi->version, pi->file, pi->sha256);
    }
    if (m->plugins->refused[0] != '\0') {
        SL_WARN("plugin_dir %s: not used: %s", m->cfg.plugin_dir, m->plugins->refused);
    }
    return 0;
}

/* An environment flag set to exactly "1". */
static int env_is_1(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && strcmp(v, "1") == 0;
}

/* Test-only fault injection (docs/protocol.md), read here once for the
 * process: the runners consult wk_faults_t, never the environment. */
static wk_faults_t read_test_faults(void)
{
    return (wk_faults_t){
        .corrupt_compressed = env_is_1("SLUICE_TEST_CORRUPT_COMPRESSED"),
        .corrupt_records = env_is_1("SLUICE_TEST_CORRUPT_RECORDS"),
    };
}

static int start_tasks(wmain_t *m)
{
    int rc = scan_plugins(m);
    if (rc < 0) {
        return rc;
    }
    char err[1024];
    sl_remote_conf_t rconf = {.roots = m->cfg.remote_roots,
                              .cache_dir = m->cfg.cache_dir,
                              .cache_bytes = (uint64_t)m->cfg.cache_bytes};
    rc = sl_remote_new(&rconf, &m->remote, err, sizeof(err));
    if (rc < 0) {
        SL_ERR("URL sources: %s", err);
        return rc;
    }
    char desc[1024];
    sl_remote_describe(m->remote, desc, sizeof(desc));
    SL_NOTICE("URL sources: %s", desc);
    /* The prefix cache only where cache_dir is set: the shard cache's
     * default directory is for URL sources, not for every job's samples. */
    if (m->cfg.cache_dir[0] != '\0') {
        rc = sl_cache_open(m->cfg.cache_dir, SL_CACHE_NS_SAMPLES, (uint64_t)m->cfg.cache_bytes,
                           &m->samples, err, sizeof(err));
        if (rc < 0) {
            SL_ERR("prefix cache: %s", err);
            return rc;
        }
        SL_NOTICE("prefix cache: '%s/samples', %lld bytes with the shards", m->cfg.cache_dir,
                  m->cfg.cache_bytes);
    }
    wk_tasks_opts_t to = {
        .samples = m->samples,
        .remote = m->remote,
        .plugins = m->plugins,
        .data_root = m->cfg.data_root,
        .threads = m->threads,
        .buffer_bytes = (size_t)m->cfg.buffer_bytes,
        .max_message_bytes = (size_t)m->cfg.max_message_bytes,
        .faults = read_test_faults(),
    };
    m->tasks = wk_tasks_new(&to);
    if (m->tasks == NULL) {
        SL_ERR("out of memory");
        return -ENOMEM;
    }
    return 0;
}

/* Fetch and the planner's methods, bound and serving; the advertised address. */
static int start_rpc(wmain_t *m)
{
    char err[1024];
    /* A Batch is at most max_message_bytes; the margin covers framing. */
    sl_rpc_server_opts_t so = {
        .listen = m->cfg.listen,
        .max_msg_bytes = (size_t)m->cfg.max_message_bytes + (64u << 10),
        .cq_threads = 1,
        .handler_threads = 1,
        .max_streams = 64,
        .security = &m->server_sec,
    };
    m->srv = sl_rpc_server_new(&so, err, sizeof(err));
    if (m->srv == NULL) {
        SL_ERR("gRPC server: %s", err);
        return -EINVAL;
    }
    int rc = sl_rpc_server_add_stream(m->srv, WK_FETCH_METHOD, &sluice__fetch_request__descriptor,
                                      wk_stream_fetch, m->tasks);
    if (rc < 0) {
        SL_ERR("gRPC server: cannot register %s: %s", WK_FETCH_METHOD, strerror(-rc));
        return rc;
    }
    m->prof = wk_profile_new(m->cfg.data_root, m->threads, m->plugins);
    if (m->prof != NULL) {
        wk_profile_set_remote(m->prof, m->remote);
    }
    rc = m->prof != NULL ? wk_profile_register(m->prof, m->srv) : -ENOMEM;
    if (rc < 0) {
        SL_ERR("gRPC server: cannot register the planner methods: %s", strerror(-rc));
        return rc;
    }
    size_t ntenants = 0;
    rc = sl_rpc_server_load_tenants(m->srv, m->cfg.tenants_file, &ntenants, err, sizeof(err));
    if (rc < 0) {
        SL_ERR("%s", err);
        return rc;
    }
    rc = sl_rpc_server_start(m->srv, m->grpc_addr, sizeof(m->grpc_addr), err, sizeof(err));
    if (rc < 0) {
        SL_ERR("gRPC server: %s", err);
        return rc;
    }
    if (m->cfg.advertise[0] != '\0') {
        snprintf(m->advertise, sizeof(m->advertise), "%s", m->cfg.advertise);
    } else {
        default_advertise(m->grpc_addr, m->advertise, sizeof(m->advertise));
    }
    return 0;
}

/* The dispatcher conversation, not started yet (start_registration). */
static int open_control(wmain_t *m)
{
    char err[1024];
    wk_control_opts_t co = {
        .plugins = m->plugins,
        .dispatcher = m->cfg.dispatcher,
        .advertise = m->advertise,
        .threads = m->threads,
        .max_message_bytes = (size_t)m->cfg.max_message_bytes + (64u << 10),
        .security = &m->sec,
        .cache_bytes = m->samples != NULL ? (uint64_t)m->cfg.cache_bytes : 0,
    };
    m->ctl = wk_control_new(&co, m->tasks, err, sizeof(err));
    if (m->ctl == NULL) {
        SL_ERR("dispatcher channel: %s", err);
        return -EINVAL;
    }
    return 0;
}

/* /status, /metrics and /healthz, unless http is "none" or "". */
static int start_http(wmain_t *m)
{
    char err[1024] = "";
    m->sctx = (wk_status_ctx_t){
        .tasks = m->tasks,
        .control = m->ctl,
        .version = wk_conf_table.version,
        .grpc_addr = m->grpc_addr,
        .advertise = m->advertise,
        .dispatcher = m->cfg.dispatcher,
        .data_root = m->cfg.data_root,
        .threads = m->threads,
        .started = sl_mono_sec(),
    };
    if (m->cfg.http[0] == '\0' || strcmp(m->cfg.http, "none") == 0) {
        snprintf(m->http_addr, sizeof(m->http_addr), "none");
        return 0;
    }
    sl_httpd_opts_t ho = {.listen = m->cfg.http, .bearer_token = m->http_token};
    m->httpd = sl_httpd_new(&ho, err, sizeof(err));
    if (m->httpd == NULL || wk_status_routes(m->httpd, &m->sctx) < 0 ||
        sl_httpd_start(m->httpd, m->http_addr, sizeof(m->http_addr), err, sizeof(err)) < 0) {
        SL_ERR("cannot serve HTTP on %s: %s", m->cfg.http, err);
        return -EINVAL;
    }
    return 0;
}

/* The one stdout line tests and scripts wait for, then systemd's READY=1:
 * ready once Fetch is served, since registration with the dispatcher retries
 * in the background, and a worker waiting for its dispatcher is not failed. */
static void announce(wmain_t *m)
{
    printf("listening grpc=%s http=%s\n", m->grpc_addr, m->http_addr);
    fflush(stdout);
    SL_NOTICE("serving Fetch on %s (advertised as %s), HTTP on %s, %u threads, data root '%s'",
              m->grpc_addr, m->advertise, m->http_addr, m->threads, m->cfg.data_root);
    char notice[SL_SDNOTIFY_MAX];
    snprintf(notice, sizeof(notice), "READY=1\nSTATUS=grpc %.300s, http %.300s, dispatcher %.300s",
             m->grpc_addr, m->http_addr, m->cfg.dispatcher);
    notify(notice);
}

static int start_registration(wmain_t *m)
{
    int rc = wk_control_start(m->ctl);
    if (rc < 0) {
        SL_ERR("cannot start the control thread: %s", strerror(-rc));
    }
    return rc;
}

/* Signals and systemd's STATUS= until SIGTERM or SIGINT, then the drain. */
/* SIGHUP: the tenants file again, so a revoked team's clients can no longer
 * open Fetch streams here; a file that does not load keeps the running set. */
static void reload_tenants(wmain_t *m)
{
    char err[1024];
    size_t n = 0;
    if (sl_rpc_server_load_tenants(m->srv, m->cfg.tenants_file, &n, err, sizeof(err)) < 0) {
        SL_ERR("SIGHUP: tenants not reloaded, keeping the running set: %s", err);
    } else if (m->cfg.tenants_file[0] != '\0') {
        SL_NOTICE("SIGHUP: %zu tenant(s) from %s", n, m->cfg.tenants_file);
    }
}

static void run_loop(wmain_t *m)
{
    wk_ctl_state_e shown = WK_CTL_STOPPED; /* no state shown yet */
    for (;;) {
        notify_registration(m->ctl, &shown, m->grpc_addr, m->cfg.dispatcher);
        struct timespec tick = {.tv_sec = 1, .tv_nsec = 0};
        int sig = sigtimedwait(&m->sigs, NULL, &tick);
        if (sig == SIGHUP) {
            notify("RELOADING=1");
            reload(m->config_path, &m->cfg);
            reload_tenants(m);
            notify("READY=1");
        } else if (sig == SIGTERM || sig == SIGINT) {
            SL_NOTICE("%s: draining, then shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            notify("STOPPING=1\nSTATUS=draining");
            wk_drain(m->ctl, m->tasks, &m->sigs, m->cfg.drain_ms);
            return;
        }
    }
}

/* Stop taking splits and end streams (OK where nothing was dropped, else
 * UNAVAILABLE), then the server with a short grace, then the dispatcher
 * conversation, then the runners. */
static void shut_down(wmain_t *m)
{
    if (m->tasks != NULL) {
        wk_tasks_stop(m->tasks);
    }
    sl_httpd_free(m->httpd); /* its callbacks read ctl and tasks */
    if (m->srv != NULL) {
        sl_rpc_server_shutdown(m->srv, WK_SHUTDOWN_GRACE_MS);
        sl_rpc_server_free(m->srv);
    }
    wk_profile_free(m->prof);
    wk_control_free(m->ctl);
    wk_tasks_free(m->tasks);
    sl_plugins_free(m->plugins); /* after every job that ran its stages */
    sl_remote_free(m->remote);   /* after every source that fetched through it */
    sl_cache_free(m->samples);   /* after every job's prefix cache */
    sl_rpc_shutdown();
}

/* No mallopt() here, unlike the `sluice` CLI: measured (docs/limits.md
 * "Allocator settings"), M_MMAP_THRESHOLD 64 MiB + M_TRIM_THRESHOLD 128 MiB
 * saved 2-3 % of the worker's CPU on a 768-sample job (glibc already raises
 * its mmap threshold to the sizes it sees freed) but kept ~30 MB more RSS;
 * M_ARENA_MAX 2 cut RSS ~40 % with CPU -3..+5 %, i.e. noise. Neither is
 * worth a process-wide override; GLIBC_TUNABLES sets them without a rebuild. */
int main(int argc, char **argv)
{
    static wmain_t m;
    sl_log_set_name("sluice-worker");
    int rc = parse_config(&m, argc, argv);
    if (rc != 0) {
        return rc > 0 ? WK_EXIT_OK : WK_EXIT_USAGE;
    }
    block_signals(&m);
    if (read_security(&m) != 0) {
        return WK_EXIT_USAGE;
    }
    sl_rpc_init();
    int code = WK_EXIT_RUNTIME;
    if (start_tasks(&m) == 0 && start_rpc(&m) == 0 && open_control(&m) == 0 &&
        start_http(&m) == 0) {
        announce(&m);
        if (start_registration(&m) == 0) {
            run_loop(&m);
            code = WK_EXIT_OK;
        }
    }
    shut_down(&m);
    if (code == WK_EXIT_OK) {
        SL_NOTICE("stopped");
    }
    return code;
}
