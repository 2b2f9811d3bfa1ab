/* rates: the planner while the job runs (profile.h): the consumer's notes
 * of every next_batch call, the plan the dispatcher answered, and the
 * control thread's ReportRates once per CL_REPORT_MS (cl_planner_tick). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/planner_impl.h"
#include "common/base/clock.h"
#include "common/cost/hostfacts.h"

void cl_planner_note_plan(cl_planner_t *p, const Sluice__Plan *plan)
{
    if (p == NULL || plan == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->predicted = plan->predicted_samples_per_sec;
    snprintf(p->binding, sizeof(p->binding), "%s", plan->binding != NULL ? plan->binding : "");
    snprintf(p->local_reason, sizeof(p->local_reason), "%s",
             plan->local_reason != NULL ? plan->local_reason : "");
    p->version = plan->version;
    pthread_mutex_unlock(&p->mu);
}

void cl_planner_get(cl_planner_t *p, cl_plan_info_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    ret->predicted = p->predicted;
    snprintf(ret->binding, sizeof(ret->binding), "%s", p->binding);
    snprintf(ret->local_reason, sizeof(ret->local_reason), "%s", p->local_reason);
    ret->version = p->version;
    ret->measured = p->measured;
    pthread_mutex_unlock(&p->mu);
}

void cl_planner_note_enter(cl_planner_t *p, double t_enter)
{
    if (p == NULL) {
        return;
    }
    double cpu = sl_thread_cpu_sec(); /* the consumer's own clock */
    pthread_mutex_lock(&p->mu);
    cl_window_enter(&p->win, t_enter);
    p->consumer_enter_cpu = cpu;
    pthread_mutex_unlock(&p->mu);
}

void cl_planner_note_batch(cl_planner_t *p, double t_enter, double t_leave, uint32_t n)
{
    if (p == NULL) {
        return;
    }
    double cpu = sl_thread_cpu_sec();
    pthread_mutex_lock(&p->mu);
    if (cpu > p->consumer_enter_cpu) {
        p->consumer_cpu += cpu - p->consumer_enter_cpu;
    }
    cl_window_leave(&p->win, t_enter, t_leave, n);
    p->delivered += n;
    pthread_mutex_unlock(&p->mu);
}

void cl_planner_note_accepted(cl_planner_t *p, uint64_t accepted)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->accepted = accepted;
    pthread_mutex_unlock(&p->mu);
}

static double units_cpu(const struct sluice_job *job, const sl_unit_stat_t *us)
{
    double s = 0.0;
    for (uint32_t u = 0; u < job->nunits && u < SL_PIPE_MAX_UNITS; u++) {
        s += us[u].cpu_sec;
    }
    return s;
}

/* Sluice's own CPU since the previous call (owncpu.h): the control
 * thread's, the executor's threads', the fetch threads', gRPC's threads' and
 * the consumer's inside sluice_next_batch; *ret_timed the part that is
 * spent per second rather than per sample (persec.h): the control thread's,
 * gRPC's and the consumer's inside sluice_next_batch (its waits wake it
 * every 10-100 ms). The first call sets the baselines. Control thread. */
static double own_cpu_delta(struct sluice_job *job, cl_planner_t *p, double *ret_timed)
{
    double ctl = sl_thread_cpu_sec();
    double line = cl_line_threads_cpu_sec(job->consumer.line);
    double timed = ctl - p->own_ctl;
    double d = timed + (line - p->own_line);
    p->own_ctl = ctl;
    p->own_line = line;
    pthread_mutex_lock(&job->mu);
    for (unsigned i = 0; i < CL_MAX_FETCHERS; i++) {
        const cl_fetcher_t *f = &job->fetch.fetchers[i];
        d += cl_owncpu_fetch_sample(&p->own_fetch, i, f->started, f->thread);
    }
    pthread_mutex_unlock(&job->mu);
    double grpc = 0.0;
    if (cl_owncpu_grpc_sample(&p->own_grpc, NULL, &grpc) == 0) {
        d += grpc;
        timed += grpc;
    }
    pthread_mutex_lock(&p->mu);
    double consumer = p->consumer_cpu - p->own_consumer;
    p->own_consumer = p->consumer_cpu;
    pthread_mutex_unlock(&p->mu);
    d += consumer;
    timed += consumer;
    *ret_timed = timed > 0.0 ? timed : 0.0;
    return d > 0.0 ? d : 0.0;
}

_Static_assert(CL_MAX_FETCHERS <= CL_OWNCPU_MAX_FETCH, "a fetch slot without a CPU ledger");

