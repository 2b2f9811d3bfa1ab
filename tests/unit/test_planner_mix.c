/* test_planner_mix: a mixed job's per-source costs in the dispatcher's
 * planner (dispatcher/planner/planner_mix.c, docs/planner.md "Mixed jobs").
 *
 * Two record sources over stages decode_image + image_tiles: "images" costs
 * 10 ms to decode and 1 ms to tile, 100 KB encoded, 600 KB decoded, 800 KB
 * tiled; "text" costs nothing to decode or tile (it has no image) and is
 * 1 KB throughout. The client has 2 CPUs, one worker class of 2 threads at
 * the client's speed, 1 ns of receive CPU per byte; the training loop takes
 * 300 samples/s. Weights images:text 0.9:0.1, then from step 5 0.5:0.5,
 * from step 10 0.1:0.9.
 *
 * A source that costs nothing anywhere scales every resource's demand alike,
 * so against an unlimited consumer it would not move the split; what moves
 * it is that the client alone keeps up with the consumer once the mix is
 * cheap enough: 2 CPUs / 9.9 ms = 202 samples/s at 0.9:0.1 (a worker must
 * help), 364 at 0.5:0.5 and 1818 at 0.1:0.9 (both above 300: all local). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/spec/mix.h"
#include "common/spec/spec.h"
#include "common/spec/spec_layout.h"
#include "dispatcher/config.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/disp.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/planner/planner_mix.h"
#include "dispatcher/planner/planner_mix_journal.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"

#define MIX_SPEC                                                                                   \
    "{\"mix\": {\"sources\": ["                                                                    \
    "{\"name\": \"images\", \"weight\": 0.9, \"source\": {\"type\": \"webdataset\", "              \
    "\"path\": \"shards\"}},"                                                                      \
    "{\"name\": \"text\", \"weight\": 0.1, \"source\": {\"type\": \"jsonl\", \"path\": "           \
    "\"t.jsonl\"}}], \"seed\": 3, \"schedule\": ["                                                 \
    "{\"from_step\": 5, \"weights\": {\"images\": 0.5, \"text\": 0.5}},"                           \
    "{\"from_step\": 10, \"weights\": {\"images\": 0.1, \"text\": 0.9}}]},"                        \
    " \"stages\": [{\"op\": \"decode_image\"}, {\"op\": \"image_tiles\", \"tile\": 32, "           \
    "\"max_tiles\": 4}], \"batch_size\": 4, \"epochs\": 2, \"offload\": \"auto\"}"

#define NSRC 2
#define NUNITS 2

typedef struct pin_s {
    Sluice__PlannerInputs in;
    Sluice__HostProfile client, wprof;
    Sluice__StageStat cu[NUNITS], wu[NUNITS];
    Sluice__StageStat *pcu[NUNITS], *pwu[NUNITS];
    Sluice__WorkerClass cls;
    Sluice__WorkerClass *pcls[1];
    uint64_t ids[1];
    Sluice__MixSourceCost src[NSRC];
    Sluice__MixSourceCost *psrc[NSRC];
    double unit[NSRC][NUNITS];
    double bytes[NSRC][NUNITS + 1];
    char names[NUNITS][64];
    sl_spec_t spec;
    char *spec_json; /* canonical, counts resolved (a travelled spec) */
} pin_t;

static const double IMG_MS[NUNITS] = {10.0, 1.0};
static const double IMG_BYTES[NUNITS + 1] = {100e3, 600e3, 800e3};

/* The spec (resolved: 100 samples each), its units' names, the client's
 * blend profile at 0.9:0.1 and a same-speed worker class of worker wid. */
