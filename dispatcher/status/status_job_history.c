/* status_job_history: each job's throughput line (measured and predicted
 * samples/s) from its first sample on, so that a page opened mid-job draws
 * the whole job at once; and what is read off a job for pages: its elapsed
 * time, ETA and name. Memory is bounded twice: DISP_STATUS_JOB_POINTS points
 * per job (neighbours merge as it runs) and DISP_STATUS_JOB_HISTORIES jobs
 * with a line (status_history.c hands the lines out). Callers hold d->mu and
 * st->mu as status_impl.h says. */
#include "dispatcher/status/status_impl.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The pace an ETA extrapolates: the last half minute (a whole epoch's
 * average would hide a re-plan; one second is split-grained noise), and
 * nothing from less than a few seconds of a line. */
#define JH_ETA_WINDOW_MS 30000
#define JH_ETA_MIN_MS 3000
/* A client reports about once a second; one silent longer than this has
 * stopped (or died), and its last report no longer describes the job. */
#define JH_REPORT_FRESH_MS 5000
/* The Python binding writes a dict spec to a temporary file of this prefix
 * (until it passes the text itself): its name says nothing. */
#define JH_TEMP_SPEC_PREFIX "sluice-spec-"

/* The mean of the samples with a value. A client's report can be any
 * finite double: beyond FLT_MAX it is FLT_MAX (converting it would be
 * undefined, and the page marks it as off the scale anyway). */
static float mean_or_none(double sum, uint32_t n)
{
    if (n == 0) {
        return -1.0f;
    }
    double v = sum / n;
    return v < FLT_MAX ? (float)v : FLT_MAX;
}

/* A merged point that had a value keeps it rather than becoming "none". */
static float merge_value(float a, float b)
{
    if (a >= 0 && b >= 0) {
        return a / 2 + b / 2; /* FLT_MAX twice stays finite */
    }
    return a >= 0 ? a : b;
}

/* pts full: pairs merge into one point each (the later time and count,
 * both covering the same number of samples, so a plain mean). */
static void compact(disp_status_jhist_t *h)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i + 1 < h->n; i += 2) {
        disp_status_jpoint_t p = h->pts[i + 1];
        p.measured = merge_value(h->pts[i].measured, h->pts[i + 1].measured);
        p.predicted = merge_value(h->pts[i].predicted, h->pts[i + 1].predicted);
        h->pts[k++] = p;
    }
    h->n = k;
    h->stride *= 2;
}

void disp_status_jhist_add(disp_status_jhist_t *h, int64_t t_ms, uint64_t done, double measured,
                           double predicted)
{
    if (h->stride == 0) {
        h->stride = 1;
    }
    h->acc_n++;
    if (measured >= 0) {
        h->acc_m += measured;
        h->acc_nm++;
    }
    if (predicted >= 0) {
        h->acc_p += predicted;
        h->acc_np++;
    }
    h->acc_t_ms = t_ms;
    h->acc_done = done;
    if (h->acc_n < h->stride) {
        return;
    }
    disp_status_jhist_pending(h, &h->pts[h->n++]);
    h->acc_n = h->acc_nm = h->acc_np = 0;
    h->acc_m = h->acc_p = 0;
    if (h->n == DISP_STATUS_JOB_POINTS) {
        compact(h); /* now, so that every point covers stride samples */
    }
}

int disp_status_jhist_pending(const disp_status_jhist_t *h, disp_status_jpoint_t *ret)
{
    if (h->acc_n == 0) {
        return 0;
    }
    ret->t_ms = h->acc_t_ms;
    ret->done = h->acc_done;
    ret->measured = mean_or_none(h->acc_m, h->acc_nm);
    ret->predicted = mean_or_none(h->acc_p, h->acc_np);
    return 1;
}

int disp_status_job_eta(const disp_status_jhist_t *h, uint64_t total, double *ret_sec)
{
    disp_status_jpoint_t now;
    if (h == NULL || (!disp_status_jhist_pending(h, &now) && h->n == 0)) {
        return -ENODATA;
    }
    if (h->acc_n == 0) {
        now = h->pts[h->n - 1];
    }
    if (now.done >= total) {
        *ret_sec = 0;
        return 0;
    }
    /* The newest point at least a window old, else the oldest one. */
    const disp_status_jpoint_t *from = NULL;
    for (uint32_t i = 0; i < h->n; i++) {
        if (h->pts[i].t_ms > now.t_ms - JH_ETA_WINDOW_MS && from != NULL) {
            break;
        }
        from = &h->pts[i];
    }
    if (from == NULL || now.t_ms - from->t_ms < JH_ETA_MIN_MS || now.done <= from->done) {
        return -ENODATA;
    }
    double rate = (double)(now.done - from->done) * 1000.0 / (double)(now.t_ms - from->t_ms);
    *ret_sec = (double)(total - now.done) / rate;
    return 0;
}

double disp_status_job_measured(const disp_job_t *job, const disp_status_jrec_t *rec,
                                int64_t now_ms)
{
    if (job->rates.have && now_ms - job->rates.at_ms <= JH_REPORT_FRESH_MS) {
        return job->rates.delivered_per_sec;
    }
    return rec != NULL && rec->rated ? rec->rate : -1;
}

double disp_status_job_elapsed(const disp_job_t *job, int64_t now_ms)
{
    int64_t end = now_ms;
    if (job->finished_ms != 0) {
        end = job->finished_ms;
    } else if (job->state == DISP_JOB_CLOSED && job->closed_ms != 0) {
        end = job->closed_ms;
    }
    return end > job->created_ms ? (double)(end - job->created_ms) / 1000.0 : 0;
}

void disp_status_job_name(const disp_job_t *job, char *buf, size_t len)
{
    if (job->spec.name[0] != '\0') {
        snprintf(buf, len, "%s", job->spec.name);
        return;
    }
    const char *base = strrchr(job->spec_name, '/');
    base = base != NULL ? base + 1 : job->spec_name;
    /* "<rpc>": the client sent no name. */
    if (base[0] != '\0' && strcmp(base, "<rpc>") != 0 &&
        strncmp(base, JH_TEMP_SPEC_PREFIX, strlen(JH_TEMP_SPEC_PREFIX)) != 0) {
        snprintf(buf, len, "%s", base);
        return;
    }
    snprintf(buf, len, "job %" PRIu64, job->id);
}