/* The first tick: the baselines the first report's window counts from. */
static void tick_start(struct sluice_job *job, cl_planner_t *p, double now)
{
    sl_unit_stat_t us[SL_PIPE_MAX_UNITS];
    cl_line_unit_stats(job->consumer.line, us);
    p->units_cpu_at_report = units_cpu(job, us);
    pthread_mutex_lock(&p->mu);
    p->accepted_at_report = p->accepted;
    uint32_t inside = p->win.inside;
    double since = p->win.inside_since;
    cl_window_start(&p->win, now);
    p->win.inside = inside; /* a call in progress counts from now */
    p->win.inside_since = since;
    pthread_mutex_unlock(&p->mu);
    p->last_report = now;
    p->cpu_at_report = sl_process_cpu_sec();
    double timed = 0.0;
    (void)own_cpu_delta(job, p, &timed);
    double ignored = 0.0;
    p->have_rundelay = p->budget_src == SL_BUDGET_UNKNOWN &&
                       cl_rundelay_sample(&p->rundelay, NULL, &ignored) >= 0;
}

/* The consumer's window since the last report (wall seconds long), taken
 * and reset under p->mu. */
typedef struct cl_window_s {
    double rate;          /* delivered samples/s (window.h) */
    double wait_fraction; /* of the window spent inside next_batch, [0, 1] */
    double consumer;      /* the loop's own rate; 0 = unknown */
    uint64_t delivered, accepted;
    uint32_t version;
} cl_window_t;

static void take_window(cl_planner_t *p, double now, cl_window_t *ret)
{
    pthread_mutex_lock(&p->mu);
    cl_window_fig_t fig;
    cl_window_take(&p->win, now, &fig);
    ret->rate = fig.rate;
    ret->wait_fraction = fig.wait_fraction;
    ret->consumer = fig.consumer;
    ret->delivered = p->delivered;
    ret->accepted = p->accepted;
    ret->version = p->version;
    p->measured = ret->rate;
    pthread_mutex_unlock(&p->mu);
}

/* Everything else Sluice's own threads spent in the window (own: their
 * CPU since the last report, owncpu.h -- never the process clock, which
 * counts the training loop too), per sample the batcher took: receiving,
 * batching, reading local samples, the control thread. The planner models
 * the read and per-byte receive costs and takes the rest as a fixed cost
 * per sample. us: the executor's per-unit sums now. */
static double window_overhead(struct sluice_job *job, cl_planner_t *p, const sl_unit_stat_t *us,
                              const cl_window_t *w, double own)
{
    double ucpu = units_cpu(job, us);
    /* Per sample the batcher took, not per sample handed out: a batch held
     * open by one late sample would otherwise charge the CPU of every
     * sample already in it (and in those after it) to the samples of the
     * window that finally delivers them. */
    double overhead = cl_overhead_add(&p->overhead, w->version,
                                      w->accepted >= p->accepted_at_report
                                          ? (double)(w->accepted - p->accepted_at_report)
                                          : 0.0,
                                      own - (ucpu - p->units_cpu_at_report));
    p->units_cpu_at_report = ucpu;
    p->accepted_at_report = w->accepted;
    return overhead;
}

/* One row per unit that ran in st (pst pointing at them); returns how many. */
static size_t unit_rows(const struct sluice_job *job, const sl_unit_stat_t *us,
                        Sluice__StageStat *st, Sluice__StageStat **pst)
{
    size_t nst = 0;
    for (uint32_t u = 0; u < job->nunits && u < SL_PIPE_MAX_UNITS; u++) {
        if (us[u].samples == 0) {
            continue;
        }
        sluice__stage_stat__init(&st[nst]);
        st[nst].name = (char *)sl_pipeline_unit_name(job->pipe, u);
        st[nst].cpu_sec_per_sample = us[u].cpu_sec / (double)us[u].samples;
        st[nst].out_bytes_per_sample = (double)us[u].out_bytes / (double)us[u].samples;
        st[nst].samples = us[u].samples;
        pst[nst] = &st[nst];
        nst++;
    }
    return nst;
}