static void pin_init(pin_t *p, uint64_t wid)
{
    memset(p, 0, sizeof(*p));
    char err[512] = "";
    ck_assert_msg(sl_spec_parse("t", MIX_SPEC, strlen(MIX_SPEC), &p->spec, err, sizeof(err)) == 0,
                  "%s", err);
    uint64_t counts[NSRC] = {100, 100};
    ck_assert_int_eq(sl_mix_resolve(p->spec.mix, counts, err, sizeof(err)), 0);
    p->spec_json = sl_spec_to_json(&p->spec);
    ck_assert_ptr_nonnull(p->spec_json);
    sl_layout_t l;
    ck_assert_int_eq(sl_spec_layout(&p->spec, 0, &l), 0);
    ck_assert_uint_eq(l.nunits, NUNITS);
    sluice__planner_inputs__init(&p->in);
    sluice__host_profile__init(&p->client);
    for (int u = 0; u < NUNITS; u++) {
        snprintf(p->names[u], sizeof(p->names[u]), "%s", sl_layout_unit_name(&l, (uint32_t)u));
        sluice__stage_stat__init(&p->cu[u]);
        p->cu[u].name = p->names[u];
        p->cu[u].cpu_sec_per_sample = 0.9 * IMG_MS[u] * 1e-3;
        p->cu[u].out_bytes_per_sample = 0.9 * IMG_BYTES[u + 1] + 0.1 * 1e3;
        p->cu[u].samples = 100;
        p->wu[u] = p->cu[u];
        p->pcu[u] = &p->cu[u];
        p->pwu[u] = &p->wu[u];
    }
    p->client.host = "client test";
    p->client.n_units = NUNITS;
    p->client.units = p->pcu;
    p->client.encoded_bytes_per_sample = 0.9 * IMG_BYTES[0] + 0.1 * 1e3;
    p->client.samples = 100;
    p->wprof = p->client;
    p->wprof.host = "cpu|2 threads|2.00 cpus";
    p->wprof.units = p->pwu;
    sluice__worker_class__init(&p->cls);
    p->cls.key = "cpu|2 threads|2.00 cpus";
    p->ids[0] = wid;
    p->cls.n_worker_ids = 1;
    p->cls.worker_ids = p->ids;
    p->cls.threads = 2;
    p->cls.cpu_budget = 2;
    p->cls.profile = &p->wprof;
    p->cls.bandwidth_bytes_per_sec = 1e9;
    p->pcls[0] = &p->cls;
    p->in.spec_hash = 7;
    p->in.client = &p->client;
    p->in.client_cpu_budget = 2;
    p->in.recv_cpu_sec_per_byte = 1e-9;
    p->in.consumer_rate = 300;
    p->in.n_classes = 1;
    p->in.classes = p->pcls;
    static const char *const srcs[NSRC] = {"images", "text"};
    for (int j = 0; j < NSRC; j++) {
        sluice__mix_source_cost__init(&p->src[j]);
        p->src[j].name = (char *)srcs[j];
        for (int u = 0; u < NUNITS; u++) {
            p->unit[j][u] = j == 0 ? IMG_MS[u] * 1e-3 : 0.0;
        }
        for (int k = 0; k <= NUNITS; k++) {
            p->bytes[j][k] = j == 0 ? IMG_BYTES[k] : 1e3;
        }
        p->src[j].n_unit_cpu_sec_per_sample = NUNITS;
        p->src[j].unit_cpu_sec_per_sample = p->unit[j];
        p->src[j].n_bytes_per_sample = NUNITS + 1;
        p->src[j].bytes_per_sample = p->bytes[j];
        p->src[j].read_cpu_sec_per_sample = j == 0 ? 0.2e-3 : 0.0;
        p->src[j].samples = 20;
        p->psrc[j] = &p->src[j];
    }
    p->in.n_mix_sources = NSRC;
    p->in.mix_sources = p->psrc;
}

static void pin_clear(pin_t *p)
{
    sl_spec_clear(&p->spec);
    free(p->spec_json);
}

#define NEAR_REL(x, want)                                                                          \
    ck_assert_msg(fabs((x) - (want)) <= 1e-9 * (1.0 + fabs(want)), "%s = %.9g, want %.9g", #x,     \
                  (double)(x), (double)(want))

/* The job's costs are the sources' weighted by the weights in force; a
 * worker class's move as the client's do, unit by unit. */
