/* hostfacts: the CPU budget from affinity and cgroup quotas, and the CPU
 * model, read from /proc and /sys (common/cost/hostfacts.h). Any thread. */
#include "common/cost/hostfacts.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* One scan of the cgroup tree for sl_cpu_budget_read. */
typedef struct cg_scan_s {
    const char *root;   /* prefix of /proc and /sys paths; "" = the real ones */
    sl_budget_t *b;
    int quota_seen;     /* some quota file held a limit (taken or not) */
} cg_scan_t;

static void take_min(cg_scan_t *sc, double v, const char *what)
{
    if (v <= 0.0) {
        return;
    }
    sc->quota_seen = 1;
    if (v < sc->b->cpus) {
        sc->b->cpus = v;
        sc->b->src = SL_BUDGET_CGROUP;
        snprintf(sc->b->why, sizeof(sc->b->why), "%s", what);
    }
}

/* cgroup v2: cpu.max of our cgroup and of every ancestor (the smallest
 * quota anywhere above us applies). Returns 1 when our own cgroup's
 * directory is there (its cgroup.controllers reads). */
static int cgroup_v2(cg_scan_t *sc, const char *rel)
{
    char path[1024];
    char dir[768];
    char line[128];
    snprintf(dir, sizeof(dir), "%s", rel);
    snprintf(path, sizeof(path), "%s/sys/fs/cgroup%s%scgroup.controllers", sc->root, dir,
             dir[0] != '\0' && dir[strlen(dir) - 1] == '/' ? "" : "/");
    /* Existence, not content: the root's list may be empty. */
    int own = access(path, R_OK) == 0;
    for (int depth = 0; depth < 32; depth++) {
        snprintf(path, sizeof(path), "%s/sys/fs/cgroup%s%scpu.max", sc->root, dir,
                 dir[0] != '\0' && dir[strlen(dir) - 1] == '/' ? "" : "/");
        if (read_line(path, line, sizeof(line)) == 0) {
            take_min(sc, sl_cgroup_v2_cpus(line), "cgroup v2 cpu.max");
        }
        char *slash = strrchr(dir, '/');
        if (slash == NULL || (slash == dir && dir[1] == '\0')) {
            break;
        }
        slash[slash == dir ? 1 : 0] = '\0';
    }
    return own;
}

/* cgroup v1: the cfs quota of the cgroup at base (a directory under the
 * cpu controller's mount). Returns 1 when its quota file reads (a quota or
 * -1, none). */
static int cgroup_v1(cg_scan_t *sc, const char *base)
{
    char path[1024];
    char line[64];
    long long quota = 0;
    long long period = 0;
    snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", base);
    if (read_line(path, line, sizeof(line)) != 0 || sscanf(line, "%lld", &quota) != 1) {
        return 0;
    }
    snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", base);
    if (read_line(path, line, sizeof(line)) != 0 || sscanf(line, "%lld", &period) != 1) {
        return 0;
    }
    take_min(sc, sl_cgroup_v1_cpus(quota, period), "cgroup v1 cfs quota");
    return 1;
}

const char *sl_budget_src_name(sl_budget_src_e src)
{
    switch (src) {
    case SL_BUDGET_AFFINITY:
        return "affinity";
    case SL_BUDGET_CGROUP:
        return "cgroup";
    case SL_BUDGET_UNKNOWN:
    case SL_BUDGET__COUNT:
        break;
    }
    return "unknown";
}

void sl_cpu_budget_read(const char *root, sl_budget_t *ret)
{
    cg_scan_t sc = {.root = root != NULL ? root : "", .b = ret};
    memset(ret, 0, sizeof(*ret));
    cpu_set_t set;
    CPU_ZERO(&set);
    ret->cpus = 1.0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
        ret->cpus = CPU_COUNT(&set);
        snprintf(ret->why, sizeof(ret->why), "affinity");
    } else {
        snprintf(ret->why, sizeof(ret->why), "default");
    }
    /* Our cgroups from /proc/self/cgroup: "0::/path" (v2) and
     * "N:cpu,cpuacct:/path" (v1). The cpu controller lives in one of them:
     * v1 when a v1 line names it, else v2. Whether *that* cgroup is
     * visible decides "no quota" against "unknown". Inside a container the
     * namespace root is also tried, since the listed path may not exist in
     * our mount view; a quota found there counts. */
    int v1_cpu = 0;  /* a v1 line names the cpu controller */
    int v1_own = 0;  /* ... and its cgroup's quota file reads */
    int v2_own = 0;  /* the v2 line's cgroup directory is there */
    char path[1024];
    snprintf(path, sizeof(path), "%s/proc/self/cgroup", sc.root);
    FILE *f = fopen(path, "re");
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
                v2_own |= cgroup_v2(&sc, rel);
            } else if (strstr(ctrl, "cpu") != NULL && strstr(ctrl, "cpuset") == NULL) {
                char base[1024];
                snprintf(base, sizeof(base), "%s/sys/fs/cgroup/%s%s", sc.root, ctrl,
                         strcmp(rel, "/") == 0 ? "" : rel);
                v1_cpu = 1;
                v1_own |= cgroup_v1(&sc, base);
            }
        }
        fclose(f);
    }
    (void)cgroup_v2(&sc, "/");
    snprintf(path, sizeof(path), "%s/sys/fs/cgroup/cpu", sc.root);
    (void)cgroup_v1(&sc, path);
    snprintf(path, sizeof(path), "%s/sys/fs/cgroup/cpu,cpuacct", sc.root);
    (void)cgroup_v1(&sc, path);
    if (ret->src != SL_BUDGET_CGROUP) {
        int own = v1_cpu ? v1_own : v2_own;
        ret->src = own || sc.quota_seen ? SL_BUDGET_AFFINITY : SL_BUDGET_UNKNOWN;
    }
    if (ret->cpus < 0.01) {
        ret->cpus = 0.01;
    }
}

double sl_cpu_budget(char *why, size_t whylen)
{
    sl_budget_t b;
    sl_cpu_budget_read(NULL, &b);
    if (why != NULL && whylen > 0) {
        snprintf(why, whylen, "%s", b.why);
    }
    return b.cpus;
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
