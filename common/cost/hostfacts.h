/* hostfacts: what a host can give: the CPU budget (affinity, cgroup v1/v2
 * quota) and the CPU model, which with the thread count names a worker's
 * speed class; and which machine it is (machine id, the CPUs it may run
 * on), so the planner can tell hosts that share CPUs from separate ones.
 * Reads /proc and /sys; nothing here logs. Any thread. */
#ifndef SL_HOSTFACTS_H
#define SL_HOSTFACTS_H

#include <stddef.h>
#include <stdint.h>

/* CPU numbers 0..SL_CPUSET_MAX-1; a larger CPU number is not recorded. */
#define SL_CPUSET_MAX 1024
/* Longest machine identity kept (a machine-id is 32 hex digits). */
#define SL_MACHINE_ID_MAX 64

typedef struct sl_cpuset_s {
    uint64_t w[SL_CPUSET_MAX / 64];
} sl_cpuset_t;

/* Where a CPU budget came from. Telling "unknown" from "no limit" matters:
 * inside some containers no cgroup is visible, and a quota the process
 * cannot see must not be taken for all of its CPUs (docs/planner.md). */
typedef enum sl_budget_src_e {
    SL_BUDGET_AFFINITY = 0, /* our cgroup was read and sets no quota: the affinity mask */
    SL_BUDGET_CGROUP,       /* a cgroup v2 cpu.max or v1 cfs quota caps it */
    SL_BUDGET_UNKNOWN,      /* no cgroup of ours readable: the affinity mask, a quota may hide */
    SL_BUDGET__COUNT
} sl_budget_src_e;

typedef struct sl_budget_s {
    double cpus;          /* never below 0.01 */
    sl_budget_src_e src;
    char why[64];         /* what limited it: "affinity", "cgroup v1 cfs quota", ... */
} sl_budget_t;

/* CPUs this process may use: the affinity mask, capped by a cgroup v2
 * cpu.max or v1 cfs quota found on the way (the smallest wins), and where
 * that came from. root prefixes /proc/self/cgroup and /sys/fs/cgroup (NULL
 * or "" = the real ones; tests point it at a fake tree); the affinity mask
 * is always this process's. The source is SL_BUDGET_CGROUP when a quota
 * was read; SL_BUDGET_AFFINITY when the cgroup holding our cpu controller
 * (v1 "cpu" line of /proc/self/cgroup, else the v2 "0::" line) exists under
 * the mount and its quota file reads as unlimited; SL_BUDGET_UNKNOWN when
 * /proc/self/cgroup is unreadable, no cgroup is mounted, or our cgroup's
 * directory is not there (another mount namespace, a container without a
 * cgroup namespace) and the mount's root shows no quota either. */
void sl_cpu_budget_read(const char *root, sl_budget_t *ret);
/* "affinity", "cgroup", "unknown" (the names on the wire and in JSON). */
const char *sl_budget_src_name(sl_budget_src_e src);
/* sl_cpu_budget_read(NULL)'s CPUs; why gets its why. */
double sl_cpu_budget(char *why, size_t whylen);
/* Parsers, exposed for tests: a v2 cpu.max line ("max 100000", "50000
 * 100000") and a v1 quota/period pair (quota -1 = none). Return the CPU
 * count, or 0 when unlimited or unparsable. */
double sl_cgroup_v2_cpus(const char *cpu_max);
double sl_cgroup_v1_cpus(long long quota_us, long long period_us);
/* "model name" (or equivalent) from /proc/cpuinfo, or "unknown". */
void sl_cpu_model(char *buf, size_t len);

/* This machine: /etc/machine-id, else /proc/sys/kernel/random/boot_id;
 * "" when neither is readable. Printable, < SL_MACHINE_ID_MAX bytes. */
void sl_machine_id(char *buf, size_t len);
/* The CPUs this process may run on: the affinity mask, which the kernel
 * already narrows to the cgroup's cpuset. Returns 0 or -errno. */
int sl_cpuset_self(sl_cpuset_t *ret);
/* Linux list format, "0-3,8,10-11" (what /sys/.../cpuset.cpus shows).
 * Parse returns 0, or -EINVAL for anything else (empty string, a CPU >=
 * SL_CPUSET_MAX, a backwards range); ret is untouched then. Format writes
 * "" for the empty set and returns -ENOSPC when len is too small. */
int sl_cpuset_parse(const char *s, sl_cpuset_t *ret);
int sl_cpuset_format(const sl_cpuset_t *set, char *buf, size_t len);
uint32_t sl_cpuset_count(const sl_cpuset_t *set);
int sl_cpuset_overlap(const sl_cpuset_t *a, const sl_cpuset_t *b);
void sl_cpuset_or(sl_cpuset_t *acc, const sl_cpuset_t *b);

#endif
