#include "worker/control.h"
#include "common/plugin/plugin.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/base/clock.h"
#include "common/base/log.h"
#include "common/base/rng.h"
#include "common/cost/hostfacts.h"
#include "common/rpc/rpc.h"
#include "proto/sluice.pb-c.h"

#define WK_CALL_TIMEOUT_MS 3000
#define WK_FINAL_TIMEOUT_MS 2000 /* the last heartbeat must not hold up the exit */
#define WK_DEFAULT_HEARTBEAT_MS 1000
/* Early heartbeat: news from the tasks (a split's last message went out,
 * a Fetch came for a job we have not been told about) is reported without
 * waiting for the interval -- the reply hands out the next split, or brings
 * the job -- but never sooner than this after the previous beat (bounds
 * the dispatcher's load). */
#define WK_EARLY_MIN_MS 100

struct wk_control_s {
    char dispatcher[256];
    char advertise[256];
    char hostname[256];
    unsigned threads;
    const struct sl_plugins_s *plugins; /* RegisterWorker tells them; not owned */
    uint64_t cache_bytes;               /* RegisterWorker tells it (docs/cache.md "When") */
    wk_tasks_t *tasks;
    sl_rpc_channel_t *ch;

    pthread_t thread;
    int started;

    pthread_mutex_t mu; /* guards below; cv wakes the thread's sleeps */
    pthread_cond_t cv;
    int stop;
    int kick;   /* heartbeat now (leaving) */
    int news;   /* the tasks have news since the last beat began (on_news) */
    int finish; /* send the final heartbeat, then stop */
    int finish_rc;
    wk_control_status_t status;

    /* Control thread only. */
    double last_cpu, last_wall;
    sl_rng_t jitter; /* retry jitter, seeded per process (wk_control_new) */
};

const char *wk_ctl_state_name(wk_ctl_state_e s)
{
    switch (s) {
    case WK_CTL_UNREGISTERED:
        return "unregistered";
    case WK_CTL_REGISTERED:
        return "registered";
    case WK_CTL_LEFT:
        return "left";
    case WK_CTL_STOPPED:
        return "stopped";
    }
    return "?";
}

int wk_backoff_next(int cur, int cap_ms)
{
    if (cur < WK_BACKOFF_MIN_MS) {
        return WK_BACKOFF_MIN_MS < cap_ms ? WK_BACKOFF_MIN_MS : cap_ms;
    }
    int next = cur > cap_ms / 2 ? cap_ms : cur * 2;
    return next < cap_ms ? next : cap_ms;
}

int wk_backoff_jitter(int ms, uint64_t r)
{
    if (ms <= 1) {
        return ms;
    }
    return ms - (int)(r % (uint64_t)(ms / 2 + 1));
}

/* A seed no other worker shares: workers started together by one script
 * or one boot have the same clock and often the same pid. */
static uint64_t jitter_seed(void)
{
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 16);
    }
    return seed;
}

/* The next retry: advances *backoff toward cap_ms and returns the jittered
 * delay to sleep. Control thread only. */
static int retry_delay(wk_control_t *c, int *backoff, int cap_ms)
{
    if (cap_ms > WK_BACKOFF_MAX_MS) {
        cap_ms = WK_BACKOFF_MAX_MS;
    }
    *backoff = wk_backoff_next(*backoff, cap_ms);
    return wk_backoff_jitter(*backoff, sl_rng_u64(&c->jitter));
}

/* The tasks' news (wk_tasks_on_news): on a stream or the control thread,
 * under the tasks' locks. */
