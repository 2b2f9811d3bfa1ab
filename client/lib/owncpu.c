/* owncpu: see owncpu.h. */
#include "client/lib/owncpu.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names gRPC core (1.51) gives the threads it starts, as comm shows them
 * (cut to 15 characters), matched as prefixes. */
static const char *const grpc_names[] = {
    "grpc",            /* grpc_global_timer, grpc_... */
    "default-executo", /* default-executor */
    "resolver-execut", /* resolver-executor */
    "event_engine",    /* the event engine's pool */
    "timer_manager",   /* the event engine's timers */
};

int cl_owncpu_is_grpc(const char *comm)
{
    for (size_t i = 0; i < sizeof(grpc_names) / sizeof(grpc_names[0]); i++) {
        if (strncmp(comm, grpc_names[i], strlen(grpc_names[i])) == 0) {
            return 1;
        }
    }
    return 0;
}

/* dir/tid/comm into name[len], the trailing newline cut. */
static int read_comm(const char *dir, const char *tid, char *name, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s/comm", dir, tid);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return -errno;
    }
    int rc = fgets(name, (int)len, f) != NULL ? 0 : -EIO;
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    return rc;
}

/* dir/tid/schedstat's first field: nanoseconds on a CPU. */
static int read_run(const char *dir, const char *tid, uint64_t *ret)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s/schedstat", dir, tid);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return -errno;
    }
    unsigned long long run = 0;
    int rc = fscanf(f, "%llu", &run) == 1 ? 0 : -EIO;
    fclose(f);
    if (rc == 0) {
        *ret = run;
    }
    return rc;
}

/* A gRPC thread's tid from a directory entry, or 0. */
static long grpc_tid(const char *dir, const char *entry)
{
    char *end = NULL;
    long tid = strtol(entry, &end, 10);
    if (end == entry || *end != '\0' || tid <= 0 || tid > 0x7fffffff) {
        return 0;
    }
    char name[32];
    return read_comm(dir, entry, name, sizeof(name)) == 0 && cl_owncpu_is_grpc(name) ? tid : 0;
}

int cl_owncpu_grpc_sample(cl_owncpu_grpc_t *g, const char *task_dir, double *ret_sec)
{
    const char *dir = task_dir != NULL ? task_dir : "/proc/self/task";
    *ret_sec = 0.0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        return -ENOENT;
    }
    /* The new table is built beside the old one (1 KB: off the stack). */
    cl_owncpu_grpc_t *next = calloc(1, sizeof(*next));
    if (next == NULL) {
        closedir(d);
        return -ENOMEM;
    }
    uint64_t delta = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && next->n < CL_OWNCPU_MAX_THREADS) {
        long tid = grpc_tid(dir, de->d_name);
        uint64_t ns = 0;
        if (tid == 0 || read_run(dir, de->d_name, &ns) != 0) {
            continue;
        }
        uint64_t prev = 0;
        for (uint32_t i = 0; i < g->n; i++) {
            if (g->t[i].tid == (int)tid) {
                prev = g->t[i].ns;
                break;
            }
        }
        delta += ns >= prev ? ns - prev : 0;
        next->t[next->n].tid = (int)tid;
        next->t[next->n].ns = ns;
        next->n++;
    }
    closedir(d);
    int first = !g->have;
    next->have = 1;
    *g = *next;
    free(next);
    *ret_sec = first ? 0.0 : (double)delta * 1e-9;
    return first ? 1 : 0;
}

double cl_owncpu_fetch_sample(cl_owncpu_fetch_t *f, unsigned i, int running, pthread_t t)
{
    if (i >= CL_OWNCPU_MAX_FETCH) {
        return 0.0;
    }
    clockid_t cid;
    struct timespec ts;
    if (!running || pthread_getcpuclockid(t, &cid) != 0 || clock_gettime(cid, &ts) != 0) {
        f->s[i].valid = 0; /* none, or it ended: its last stretch is lost */
        return 0.0;
    }
    double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    /* A new thread in the slot started since the last sample: all of its
     * CPU is new. */
    double prev = f->s[i].valid && f->s[i].clock == cid ? f->s[i].sec : 0.0;
    f->s[i].clock = cid;
    f->s[i].valid = 1;
    f->s[i].sec = now;
    return now > prev ? now - prev : 0.0;
}
