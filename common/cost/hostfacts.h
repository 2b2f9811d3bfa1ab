/* hostfacts: what a host can give: the CPU budget (affinity, cgroup v1/v2
 * quota) and the CPU model, which with the thread count names a worker's
 * speed class. Reads /proc and /sys; nothing here logs. Any thread. */
#ifndef SL_HOSTFACTS_H
#define SL_HOSTFACTS_H

#include <stddef.h>

/* CPUs this process may use: the affinity mask, capped by a cgroup v2
 * cpu.max or v1 cfs quota found on the way (the smallest wins). why gets a
 * short description of what limited it. Never below 0.01. */
double sl_cpu_budget(char *why, size_t whylen);
/* Parsers, exposed for tests: a v2 cpu.max line ("max 100000", "50000
 * 100000") and a v1 quota/period pair (quota -1 = none). Return the CPU
 * count, or 0 when unlimited or unparsable. */
double sl_cgroup_v2_cpus(const char *cpu_max);
double sl_cgroup_v1_cpus(long long quota_us, long long period_us);
/* "model name" (or equivalent) from /proc/cpuinfo, or "unknown". */
void sl_cpu_model(char *buf, size_t len);

#endif
