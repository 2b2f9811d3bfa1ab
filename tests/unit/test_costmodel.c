/* test_costmodel: common/cost/ (costmodel, profiler, hostfacts) -- the linear per-sample cost model
 * (exact recovery on synthetic costs, error reported), the profiler on a
 * generated image folder of small and large JPEGs (large ones cost more,
 * a corrupt file is counted not profiled), the cgroup parsers and the
 * budget's source ("unknown" told from "no limit" on fake trees), sample
 * picking and the spec cost hash. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/cost/costmodel.h"
#include "common/profile/features.h"
#include "common/cost/hostfacts.h"
#include "common/profile/profiler.h"
#include "common/engine/pipeline.h"
#include "common/data/source.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures.h"

START_TEST(test_model_exact)
{
    /* cost = 1 ms + 0.02 ms/KB + 4 ms/MPix + 3 ms/MPix if progressive */
    sl_costmodel_t m;
    sl_costmodel_init(&m);
    for (int i = 0; i < 50; i++) {
        sl_cost_features_t f = {.kb = 20.0 + 7.0 * i, .mpix = 0.1 + 0.05 * (i % 9),
                                .progressive = i % 4 == 0, .images = 1};
        f.prog_mpix = f.progressive ? f.mpix : 0;
        double y = 1e-3 + 2e-5 * f.kb + 4e-3 * f.mpix + 3e-3 * f.prog_mpix;
        sl_costmodel_add(&m, &f, y);
    }
    ck_assert_int_eq(sl_costmodel_fit(&m), 0);
    /* images is always 1 here, like the constant: only their sum is fixed. */
    ck_assert(fabs(m.coef[0] + m.coef[5] - 1e-3) < 1e-7);
    ck_assert(fabs(m.coef[1] - 2e-5) < 1e-9);
    ck_assert(fabs(m.coef[2] - 4e-3) < 1e-7);
    ck_assert(fabs(m.coef[3] - 3e-3) < 1e-7);
    sl_cost_features_t big = {.kb = 500, .mpix = 2.0, .progressive = 1, .prog_mpix = 2.0,
                              .images = 1};
    ck_assert(fabs(sl_costmodel_predict(&m, &big) - (1e-3 + 1e-2 + 8e-3 + 6e-3)) < 1e-6);

    /* Never progressive: the column never varies, the ridge keeps it solvable. */
    sl_costmodel_init(&m);
    for (int i = 0; i < 10; i++) {
        sl_cost_features_t f = {.kb = 10.0 * (i + 1), .mpix = 0.2 * ((i % 3) + 1)};
        sl_costmodel_add(&m, &f, 1e-3 + 1e-4 * f.kb + 2e-3 * f.mpix);
    }
    ck_assert_int_eq(sl_costmodel_fit(&m), 0);
    sl_cost_features_t f = {.kb = 55, .mpix = 0.4};
    ck_assert(fabs(sl_costmodel_predict(&m, &f) - (1e-3 + 5.5e-3 + 0.8e-3)) < 1e-6);

    /* Too few samples: not fitted, predicts the mean. */
    sl_costmodel_init(&m);
    ck_assert_int_eq(sl_costmodel_fit(&m), -EDOM);
    sl_costmodel_add(&m, &f, 2e-3);
    ck_assert_int_eq(sl_costmodel_fit(&m), -EDOM);
    ck_assert(fabs(sl_costmodel_predict(&m, &f) - 2e-3) < 1e-12);
    /* Garbage measurements are ignored. */
    sl_costmodel_add(&m, &f, NAN);
    sl_costmodel_add(&m, &f, -1.0);
    ck_assert_uint_eq(m.n, 1);
}
END_TEST

START_TEST(test_features)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    fx_jpeg_opts_t o = {.width = 320, .height = 200, .progressive = true, .seed = 3};
    ck_assert_int_eq(fx_make_jpeg(&o, &buf, &len), 0);
    sl_cost_features_t f;
    sl_cost_features(buf, len, &f);
    ck_assert(fabs(f.mpix - 0.064) < 1e-9);
    ck_assert(fabs(f.kb - (double)len / 1000.0) < 1e-9);
    ck_assert_int_eq(f.progressive, 1);
    free(buf);
    const uint8_t junk[] = "not a jpeg at all";
    sl_cost_features(junk, sizeof(junk), &f);
    ck_assert(f.mpix == 0.0 && f.kb > 0.0);
}
END_TEST

