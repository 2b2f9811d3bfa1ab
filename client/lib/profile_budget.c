/* profile_budget: see profile_budget.h. */
#include "client/lib/profile_budget.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cl_budget_est_init(cl_budget_est_t *e, double nominal)
{
    memset(e, 0, sizeof(*e));
    e->nominal = isfinite(nominal) && nominal > 0.0 ? nominal : 1.0;
}

double cl_budget_est_lone(cl_budget_est_t *e, double thread_cpu, double wall)
{
    if (!(wall >= CL_BUDGET_LONE_MIN_WALL) || !(thread_cpu > 0.0)) {
        return 0.0;
    }
    double r = thread_cpu / wall;
    if (r >= CL_BUDGET_LONE_MAX) {
        return 0.0;
    }
    e->estimate = fmin(r, e->nominal);
    return e->estimate;
}

int cl_budget_est_window(cl_budget_est_t *e, double cpu, double delay, double wall)
{
    if (!(wall >= CL_BUDGET_MIN_WALL) || !(cpu >= 0.0) || !(delay >= 0.0)) {
        return 0;
    }
    double got = cpu / wall;
    double demand = (cpu + delay) / wall;
    double waited = cpu + delay > 0.0 ? delay / (cpu + delay) : 0.0;
    e->last_got = got;
    e->last_demand = demand;
    e->last_waited = waited;
    double before = e->estimate;
    got = fmin(got, e->nominal);
    if (demand >= CL_BUDGET_DEMAND * e->nominal && waited >= CL_BUDGET_WAITED) {
        /* The pipeline's threads wanted the CPU and waited for it: what
         * they got is what there is. Half way, so one odd window (a
         * neighbour's burst) does not swing a plan alone. */
        e->estimate = e->windows == 0 && e->estimate <= 0.0 ? got : 0.5 * (e->estimate + got);
        e->windows++;
    } else if (e->estimate > 0.0 && got > e->estimate) {
        e->estimate = got; /* it got at least this much */
    }
    return e->estimate != before;
}

/* schedstat is three numbers: on-CPU ns,
 * run-queue wait ns, timeslices. */
static int read_delay(const char *dir, const char *tid, uint64_t *ret)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s/schedstat", dir, tid);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return -errno;
    }
    unsigned long long run = 0;
    unsigned long long wait = 0;
    int rc = fscanf(f, "%llu %llu", &run, &wait) == 2 ? 0 : -EIO;
    fclose(f);
    if (rc == 0) {
        *ret = wait;
    }
    return rc;
}

int cl_rundelay_sample(cl_rundelay_t *rd, const char *task_dir, double *ret_sec)
{
    const char *dir = task_dir != NULL ? task_dir : "/proc/self/task";
    *ret_sec = 0.0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        return -ENOENT;
    }
    /* The new table is built beside the old one (8 KB: off the stack). */
    cl_rundelay_t *next = calloc(1, sizeof(*next));
    if (next == NULL) {
        closedir(d);
        return -ENOMEM;
    }
    uint64_t delta = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && next->n < CL_RUNDELAY_MAX) {
        char *end = NULL;
        long tid = strtol(de->d_name, &end, 10);
        uint64_t ns = 0;
        if (end == de->d_name || *end != '\0' || tid <= 0 || tid > 0x7fffffff ||
            read_delay(dir, de->d_name, &ns) != 0) {
            continue;
        }
        uint64_t prev = 0;
        int seen = 0;
        for (uint32_t i = 0; i < rd->n && !seen; i++) {
            if (rd->t[i].tid == (int)tid) {
                prev = rd->t[i].ns;
                seen = 1;
            }
        }
        /* A thread first seen started in the window: all its wait is new. */
        delta += ns >= prev ? ns - prev : 0;
        next->t[next->n].tid = (int)tid;
        next->t[next->n].ns = ns;
        next->n++;
    }
    closedir(d);
    if (next->n == 0) {
        free(next);
        return -ENOENT;
    }
    int first = !rd->have;
    next->have = 1;
    *rd = *next;
    free(next);
    *ret_sec = first ? 0.0 : (double)delta * 1e-9;
    return first ? 1 : 0;
}

int cl_budget_busy(double cpu, double wall, double budget)
{
    if (!(budget > 0.0) || !(wall > 0.0) || !isfinite(cpu)) {
        return 0;
    }
    return cpu / wall >= CL_BUSY_FRACTION * budget;
}
