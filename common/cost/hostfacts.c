/* hostfacts: the CPU budget from affinity and cgroup quotas, and the CPU
 * model, read from /proc and /sys (common/cost/hostfacts.h). Any thread. */
#include "common/cost/hostfacts.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double sl_cgroup_v2_cpus(const char *cpu_max)
{
    char quota[32];
    long long period = 0;
    if (cpu_max == NULL || sscanf(cpu_max, "%31s %lld", quota, &period) != 2 || period <= 0 ||
        strcmp(quota, "max") == 0) {
        return 0.0;
    }
    char *end = NULL;
    long long q = strtoll(quota, &end, 10);
    if (end == quota || *end != '\0' || q <= 0) {
        return 0.0;
    }
    return (double)q / (double)period;
}

double sl_cgroup_v1_cpus(long long quota_us, long long period_us)
{
    if (quota_us <= 0 || period_us <= 0) {
        return 0.0;
    }
    return (double)quota_us / (double)period_us;
}

/* First line of a small file, without the newline. */
static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return -errno;
    }
    int rc = fgets(buf, (int)len, f) != NULL ? 0 : -EIO;
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return rc;
}

static void take_min(double *cur, double v, char *why, size_t whylen, const char *what)
{
    if (v > 0.0 && v < *cur) {
        *cur = v;
        snprintf(why, whylen, "%s", what);
    }
}

/* cgroup v2: cpu.max of our cgroup and of every ancestor (the smallest
 * quota anywhere above us applies). */
static void cgroup_v2(const char *rel, double *cur, char *why, size_t whylen)
{
    char path[1024];
    char dir[768];
    snprintf(dir, sizeof(dir), "%s", rel);
    for (int depth = 0; depth < 32; depth++) {
        char line[128];
        snprintf(path, sizeof(path), "/sys/fs/cgroup%s%scpu.max", dir,
                 dir[0] != '\0' && dir[strlen(dir) - 1] == '/' ? "" : "/");
        if (read_line(path, line, sizeof(line)) == 0) {
            take_min(cur, sl_cgroup_v2_cpus(line), why, whylen, "cgroup v2 cpu.max");
        }
        char *slash = strrchr(dir, '/');
        if (slash == NULL || (slash == dir && dir[1] == '\0')) {
            break;
        }
        slash[slash == dir ? 1 : 0] = '\0';
    }
}

static void cgroup_v1(const char *base, double *cur, char *why, size_t whylen)
{
    char path[1024];
    char line[64];
    long long quota = 0;
    long long period = 0;
    snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", base);
    if (read_line(path, line, sizeof(line)) != 0 || sscanf(line, "%lld", &quota) != 1) {
        return;
    }
    snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", base);
    if (read_line(path, line, sizeof(line)) != 0 || sscanf(line, "%lld", &period) != 1) {
        return;
    }
    take_min(cur, sl_cgroup_v1_cpus(quota, period), why, whylen, "cgroup v1 cfs quota");
}

double sl_cpu_budget(char *why, size_t whylen)
{
    char whybuf[64];
    if (why == NULL || whylen == 0) {
        why = whybuf;
        whylen = sizeof(whybuf);
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    double cpus = 1.0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
        cpus = CPU_COUNT(&set);
        snprintf(why, whylen, "affinity");
    } else {
        snprintf(why, whylen, "default");
    }
    /* Our cgroups from /proc/self/cgroup: "0::/path" (v2) and
     * "N:cpu,cpuacct:/path" (v1). Inside a container the namespace root is
     * also tried, since the listed path may not exist in our mount view. */
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f != NULL) {
        char line[1024];
        for (int nlines = 0; nlines < 64 && fgets(line, sizeof(line), f) != NULL; nlines++) {
            line[strcspn(line, "\n")] = '\0';
            char *c1 = strchr(line, ':');
            char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
            if (c2 == NULL) {
                continue;
            }
            *c2 = '\0';
            const char *ctrl = c1 + 1;
            const char *rel = c2 + 1;
            if (ctrl[0] == '\0') {
                cgroup_v2(rel, &cpus, why, whylen);
            } else if (strstr(ctrl, "cpu") != NULL && strstr(ctrl, "cpuset") == NULL) {
                char base[1024];
                snprintf(base, sizeof(base), "/sys/fs/cgroup/%s%s", ctrl,
                         strcmp(rel, "/") == 0 ? "" : rel);
                cgroup_v1(base, &cpus, why, whylen);
            }
        }
        fclose(f);
    }
    cgroup_v2("/", &cpus, why, whylen);
    cgroup_v1("/sys/fs/cgroup/cpu", &cpus, why, whylen);
    cgroup_v1("/sys/fs/cgroup/cpu,cpuacct", &cpus, why, whylen);
    return cpus < 0.01 ? 0.01 : cpus;
}

