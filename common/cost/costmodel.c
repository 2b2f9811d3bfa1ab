#include "common/cost/costmodel.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/err.h"
#include "common/image/jpeg.h"
#include "common/base/clock.h"

/* ------------------------------------------------------------ cost model */

void sl_cost_features(const uint8_t *buf, size_t len, sl_cost_features_t *ret)
{
    sl_cost_features_head(buf, len, len, ret);
}

void sl_cost_features_head(const uint8_t *buf, size_t len, uint64_t file_bytes,
                           sl_cost_features_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->kb = (double)file_bytes / 1000.0;
    sl_jpeg_info_t info;
    if (buf != NULL && sl_jpeg_probe(buf, len, &info, NULL, 0) == 0) {
        ret->mpix = (double)info.width * (double)info.height / 1e6;
        ret->progressive = info.progressive;
    }
}

static void feature_vec(const sl_cost_features_t *f, double x[SL_COST_NPARAM])
{
    x[0] = 1.0;
    x[1] = f->kb;
    x[2] = f->mpix;
    x[3] = f->progressive ? f->mpix : 0.0;
}

void sl_costmodel_init(sl_costmodel_t *m) { memset(m, 0, sizeof(*m)); }

int sl_costmodel_set(sl_costmodel_t *m, const double *coef, size_t n)
{
    if (coef == NULL || n != SL_COST_NPARAM) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(coef[i])) {
            return -EINVAL;
        }
    }
    sl_costmodel_init(m);
    memcpy(m->coef, coef, sizeof(m->coef));
    m->fitted = 1;
    return 0;
}

void sl_costmodel_add(sl_costmodel_t *m, const sl_cost_features_t *f, double sec)
{
    if (!isfinite(sec) || sec < 0.0) {
        return;
    }
    double x[SL_COST_NPARAM];
    feature_vec(f, x);
    for (int i = 0; i < SL_COST_NPARAM; i++) {
        for (int j = 0; j < SL_COST_NPARAM; j++) {
            m->xtx[i][j] += x[i] * x[j];
        }
        m->xty[i] += x[i] * sec;
    }
    m->n++;
}

int sl_costmodel_fit(sl_costmodel_t *m)
{
    if (m->n < 2) {
        return -EDOM;
    }
    /* Gaussian elimination with partial pivoting on (XtX + ridge) c = Xty.
     * The ridge, relative to each diagonal, only matters for a feature that
     * never varied (all baseline JPEGs: the progressive column is 0). */
    double a[SL_COST_NPARAM][SL_COST_NPARAM + 1];
    for (int i = 0; i < SL_COST_NPARAM; i++) {
        for (int j = 0; j < SL_COST_NPARAM; j++) {
            a[i][j] = m->xtx[i][j];
        }
        a[i][i] += 1e-9 * (m->xtx[i][i] > 0.0 ? m->xtx[i][i] : 1.0);
        a[i][SL_COST_NPARAM] = m->xty[i];
    }
    for (int c = 0; c < SL_COST_NPARAM; c++) {
        int piv = c;
        for (int r = c + 1; r < SL_COST_NPARAM; r++) {
            if (fabs(a[r][c]) > fabs(a[piv][c])) {
                piv = r;
            }
        }
        if (fabs(a[piv][c]) < 1e-300) {
            return -EDOM;
        }
        if (piv != c) {
            for (int j = 0; j <= SL_COST_NPARAM; j++) {
                double t = a[c][j];
                a[c][j] = a[piv][j];
                a[piv][j] = t;
            }
        }
        for (int r = 0; r < SL_COST_NPARAM; r++) {
            if (r == c) {
                continue;
            }
            double k = a[r][c] / a[c][c];
            for (int j = c; j <= SL_COST_NPARAM; j++) {
                a[r][j] -= k * a[c][j];
            }
        }
    }
    for (int i = 0; i < SL_COST_NPARAM; i++) {
        m->coef[i] = a[i][SL_COST_NPARAM] / a[i][i];
        if (!isfinite(m->coef[i])) {
            return -EDOM;
        }
    }
    m->fitted = 1;
    return 0;
}

double sl_costmodel_predict(const sl_costmodel_t *m, const sl_cost_features_t *f)
{
    if (!m->fitted) {
        return m->n > 0 ? m->xty[0] / (double)m->n : 0.0; /* xty[0] sums the costs */
    }
    double x[SL_COST_NPARAM];
    feature_vec(f, x);
    double y = 0.0;
    for (int i = 0; i < SL_COST_NPARAM; i++) {
        y += m->coef[i] * x[i];
    }
    return y > 0.0 ? y : 0.0;
}

/* ------------------------------------------------------------ profiler */

size_t sl_profile_pick(uint64_t total, size_t n, uint64_t *ret_indices)
{
    if (total == 0) {
        return 0;
    }
    if ((uint64_t)n > total) {
        n = (size_t)total;
    }
    /* Centres of n equal strides: spread over every class of a sorted
     * imagefolder, the same indices on every host. */
    for (size_t i = 0; i < n; i++) {
        ret_indices[i] = (uint64_t)(((double)i + 0.5) * (double)total / (double)n);
        if (ret_indices[i] >= total) {
            ret_indices[i] = total - 1;
        }
    }
    return n;
}

typedef struct rec_s {
    sl_cost_features_t f;
    double sec;
} rec_t;

