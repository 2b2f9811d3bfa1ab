/* sluice-worker: wiring only. Start order: gRPC server (Fetch), HTTP status,
 * the "listening" line, then registration with the dispatcher (which keeps
 * retrying while the gRPC server already serves). Signals are blocked in
 * every thread and taken synchronously here with sigtimedwait, so shutdown
 * and reload run on the main thread (STYLE.md habit 11). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/http/httpd.h"
#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "common/base/sdnotify.h"
#include "common/base/secret.h"
#include "proto/sluice.pb-c.h"
#include "worker/config.h"
#include "worker/control.h"
#include "worker/status.h"
#include "worker/stream.h"
#include "worker/tasks.h"
#include "worker/profile.h"
#include "common/base/clock.h"

#define WK_SHUTDOWN_GRACE_MS 1000
#define WK_DRAIN_MAX_JOBS 256  /* jobs looked at while draining (as /status) */
#define WK_DRAIN_POLL_MS 50

enum { WK_EXIT_OK = 0, WK_EXIT_RUNTIME = 1, WK_EXIT_USAGE = 2 };

/* Advertise the bound address; a wildcard host is useless to a client, so it
 * becomes this host's name. */
static void default_advertise(const char *bound, char *out, size_t len)
{
    const char *colon = strrchr(bound, ':');
    size_t hostlen = colon != NULL ? (size_t)(colon - bound) : strlen(bound);
    int wildcard = (hostlen == 7 && strncmp(bound, "0.0.0.0", 7) == 0) ||
                   (hostlen == 4 && strncmp(bound, "[::]", 4) == 0) || hostlen == 0;
    if (wildcard && colon != NULL) {
        char host[256];
        if (gethostname(host, sizeof(host)) == 0) {
            host[sizeof(host) - 1] = '\0';
            snprintf(out, len, "%s%s", host, colon);
            return;
        }
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

/* The end of the drain: unfinished work is dropped, then the final
 * heartbeat (leaving, nothing in progress) lets the dispatcher forget us. */
static void leave(wk_control_t *ctl, wk_tasks_t *tasks)
{
    wk_tasks_quiesce(tasks);
    int rc = wk_control_finish(ctl);
    if (rc == 0) {
        SL_NOTICE("told the dispatcher this worker is leaving");
    } else if (rc != -ENOTCONN) {
        SL_WARN("could not tell the dispatcher this worker is leaving (%s); it re-assigns our "
                "splits after its worker timeout",
                strerror(-rc));
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

/* Work a client is still waiting for: splits queued or running, batches
 * buffered, on jobs whose client is attached. A job nobody streams from has
 * nobody to drain to; its splits are re-assigned by the dispatcher. Returns
 * the number of such jobs (0 also when the snapshot cannot be taken). */
static size_t drain_pending(wk_tasks_t *tasks, wk_job_info_t *rows)
{
    size_t n = wk_tasks_snapshot(tasks, rows, WK_DRAIN_MAX_JOBS);
    size_t busy = 0;
    for (size_t i = 0; i < n && i < WK_DRAIN_MAX_JOBS; i++) {
        const wk_job_info_t *r = &rows[i];
        int work = r->splits_queued > 0 || r->splits_running > 0 || r->buffered_msgs > 0 ||
                   r->inflight > 0;
        if (work && r->stream_attached) {
            busy++;
        }
    }
    return busy;
}

/* SIGTERM (docs/protocol.md "Leaving"): take no new splits and say so in
 * every heartbeat from now on (leaving=true), so the dispatcher hands us
 * nothing new and re-queues what we never started; then let the Fetch
 * streams carry out what is queued, running or buffered, for at most
 * drain_ms (a second SIGTERM/SIGINT cuts the wait short); then drop what is
 * left and send the last heartbeat, which reports nothing in progress: the
 * dispatcher re-queues the rest at once instead of after worker_timeout. */
static void drain(wk_control_t *ctl, wk_tasks_t *tasks, const sigset_t *sigs, long long drain_ms)
{
    wk_tasks_begin_drain(tasks);
    wk_control_leave(ctl);
    wk_job_info_t *rows = calloc(WK_DRAIN_MAX_JOBS, sizeof(*rows));
    if (rows == NULL || drain_ms <= 0) {
        free(rows);
        leave(ctl, tasks);
        return;
    }
    double deadline = sl_mono_sec() + (double)drain_ms / 1000.0;
    size_t busy = drain_pending(tasks, rows);
    if (busy > 0) {
        SL_NOTICE("draining: %zu job%s still streaming (at most %lld ms)", busy,
                  busy == 1 ? "" : "s", drain_ms);
    }
    while (busy > 0) {
        if (sl_mono_sec() >= deadline) {
            SL_WARN("drain: %zu job%s still busy after %lld ms; stopping anyway", busy,
                    busy == 1 ? "" : "s", drain_ms);
            break;
        }
        struct timespec poll = {.tv_sec = 0, .tv_nsec = WK_DRAIN_POLL_MS * 1000000L};
        int sig = sigtimedwait(sigs, NULL, &poll);
        if (sig == SIGTERM || sig == SIGINT) {
            SL_NOTICE("second signal: stopping without waiting for the drain");
            break;
        }
        busy = drain_pending(tasks, rows);
    }
    free(rows);
    leave(ctl, tasks);
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

/* No mallopt() here, unlike the `sluice` CLI: measured (docs/limits.md
 * "Allocator settings"), M_MMAP_THRESHOLD 64 MiB + M_TRIM_THRESHOLD 128 MiB
 * saved 2-3 % of the worker's CPU on a 768-sample job (glibc already raises
 * its mmap threshold to the sizes it sees freed) but kept ~30 MB more RSS;
 * M_ARENA_MAX 2 cut RSS ~40 % with CPU -3..+5 %, i.e. noise. Neither is
 * worth a process-wide override; GLIBC_TUNABLES sets them without a rebuild. */
int main(int argc, char **argv)
{
    sl_log_set_name("sluice-worker");
    wk_config_t cfg;
    char config_path[4096];
    char err[1024];
    int rc = wk_config_parse(&cfg, argc, argv, config_path, sizeof(config_path), err,
                             sizeof(err));
    if (rc == 1) {
        return WK_EXIT_OK;
    }
    if (rc < 0) {
        fprintf(stderr, "sluice-worker: %s\n", err);
        return WK_EXIT_USAGE;
    }
    sl_log_set_level(cfg.log_level);
    unsigned threads = (unsigned)cfg.threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)(n > 256 ? 256 : n) : 1;
    }

    /* Block the signals we take synchronously before any thread exists, so
     * every thread inherits the mask. SIGPIPE is ignored (sockets). */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    int exit_code = WK_EXIT_RUNTIME;
    sl_rpc_server_t *srv = NULL;
    sl_httpd_t *httpd = NULL;
    wk_control_t *ctl = NULL;
    wk_tasks_t *tasks = NULL;
    wk_profile_t *prof = NULL; /* planner: Profile and Probe */
    char grpc_addr[300] = "";
    char http_addr[300] = "none";
    char advertise[300] = "";

    /* One cluster token: the dispatcher checks it from us, we check it from
     * clients. Server side: cert+key turn TLS on, tls_ca then requires client
     * certificates. Channel to the dispatcher: tls_ca (or a cert) turns TLS
     * on; cert+key are presented as our client certificate. */
    static char token[SL_SECRET_MAX];
    static char http_token[SL_SECRET_MAX];
    if (cfg.token_file[0] != '\0' &&
        sl_secret_read(cfg.token_file, token, sizeof(token), err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-worker: %s\n", err);
        return WK_EXIT_USAGE;
    }
    if (cfg.http_token_file[0] != '\0' &&
        sl_secret_read(cfg.http_token_file, http_token, sizeof(http_token), err,
                       sizeof(err)) != 0) {
        fprintf(stderr, "sluice-worker: %s\n", err);
        return WK_EXIT_USAGE;
    }
    sl_rpc_security_t sec = {
        .tls_cert = cfg.tls_cert[0] != '\0' ? cfg.tls_cert : NULL,
        .tls_key = cfg.tls_key[0] != '\0' ? cfg.tls_key : NULL,
        .tls_ca = cfg.tls_ca[0] != '\0' ? cfg.tls_ca : NULL,
        .token = token[0] != '\0' ? token : NULL,
    };
    /* tls_ca alone: TLS to the dispatcher, a plaintext server of our own. */
    sl_rpc_security_t server_sec = sec;
    if (sec.tls_cert == NULL) {
        server_sec.tls_ca = NULL;
    }

    sl_rpc_init();
    wk_tasks_opts_t to = {
        .data_root = cfg.data_root,
        .threads = threads,
        .buffer_bytes = (size_t)cfg.buffer_bytes,
        .max_message_bytes = (size_t)cfg.max_message_bytes,
    };
    tasks = wk_tasks_new(&to);
    if (tasks == NULL) {
        SL_ERR("out of memory");
        goto out;
    }

    /* A Batch is at most max_message_bytes; the margin covers framing. */
    sl_rpc_server_opts_t so = {
        .listen = cfg.listen,
        .max_msg_bytes = (size_t)cfg.max_message_bytes + (64u << 10),
        .cq_threads = 1,
        .handler_threads = 1,
        .max_streams = 64,
        .security = &server_sec,
    };
    srv = sl_rpc_server_new(&so, err, sizeof(err));
    if (srv == NULL) {
        SL_ERR("gRPC server: %s", err);
        goto out;
    }
    rc = sl_rpc_server_add_stream(srv, WK_FETCH_METHOD, &sluice__fetch_request__descriptor,
                                  wk_stream_fetch, tasks);
    if (rc < 0) {
        SL_ERR("gRPC server: cannot register %s: %s", WK_FETCH_METHOD, strerror(-rc));
        goto out;
    }
    prof = wk_profile_new(cfg.data_root, threads);
    rc = prof != NULL ? wk_profile_register(prof, srv) : -ENOMEM;
    if (rc < 0) {
        SL_ERR("gRPC server: cannot register the planner methods: %s", strerror(-rc));
        goto out;
    }
    rc = sl_rpc_server_start(srv, grpc_addr, sizeof(grpc_addr), err, sizeof(err));
    if (rc < 0) {
        SL_ERR("gRPC server: %s", err);
        goto out;
    }
    if (cfg.advertise[0] != '\0') {
        snprintf(advertise, sizeof(advertise), "%s", cfg.advertise);
    } else {
        default_advertise(grpc_addr, advertise, sizeof(advertise));
    }

    wk_control_opts_t co = {
        .dispatcher = cfg.dispatcher,
        .advertise = advertise,
        .threads = threads,
        .max_message_bytes = (size_t)cfg.max_message_bytes + (64u << 10),
        .security = &sec,
    };
    ctl = wk_control_new(&co, tasks, err, sizeof(err));
    if (ctl == NULL) {
        SL_ERR("dispatcher channel: %s", err);
        goto out;
    }

    wk_status_ctx_t sctx = {
        .tasks = tasks,
        .control = ctl,
        .version = wk_conf_table.version,
        .grpc_addr = grpc_addr,
        .advertise = advertise,
        .dispatcher = cfg.dispatcher,
        .data_root = cfg.data_root,
        .threads = threads,
        .started = sl_mono_sec(),
    };
    if (cfg.http[0] != '\0' && strcmp(cfg.http, "none") != 0) {
        sl_httpd_opts_t ho = {.listen = cfg.http, .bearer_token = http_token};
        httpd = sl_httpd_new(&ho, err, sizeof(err));
        if (httpd == NULL || wk_status_routes(httpd, &sctx) < 0 ||
            sl_httpd_start(httpd, http_addr, sizeof(http_addr), err, sizeof(err)) < 0) {
            SL_ERR("cannot serve HTTP on %s: %s", cfg.http, err);
            goto out;
        }
    }

    printf("listening grpc=%s http=%s\n", grpc_addr, http_addr);
    fflush(stdout);
    SL_NOTICE("serving Fetch on %s (advertised as %s), HTTP on %s, %u threads, data root '%s'",
              grpc_addr, advertise, http_addr, threads, cfg.data_root);
    /* Ready once Fetch is served: registration with the dispatcher retries in
     * the background, and a worker waiting for its dispatcher is not failed. */
    char notice[SL_SDNOTIFY_MAX];
    snprintf(notice, sizeof(notice), "READY=1\nSTATUS=grpc %.300s, http %.300s, dispatcher %.300s",
             grpc_addr, http_addr, cfg.dispatcher);
    notify(notice);

    rc = wk_control_start(ctl);
    if (rc < 0) {
        SL_ERR("cannot start the control thread: %s", strerror(-rc));
        goto out;
    }

    wk_ctl_state_e shown = WK_CTL_STOPPED; /* no state shown yet */
    for (;;) {
        notify_registration(ctl, &shown, grpc_addr, cfg.dispatcher);
        struct timespec tick = {.tv_sec = 1, .tv_nsec = 0};
        int sig = sigtimedwait(&sigs, NULL, &tick);
        if (sig == SIGHUP) {
            notify("RELOADING=1");
            reload(config_path, &cfg);
            notify("READY=1");
        } else if (sig == SIGTERM || sig == SIGINT) {
            SL_NOTICE("%s: draining, then shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            notify("STOPPING=1\nSTATUS=draining");
            drain(ctl, tasks, &sigs, cfg.drain_ms);
            break;
        }
    }
    exit_code = WK_EXIT_OK;

out:
    /* Stop taking splits and end streams (OK where nothing was dropped, else
     * UNAVAILABLE), then the server with a short grace, then the dispatcher
     * conversation, then the runners. */
    if (tasks != NULL) {
        wk_tasks_stop(tasks);
    }
    sl_httpd_free(httpd); /* its callbacks read ctl and tasks */
    if (srv != NULL) {
        sl_rpc_server_shutdown(srv, WK_SHUTDOWN_GRACE_MS);
        sl_rpc_server_free(srv);
    }
    wk_profile_free(prof);
    wk_control_free(ctl);
    wk_tasks_free(tasks);
    sl_rpc_shutdown();
    if (exit_code == WK_EXIT_OK) {
        SL_NOTICE("stopped");
    }
    return exit_code;
}
