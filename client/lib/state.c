/* state: saving a rank's position and resuming from the states of every
 * rank (client/lib/state.h). */
#include "client/lib/state.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "common/base/sha256.h"
#include "client/lib/state_mix.h"
#include "client/lib/taken.h"
#include "client/lib/url_pins.h"
#include "common/base/err.h"
#include "common/order/ranks.h"
#include "common/spec/resume.h"

#define MAGIC "SLUICE-STATE "

/* What identifies the run's samples: the spec without what a resume may
 * change (rank, world size, epochs, the resume section) or what does not
 * change a sample (offload, compression, name); neutral: nor a mix's
 * weights (state_mix.h). */
static int spec_identity(const sl_spec_t *spec, bool neutral, char hex[65])
{
    sl_spec_t *c = malloc(sizeof(*c));
    if (c == NULL || sl_spec_copy(c, spec) < 0) {
        free(c);
        return -ENOMEM;
    }
    c->world_size = 1;
    c->rank = 0;
    c->epochs = 1;
    sl_resume_free(c->resume);
    c->resume = NULL;
    c->offload = SL_OFFLOAD_AUTO;
    c->split = 0;
    c->local_share = 0;
    c->compress = SL_COMPRESS_OFF;
    c->name[0] = '\0';
    if (neutral) {
        cl_state_mix_neutral(c);
    }
    char *json = sl_spec_to_json(c);
    sl_spec_clear(c);
    free(c);
    if (json == NULL) {
        return -ENOMEM;
    }
    sl_sha256_hex(json, strlen(json), hex);
    free(json);
    return 0;
}

/* The job's identity as a state names it: the spec's hash and the source's
 * fingerprint. 0 or -ENOMEM. */
static int identity(const sluice_job_t *job, char spec_hex[65], char fp[17])
{
    snprintf(fp, 17, "%016" PRIx64, sl_source_fingerprint(job->src));
    return spec_identity(&job->spec, false, spec_hex);
}

static void mac_hex(const char *key, size_t keylen, const char *data, size_t n, char hex[65])
{
    uint8_t d[32];
    if (key != NULL && keylen > 0) {
        sl_hmac_sha256(key, keylen, data, n, d);
    } else {
        sl_sha256_t s;
        sl_sha256_init(&s);
        sl_sha256_update(&s, data, n);
        sl_sha256_final(&s, d);
    }
    for (int i = 0; i < 32; i++) {
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    }
}

/* ------------------------------------------------------------ save */

/* The job's URL versions (url_pins.h) into o as "url_pins", when it has
 * any: an older sluice ignores the key (and resumes without the check), a
 * state without it resumes with an empty table, so the version stays 1. */
static int add_pins(const sluice_job_t *job, json_t *o)
{
    if (job->pins == NULL || cl_upins_count(job->pins) == 0) {
        return 0;
    }
    char *hex;
    size_t len;
    if (cl_upins_save(job->pins, &hex, &len) < 0) {
        return -ENOMEM;
    }
    json_t *s = json_stringn(hex, len);
    free(hex);
    return s != NULL && json_object_set_new(o, "url_pins", s) == 0 ? 0 : -ENOMEM;
}