/* sl_profile_t.size_error of n measured samples. */
static double size_proxy_error(const rec_t *recs, uint64_t n)
{
    double kb = 0.0, sec = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        kb += recs[i].f.kb;
        sec += recs[i].sec;
    }
    if (n < 2 || !(kb > 0.0) || !(sec > 0.0)) {
        return -1.0;
    }
    double mean = kb / (double)n;
    double proxy_sum = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        proxy_sum += sl_cost_size_proxy(recs[i].f.kb, mean);
    }
    double scale = sec / proxy_sum;
    double abs_err = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        abs_err += fabs(sl_cost_size_proxy(recs[i].f.kb, mean) * scale - recs[i].sec);
    }
    return abs_err / sec;
}

int sl_profile_run(const sl_pipeline_t *p, const sl_source_t *src, const uint64_t *indices,
                   size_t n, int max_ms, sl_profile_t *ret, char *err, size_t errlen)
{
    if (p == NULL || src == NULL || (n > 0 && indices == NULL) || n > SL_PROFILE_MAX_SAMPLES) {
        return sl_err(err, errlen, -EINVAL, "profile: bad arguments");
    }
    if (max_ms <= 0) {
        max_ms = SL_PROFILE_DEFAULT_MS;
    }
    sl_profile_t pr;
    memset(&pr, 0, sizeof(pr));
    pr.nunits = sl_pipeline_nunits(p);
    pr.model_error = -1.0;
    pr.size_error = -1.0;
    sl_costmodel_init(&pr.model);
    rec_t *recs = calloc(n > 0 ? n : 1, sizeof(*recs));
    if (recs == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    sl_pipe_scratch_t scratch;
    sl_pipe_scratch_init(&scratch);
    sl_tensor_t t;
    sl_tensor_init(&t);
    double t0 = sl_mono_sec();
    char detail[256];
    /* One untimed sample first: the scratch buffers' first allocation and
     * page faults would otherwise be charged to whichever sample came first. */
    if (n > 0 && sl_source_read(src, indices[0], &t, detail, sizeof(detail)) == 0) {
        (void)sl_pipeline_run(p, 0, pr.nunits, 0, indices[0], &t, &scratch, NULL, detail,
                              sizeof(detail));
    }
    for (size_t i = 0; i < n; i++) {
        if ((sl_mono_sec() - t0) * 1000.0 >= (double)max_ms) {
            break;
        }
        double c0 = sl_thread_cpu_sec();
        int rc = sl_source_read(src, indices[i], &t, detail, sizeof(detail));
        double read_sec = sl_thread_cpu_sec() - c0;
        if (rc != 0) {
            pr.failed++;
            continue;
        }
        sl_cost_features_t f;
        sl_cost_features(t.data, t.nbytes, &f);
        uint64_t encoded = t.nbytes;
        /* Into a private row first: a sample a unit refuses must not count. */
        sl_unit_stat_t row[SL_PIPE_MAX_UNITS];
        memset(row, 0, sizeof(row));
        rc = sl_pipeline_run(p, 0, pr.nunits, 0, indices[i], &t, &scratch, row, detail,
                             sizeof(detail));
        if (rc != 0) {
            pr.failed++;
            continue;
        }
        double sec = 0.0;
        for (uint32_t u = 0; u < pr.nunits; u++) {
            pr.units[u].cpu_sec += row[u].cpu_sec;
            pr.units[u].out_bytes += row[u].out_bytes;
            pr.units[u].samples += row[u].samples;
            sec += row[u].cpu_sec;
        }
        pr.read_cpu_sec += read_sec;
        pr.encoded_bytes += encoded;
        recs[pr.samples].f = f;
        recs[pr.samples].sec = sec;
        sl_costmodel_add(&pr.model, &f, sec);
        pr.samples++;
    }
    pr.seconds = sl_mono_sec() - t0;
    if (sl_costmodel_fit(&pr.model) == 0) {
        double abs_err = 0.0;
        double sum = 0.0;
        for (uint64_t i = 0; i < pr.samples; i++) {
            abs_err += fabs(sl_costmodel_predict(&pr.model, &recs[i].f) - recs[i].sec);
            sum += recs[i].sec;
        }
        pr.model_error = sum > 0.0 ? abs_err / sum : -1.0;
    }
    pr.size_error = size_proxy_error(recs, pr.samples);
    sl_tensor_free(&t);
    sl_pipe_scratch_free(&scratch);
    free(recs);
    *ret = pr;
    return 0;
}

/* ------------------------------------------------------------ host facts */

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

uint64_t sl_spec_cost_hash(const sl_spec_t *spec, uint64_t fingerprint)
{
    sl_spec_t s = *spec;
    s.epochs = 1;
    s.offload = SL_OFFLOAD_AUTO;
    s.split = 0;
    s.local_share = 0.0;
    s.batch_size = 1;
    s.drop_last = false;
    s.deterministic = false;
    s.shuffle = false;
    s.seed = 0;
    s.on_error = SL_ON_ERROR_SKIP;
    s.name[0] = '\0'; /* a renamed spec costs the same */
    char *json = sl_spec_to_json(&s);
    /* FNV-1a 64 over the JSON, then the fingerprint's bytes. */
    uint64_t h = 0xcbf29ce484222325ULL;
    if (json != NULL) {
        for (const char *c = json; *c != '\0'; c++) {
            h = (h ^ (uint8_t)*c) * 0x100000001b3ULL;
        }
        free(json);
    }
    for (int i = 0; i < 8; i++) {
        h = (h ^ ((fingerprint >> (8 * i)) & 0xff)) * 0x100000001b3ULL;
    }
    return h & 0x1fffffffffffffULL; /* below 2^53: exact in JSON readers */
}