/* The request's figures besides the units' (req->stages). */
static void fill_report(const struct sluice_job *job, const cl_planner_t *p, const cl_window_t *w,
                        double cpu, double wall, double overhead, Sluice__ReportRatesRequest *req)
{
    double budget = p->in.client_cpu_budget > 0 ? p->in.client_cpu_budget : 1.0;
    req->version = SL_PROTOCOL_VERSION;
    req->job_id = job->job_id;
    req->job_secret = (char *)job->job_secret;
    req->rank = job->spec.rank;
    req->delivered_per_sec = w->rate;
    req->wait_fraction = w->wait_fraction;
    req->cpu_fraction = (cpu - p->cpu_at_report) / wall / budget;
    req->cpu_budget = p->in.client_cpu_budget;
    req->recv_cpu_sec_per_byte = p->in.recv_cpu_sec_per_byte;
    req->consumer_rate = w->consumer;
    req->delivered = w->delivered;
    req->overhead_cpu_sec_per_sample = overhead;
    req->step_load = job->bstats.step_load;
    req->pack_fill = job->pstats.fill;
    req->pack_oversize = job->pstats.oversize;
    req->step_imbalance = job->bstats.imbalance;
    req->step_imbalance_max = job->bstats.imbalance_max;
    req->measured_cpu_budget = p->budget_src == SL_BUDGET_UNKNOWN ? p->best.estimate : 0.0;
}

/* Sends the report (short: this runs on the control thread, between acks
 * and polls); the reply's plan is the current one. */
static void send_report(struct sluice_job *job, cl_planner_t *p, Sluice__ReportRatesRequest *req)
{
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t rst;
    int ms = job->timeout_ms < CL_REPORT_TIMEOUT_MS ? job->timeout_ms : CL_REPORT_TIMEOUT_MS;
    if (sl_rpc_unary(job->disp, "/sluice.Dispatcher/ReportRates", &req->base,
                     &sluice__report_rates_response__descriptor, ms, 0, &resp, &rst) == 0) {
        cl_planner_note_plan(p, ((Sluice__ReportRatesResponse *)resp)->plan);
        protobuf_c_message_free_unpacked(resp, NULL);
    }
}

void cl_planner_tick(struct sluice_job *job)
{
    cl_planner_t *p = job->planner;
    if (p == NULL || job->disp == NULL) {
        return;
    }
    double now = sl_mono_sec();
    if (p->last_report == 0.0) {
        tick_start(job, p, now);
        return;
    }
    double wall = now - p->last_report;
    if (wall * 1000.0 < CL_REPORT_MS) {
        return;
    }
    double cpu = sl_process_cpu_sec();
    cl_window_t w;
    take_window(p, now, &w);
    /* No cgroup told the budget: measure what this window got. */
    if (p->have_rundelay) {
        double delay = -1.0;
        if (cl_rundelay_sample(&p->rundelay, NULL, &delay) != 0) {
            delay = -1.0; /* the threads' schedstat went away: nothing measured */
        }
        (void)cl_budget_est_window(&p->best, cpu - p->cpu_at_report, delay, wall);
    }
    /* Per-unit costs the client measured while running: the executor's
     * sums (read without its lock: slightly stale is fine for a profile). */
    sl_unit_stat_t us[SL_PIPE_MAX_UNITS];
    cl_line_unit_stats(job->consumer.line, us);
    double timed = 0.0;
    double overhead = window_overhead(job, p, us, &w, own_cpu_delta(job, p, &timed));
    Sluice__StageStat st[SL_PIPE_MAX_UNITS];
    Sluice__StageStat *pst[SL_PIPE_MAX_UNITS];
    Sluice__ReportRatesRequest req = SLUICE__REPORT_RATES_REQUEST__INIT;
    req.n_stages = unit_rows(job, us, st, pst);
    req.stages = pst;
    fill_report(job, p, &w, cpu, wall, overhead, &req);
    /* Busy against the budget the client knows, else the one it measured;
     * with neither, a used fraction means nothing and the client is never
     * called busy. */
    double known = p->budget_src == SL_BUDGET_UNKNOWN ? p->best.estimate : p->in.client_cpu_budget;
    req.persec_cpu = cl_persec_add(&p->persec, timed, wall, cpu - p->cpu_at_report, known);
    int busy = cl_budget_busy(cpu - p->cpu_at_report, wall, known);
    pthread_mutex_lock(&job->mu);
    job->cpu_busy = busy;
    pthread_mutex_unlock(&job->mu);
    p->last_report = now;
    p->cpu_at_report = cpu;
    send_report(job, p, &req);
}

int cl_planner_due_ms(const struct sluice_job *job)
{
    const cl_planner_t *p = job->planner;
    if (p == NULL || job->disp == NULL) {
        return INT_MAX;
    }
    if (p->last_report == 0.0) {
        return 0; /* the first tick starts the window */
    }
    double left = CL_REPORT_MS - (sl_mono_sec() - p->last_report) * 1000.0;
    return left <= 0.0 ? 0 : (int)left + 1;
}
