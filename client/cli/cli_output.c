/* What every run prints: digests, the JSON summary, the text summary. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli/cli.h"
#include "common/base/sha256.h"
#include "client/lib/stats.h"

/* A record's key as one digest-file word: bytes that would split the line
 * or the word (whitespace, control characters) become '?'. */
static void key_word(const char *key, char *out, size_t outlen)
{
    size_t i = 0;
    for (; key[i] != '\0' && i + 1 < outlen; i++) {
        unsigned char ch = (unsigned char)key[i];
        out[i] = ch <= ' ' || ch == 0x7f ? '?' : (char)ch;
    }
    out[i] = '\0';
    if (i == 0 && outlen > 1) {
        snprintf(out, outlen, "-");
    }
}

int sl_cli_write_digests(FILE *f, sluice_job_t *job, sluice_batch_t *batch)
{
    const sluice_records_t *r = NULL;
    if (batch->dtype == SLUICE_DT_RECORD && sluice_batch_records(job, batch, &r) < 0) {
        return -1;
    }
    for (uint32_t i = 0; i < batch->n; i++) {
        char hex[65], third[512];
        sl_sha256_hex(batch->data + batch->offsets[i], batch->sizes[i], hex);
        if (r != NULL) {
            key_word(r->keys[i], third, sizeof(third));
        } else {
            snprintf(third, sizeof(third), "%" PRId32, batch->labels[i]);
        }
        if (fprintf(f, "%" PRIu64 " %" PRIu64 " %s %s\n", batch->epoch, batch->indices[i],
                    third, hex) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Per-unit cost measured on this host: the profile the planner reads. */
static json_t *units_json(const cl_job_info_t *info)
{
    json_t *units = json_array();
    for (uint32_t u = 0; u < info->nunits; u++) {
        const sl_unit_stat_t *us = &info->units[u];
        json_t *j = json_object();
        double ns = us->samples ? (double)us->samples : 1.0;
        json_object_set_new(j, "name", json_string(info->unit_names[u]));
        json_object_set_new(j, "samples", json_integer((json_int_t)us->samples));
        json_object_set_new(j, "cpu_ms_per_sample", json_real(us->cpu_sec * 1e3 / ns));
        json_object_set_new(j, "out_bytes_per_sample", json_real((double)us->out_bytes / ns));
        double sub = 0;
        for (int k = 0; k < SL_SUB__COUNT; k++) {
            sub += us->sub_sec[k];
        }
        if (sub > 0) {
            /* Only units that time their parts (the fused decode + crop). */
            json_object_set_new(
                j, "substages",
                json_pack("{s:f, s:f, s:f, s:f}", "setup_ms", us->sub_sec[SL_SUB_SETUP] * 1e3 / ns,
                          "skip_ms", us->sub_sec[SL_SUB_SKIP] * 1e3 / ns, "rows_ms",
                          us->sub_sec[SL_SUB_ROWS] * 1e3 / ns, "resample_ms",
                          us->sub_sec[SL_SUB_RESAMPLE] * 1e3 / ns));
        }
        json_array_append_new(units, j);
    }
    return units;
}

/* Text from the file system or a peer: json_string refuses invalid UTF-8. */
static json_t *text_json(const char *s)
{
    json_t *v = json_string(s);
    return v != NULL ? v : json_string("(not utf-8)");
}

/* The most recent skipped samples, oldest first. */
static json_t *recent_skips_json(const sluice_job_t *job)
{
    static sluice_skip_t k[SLUICE_RECENT_SKIPS]; /* 35 KB: off the stack; CLI thread only */
    int n = sluice_recent_skips(job, k, SLUICE_RECENT_SKIPS);
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *j = json_object();
        json_object_set_new(j, "epoch", json_integer((json_int_t)k[i].epoch));
        json_object_set_new(j, "index", json_integer((json_int_t)k[i].index));
        json_object_set_new(j, "reason", json_string(k[i].reason));
        json_object_set_new(j, "path", text_json(k[i].path));
        json_object_set_new(j, "detail", text_json(k[i].detail));
        json_array_append_new(a, j);
    }
    return a;
}

/* A mixed job's sources: name, target share, samples delivered, share. */
static json_t *mix_json(const sluice_job_t *job, const uint64_t *by_source)
{
    uint32_t n = sluice_mix_nsources(job);
    uint64_t total = 0;
    for (uint32_t j = 0; j < n && j < SL_CLI_MIX_MAX; j++) {
        total += by_source[j];
    }
    json_t *a = json_array();
    for (uint32_t j = 0; j < n && j < SL_CLI_MIX_MAX; j++) {
        json_array_append_new(a, json_pack("{s:s, s:f, s:I, s:f}", "name",
                                           sluice_mix_source_name(job, j), "weight_share",
                                           sluice_mix_source_share(job, j), "samples",
                                           (json_int_t)by_source[j], "share",
                                           total > 0 ? (double)by_source[j] / (double)total : 0.0));
    }
    return json_pack("{s:o, s:I}", "sources", a, "samples_per_epoch",
                     (json_int_t)sluice_mix_samples_per_epoch(job));
}

/* The prefix cache (docs/cache.md): this host's own samples, and under
 * "workers" the job's workers' as the dispatcher last said. */
static json_t *cache_json(const cl_job_info_t *info)
{
    json_t *c = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "prefix_units",
                          (int)info->cache_prefix, "hits", (json_int_t)info->cache_hits, "misses",
                          (json_int_t)info->cache_misses, "bytes_read",
                          (json_int_t)info->cache_bytes_read, "bytes_written",
                          (json_int_t)info->cache_bytes_written, "evictions",
                          (json_int_t)info->cache_evictions, "bytes_evicted",
                          (json_int_t)info->cache_bytes_evicted, "store_errors",
                          (json_int_t)info->cache_store_errors, "corrupt",
                          (json_int_t)info->cache_corrupt);
    json_object_set_new(c, "waited", json_integer((json_int_t)info->cache_waited));
    json_object_set_new(c, "claim_timeouts", json_integer((json_int_t)info->cache_claim_timeouts));
    const uint64_t *w = info->workers_cache;
    json_object_set_new(c, "workers",
                        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "hits",
                                  (json_int_t)w[0], "misses", (json_int_t)w[1], "bytes_read",
                                  (json_int_t)w[2], "bytes_written", (json_int_t)w[3], "evictions",
                                  (json_int_t)w[4], "bytes_evicted", (json_int_t)w[7],
                                  "store_errors", (json_int_t)w[5], "corrupt", (json_int_t)w[6]));
    return c;
}

