#include "tests/unit/fixtures_planner.h"

#include "common/rpc/rpc.h"
#include "tests/unit/fixtures.h"

#include <string.h>

void fx_pin_init(fx_pin_t *p, uint64_t wid)
{
    static const char *names[3] = {"decode_jpeg+center_crop", "flip", "normalize"};
    static const double ms[3] = {10.0, 0.01, 0.05};
    static const double out[3] = {192, 192, 768};
    memset(p, 0, sizeof(*p));
    sluice__planner_inputs__init(&p->in);
    sluice__host_profile__init(&p->client);
    sluice__host_profile__init(&p->wprof);
    for (int u = 0; u < 3; u++) {
        sluice__stage_stat__init(&p->cu[u]);
        p->cu[u].name = (char *)names[u];
        p->cu[u].cpu_sec_per_sample = ms[u] * 1e-3;
        p->cu[u].out_bytes_per_sample = out[u];
        p->cu[u].samples = 100;
        p->wu[u] = p->cu[u];
        p->pcu[u] = &p->cu[u];
        p->pwu[u] = &p->wu[u];
    }
    p->client.host = "client test";
    p->client.n_units = 3;
    p->client.units = p->pcu;
    p->client.encoded_bytes_per_sample = 100e3;
    p->client.samples = 100;
    static const double coef[SL_COST_NPARAM] = FX_PIN_COEF;
    memcpy(p->coef, coef, sizeof(p->coef));
    p->client.n_cost_model_coef = SL_COST_NPARAM;
    p->client.cost_model_coef = p->coef;
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
    p->pcls[0] = &p->cls;
    p->in.spec_hash = 42;
    p->in.client = &p->client;
    p->in.client_cpu_budget = 2;
    p->in.recv_cpu_sec_per_byte = 1e-9;
    p->in.n_classes = 1;
    p->in.classes = p->pcls;
}

void fx_pl_base(disp_pl_input_t *in, double cores)
{
    memset(in, 0, sizeof(*in));
    in->nunits = 2;
    in->unit_sec[0] = 0.010;
    in->unit_sec[1] = 0.002;
    in->bytes[0] = 100e3;
    in->bytes[1] = 150e3;
    in->bytes[2] = 600e3;
    in->recv_sec_per_byte = 1e-9;
    in->client_cores = cores;
}

void fx_pl_add_class(disp_pl_input_t *in, uint32_t workers, double cores, double speed,
                     double bandwidth)
{
    disp_pl_class_t *c = &in->classes[in->nclasses++];
    memset(c, 0, sizeof(*c));
    c->workers = workers;
    c->cores = cores;
    c->profiled = 1;
    c->read_sec = in->read_sec / speed;
    for (uint32_t u = 0; u < in->nunits; u++) {
        c->unit_sec[u] = in->unit_sec[u] / speed;
    }
    c->bandwidth = bandwidth;
}

void fx_pin_request(fx_pin_t *p, Sluice__SubmitJobRequest *req)
{
    sluice__submit_job_request__init(req);
    req->version = SL_PROTOCOL_VERSION;
    req->job_secret = (char *)FX_JOB_SECRET;
    req->spec_json = FX_PIN_SPEC;
    req->num_samples = 200; /* 20 splits per epoch at the fixtures' split size */
    req->source_fingerprint = 99;
    req->planner = p != NULL ? &p->in : NULL;
}
