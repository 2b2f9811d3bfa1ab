/* owncpu: the CPU of Sluice's own threads in the client's process -- what
 * the per-sample overhead (overhead.h) counts. Never the process clock: in a
 * training process that counts the model's forward and backward passes and
 * every other thread of the loop too, and a resnet18 loop fed by
 * sluice.torch once charged 261 ms per sample to Sluice (issue 39).
 *
 * Sluice's threads are (docs/planner.md "Inputs"):
 *  - the ones the library starts: the executor's pool (cl_line_threads_cpu_sec),
 *    the control thread (its own clock) and one fetch thread per worker
 *    stream (cl_owncpu_fetch_t below: streams come and go);
 *  - gRPC core's own threads (its executors, timers, event engine). They carry
 *    no handle the library could ask for, but they name themselves: they are
 *    found by name in /proc/self/task/TID/comm (cl_owncpu_is_grpc) and their
 *    CPU read from TID/schedstat (nanoseconds on a CPU);
 *  - the consumer's time inside sluice_next_batch (rates.c: its thread's clock
 *    at entry and at return).
 * A process that runs gRPC for something else too (grpcio in Python) has
 * those threads counted as well: they carry the same names.
 *
 * Not thread-safe: one owner (the control thread). */
#ifndef CL_OWNCPU_H
#define CL_OWNCPU_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* gRPC threads remembered by cl_owncpu_grpc_sample; more are not counted. */
#define CL_OWNCPU_MAX_THREADS 64
/* Fetch streams followed by cl_owncpu_fetch_sample. */
#define CL_OWNCPU_MAX_FETCH 64

/* 1 when a thread name (as /proc/.../comm shows it: at most 15 characters)
 * is one gRPC core gives its threads, else 0. */
int cl_owncpu_is_grpc(const char *comm);

typedef struct cl_owncpu_grpc_s {
    uint32_t n;
    int have; /* a previous sample exists */
    struct {
        int tid;
        uint64_t ns;
    } t[CL_OWNCPU_MAX_THREADS];
} cl_owncpu_grpc_t;

/* CPU seconds gRPC's threads used since the previous call into *ret_sec,
 * reading task_dir/TID/{comm,schedstat} (task_dir NULL = /proc/self/task).
 * A thread first seen after the first call started in between: all its CPU
 * is new. Returns 0, 1 for the first call (a baseline: *ret_sec 0),
 * -ENOENT when the directory does not read. */
int cl_owncpu_grpc_sample(cl_owncpu_grpc_t *g, const char *task_dir, double *ret_sec);

/* Thread CPU followed per fetch slot across samples. A slot's thread is
 * told apart by its CPU clock id (one per kernel thread id), so a stream
 * restarted in the same slot counts from zero. */
typedef struct cl_owncpu_fetch_s {
    struct {
        clockid_t clock;
        int valid;
        double sec; /* its CPU at the last sample */
    } s[CL_OWNCPU_MAX_FETCH];
} cl_owncpu_fetch_t;

/* CPU seconds the thread of slot i used since the previous sample of the
 * slot: running 1 when the slot holds a started thread (t its handle),
 * 0 when it holds none. A thread that ended between samples keeps what it
 * used after the last one uncounted (it is joined before anyone could read
 * its clock). Returns the seconds (>= 0). */
double cl_owncpu_fetch_sample(cl_owncpu_fetch_t *f, unsigned i, int running, pthread_t t);

#endif