/* The short-job guard's verdict and estimates (sluice.h guard_*). */
static json_t *guard_json(const sluice_stats_t *st)
{
    json_t *g = json_object();
    json_object_set_new(g, "choice", json_string(st->guard_choice));
    json_object_set_new(g, "reason", json_string(st->guard_reason));
    json_object_set_new(g, "rate_off", json_real(st->guard_rate_off));
    json_object_set_new(g, "rate_all", json_real(st->guard_rate_all));
    json_object_set_new(g, "rate_both", json_real(st->guard_rate_both));
    json_object_set_new(g, "profile_seconds", json_real(st->guard_profile_sec));
    json_object_set_new(g, "gain_seconds", json_real(st->guard_gain_sec));
    json_object_set_new(g, "seconds", json_real(st->guard_seconds));
    return g;
}

void sl_cli_print_json(const sluice_job_t *job, double seconds, const uint64_t *by_source)
{
    sluice_stats_t st;
    sluice_get_stats(job, &st);
    cl_job_info_t info;
    cl_job_info(job, &info);
    json_t *o = json_object();
    json_object_set_new(o, "samples", json_integer((json_int_t)st.delivered));
    json_t *sk = json_object();
    json_object_set_new(sk, "total", json_integer((json_int_t)st.skipped));
    json_t *reasons = json_object();
    /* Sized by the library: a reason past a fixed array would be dropped. */
    int max = sluice_skip_counts(job, NULL, NULL, 0);
    const char **names = max > 0 ? calloc((size_t)max, sizeof(*names)) : NULL;
    uint64_t *counts = max > 0 ? calloc((size_t)max, sizeof(*counts)) : NULL;
    int n = names != NULL && counts != NULL ? sluice_skip_counts(job, names, counts, max) : 0;
    for (int i = 0; i < n; i++) {
        if (counts[i] > 0) {
            json_object_set_new(reasons, names[i], json_integer((json_int_t)counts[i]));
        }
    }
    free(names);
    free(counts);
    json_object_set_new(sk, "reasons", reasons);
    if (info.first_skip[0] != '\0') {
        json_object_set_new(sk, "first", text_json(info.first_skip));
    }
    json_object_set_new(sk, "recent", recent_skips_json(job));
    json_object_set_new(o, "skipped", sk);
    if (info.failed_on[0] != '\0') {
        json_object_set_new(o, "failed_on", text_json(info.failed_on));
    }
    json_object_set_new(o, "duplicates_dropped", json_integer((json_int_t)st.duplicates_dropped));
    uint64_t pinned, unpinned;
    sluice_url_pins(job, &pinned, &unpinned);
    if (pinned + unpinned > 0) { /* URL images held to one version (docs/sources.md) */
        json_object_set_new(o, "url_pins",
                            json_pack("{s:I, s:I}", "pinned", (json_int_t)pinned, "unpinned",
                                      (json_int_t)unpinned));
    }
    json_object_set_new(o, "epochs", json_integer(info.epochs));
    if (by_source != NULL && sluice_mix_nsources(job) > 0) {
        json_object_set_new(o, "mix", mix_json(job, by_source));
    }
    json_object_set_new(o, "first_epoch", json_integer((json_int_t)st.first_epoch));
    json_object_set_new(o, "seconds", json_real(seconds));
    json_object_set_new(o, "samples_per_sec",
                        json_real(seconds > 0 ? (double)st.delivered / seconds : 0));
    json_object_set_new(o, "wait_seconds", json_real(st.wait_seconds));
    json_t *plan = json_object();
    json_object_set_new(plan, "mode", json_string(st.plan_mode));
    json_object_set_new(plan, "split", json_integer(st.plan_split));
    json_object_set_new(plan, "local_share", json_real(st.plan_local_share));
    json_object_set_new(plan, "compress", json_boolean(st.plan_compress));
    if (st.plan_version > 0 &&
        (strcmp(st.plan_mode, "auto") == 0 || strcmp(st.plan_mode, "fastflow") == 0)) {
        /* planner: its prediction, next to the measured rate (a fixed
         * plan has a version too, but nothing predicted) */
        json_object_set_new(plan, "version", json_integer(st.plan_version));
        json_object_set_new(plan, "predicted_samples_per_sec", json_real(st.plan_predicted));
        json_object_set_new(plan, "binding", json_string(st.plan_binding));
        json_object_set_new(plan, "profile_seconds", json_real(st.profile_seconds));
    }
    if (st.sample_costs[0] != '\0') {
        json_object_set_new(plan, "sample_costs", json_string(st.sample_costs));
    }
    if (st.guard_choice[0] != '\0') {
        json_object_set_new(plan, "short_job_guard", guard_json(&st));
    }
    json_object_set_new(o, "plan", plan);
    json_object_set_new(o, "cache", cache_json(&info));
    if (st.job_id != 0) {
        json_object_set_new(o, "job_id", json_integer((json_int_t)st.job_id));
    }
    if (st.fallback[0] != '\0') {
        json_object_set_new(o, "fallback", text_json(st.fallback));
    }
    if (st.step_imbalance > 0) {
        json_t *bal = json_pack("{s:f, s:f, s:f}", "step_load", st.step_load, "imbalance_mean",
                                st.step_imbalance, "imbalance_max", st.step_imbalance_max);
        if (bal != NULL && st.pack_fill > 0) {
            json_object_set_new(bal, "pack_fill", json_real(st.pack_fill));
            json_object_set_new(bal, "oversize", json_integer((json_int_t)st.pack_oversize));
        }
        json_object_set_new(o, "balance", bal);
    }
    json_t *src = json_object();
    json_object_set_new(src, "local", json_integer((json_int_t)st.from_local));
    json_object_set_new(src, "remote", json_integer((json_int_t)st.from_remote));
    json_object_set_new(o, "sources", src);
    json_object_set_new(o, "units", units_json(&info));
    char *s = json_dumps(o, JSON_COMPACT);
    if (s != NULL) {
        printf("%s\n", s);
        free(s);
    }
    json_decref(o);
}