static const char *SPEC = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
                          " \"stages\": [{\"op\": \"decode_jpeg\"},"
                          " {\"op\": \"center_crop\", \"size\": 32}, {\"op\": \"flip\"},"
                          " {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5],"
                          " \"std\": [0.2, 0.2, 0.2]}], \"batch_size\": 4}";

/* 12 small images and 4 with ~25x the pixels, plus a corrupt file, in a
 * source of 17; SPEC's pipeline; every index picked (n = 17). */
typedef struct prof_fx_s {
    char dir[FX_TMPDIR_LEN];
    sl_spec_t spec;
    sl_pipeline_t *p;
    sl_source_t *src;
    uint64_t idx[32];
    size_t n;
} prof_fx_t;

static void prof_fx_open(prof_fx_t *f)
{
    char path[512];
    char err[512];
    memset(f, 0, sizeof(*f));
    ck_assert_int_eq(fx_mkdtemp_class(f->dir, "c0"), 0);
    for (int i = 0; i < 16; i++) {
        int big = i % 4 == 3;
        fx_jpeg_opts_t o = {.width = big ? 800 : 160, .height = big ? 600 : 120,
                            .seed = (uint32_t)i};
        snprintf(path, sizeof(path), "%s/train/c0/img_%02d.jpg", f->dir, i);
        ck_assert_int_eq(fx_make_jpeg_file(path, &o), 0);
    }
    snprintf(path, sizeof(path), "%s/train/c0/zz_bad.jpg", f->dir);
    ck_assert_int_eq(fx_write_file(path, "garbage!", 8), 0);
    ck_assert_int_eq(sl_spec_parse("t", SPEC, strlen(SPEC), &f->spec, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_pipeline_new(&f->spec, 0, &f->p, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_source_open(f->dir, f->spec.source_type, f->spec.source_path, &f->src, err,
                                    sizeof(err)),
                     0);
    ck_assert_uint_eq(sl_source_count(f->src), 17);
    f->n = sl_profile_pick(sl_source_count(f->src), 32, f->idx);
    ck_assert_uint_eq(f->n, 17); /* no more than the source has */
}

static void prof_fx_close(prof_fx_t *f)
{
    sl_source_free(f->src);
    sl_pipeline_free(f->p);
    sl_spec_clear(&f->spec);
    fx_rmtree(f->dir);
}

/* A full decode + flip pipeline (no crop: big images cost their pixels). */
static sl_pipeline_t *full_decode_pipeline(sl_spec_t *fs)
{
    const char *full = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
                       " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"flip\"}]}";
    char err[512];
    sl_pipeline_t *fp = NULL;
    ck_assert_int_eq(sl_spec_parse("f", full, strlen(full), fs, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_pipeline_new(fs, 0, &fp, err, sizeof(err)), 0);
    return fp;
}

/* Every sample timed per unit; the corrupt file counted, not timed. */
START_TEST(test_profile_run)
{
    prof_fx_t f;
    prof_fx_open(&f);
    char err[512];
    sl_profile_t pr;
    ck_assert_int_eq(sl_profile_run(f.p, f.src, f.idx, f.n, 10000, &pr, err, sizeof(err)), 0);
    ck_assert_uint_eq(pr.samples, 16);
    ck_assert_uint_eq(pr.failed, 1);
    ck_assert_uint_eq(pr.nunits, 3); /* decode+center_crop fused, flip, normalize */
    for (uint32_t u = 0; u < pr.nunits; u++) {
        ck_assert_uint_eq(pr.units[u].samples, 16);
        ck_assert(pr.units[u].cpu_sec > 0.0);
    }
    ck_assert_uint_eq(pr.units[0].out_bytes, 16u * 32 * 32 * 3);
    ck_assert_uint_eq(pr.units[2].out_bytes, 16u * 32 * 32 * 3 * 4);
    ck_assert(pr.encoded_bytes > 0);
    ck_assert(pr.model.fitted);
    ck_assert(pr.model_error >= 0.0);
    prof_fx_close(&f);
}
END_TEST

/* The codec pass after a profile: per boundary, what delta + zstd makes of
 * the samples' bytes. */
START_TEST(test_profile_codec)
{
    prof_fx_t f;
    prof_fx_open(&f);
    char err[512];
    sl_profile_t pr;
    ck_assert_int_eq(sl_profile_run(f.p, f.src, f.idx, f.n, 10000, &pr, err, sizeof(err)), 0);
    /* The codec pass: 8 samples; boundary 0 (JPEG bytes) is never
     * compressed, the uint8 crop shrinks under delta + zstd, and the pass
     * leaves the unit costs alone. */
    double unit0 = pr.units[0].cpu_sec;
    ck_assert_int_eq(sl_profile_codec(f.p, f.src, f.idx, f.n, &pr, err, sizeof(err)), 0);
    ck_assert_uint_eq(pr.codec_samples, SL_PROFILE_CODEC_SAMPLES);
    ck_assert(pr.units[0].cpu_sec == unit0);
    ck_assert(sl_profile_codec_ratio(&pr, 0) == 1.0);
    ck_assert(pr.codec_compress_sec[0] == 0.0);
    ck_assert_uint_eq(pr.codec_raw[1], 8u * 32 * 32 * 3);
    ck_assert_msg(sl_profile_codec_ratio(&pr, 1) > 1.0, "ratio %g",
                  sl_profile_codec_ratio(&pr, 1));
    ck_assert(pr.codec_compress_sec[1] > 0.0);
    ck_assert_uint_eq(pr.codec_raw[3], 8u * 32 * 32 * 3 * 4);
    ck_assert(sl_profile_codec_ratio(&pr, 4) == 1.0); /* beyond nunits */
    prof_fx_close(&f);
}
END_TEST

/* Full decodes: big images cost more, and the model says so from the
 * header alone (the fused crop of SPEC decodes big ones DCT-scaled). */
START_TEST(test_profile_full_decode_model)
{
    prof_fx_t f;
    prof_fx_open(&f);
    char err[512];
    sl_spec_t fs;
    sl_pipeline_t *fp = full_decode_pipeline(&fs);
    char path[512];
    sl_profile_t pr;
    ck_assert_int_eq(sl_profile_run(fp, f.src, f.idx, f.n, 10000, &pr, err, sizeof(err)), 0);
    ck_assert_uint_eq(pr.samples, 16);
    sl_cost_features_t fsmall;
    sl_cost_features_t flarge;
    uint8_t *buf = NULL;
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/train/c0/img_00.jpg", f.dir);
    ck_assert_int_eq(fx_read_file(path, &buf, &len), 0);
    sl_cost_features(buf, len, &fsmall);
    free(buf);
    snprintf(path, sizeof(path), "%s/train/c0/img_03.jpg", f.dir);
    ck_assert_int_eq(fx_read_file(path, &buf, &len), 0);
    sl_cost_features(buf, len, &flarge);
    free(buf);
    ck_assert(fabs(flarge.mpix - 0.48) < 1e-9);
    ck_assert_msg(sl_costmodel_predict(&pr.model, &flarge) >
                      2.0 * sl_costmodel_predict(&pr.model, &fsmall),
                  "large %.3g s, small %.3g s", sl_costmodel_predict(&pr.model, &flarge),
                  sl_costmodel_predict(&pr.model, &fsmall));
    /* The errors are reported (their size depends on the machine's noise;
     * docs/planner.md has measured ones): the header model's, and the size
     * proxy's the split cut uses. The proxy is a fixed formula scaled to
     * the measured total, so it can be far off but never beyond 2x the
     * total (every term is positive). */
    ck_assert(pr.model_error >= 0.0);
    ck_assert_msg(pr.size_error >= 0.0 && pr.size_error <= 2.0, "%g", pr.size_error);
    sl_pipeline_free(fp);
    sl_spec_clear(&fs);
    prof_fx_close(&f);
}
END_TEST

/* A CPU budget stops the profile, never before one timed sample; more
 * samples than a profile takes are refused. */
START_TEST(test_profile_budget)
{
    prof_fx_t f;
    prof_fx_open(&f);
    char err[512];
    sl_spec_t fs;
    sl_pipeline_t *fp = full_decode_pipeline(&fs);
    sl_profile_t pr;
    /* A 1 ms budget stops long before the 4 big full decodes are done, but
     * not before one timed sample: a profile of none tells nothing (under
     * load the warm-up alone used to spend a short budget). */
    ck_assert_int_eq(sl_profile_run(fp, f.src, f.idx, f.n, 1, &pr, err, sizeof(err)), 0);
    ck_assert(pr.samples + pr.failed < f.n);
    ck_assert_uint_ge(pr.samples, 1);
    /* The warm-up of a 0.48 MP full decode alone spends 1 ms: still one timed. */
    const uint64_t big[2] = {3, 3};
    ck_assert_int_eq(sl_profile_run(fp, f.src, big, 2, 1, &pr, err, sizeof(err)), 0);
    ck_assert_uint_ge(pr.samples, 1);
    sl_pipeline_free(fp);
    sl_spec_clear(&fs);
    ck_assert_int_eq(sl_profile_run(f.p, f.src, f.idx, SL_PROFILE_MAX_SAMPLES + 1, 10, &pr, err,
                                    sizeof(err)),
                     -EINVAL);
    prof_fx_close(&f);
}
END_TEST

START_TEST(test_pick)
{
    uint64_t idx[8];
    ck_assert_uint_eq(sl_profile_pick(0, 8, idx), 0);
    ck_assert_uint_eq(sl_profile_pick(1000, 4, idx), 4);
    ck_assert_uint_eq(idx[0], 125);
    ck_assert_uint_eq(idx[1], 375);
    ck_assert_uint_eq(idx[3], 875);
    ck_assert_uint_eq(sl_profile_pick(3, 8, idx), 3);
    ck_assert_uint_eq(idx[0], 0);
    ck_assert_uint_eq(idx[2], 2);
}
END_TEST

/* CPU sets in list format both ways, every broken form refused (ret
 * untouched), and this process's own identity. */
START_TEST(test_cpuset_and_machine)
{
    sl_cpuset_t a;
    char buf[64];
    ck_assert_int_eq(sl_cpuset_parse("0-3,8,10-11,1023", &a), 0);
    ck_assert_uint_eq(sl_cpuset_count(&a), 8);
    ck_assert_int_eq(sl_cpuset_format(&a, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "0-3,8,10-11,1023");
    ck_assert_int_eq(sl_cpuset_format(&a, buf, 5), -ENOSPC);
    ck_assert_int_eq(sl_cpuset_parse("3,2,1,0", &a), 0);
    ck_assert_int_eq(sl_cpuset_format(&a, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "0-3");
    sl_cpuset_t keep = a;
    const char *bad[] = {NULL, "", " 1", "-1", "1-", "3-1", "1,,2", "1024", "0-1024", "x",
                         "1 2", "0-1,", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(sl_cpuset_parse(bad[i], &a) == -EINVAL, "\"%s\" accepted", bad[i]);
        ck_assert(memcmp(&a, &keep, sizeof(a)) == 0);
    }
    sl_cpuset_t b;
    ck_assert_int_eq(sl_cpuset_parse("4-5", &b), 0);
    ck_assert_int_eq(sl_cpuset_overlap(&a, &b), 0);
    sl_cpuset_or(&b, &a);
    ck_assert_int_eq(sl_cpuset_overlap(&a, &b), 1);
    ck_assert_uint_eq(sl_cpuset_count(&b), 6);
    sl_cpuset_t self;
    ck_assert_int_eq(sl_cpuset_self(&self), 0);
    ck_assert_uint_ge(sl_cpuset_count(&self), 1);
    char id[SL_MACHINE_ID_MAX];
    sl_machine_id(id, sizeof(id)); /* both files exist on every Linux this runs on */
    ck_assert(id[0] != '\0');
}
END_TEST

START_TEST(test_cgroup_parsers)
{
    ck_assert(sl_cgroup_v2_cpus("max 100000") == 0.0);
    ck_assert(fabs(sl_cgroup_v2_cpus("50000 100000") - 0.5) < 1e-12);
    ck_assert(fabs(sl_cgroup_v2_cpus("400000 100000") - 4.0) < 1e-12);
    ck_assert(sl_cgroup_v2_cpus("") == 0.0);
    ck_assert(sl_cgroup_v2_cpus("12x 100") == 0.0);
    ck_assert(sl_cgroup_v2_cpus("100 0") == 0.0);
    ck_assert(sl_cgroup_v2_cpus(NULL) == 0.0);
    ck_assert(sl_cgroup_v1_cpus(-1, 100000) == 0.0);
    ck_assert(fabs(sl_cgroup_v1_cpus(150000, 100000) - 1.5) < 1e-12);
    ck_assert(sl_cgroup_v1_cpus(100, 0) == 0.0);
    char why[64];
    double b = sl_cpu_budget(why, sizeof(why));
    ck_assert(b >= 0.01 && b <= 4096);
    ck_assert(why[0] != '\0');
    char model[128];
    sl_cpu_model(model, sizeof(model));
    ck_assert(model[0] != '\0');
}
END_TEST

/* A file under root, its directories made on the way. */
static void put(const char *root, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            (void)mkdir(path, 0755);
            *p = '/';
        }
    }
    ck_assert_int_eq(fx_write_file(path, text, strlen(text)), 0);
}

/* sl_cpu_budget_read against fake trees: "unknown" (no cgroup of ours
 * readable: a quota may hide) is told from "affinity" (read, no quota). */
static sl_budget_t budget_in(const char *const *files)
{
    char root[FX_TMPDIR_LEN];
    ck_assert_int_eq(fx_mkdtemp(root), 0);
    for (size_t i = 0; files[i] != NULL; i += 2) {
        put(root, files[i], files[i + 1]);
    }
    sl_budget_t b;
    sl_cpu_budget_read(root, &b);
    fx_rmtree(root);
    return b;
}

START_TEST(test_budget_source)
{
    sl_budget_t aff;
    sl_cpu_budget_read("/nonexistent-root", &aff);
    ck_assert_int_eq(aff.src, SL_BUDGET_UNKNOWN); /* nothing at all */
    ck_assert(aff.cpus >= 1.0);
    ck_assert_str_eq(sl_budget_src_name(SL_BUDGET_UNKNOWN), "unknown");
    ck_assert_str_eq(sl_budget_src_name(SL_BUDGET_AFFINITY), "affinity");
    ck_assert_str_eq(sl_budget_src_name(SL_BUDGET_CGROUP), "cgroup");
    const double cpus = aff.cpus; /* the affinity mask's count */

    /* v1: our cgroup with a quarter of a CPU. */
    const char *v1q[] = {"proc/self/cgroup", "2:cpuacct:/\n1:cpu:/job\n0::/\n",
                         "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n",
                         "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n",
                         "sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "25000\n",
                         "sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000\n", NULL};
    sl_budget_t b = budget_in(v1q);
    ck_assert_int_eq(b.src, SL_BUDGET_CGROUP);
    ck_assert(fabs(b.cpus - 0.25) < 1e-12);
    ck_assert_str_eq(b.why, "cgroup v1 cfs quota");
    /* ... without a quota: read, no limit. */
    const char *v1n[] = {"proc/self/cgroup", "1:cpu,cpuacct:/job\n",
                         "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n",
                         "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n", NULL};
    b = budget_in(v1n);
    ck_assert_int_eq(b.src, SL_BUDGET_AFFINITY);
    ck_assert(b.cpus == cpus);
    /* Our cgroup is not under the mount (another mount namespace, a
     * container without a cgroup namespace) and its root has no quota:
     * unknown, not "no limit". */
    const char *v1h[] = {"proc/self/cgroup", "1:cpu:/job\n",
                         "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n",
                         "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n", NULL};
    b = budget_in(v1h);
    ck_assert_int_eq(b.src, SL_BUDGET_UNKNOWN);
    ck_assert(b.cpus == cpus);
    /* ... but a quota at the mount's root is the container's: known. */
    const char *v1r[] = {"proc/self/cgroup", "1:cpu:/docker/abc\n",
                         "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "50000\n",
                         "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n", NULL};
    b = budget_in(v1r);
    ck_assert_int_eq(b.src, SL_BUDGET_CGROUP);
    ck_assert(fabs(b.cpus - 0.5) < 1e-12);
    /* An empty /sys/fs/cgroup (a tmpfs over it): unknown. */
    const char *none[] = {"proc/self/cgroup", "1:cpu:/job\n0::/job\n",
                          "sys/fs/cgroup/README", "nothing here\n", NULL};
    b = budget_in(none);
    ck_assert_int_eq(b.src, SL_BUDGET_UNKNOWN);
    /* No /proc/self/cgroup: unknown. */
    const char *noproc[] = {"sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n",
                            "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n", NULL};
    b = budget_in(noproc);
    ck_assert_int_eq(b.src, SL_BUDGET_UNKNOWN);

    /* v2: the quota of an ancestor applies; our directory is there. */
    const char *v2q[] = {"proc/self/cgroup", "0::/a/b\n",
                         "sys/fs/cgroup/cgroup.controllers", "cpu memory\n",
                         "sys/fs/cgroup/a/cgroup.controllers", "cpu\n",
                         "sys/fs/cgroup/a/cpu.max", "50000 100000\n",
                         "sys/fs/cgroup/a/b/cgroup.controllers", "\n",
                         "sys/fs/cgroup/a/b/cpu.max", "max 100000\n", NULL};
    b = budget_in(v2q);
    ck_assert_int_eq(b.src, SL_BUDGET_CGROUP);
    ck_assert(fabs(b.cpus - 0.5) < 1e-12);
    ck_assert_str_eq(b.why, "cgroup v2 cpu.max");
    const char *v2n[] = {"proc/self/cgroup", "0::/a/b\n",
                         "sys/fs/cgroup/cgroup.controllers", "cpu memory\n",
                         "sys/fs/cgroup/a/b/cgroup.controllers", "\n", NULL};
    b = budget_in(v2n);
    ck_assert_int_eq(b.src, SL_BUDGET_AFFINITY);
    /* v2, our directory missing: unknown. */
    const char *v2h[] = {"proc/self/cgroup", "0::/a/b\n",
                         "sys/fs/cgroup/cgroup.controllers", "cpu memory\n", NULL};
    b = budget_in(v2h);
    ck_assert_int_eq(b.src, SL_BUDGET_UNKNOWN);
    /* Hybrid: the cpu controller is v1's; a visible v2 tree does not make
     * a hidden v1 cgroup known. */
    const char *hyb[] = {"proc/self/cgroup", "1:cpu:/job\n0::/\n",
                         "sys/fs/cgroup/cgroup.controllers", "\n", NULL};
    b = budget_in(hyb);
    ck_assert_int_eq(b.src, SL_BUDGET_UNKNOWN);
    /* The real one reads something sane. */
    sl_cpu_budget_read(NULL, &b);
    ck_assert(b.cpus >= 0.01 && b.src < SL_BUDGET__COUNT);
}
END_TEST

START_TEST(test_cost_hash)
{
    sl_spec_t a;
    sl_spec_t b;
    char err[512];
    ck_assert_int_eq(sl_spec_parse("t", SPEC, strlen(SPEC), &a, err, sizeof(err)), 0);
    b = a;
    b.epochs = 90;
    b.seed = 7;
    b.offload = SL_OFFLOAD_FASTFLOW;
    b.batch_size = 256;
    ck_assert_uint_eq(sl_spec_cost_hash(&a, 1), sl_spec_cost_hash(&b, 1));
    ck_assert_uint_ne(sl_spec_cost_hash(&a, 1), sl_spec_cost_hash(&a, 2));
    b = a;
    b.stages[1].size_h = b.stages[1].size_w = 64;
    ck_assert_uint_ne(sl_spec_cost_hash(&a, 1), sl_spec_cost_hash(&b, 1));
    ck_assert(sl_spec_cost_hash(&a, 1) < (1ull << 53));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("costmodel");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_model_exact);
    tcase_add_test(tc, test_features);
    tcase_add_test(tc, test_profile_run);
    tcase_add_test(tc, test_profile_codec);
    tcase_add_test(tc, test_profile_full_decode_model);
    tcase_add_test(tc, test_profile_budget);
    tcase_add_test(tc, test_pick);
    tcase_add_test(tc, test_cgroup_parsers);
    tcase_add_test(tc, test_cpuset_and_machine);
    tcase_add_test(tc, test_cost_hash);
    tcase_add_test(tc, test_budget_source);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