START_TEST(test_weighted_costs)
{
    pin_t p;
    pin_init(&p, 1);
    p.wu[0].cpu_sec_per_sample *= 2.0; /* the worker decodes at half the client's speed */
    disp_pjob_t *pj = NULL;
    char err[512] = "";
    ck_assert_msg(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_ptr_nonnull(pj->mix);
    NEAR_REL(pj->mix->weights[0], 0.9);
    NEAR_REL(pj->client.units[0].cpu_sec_per_sample, 0.9 * 10e-3);
    NEAR_REL(pj->client.units[1].cpu_sec_per_sample, 0.9 * 1e-3);
    NEAR_REL(pj->client.encoded_bytes, 0.9 * 100e3 + 0.1 * 1e3);
    NEAR_REL(pj->client.units[0].out_bytes_per_sample, 0.9 * 600e3 + 0.1 * 1e3);
    NEAR_REL(pj->client.units[1].out_bytes_per_sample, 0.9 * 800e3 + 0.1 * 1e3);
    NEAR_REL(pj->client.read_sec, 0.9 * 0.2e-3);
    NEAR_REL(pj->classes[0].prof.units[0].cpu_sec_per_sample, 2.0 * 0.9 * 10e-3);
    /* From step 10 on: 0.1:0.9. */
    disp_pjob_mix_apply(pj, 10);
    NEAR_REL(pj->client.units[0].cpu_sec_per_sample, 0.1 * 10e-3);
    NEAR_REL(pj->client.units[1].out_bytes_per_sample, 0.1 * 800e3 + 0.9 * 1e3);
    NEAR_REL(pj->client.encoded_bytes, 0.1 * 100e3 + 0.9 * 1e3);
    NEAR_REL(pj->client.read_sec, 0.1 * 0.2e-3);
    NEAR_REL(pj->classes[0].prof.units[0].cpu_sec_per_sample, 2.0 * 0.1 * 10e-3);
    NEAR_REL(pj->classes[0].prof.units[1].cpu_sec_per_sample, 0.1 * 1e-3);
    /* Back to step 0: the same numbers as at submission. */
    disp_pjob_mix_apply(pj, 0);
    NEAR_REL(pj->client.units[0].cpu_sec_per_sample, 0.9 * 10e-3);
    NEAR_REL(pj->classes[0].prof.units[0].cpu_sec_per_sample, 2.0 * 0.9 * 10e-3);
    disp_pjob_free(pj);
    /* The blend's profile ran 1:1 (the client says so): the worker's 18 ms
     * were a 1:1 mix's (5 ms at the client's per-source costs), so 0.9:0.1
     * makes 18 x 9 / 5 and 0.1:0.9 18 x 1 / 5. */
    p.src[0].profiled_share = 0.5;
    p.src[1].profiled_share = 0.5;
    ck_assert_int_eq(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
    NEAR_REL(pj->mix->profiled[0], 0.5);
    NEAR_REL(pj->classes[0].prof.units[0].cpu_sec_per_sample, 18e-3 * 9.0 / 5.0);
    disp_pjob_mix_apply(pj, 10);
    NEAR_REL(pj->classes[0].prof.units[0].cpu_sec_per_sample, 18e-3 * 1.0 / 5.0);
    NEAR_REL(pj->client.units[0].cpu_sec_per_sample, 0.1 * 10e-3); /* the client's: per source */
    disp_pjob_free(pj);
    /* A unit no profiled sample ran (text only) takes the client's cost. */
    p.src[0].profiled_share = 0.0;
    p.src[1].profiled_share = 1.0;
    ck_assert_int_eq(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
    NEAR_REL(pj->classes[0].prof.units[0].cpu_sec_per_sample, 0.9 * 10e-3);
    disp_pjob_free(pj);
    pin_clear(&p);
}
END_TEST

/* A text-only source at 0 decode cost moves the plan toward local as its
 * weight grows: less CPU per sample, so the client's own share rises (and
 * the job runs faster). */
START_TEST(test_plan_moves_local)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    pin_t p;
    pin_init(&p, w1);
    disp_pjob_t *pj = NULL;
    char err[512] = "";
    ck_assert_msg(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)) == 0, "%s",
                  err);
    static const uint64_t steps[3] = {0, 5, 10}; /* text 0.1, 0.5, 0.9 */
    double share[3], rate[3];
    for (int i = 0; i < 3; i++) {
        disp_pjob_mix_apply(pj, steps[i]);
        disp_plan_t plan;
        memset(&plan, 0, sizeof(plan));
        disp_pjob_plan(pj, &d->reg, &plan, now, "test");
        share[i] = plan.split == 0 ? 1.0 : plan.local_share;
        rate[i] = plan.predicted;
        printf("text weight %.1f: split %u, local share %.3f, %.0f samples/s, bound by %s\n",
               pj->mix->weights[1], plan.split, plan.local_share, plan.predicted, plan.binding);
    }
    ck_assert(share[0] < 1.0); /* image-heavy: the worker takes a part */
    ck_assert(share[1] > share[0]);
    ck_assert(share[2] >= share[1]);
    ck_assert(share[2] == 1.0);                /* text-heavy: the client alone keeps up */
    ck_assert(rate[0] > 0.0 && rate[2] > 0.0); /* the consumer's 300 both times */
    json_t *j = disp_pjob_json(pj, NULL);
    json_t *m = json_object_get(j, "mix");
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(json_array_size(json_object_get(m, "sources")), 2);
    json_t *t = json_array_get(json_object_get(m, "sources"), 1);
    ck_assert_str_eq(json_string_value(json_object_get(t, "name")), "text");
    NEAR_REL(json_real_value(json_object_get(t, "weight_share")), 0.9);
    NEAR_REL(json_real_value(json_array_get(json_object_get(t, "unit_ms"), 0)), 0.0);
    NEAR_REL(json_real_value(json_array_get(json_object_get(m, "unit_ms"), 0)), 1.0);
    NEAR_REL(json_real_value(json_array_get(json_object_get(m, "profiled_unit_ms"), 0)), 9.0);
    json_decref(j);
    disp_pjob_free(pj);
    pin_clear(&p);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

/* A schedule's change is due once, at its step; then measured costs (of
 * the old mix) no longer replace the weighted ones. */
START_TEST(test_due)
{
    pin_t p;
    pin_init(&p, 1);
    disp_pjob_t *pj = NULL;
    char err[512] = "", why[160] = "";
    ck_assert_int_eq(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
    ck_assert_int_eq(disp_pjob_mix_due(pj, 0, why, sizeof(why)), 0);
    ck_assert_int_eq(disp_pjob_mix_due(pj, 4, why, sizeof(why)), 0);
    ck_assert_int_eq(disp_pjob_mix_stale(pj), 0);
    ck_assert_int_eq(disp_pjob_mix_due(pj, 5, why, sizeof(why)), 1);
    ck_assert_str_eq(why, "mix weights at step 5: images 0.90 text 0.10 -> images 0.50 text 0.50");
    ck_assert_int_eq(disp_pjob_mix_due(pj, 6, why, sizeof(why)), 0);
    ck_assert_int_eq(disp_pjob_mix_stale(pj), 1);
    NEAR_REL(pj->client.units[0].cpu_sec_per_sample, 0.5 * 10e-3);
    disp_pjob_free(pj);
    pin_clear(&p);
}
END_TEST

/* Per-source costs that do not fit are refused naming the field; numbers
 * that are not finite or negative count as 0; an unmixed job or a client
 * that sent none has no mix state. */
START_TEST(test_bad_inputs)
{
    pin_t p;
    pin_init(&p, 1);
    disp_pjob_t *pj = NULL;
    char err[512] = "";
    p.in.n_mix_sources = 1;
    ck_assert_int_eq(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "planner: mix_sources has 1 sources, the spec's mix 2");
    p.in.n_mix_sources = NSRC;
    p.src[1].name = "docs";
    ck_assert_int_eq(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "planner: mix_sources[1] is \"docs\", the mix's source 1 is \"text\"");
    p.src[1].name = "text";
    p.src[0].n_bytes_per_sample = NUNITS;
    ck_assert_int_eq(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)),
                     -EINVAL);
    ck_assert_msg(strstr(err, "mix_sources[0] (\"images\"): 2 unit costs and 2 boundaries'") !=
                      NULL,
                  "%s", err);
    p.src[0].n_bytes_per_sample = NUNITS + 1;
    p.unit[0][1] = NAN;
    p.unit[1][0] = -1.0;
    p.bytes[1][2] = INFINITY;
    p.src[0].read_cpu_sec_per_sample = 1e9;
    p.src[1].profiled_share = NAN; /* no share at all: the weights of step 0 */
    ck_assert_int_eq(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
    NEAR_REL(pj->mix->profiled[0], 0.9);
    NEAR_REL(pj->mix->profiled[1], 0.1);
    NEAR_REL(pj->mix->unit_sec[0][1], 0.0);
    NEAR_REL(pj->mix->unit_sec[1][0], 0.0);
    NEAR_REL(pj->mix->bytes[1][2], 0.0);
    NEAR_REL(pj->mix->read_sec[0], 0.0);
    disp_pjob_free(pj);
    p.in.n_mix_sources = 0; /* an older client: the blend's profile stands */
    ck_assert_int_eq(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)), 0);
    ck_assert_ptr_null(pj->mix);
    NEAR_REL(pj->client.units[0].cpu_sec_per_sample, 0.9 * 10e-3);
    ck_assert_int_eq(disp_pjob_mix_due(pj, 10, err, sizeof(err)), 0);
    ck_assert_int_eq(disp_pjob_mix_stale(pj), 0);
    ck_assert_ptr_null(disp_pjob_mix_json(pj));
    disp_pjob_free(pj);
    pin_clear(&p);
}
END_TEST