void sl_cli_print_text(const sluice_job_t *job, double seconds)
{
    sluice_stats_t st;
    sluice_get_stats(job, &st);
    fprintf(stderr,
            "sluice: %" PRIu64 " samples in %.2f s (%.1f samples/s), %" PRIu64
            " skipped, %" PRIu64 " local / %" PRIu64 " remote, plan %s split=%u share=%.2f%s\n",
            st.delivered, seconds, seconds > 0 ? (double)st.delivered / seconds : 0, st.skipped,
            st.from_local, st.from_remote, st.plan_mode, st.plan_split, st.plan_local_share,
            st.plan_compress ? " +zstd" : "");
    if (st.plan_predicted > 0) {
        fprintf(stderr, "sluice: plan v%u predicted %.1f samples/s (bound by %s)\n",
                st.plan_version, st.plan_predicted, st.plan_binding);
    }
    cl_job_info_t info;
    cl_job_info(job, &info);
    if (info.failed_on[0] != '\0') {
        fprintf(stderr, "sluice: stopped at a bad sample (on_error \"fail\"): %s\n",
                info.failed_on);
    }
    if (info.first_skip[0] != '\0') {
        fprintf(stderr, "sluice: first skipped sample: %s\n", info.first_skip);
    }
    sluice_skip_t last;
    if (st.skipped > 1 && sluice_recent_skips(job, &last, 1) == 1) {
        fprintf(stderr, "sluice: last skipped sample: %s (--json lists the last %d)\n",
                last.detail, SLUICE_RECENT_SKIPS);
    }
}

void sl_cli_warn_fallback(const char *cmd, const sluice_job_t *job, int *warned)
{
    if (*warned) {
        return;
    }
    sluice_stats_t st;
    sluice_get_stats(job, &st);
    if (st.fallback[0] != '\0') {
        fprintf(stderr, "sluice %s: warning: the job's remote work runs on this host: %s\n",
                cmd, st.fallback);
        *warned = 1;
    }
}