void sl_cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (f == NULL) {
        return;
    }
    char line[512];
    /* x86 says "model name"; arm64 has no name, "CPU part" is the closest. */
    for (int nlines = 0; nlines < 4096 && fgets(line, sizeof(line), f) != NULL; nlines++) {
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "CPU part", 8) == 0) {
            char *colon = strchr(line, ':');
            if (colon != NULL) {
                colon++;
                colon += strspn(colon, " \t");
                colon[strcspn(colon, "\n")] = '\0';
                snprintf(buf, len, "%s", colon);
                break;
            }
        }
    }
    fclose(f);
}

/* ------------------------------------------------------------ machine identity */

void sl_machine_id(char *buf, size_t len)
{
    static const char *const paths[] = {"/etc/machine-id", "/proc/sys/kernel/random/boot_id"};
    char line[SL_MACHINE_ID_MAX];
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        if (read_line(paths[i], line, sizeof(line)) != 0 || line[0] == '\0') {
            continue;
        }
        int printable = 1;
        for (const char *p = line; *p != '\0'; p++) {
            printable &= *p > ' ' && *p < 0x7f;
        }
        if (printable) {
            snprintf(buf, len, "%s", line);
            return;
        }
    }
}

int sl_cpuset_self(sl_cpuset_t *ret)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        return -errno;
    }
    memset(ret, 0, sizeof(*ret));
    for (int c = 0; c < CPU_SETSIZE && c < SL_CPUSET_MAX; c++) {
        if (CPU_ISSET(c, &set)) {
            ret->w[c / 64] |= 1ULL << (c % 64);
        }
    }
    return 0;
}

/* A CPU number: decimal digits only, below SL_CPUSET_MAX. */
static int cpu_num(const char **p, long *ret)
{
    if (**p < '0' || **p > '9') {
        return -EINVAL;
    }
    long v = 0;
    while (**p >= '0' && **p <= '9') {
        v = v * 10 + (**p - '0');
        if (v >= SL_CPUSET_MAX) {
            return -EINVAL;
        }
        (*p)++;
    }
    *ret = v;
    return 0;
}

int sl_cpuset_parse(const char *s, sl_cpuset_t *ret)
{
    if (s == NULL || *s == '\0') {
        return -EINVAL;
    }
    sl_cpuset_t set;
    memset(&set, 0, sizeof(set));
    const char *p = s;
    for (;;) {
        long lo = 0;
        long hi = 0;
        if (cpu_num(&p, &lo) != 0) {
            return -EINVAL;
        }
        hi = lo;
        if (*p == '-') {
            p++;
            if (cpu_num(&p, &hi) != 0 || hi < lo) {
                return -EINVAL;
            }
        }
        for (long c = lo; c <= hi; c++) {
            set.w[c / 64] |= 1ULL << (c % 64);
        }
        if (*p == '\0') {
            break;
        }
        if (*p++ != ',') {
            return -EINVAL;
        }
    }
    *ret = set;
    return 0;
}

static int is_set(const sl_cpuset_t *set, int c) { return (set->w[c / 64] >> (c % 64)) & 1; }

int sl_cpuset_format(const sl_cpuset_t *set, char *buf, size_t len)
{
    if (len == 0) {
        return -ENOSPC;
    }
    size_t off = 0;
    buf[0] = '\0';
    for (int c = 0; c < SL_CPUSET_MAX; c++) {
        if (!is_set(set, c)) {
            continue;
        }
        int end = c;
        while (end + 1 < SL_CPUSET_MAX && is_set(set, end + 1)) {
            end++;
        }
        int n = end > c ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", c, end)
                        : snprintf(buf + off, len - off, "%s%d", off ? "," : "", c);
        if (n < 0 || (size_t)n >= len - off) {
            buf[0] = '\0';
            return -ENOSPC;
        }
        off += (size_t)n;
        c = end;
    }
    return 0;
}

uint32_t sl_cpuset_count(const sl_cpuset_t *set)
{
    uint32_t n = 0;
    for (size_t i = 0; i < SL_CPUSET_MAX / 64; i++) {
        n += (uint32_t)__builtin_popcountll(set->w[i]);
    }
    return n;
}

int sl_cpuset_overlap(const sl_cpuset_t *a, const sl_cpuset_t *b)
{
    for (size_t i = 0; i < SL_CPUSET_MAX / 64; i++) {
        if (a->w[i] & b->w[i]) {
            return 1;
        }
    }
    return 0;
}

void sl_cpuset_or(sl_cpuset_t *acc, const sl_cpuset_t *b)
{
    for (size_t i = 0; i < SL_CPUSET_MAX / 64; i++) {
        acc->w[i] |= b->w[i];
    }
}