/* The loop's consumption of each epoch it took part of, as JSON. */
static json_t *taken_json(const sluice_job_t *job, const cl_taken_t *t)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < t->nep; i++) {
        const cl_taken_epoch_t *e = &t->ep[i];
        uint64_t live = sl_spec_live_positions(&job->spec, job->num_samples, e->epoch);
        json_t *runs = json_array();
        if (runs == NULL) {
            json_decref(a);
            return NULL;
        }
        for (size_t k = 0; e->complete ? k < 1 : k < e->n; k++) {
            uint64_t b = e->complete ? 0 : e->r[k].begin, end = e->complete ? live : e->r[k].end;
            end = end < live ? end : live; /* holes are nobody's samples */
            if (b < end && json_array_append_new(runs, json_pack("[I,I]", (json_int_t)b,
                                                                 (json_int_t)end)) < 0) {
                json_decref(runs);
                json_decref(a);
                return NULL;
            }
        }
        if (json_array_append_new(a, json_pack("{s:I,s:o}", "epoch", (json_int_t)e->epoch,
                                               "runs", runs)) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* A mixed job's weights and its hash without them (state_mix.h). */
static int add_mix(const sluice_job_t *job, json_t *o)
{
    char hex[65];
    if (spec_identity(&job->spec, true, hex) < 0) {
        return -ENOMEM;
    }
    json_t *m = cl_state_mix_json(&job->spec);
    if (m == NULL || json_object_set_new(o, "mix", m) < 0 ||
        json_object_set_new(o, "spec_data", json_string(hex)) < 0) {
        return -ENOMEM;
    }
    return 0;
}

int cl_state_save(const sluice_job_t *job, const char *key, size_t keylen, char **ret,
                  size_t *ret_len, char *err, size_t errlen)
{
    const cl_taken_t *t = cl_line_taken(job->consumer.line);
    if (t->overflow) {
        return sl_err(err, errlen, -E2BIG,
                      "state: the consumed positions do not fit a state (more than %d "
                      "epochs in part or %d ranges in one)",
                      CL_TAKEN_MAX_EPOCHS, CL_TAKEN_MAX_RANGES);
    }
    char spec_hex[65], fp[17];
    if (identity(job, spec_hex, fp) < 0) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    json_t *resume = job->spec.resume != NULL ? sl_resume_to_json(job->spec.resume) : json_null();
    json_t *taken = taken_json(job, t);
    json_t *o = resume != NULL && taken != NULL
                    ? json_pack("{s:s,s:i,s:s,s:I,s:s,s:s,s:I,s:I,s:i,s:i,s:o,s:o}", "format",
                                "sluice-state", "version", CL_STATE_VERSION, "spec", spec_hex,
                                "samples", (json_int_t)job->num_samples, "fingerprint", fp,
                                "padding", job->spec.rank_padding == SL_RANK_PAD ? "pad" : "drop",
                                "end_epoch", (json_int_t)job->end_epoch, "done_below",
                                (json_int_t)t->done_below, "world_size",
                                (int)job->spec.world_size, "rank", (int)job->spec.rank, "resume",
                                resume, "taken", taken)
                    : NULL;
    if (o == NULL) {
        json_decref(resume);
        json_decref(taken);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    if ((job->spec.mix != NULL && add_mix(job, o) < 0) || add_pins(job, o) < 0) {
        json_decref(o);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    char *body = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    size_t cap = body != NULL ? strlen(body) + 128 : 0;
    char *out = body != NULL ? malloc(cap) : NULL;
    if (out == NULL) {
        free(body);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int n = snprintf(out, cap, MAGIC "%d\n%s\n", CL_STATE_VERSION, body);
    free(body);
    char mac[65];
    mac_hex(key, keylen, out, (size_t)n, mac);
    n += snprintf(out + n, cap - (size_t)n, "%s %s\n", keylen > 0 ? "hmac-sha256" : "sha256", mac);
    *ret = out;
    *ret_len = (size_t)n;
    return 0;
}

/* ------------------------------------------------------------ load */

typedef struct rank_state_s {
    json_t *root;
    uint32_t world, rank;
    uint64_t done_below;
    bool reweighted; /* a mix saved under other weights (state_mix.h) */
} rank_state_t;

/* Checks the frame and the MAC of state i; parses its body. */
static int parse_one(const char *buf, size_t len, unsigned i, const char *key, size_t keylen,
                     json_t **ret, char *err, size_t errlen)
{
    if (buf == NULL || len > CL_STATE_MAX_BYTES || len < sizeof(MAGIC) ||
        memcmp(buf, MAGIC, sizeof(MAGIC) - 1) != 0) {
        return sl_err(err, errlen, -EINVAL, "state %u: not a sluice state (no \"%s\" line)", i,
                      MAGIC "1");
    }
    long version = strtol(buf + sizeof(MAGIC) - 1, NULL, 10);
    if (version != CL_STATE_VERSION) {
        return sl_err(err, errlen, -EINVAL,
                      "state %u: version %ld; this sluice reads version %d (a newer sluice "
                      "saved it?)",
                      i, version, CL_STATE_VERSION);
    }
    /* The last line is the MAC over everything before it. */
    size_t end = len;
    while (end > 0 && buf[end - 1] == '\n') {
        end--;
    }
    size_t ls = end;
    while (ls > 0 && buf[ls - 1] != '\n') {
        ls--;
    }
    const char *line = buf + ls;
    size_t llen = end - ls;
    int hmac = llen == 12 + 64 && memcmp(line, "hmac-sha256 ", 12) == 0;
    int plain = llen == 7 + 64 && memcmp(line, "sha256 ", 7) == 0;
    if (ls == 0 || (!hmac && !plain)) {
        return sl_err(err, errlen, -EINVAL, "state %u: damaged (no checksum line at its end)", i);
    }
    if (keylen > 0 && !hmac) {
        return sl_err(err, errlen, -EINVAL,
                      "state %u: not signed, and this job has a token: only states signed with "
                      "the cluster token are accepted",
                      i);
    }
    if (hmac && keylen == 0) {
        return sl_err(err, errlen, -EINVAL,
                      "state %u: signed with a cluster token; give the job that token "
                      "(--token-file) to verify it",
                      i);
    }
    char want[65];
    mac_hex(hmac ? key : NULL, hmac ? keylen : 0, buf, ls, want);
    uint8_t diff = 0;
    for (int k = 0; k < 64; k++) {
        diff |= (uint8_t)(want[k] ^ line[llen - 64 + k]);
    }
    if (diff != 0) {
        return sl_err(err, errlen, -EINVAL, "state %u: %s", i,
                      hmac ? "the signature does not match (damaged, or signed with another "
                             "token)"
                           : "the checksum does not match (damaged)");
    }
    const char *body = memchr(buf, '\n', ls);
    json_error_t jerr;
    json_t *root = body != NULL ? json_loadb(body + 1, ls - (size_t)(body + 1 - buf), 0, &jerr)
                                : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        return sl_err(err, errlen, -EINVAL, "state %u: damaged (its body is not a JSON object)",
                      i);
    }
    *ret = root;
    return 0;
}

static int get_u64(const json_t *o, const char *k, uint64_t *out)
{
    const json_t *v = json_object_get(o, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        return -EINVAL;
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* Checks that state i belongs to this job's spec (its identity spec_hex)
 * and source (fingerprint fp). */
static int check_one(const sluice_job_t *job, const char *spec_hex, const char *fp,
                     const json_t *o, unsigned i, rank_state_t *rs, char *err, size_t errlen)
{
    const char *spec = json_string_value(json_object_get(o, "spec"));
    const char *sfp = json_string_value(json_object_get(o, "fingerprint"));
    const char *pad = json_string_value(json_object_get(o, "padding"));
    uint64_t samples, world, rank, done;
    if (spec == NULL || sfp == NULL || pad == NULL || get_u64(o, "samples", &samples) < 0 ||
        get_u64(o, "world_size", &world) < 0 || get_u64(o, "rank", &rank) < 0 ||
        get_u64(o, "done_below", &done) < 0 || world == 0 || world > SL_SPEC_WORLD_MAX ||
        rank >= world || !json_is_array(json_object_get(o, "taken"))) {
        return sl_err(err, errlen, -EINVAL, "state %u: damaged (a field is missing or wrong)",
                      i);
    }
    bool reweighted = false;
    if (strcmp(spec, spec_hex) != 0 && job->spec.mix != NULL) {
        /* Only the weights differ? Then each source resumes where it was. */
        const char *data = json_string_value(json_object_get(o, "spec_data"));
        char hex[65];
        if (spec_identity(&job->spec, true, hex) < 0) {
            return sl_err(err, errlen, -ENOMEM, "out of memory");
        }
        reweighted = data != NULL && strcmp(data, hex) == 0;
    }
    if (strcmp(spec, spec_hex) != 0 && !reweighted) {
        return sl_err(err, errlen, -EINVAL,
                      "state %u: saved by a job of another spec (spec hash %.16s, this one "
                      "%.16s): resume with the spec and seed it was saved with",
                      i, spec, spec_hex);
    }
    if (samples != job->num_samples || strcmp(sfp, fp) != 0) {
        return sl_err(err, errlen, -EINVAL,
                      "state %u: saved over another source (%" PRIu64 " samples, fingerprint "
                      "%s; this one %" PRIu64 ", %s)",
                      i, samples, sfp, job->num_samples, fp);
    }
    if (strcmp(pad, job->spec.rank_padding == SL_RANK_PAD ? "pad" : "drop") != 0) {
        return sl_err(err, errlen, -EINVAL, "state %u: saved with rank_padding \"%s\"", i, pad);
    }
    *rs = (rank_state_t){.world = (uint32_t)world,
                         .rank = (uint32_t)rank,
                         .done_below = done,
                         .reweighted = reweighted};
    return 0;
}

/* State i's URL versions, if it saved any, into the job's table as saved
 * ones (url_pins.h). */
static int load_pins(sluice_job_t *job, const json_t *o, unsigned i, char *err, size_t errlen)
{
    const json_t *v = json_object_get(o, "url_pins");
    if (v == NULL) {
        return 0;
    }
    if (!json_is_string(v)) {
        return sl_err(err, errlen, -EINVAL, "state %u: damaged (its \"url_pins\" is not a string)",
                      i);
    }
    char msg[256];
    int rc = cl_upins_load(job->pins, json_string_value(v), json_string_length(v), msg,
                           sizeof(msg));
    if (rc == -ESTALE) {
        return sl_err(err, errlen, -EINVAL, "state %u: saved over another source: %s", i, msg);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "state %u: damaged: %s", i, msg);
    }
    return 0;
}

/* Every state of one run: the same world and resume history, each rank once. */
static int check_set(rank_state_t *rs, unsigned n, char *err, size_t errlen)
{
    uint32_t world = rs[0].world;
    const json_t *hist = json_object_get(rs[0].root, "resume");
    uint8_t *have = calloc(world, 1);
    if (have == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = 0;
    for (unsigned i = 0; rc == 0 && i < n; i++) {
        if (rs[i].world != world || !json_equal(json_object_get(rs[i].root, "resume"), hist) ||
            rs[i].reweighted != rs[0].reweighted ||
            (rs[0].reweighted &&
             !json_equal(json_object_get(rs[i].root, "mix"), json_object_get(rs[0].root, "mix")))) {
            rc = sl_err(err, errlen, -EINVAL,
                        "state %u: from another run than state 0 (world size %u vs %u, or "
                        "another resume history or mix)",
                        i, rs[i].world, world);
        } else if (have[rs[i].rank]++) {
            rc = sl_err(err, errlen, -EINVAL, "state %u: rank %u's state is given twice", i,
                        rs[i].rank);
        }
    }
    for (uint32_t r = 0; rc == 0 && r < world; r++) {
        if (!have[r]) {
            rc = sl_err(err, errlen, -EINVAL,
                        "states: rank %u of %u is missing (resuming needs the state of every "
                        "rank that saved one)",
                        r, world);
        }
    }
    free(have);
    return rc;
}

/* The runs rank (of the saving job) consumed of epoch, as a generation's runs. */
static int add_rank_runs(const sl_spec_t *saved, uint64_t n, const rank_state_t *rs,
                         uint64_t epoch, sl_resume_gen_t *g, size_t *cap)
{
    uint64_t live = sl_resume_live_positions(saved, n, epoch, rs->world, rs->rank);
    const json_t *taken = json_object_get(rs->root, "taken");
    const json_t *runs = NULL;
    if (rs->done_below > epoch) {
        runs = NULL; /* the whole share */
    } else {
        size_t i;
        const json_t *e;
        json_array_foreach(taken, i, e)
        {
            uint64_t ep;
            if (get_u64(e, "epoch", &ep) == 0 && ep == epoch) {
                runs = json_object_get(e, "runs");
                if (!json_is_array(runs)) {
                    return -EINVAL;
                }
                break;
            }
        }
        if (runs == NULL) {
            return 0; /* nothing of this epoch */
        }
    }
    size_t nr = runs != NULL ? json_array_size(runs) : 1;
    if (g->nruns + nr > SL_RESUME_MAX_RUNS) {
        return -E2BIG;
    }
    if (g->nruns + nr > *cap) {
        size_t c = (g->nruns + nr) * 2;
        sl_resume_run_t *p = realloc(g->runs, c * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        g->runs = p;
        *cap = c;
    }
    uint64_t last = 0;
    for (size_t k = 0; k < nr; k++) {
        json_int_t b = 0, e = (json_int_t)live;
        if (runs != NULL && json_unpack(json_array_get(runs, k), "[II]", &b, &e) < 0) {
            return -EINVAL;
        }
        if (b < (json_int_t)last || e <= b || (uint64_t)e > live) {
            return -EINVAL; /* unsorted, empty or past the share */
        }
        g->runs[g->nruns++] = (sl_resume_run_t){rs->rank, (uint64_t)b, (uint64_t)e};
        last = (uint64_t)e;
    }
    return 0;
}

/* The merged history of epoch: the saving job's, plus what its ranks took. */
static int merge_epoch(const sl_spec_t *saved, uint64_t n, rank_state_t *rs, unsigned ns,
                       uint64_t epoch, sl_resume_epoch_t *out)
{
    const sl_resume_epoch_t *hist = sl_resume_find(saved->resume, epoch);
    uint32_t nh = hist != NULL ? hist->ngens : 0;
    if (nh + 1 > SL_RESUME_MAX_GENS) {
        return -E2BIG;
    }
    out->epoch = epoch;
    out->gens = calloc(nh + 1, sizeof(*out->gens));
    if (out->gens == NULL) {
        return -ENOMEM;
    }
    for (uint32_t g = 0; g < nh; g++) {
        sl_resume_gen_t *d = &out->gens[g];
        d->world = hist->gens[g].world;
        d->runs = malloc((hist->gens[g].nruns > 0 ? hist->gens[g].nruns : 1) * sizeof(*d->runs));
        if (d->runs == NULL) {
            out->ngens = g;
            return -ENOMEM;
        }
        d->nruns = hist->gens[g].nruns;
        memcpy(d->runs, hist->gens[g].runs, d->nruns * sizeof(*d->runs));
    }
    out->ngens = nh + 1;
    if (hist != NULL && hist->carry != NULL &&
        (out->carry = sl_resume_carry_dup(hist->carry)) == NULL) {
        return -ENOMEM; /* a weight change before: its draws stay the epoch's head */
    }
    sl_resume_gen_t *g = &out->gens[nh];
    g->world = rs[0].world;
    size_t cap = 0;
    /* Ranks in order, so the runs are sorted by rank. */
    for (uint32_t r = 0; r < rs[0].world; r++) {
        for (unsigned i = 0; i < ns; i++) {
            if (rs[i].rank == r) {
                int rc = add_rank_runs(saved, n, &rs[i], epoch, g, &cap);
                if (rc < 0) {
                    return rc;
                }
            }
        }
    }
    if (g->nruns == 0) {
        free(g->runs);
        g->runs = NULL;
        out->ngens = nh; /* nothing taken: the history alone (or a fresh epoch) */
    }
    return 0;
}

static int merge(sluice_job_t *job, rank_state_t *rs, unsigned ns, uint64_t from,
                 sl_resume_t **ret, char *err, size_t errlen)
{
    /* The saving job's spec: this one with the history it ran with. */
    sl_resume_t *hist = NULL;
    const json_t *h = json_object_get(rs[0].root, "resume");
    if (!json_is_null(h)) {
        char msg[256];
        int rc = sl_resume_from_json(h, SL_SPEC_WORLD_MAX, &hist, msg, sizeof(msg));
        if (rc < 0) {
            return sl_err(err, errlen, rc, "state 0: damaged: %s", msg);
        }
    }
    sl_spec_t *saved = calloc(1, sizeof(*saved)); /* zeroed: owns nothing until copied */
    sl_resume_t *r = calloc(1, sizeof(*r));
    int rc = saved != NULL && r != NULL ? 0 : -ENOMEM;
    if (rc == 0) {
        rc = sl_spec_copy(saved, &job->spec);
    }
    bool named = false; /* err already says what is wrong */
    if (rc == 0 && rs[0].reweighted &&
        cl_state_mix_set(saved, json_object_get(rs[0].root, "mix")) < 0) {
        rc = sl_err(err, errlen, -EINVAL, "state 0: damaged (its \"mix\" weights)");
        named = true;
    }
    if (rc == 0) {
        sl_resume_free(saved->resume);
        saved->resume = hist; /* borrowed: freed below */
        rc = sl_resume_check(saved, job->num_samples, err, errlen);
    }
    /* Epochs any rank took part of, or the history has. */
    uint64_t last = from;
    for (unsigned i = 0; rc == 0 && i < ns; i++) {
        size_t k;
        const json_t *e;
        json_array_foreach(json_object_get(rs[i].root, "taken"), k, e)
        {
            uint64_t ep;
            if (get_u64(e, "epoch", &ep) == 0 && ep > last) {
                last = ep;
            }
        }
    }
    for (unsigned i = 0; rc == 0 && i < ns; i++) {
        /* A rank ahead of the slowest: every epoch it finished is in part. */
        if (rs[i].done_below > 0 && rs[i].done_below - 1 > last) {
            last = rs[i].done_below - 1;
        }
    }
    for (uint32_t k = 0; hist != NULL && k < hist->nepochs; k++) {
        last = hist->ep[k].epoch > last ? hist->ep[k].epoch : last;
    }
    if (rc == 0 && last - from >= SL_RESUME_MAX_EPOCHS) {
        rc = sl_err(err, errlen, -EINVAL, "states: more than %d epochs in part",
                    SL_RESUME_MAX_EPOCHS);
    }
    if (rc == 0 && (r->ep = calloc(last - from + 1, sizeof(*r->ep))) == NULL) {
        rc = -ENOMEM;
    }
    for (uint64_t e = from; rc == 0 && e <= last; e++) {
        sl_resume_epoch_t *out = &r->ep[r->nepochs];
        rc = merge_epoch(saved, job->num_samples, rs, ns, e, out);
        if (rc == 0 && out->ngens == 0) {
            free(out->gens); /* untouched: a fresh epoch */
            out->gens = NULL;
        } else if (rc == 0 || out->gens != NULL) {
            r->nepochs++;
        }
    }
    if (rc == 0 && rs[0].reweighted && r->nepochs > 0) {
        saved->resume = r; /* the old weights' whole history: what each source took */
        rc = cl_state_mix_carry(job, saved, r);
        if (rc == -EINVAL || rc == -E2BIG) {
            rc = sl_err(err, errlen, -EINVAL,
                        "states: the consumed positions do not add up under the weights they "
                        "were saved with (damaged?), or name more than %d draws' runs",
                        SL_RESUME_MAX_RUNS);
        }
    } else if (!named && (rc == -EINVAL || rc == -E2BIG)) {
        rc = sl_err(err, errlen, -EINVAL,
                    "states: a rank's consumed positions are out of order or beyond its share "
                    "(damaged, or saved over another source)");
    } else if (rc == -ENOMEM) {
        rc = sl_err(err, errlen, -ENOMEM, "out of memory merging states");
    }
    if (saved != NULL) {
        saved->resume = NULL;
    }
    sl_spec_clear(saved);
    free(saved);
    sl_resume_free(hist);
    if (rc == 0 && r->nepochs > 0) {
        *ret = r;
    } else {
        sl_resume_free(r);
    }
    return rc;
}

int cl_state_apply(sluice_job_t *job, const sluice_options_t *opts, const char *key,
                   size_t keylen, char *err, size_t errlen)
{
    unsigned ns = opts->n_resume_states;
    if (ns == 0) {
        return 0;
    }
    if (opts->resume_states == NULL || opts->resume_state_lens == NULL ||
        ns > SL_SPEC_WORLD_MAX) {
        return sl_err(err, errlen, -EINVAL, "resume: %u states without their buffers (or more "
                                            "than %d)",
                      ns, SL_SPEC_WORLD_MAX);
    }
    char spec_hex[65], fp[17];
    rank_state_t *rs = calloc(ns, sizeof(*rs));
    if (rs == NULL || identity(job, spec_hex, fp) < 0) {
        free(rs);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = 0;
    for (unsigned i = 0; rc == 0 && i < ns; i++) {
        rc = parse_one(opts->resume_states[i], opts->resume_state_lens[i], i, key, keylen,
                       &rs[i].root, err, errlen);
        json_t *root = rs[i].root;
        if (rc == 0) {
            rc = check_one(job, spec_hex, fp, root, i, &rs[i], err, errlen);
            rs[i].root = root;
        }
        if (rc == 0 && job->pins != NULL) {
            rc = load_pins(job, root, i, err, errlen);
        }
    }
    if (rc == 0) {
        rc = check_set(rs, ns, err, errlen);
    }
    uint64_t from = UINT64_MAX;
    for (unsigned i = 0; rc == 0 && i < ns; i++) {
        from = rs[i].done_below < from ? rs[i].done_below : from;
    }
    if (rc == 0 && from >= job->end_epoch) {
        rc = sl_err(err, errlen, -ERANGE,
                    "resume: the states are at epoch %" PRIu64 ", the job ends before epoch "
                    "%" PRIu64 ": nothing is left to run",
                    from, job->end_epoch);
    }
    sl_resume_t *r = NULL;
    if (rc == 0) {
        rc = merge(job, rs, ns, from, &r, err, errlen);
    }
    if (rc == 0) {
        sl_resume_free(job->spec.resume); /* the rest of the spec stays */
        job->spec.resume = r;
        job->first_epoch = from;
        job->consumer.local_epoch = from;
        job->spec.epochs = (uint32_t)(job->end_epoch - from);
        rc = sl_resume_check(&job->spec, job->num_samples, err, errlen);
    }
    for (unsigned i = 0; i < ns; i++) {
        json_decref(rs[i].root);
    }
    free(rs);
    return rc;
}

int sluice_state_save(sluice_job_t *job, char **ret, size_t *ret_len)
{
    if (job == NULL || ret == NULL || ret_len == NULL || job->consumer.line == NULL) {
        return -EINVAL; /* no line: opened by sluice_describe, nothing consumed */
    }
    return cl_state_save(job, job->token, strlen(job->token), ret, ret_len,
                         job->consumer.last_error, sizeof(job->consumer.last_error));
}

void sluice_state_free(char *state) { free(state); }