/* Through the dispatcher: a submitted job re-plans when its acknowledged
 * positions reach a schedule's step, and says why. */
/* The state the journal keeps (planner_mix_journal.h) gives back, after a
 * weight change, the same weights, change count and costs: the profiles go
 * out as profiled on the blend, so the worker class is not scaled twice. */
START_TEST(test_journal_round_trip)
{
    pin_t p;
    pin_init(&p, 1);
    p.wu[0].cpu_sec_per_sample *= 2.0;
    disp_pjob_t *pj = NULL, *back = NULL;
    char err[512] = "", why[160];
    ck_assert_msg(disp_pjob_new(&p.in, &p.spec, SL_OFFLOAD_AUTO, &pj, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_int_eq(disp_pjob_mix_due(pj, 10, why, sizeof(why)), 1);
    static disp_pmix_pb_t b;
    static disp_hprof_t prof[1 + DISP_PL_MAX_CLASSES];
    Sluice__PlannerInputs in = p.in;
    uint64_t step = 0;
    uint32_t changes = 0;
    ck_assert_int_eq(disp_pjob_mix_to_journal(pj, &b, &in, &prof[0], &prof[1], &step, &changes), 1);
    ck_assert_uint_eq(step, 10);
    ck_assert_uint_eq(changes, 1);
    ck_assert_uint_eq(in.n_mix_sources, NSRC);
    /* The journal's profiles are the blend's as profiled, not the weighted ones. */
    NEAR_REL(prof[0].units[0].cpu_sec_per_sample, 0.9 * 10e-3);
    NEAR_REL(prof[1].units[0].cpu_sec_per_sample, 2.0 * 0.9 * 10e-3);
    for (int u = 0; u < NUNITS; u++) {
        p.cu[u].cpu_sec_per_sample = prof[0].units[u].cpu_sec_per_sample;
        p.wu[u].cpu_sec_per_sample = prof[1].units[u].cpu_sec_per_sample;
    }
    p.client.read_cpu_sec_per_sample = prof[0].read_sec;
    p.wprof.read_cpu_sec_per_sample = prof[1].read_sec;
    ck_assert_msg(disp_pjob_new(&in, &p.spec, SL_OFFLOAD_AUTO, &back, err, sizeof(err)) == 0, "%s",
                  err);
    disp_pjob_mix_from_journal(back, step, changes);
    ck_assert_ptr_nonnull(back->mix);
    ck_assert_uint_eq(back->mix->changes, 1);
    ck_assert_int_eq(disp_pjob_mix_stale(back), 1);
    for (int j = 0; j < NSRC; j++) {
        NEAR_REL(back->mix->weights[j], pj->mix->weights[j]);
        NEAR_REL(back->mix->profiled[j], pj->mix->profiled[j]);
    }
    for (int u = 0; u < NUNITS; u++) {
        NEAR_REL(back->client.units[u].cpu_sec_per_sample, pj->client.units[u].cpu_sec_per_sample);
        NEAR_REL(back->client.units[u].out_bytes_per_sample,
                 pj->client.units[u].out_bytes_per_sample);
        NEAR_REL(back->classes[0].prof.units[u].cpu_sec_per_sample,
                 pj->classes[0].prof.units[u].cpu_sec_per_sample);
    }
    NEAR_REL(back->classes[0].prof.units[0].cpu_sec_per_sample, 2.0 * 0.1 * 10e-3);
    NEAR_REL(back->client.read_sec, pj->client.read_sec);
    /* The weights of step 10 in force: no re-plan for them again. */
    ck_assert_int_eq(disp_pjob_mix_due(back, 12, why, sizeof(why)), 0);
    disp_pjob_free(pj);
    disp_pjob_free(back);
    pin_clear(&p);
}
END_TEST

START_TEST(test_dispatcher_replans_at_step)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = fx_disp_register(d, "127.0.0.1:9", 2, 0, now);
    pin_t p;
    pin_init(&p, w1);
    Sluice__SubmitJobRequest req;
    sluice__submit_job_request__init(&req);
    req.version = SL_PROTOCOL_VERSION;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.spec_json = p.spec_json;
    req.num_samples = 200;
    req.source_fingerprint = 99;
    req.planner = &p.in;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_msg(disp_svc_submit_job(d, &req, &resp, &a, now, err, sizeof(err)) == SL_RPC_OK, "%s",
                  err);
    ck_assert_uint_eq(d->jobs.n, 1);
    disp_job_t *job = d->jobs.jobs[0];
    ck_assert_ptr_nonnull(job->planner);
    ck_assert_ptr_nonnull(job->planner->mix);
    uint32_t v = job->plan.version;
    double share0 = job->plan.split == 0 ? 1.0 : job->plan.local_share;
    ck_assert_uint_eq(disp_job_mix_step(job), 0);
    disp_planner_tick(d, now + 10);
    ck_assert_uint_eq(job->plan.version, v); /* nothing changed */
    /* Step 10 of epoch 0 (4 positions a step, one rank): 40 positions. */
    job->ep[0].acked_positions = 40;
    ck_assert_uint_eq(disp_job_mix_step(job), 10);
    disp_planner_tick(d, now + 20);
    ck_assert_uint_eq(job->plan.version, v + 1);
    ck_assert_msg(strstr(job->planner->last_reason, "mix weights at step 10") != NULL, "%s",
                  job->planner->last_reason);
    ck_assert(share0 < 1.0);
    ck_assert(job->plan.split == 0 || job->plan.local_share >= 1.0); /* all local now */
    disp_planner_tick(d, now + 30);
    ck_assert_uint_eq(job->plan.version, v + 1); /* once */
    disp_arena_free(&a);
    fx_disp_destroy(d);
    free(d);
    pin_clear(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("planner_mix");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_weighted_costs);
    tcase_add_test(tc, test_plan_moves_local);
    tcase_add_test(tc, test_due);
    tcase_add_test(tc, test_bad_inputs);
    tcase_add_test(tc, test_dispatcher_replans_at_step);
    tcase_add_test(tc, test_journal_round_trip);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