static void on_news(void *arg)
{
    wk_control_t *c = arg;
    pthread_mutex_lock(&c->mu);
    c->news = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

wk_control_t *wk_control_new(const wk_control_opts_t *o, wk_tasks_t *tasks, char *err,
                             size_t errlen)
{
    wk_control_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(c->dispatcher, sizeof(c->dispatcher), "%s", o->dispatcher);
    snprintf(c->advertise, sizeof(c->advertise), "%s", o->advertise);
    if (gethostname(c->hostname, sizeof(c->hostname)) < 0) {
        snprintf(c->hostname, sizeof(c->hostname), "unknown");
    }
    c->hostname[sizeof(c->hostname) - 1] = '\0';
    c->threads = o->threads;
    c->plugins = o->plugins;
    c->cache_bytes = o->cache_bytes;
    c->tasks = tasks;
    sl_rng_init(&c->jitter, jitter_seed(), 0, 0, 0);
    pthread_mutex_init(&c->mu, NULL);
    if (sl_cond_init_mono(&c->cv) != 0) {
        pthread_mutex_destroy(&c->mu);
        free(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->ch = sl_rpc_channel_new(c->dispatcher, o->max_message_bytes, o->security, 0, err,
                               errlen);
    if (c->ch == NULL) {
        wk_control_free(c);
        return NULL;
    }
    wk_tasks_on_news(tasks, on_news, c);
    return c;
}

/* Busy threads / threads since the last heartbeat, from process CPU time. */
static double measure_load(wk_control_t *c)
{
    double cpu = sl_process_cpu_sec();
    double wall = sl_mono_sec();
    double load = 0;
    if (c->last_wall > 0 && wall > c->last_wall && c->threads > 0) {
        load = (cpu - c->last_cpu) / ((wall - c->last_wall) * c->threads);
    }
    c->last_cpu = cpu;
    c->last_wall = wall;
    return load < 0 ? 0 : load > 1 ? 1 : load;
}

/* Sleeps up to ms unless stopped, finishing or kicked; returns 1 when
 * stopping (not finishing: the loop sends the final heartbeat first).
 * early: news also ends it, WK_EARLY_MIN_MS after it began at the soonest. */
static int sleep_ms(wk_control_t *c, int ms, int early)
{
    double start = sl_mono_sec();
    double until = start + ms / 1000.0;
    double min_end = start + WK_EARLY_MIN_MS / 1000.0;
    pthread_mutex_lock(&c->mu);
    while (!c->stop && !c->kick && !c->finish) {
        double deadline = early && c->news && min_end < until ? min_end : until;
        if (sl_cond_wait_until(&c->cv, &c->mu, deadline) == ETIMEDOUT) {
            break;
        }
    }
    c->kick = 0;
    int stop = c->stop;
    pthread_mutex_unlock(&c->mu);
    return stop;
}

static void note_failure(wk_control_t *c, const char *what, const sl_rpc_status_t *st, int rc)
{
    pthread_mutex_lock(&c->mu);
    c->status.failures++;
    uint64_t n = c->status.failures;
    if (rc == -ECOMM) {
        snprintf(c->status.last_error, sizeof(c->status.last_error), "%s: %s: %.400s", what,
                 sl_rpc_code_name(st->code), st->details);
    } else {
        snprintf(c->status.last_error, sizeof(c->status.last_error), "%s: %s", what,
                 strerror(-rc));
    }
    char msg[sizeof(c->status.last_error)];
    snprintf(msg, sizeof(msg), "%s", c->status.last_error);
    pthread_mutex_unlock(&c->mu);
    /* The first failures at notice, then one line in ten: a dispatcher that
     * is down for a while must not flood the log. */
    if (n <= 3 || n % 10 == 0) {
        SL_NOTICE("dispatcher %s unreachable or refused (attempt %" PRIu64 "): %s; retrying",
                  c->dispatcher, n, msg);
    } else {
        SL_DEBUG("dispatcher %s: attempt %" PRIu64 ": %s", c->dispatcher, n, msg);
    }
}

/* RegisterWorker. Returns 0 when registered. */
static int do_register(wk_control_t *c)
{
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.address = c->advertise;
    req.threads = c->threads;
    req.hostname = c->hostname;
    /* Which machine and CPUs we share with others (docs/planner.md "Shared
     * machines"); read each time, as affinity and quotas can change. */
    char machine[SL_MACHINE_ID_MAX] = "";
    char cpus[512] = "";
    sl_cpuset_t set;
    sl_machine_id(machine, sizeof(machine));
    if (sl_cpuset_self(&set) != 0 || sl_cpuset_format(&set, cpus, sizeof(cpus)) != 0) {
        cpus[0] = '\0';
    }
    req.machine_id = machine;
    req.cpu_set = cpus;
    req.cpu_budget = sl_cpu_budget(NULL, 0);
    req.cache_bytes = c->cache_bytes;
    Sluice__PluginInfo pis[SL_PLUGIN_MAX], *pip[SL_PLUGIN_MAX];
    for (size_t i = 0; c->plugins != NULL && i < c->plugins->n; i++) {
        const sl_plugin_info_t *pi = &c->plugins->v[i];
        sluice__plugin_info__init(&pis[i]);
        pis[i].name = (char *)pi->name;
        pis[i].version = (char *)pi->version;
        pis[i].sha256 = (char *)pi->sha256;
        pip[i] = &pis[i];
    }
    req.n_plugins = c->plugins != NULL ? c->plugins->n : 0;
    req.plugins = pip;
    pthread_mutex_lock(&c->mu);
    req.worker_id = c->status.worker_id;
    pthread_mutex_unlock(&c->mu);

    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    int rc = sl_rpc_unary(c->ch, "/sluice.Dispatcher/RegisterWorker", &req.base,
                          &sluice__register_worker_response__descriptor, WK_CALL_TIMEOUT_MS, 0,
                          &resp, &st);
    if (rc < 0) {
        note_failure(c, "RegisterWorker", &st, rc);
        return rc;
    }
    Sluice__RegisterWorkerResponse *r = (Sluice__RegisterWorkerResponse *)resp;
    if (r->worker_id == 0) {
        protobuf_c_message_free_unpacked(resp, NULL);
        sl_rpc_status_t bad = {.code = SL_RPC_INTERNAL};
        snprintf(bad.details, sizeof(bad.details), "reply has worker_id 0");
        note_failure(c, "RegisterWorker", &bad, -ECOMM);
        return -EPROTO;
    }
    /* A silly interval from a peer is clamped, not trusted. */
    uint32_t hb = r->heartbeat_ms;
    if (hb == 0) {
        hb = WK_DEFAULT_HEARTBEAT_MS;
    }
    hb = hb < 50 ? 50 : hb > 60000 ? 60000 : hb;
    pthread_mutex_lock(&c->mu);
    c->status.worker_id = r->worker_id;
    c->status.heartbeat_ms = hb;
    c->status.state = WK_CTL_REGISTERED;
    c->status.registrations++;
    c->status.failures = 0;
    c->status.last_error[0] = '\0';
    pthread_mutex_unlock(&c->mu);
    SL_NOTICE("registered with dispatcher %s as worker %" PRIu64 " (address %s, heartbeat %u ms)",
              c->dispatcher, r->worker_id, c->advertise, hb);
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
}

static void apply_reply(wk_control_t *c, const Sluice__HeartbeatResponse *r)
{
    /* Specs first: an assignment in the same reply needs its job. Revocations
     * before assignments: they refer to earlier assignments, so a split
     * revoked and handed back to us in one reply ends up assigned. The
     * deprecated revoked_splits (no job id: ambiguous with two jobs) is
     * ignored. */
    for (size_t i = 0; i < r->n_jobs; i++) {
        wk_tasks_add_job(c->tasks, r->jobs[i]);
    }
    for (size_t i = 0; i < r->n_revoked; i++) {
        if (r->revoked[i] != NULL) {
            wk_tasks_revoke(c->tasks, r->revoked[i]->job_id, r->revoked[i]->split_id);
        }
    }
    for (size_t i = 0; i < r->n_assign; i++) {
        wk_tasks_assign(c->tasks, r->assign[i]);
    }
    for (size_t i = 0; i < r->n_closed_jobs; i++) {
        wk_tasks_close_job(c->tasks, r->closed_jobs[i]);
    }
}

/* Job-qualified split lists for the request: msgs[n] and ptrs[n], freed by
 * the caller (ids only; the other SplitAssignment fields stay 0). */
static int refs_to_msgs(const wk_split_ref_t *refs, size_t n, Sluice__SplitAssignment **ret_msgs,
                        Sluice__SplitAssignment ***ret_ptrs)
{
    *ret_msgs = NULL;
    *ret_ptrs = NULL;
    if (n == 0) {
        return 0;
    }
    Sluice__SplitAssignment *msgs = calloc(n, sizeof(*msgs));
    Sluice__SplitAssignment **ptrs = calloc(n, sizeof(*ptrs));
    if (msgs == NULL || ptrs == NULL) {
        free(msgs);
        free(ptrs);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        sluice__split_assignment__init(&msgs[i]);
        msgs[i].job_id = refs[i].job_id;
        msgs[i].split_id = refs[i].split_id;
        msgs[i].assignment = refs[i].assignment;
        msgs[i].cached = refs[i].cached != 0;
        ptrs[i] = &msgs[i];
    }
    *ret_msgs = msgs;
    *ret_ptrs = ptrs;
    return 0;
}

/* A Heartbeat request and the arrays it points into, built from a tasks
 * report (which must outlive it: the request borrows its lists). */
typedef struct hb_msg_s {
    Sluice__HeartbeatRequest req;
    Sluice__StageStat *stats;
    Sluice__StageStat **pstats;
    Sluice__SplitAssignment *prog, *sent;
    Sluice__SplitAssignment **pprog, **psent;
    uint64_t *legacy; /* split ids alone, for a dispatcher that predates in_progress */
    Sluice__CacheStats *cache;
    Sluice__CacheStats **pcache;
} hb_msg_t;

static void hb_msg_free(hb_msg_t *m)
{
    free(m->cache);
    free(m->pcache);
    free(m->stats);
    free(m->pstats);
    free(m->legacy);
    free(m->prog);
    free(m->pprog);
    free(m->sent);
    free(m->psent);
}

/* Per-unit stats as the dispatcher wants them: per-sample averages. */
static void hb_stats(hb_msg_t *m, const wk_tasks_report_t *rep)
{
    for (size_t i = 0; i < rep->n_units; i++) {
        const wk_unit_report_t *u = &rep->units[i];
        Sluice__StageStat *s = &m->stats[i];
        sluice__stage_stat__init(s);
        s->name = (char *)u->name;
        s->samples = u->samples;
        s->cpu_sec_per_sample = u->samples > 0 ? u->cpu_sec / (double)u->samples : 0;
        s->out_bytes_per_sample = u->samples > 0 ? (double)u->out_bytes / (double)u->samples : 0;
        m->pstats[i] = s;
    }
}

/* The prefix caches' growth per job (docs/cache.md). 0 or -ENOMEM. */
static int hb_cache(hb_msg_t *m, const wk_tasks_report_t *rep)
{
    if (rep->n_cache == 0) {
        return 0;
    }
    m->cache = calloc(rep->n_cache, sizeof(*m->cache));
    m->pcache = calloc(rep->n_cache, sizeof(*m->pcache));
    if (m->cache == NULL || m->pcache == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < rep->n_cache; i++) {
        Sluice__CacheStats *s = &m->cache[i];
        const sl_pcache_stats_t *c = &rep->cache[i];
        sluice__cache_stats__init(s);
        s->job_id = rep->cache_jobs[i];
        s->hits = c->hits;
        s->misses = c->misses;
        s->bytes_read = c->bytes_read;
        s->bytes_written = c->bytes_written;
        s->evictions = c->evictions;
        s->store_errors = c->store_errors;
        s->corrupt = c->corrupt;
        s->bytes_evicted = c->bytes_evicted;
        s->read_ns = c->read_ns;
        s->read_bytes_sq = c->read_bytes_sq;
        s->read_bytes_ns = c->read_bytes_ns;
        m->pcache[i] = s;
    }
    return 0;
}

/* Fills m from the report and the control state. 0 or -ENOMEM (m freed). */
static int hb_msg_build(wk_control_t *c, const wk_tasks_report_t *rep, hb_msg_t *m)
{
    memset(m, 0, sizeof(*m));
    if (rep->n_splits > 0) {
        m->legacy = calloc(rep->n_splits, sizeof(*m->legacy));
    }
    if (rep->n_units > 0) {
        m->stats = calloc(rep->n_units, sizeof(*m->stats));
        m->pstats = calloc(rep->n_units, sizeof(*m->pstats));
    }
    if ((rep->n_units > 0 && (m->stats == NULL || m->pstats == NULL)) ||
        (rep->n_splits > 0 && m->legacy == NULL) ||
        refs_to_msgs(rep->splits, rep->n_splits, &m->prog, &m->pprog) < 0 ||
        refs_to_msgs(rep->sent, rep->n_sent, &m->sent, &m->psent) < 0 || hb_cache(m, rep) < 0) {
        hb_msg_free(m);
        return -ENOMEM;
    }
    for (size_t i = 0; i < rep->n_splits; i++) {
        m->legacy[i] = rep->splits[i].split_id;
    }
    hb_stats(m, rep);
    double load = measure_load(c);
    Sluice__HeartbeatRequest *req = &m->req;
    sluice__heartbeat_request__init(req);
    req->version = SL_PROTOCOL_VERSION;
    pthread_mutex_lock(&c->mu);
    req->worker_id = c->status.worker_id;
    req->leaving = c->status.leaving;
    c->status.load = load;
    pthread_mutex_unlock(&c->mu);
    req->load = load;
    req->buffered_bytes = rep->buffered_bytes;
    req->bytes_sent = rep->bytes_sent;
    req->n_known_jobs = rep->n_known;
    req->known_jobs = rep->known_jobs;
    req->n_splits_in_progress = rep->n_splits;
    req->splits_in_progress = m->legacy;
    req->n_in_progress = rep->n_splits;
    req->in_progress = m->pprog;
    req->n_sent = rep->n_sent;
    req->sent = m->psent;
    req->n_stages = rep->n_units;
    req->stages = m->pstats;
    req->n_failed_jobs = rep->n_failed;
    req->failed_jobs = rep->failed_jobs;
    req->failure = (char *)rep->failure;
    req->n_job_cache = rep->n_cache;
    req->job_cache = m->pcache;
    return 0;
}

/* Acts on a (non-final) reply. Returns 0, or 1 when the dispatcher does
 * not know us (we registered again later, or we have left). */
static int hb_reply(wk_control_t *c, const Sluice__HeartbeatResponse *r)
{
    if (!r->known) {
        pthread_mutex_lock(&c->mu);
        int leaving = c->status.leaving;
        c->status.state = leaving ? WK_CTL_LEFT : WK_CTL_UNREGISTERED;
        pthread_mutex_unlock(&c->mu);
        if (leaving) {
            SL_NOTICE("dispatcher %s has let this worker go", c->dispatcher);
        } else {
            SL_NOTICE("dispatcher %s does not know this worker (restarted?); registering again",
                      c->dispatcher);
        }
        return 1;
    }
    pthread_mutex_lock(&c->mu);
    c->status.heartbeats++;
    c->status.failures = 0;
    c->status.last_error[0] = '\0';
    pthread_mutex_unlock(&c->mu);
    apply_reply(c, r);
    return 0;
}

/* Heartbeat. Returns 0 ok, 1 when the dispatcher does not know us, < 0 on
 * failure. final: the last one before exit (short deadline, reply unused). */
static int do_heartbeat(wk_control_t *c, int final)
{
    wk_tasks_report_t rep;
    int rc = wk_tasks_report(c->tasks, &rep);
    if (rc < 0) {
        sl_rpc_status_t st = {.code = SL_RPC_INTERNAL};
        note_failure(c, "Heartbeat report", &st, rc);
        return rc;
    }
    hb_msg_t m;
    rc = hb_msg_build(c, &rep, &m);
    if (rc < 0) {
        wk_tasks_report_free(&rep);
        return rc;
    }
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    rc = sl_rpc_unary(c->ch, "/sluice.Dispatcher/Heartbeat", &m.req.base,
                      &sluice__heartbeat_response__descriptor,
                      final ? WK_FINAL_TIMEOUT_MS : WK_CALL_TIMEOUT_MS, 0, &resp, &st);
    hb_msg_free(&m);
    if (rc < 0) {
        wk_tasks_report_free(&rep);
        note_failure(c, "Heartbeat", &st, rc);
        return rc;
    }
    /* The dispatcher has the sent splits now (also when it no longer knows
     * us: then it re-assigned everything of ours anyway). */
    wk_tasks_report_done(c->tasks, &rep);
    wk_tasks_report_free(&rep);
    rc = final ? 0 : hb_reply(c, (const Sluice__HeartbeatResponse *)resp);
    protobuf_c_message_free_unpacked(resp, NULL);
    return rc;
}

static void *control_main(void *arg)
{
    wk_control_t *c = arg;
    int backoff = 0;
    SL_NOTICE("registering with dispatcher %s", c->dispatcher);
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int stop = c->stop;
        int finish = c->finish;
        int leaving = c->status.leaving;
        wk_ctl_state_e state = c->status.state;
        uint32_t hb = c->status.heartbeat_ms;
        pthread_mutex_unlock(&c->mu);
        if (finish) {
            int rc = state == WK_CTL_REGISTERED ? do_heartbeat(c, 1) : -ENOTCONN;
            pthread_mutex_lock(&c->mu);
            c->finish_rc = rc;
            pthread_mutex_unlock(&c->mu);
            break;
        }
        if (stop) {
            break;
        }
        int wait;
        switch (state) {
        case WK_CTL_UNREGISTERED:
            if (leaving) {
                wait = 1000; /* unknown to the dispatcher: nothing to hand back */
            } else if (do_register(c) == 0) {
                backoff = 0;
                wait = 0; /* heartbeat at once: it brings the first jobs */
            } else {
                wait = retry_delay(c, &backoff, WK_BACKOFF_MAX_MS);
            }
            break;
        case WK_CTL_REGISTERED: {
            pthread_mutex_lock(&c->mu);
            c->news = 0; /* this beat reports it */
            pthread_mutex_unlock(&c->mu);
            int rc = do_heartbeat(c, 0);
            if (rc == 0) {
                backoff = 0;
                wait = (int)hb;
            } else if (rc == 1) {
                backoff = 0;
                wait = 0;
            } else {
                /* Retry sooner than a full interval, so a dispatcher back from a
                 * restart hears from us (and answers known=false) quickly. */
                wait = retry_delay(c, &backoff, (int)hb);
            }
            break;
        }
        case WK_CTL_LEFT:
        case WK_CTL_STOPPED:
        default:
            wait = 1000;
            break;
        }
        if (wait > 0 && sleep_ms(c, wait, state == WK_CTL_REGISTERED && !leaving)) {
            break;
        }
    }
    pthread_mutex_lock(&c->mu);
    c->status.state = WK_CTL_STOPPED;
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int wk_control_start(wk_control_t *c)
{
    int rc = pthread_create(&c->thread, NULL, control_main, c);
    if (rc != 0) {
        return -rc;
    }
    c->started = 1;
    return 0;
}

void wk_control_stop(wk_control_t *c)
{
    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->started) {
        pthread_join(c->thread, NULL);
        c->started = 0;
    }
}

void wk_control_leave(wk_control_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->status.leaving = 1;
    c->kick = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

int wk_control_finish(wk_control_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->status.leaving = 1;
    c->finish = 1;
    c->finish_rc = -ENOTCONN;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->started) {
        pthread_join(c->thread, NULL);
        c->started = 0;
    }
    pthread_mutex_lock(&c->mu);
    int rc = c->finish_rc;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void wk_control_free(wk_control_t *c)
{
    if (c == NULL) {
        return;
    }
    wk_control_stop(c);
    wk_tasks_on_news(c->tasks, NULL, NULL); /* c must not hear news once freed */
    sl_rpc_channel_free(c->ch);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

void wk_control_get_status(wk_control_t *c, wk_control_status_t *ret)
{
    pthread_mutex_lock(&c->mu);
    *ret = c->status;
    pthread_mutex_unlock(&c->mu);
}
