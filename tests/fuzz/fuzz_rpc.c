/* fuzz_rpc: the dispatcher's RPC handlers (dispatcher/service/service.h) fed
 * arbitrary request bytes, on an in-memory dispatcher with the daemon's
 * default configuration (but split_size 8), called as the gRPC server calls
 * them: unpack as the method's request type, version check, handler, pack
 * the reply.
 *
 * An input is a sequence of calls, so that state built by one (a worker, a
 * job) is there for the next:
 *   [u8 op] [u8 dt] [u16 len, little-endian] [len bytes of request] ...
 * op % 10 picks RegisterWorker, Heartbeat, SubmitJob, GetAssignment,
 * AckSplits, ReportRates, CloseJob, 7 = the periodic tick alone,
 * GetPlanContext, PlanJob; the clock advances dt * 50 ms first and the tick
 * (with the status sampler, as the daemon's main loop runs them) runs
 * whenever it has. A short last record takes the bytes that are left.
 *
 * Contracts: no crash, leak or UB (invariant 4); every status is one the
 * header lists, with a printable message; every OK reply packs and unpacks
 * as its response type (what the peer will do with it); /status (with and
 * without the sampler's history) stays valid JSON and /metrics text is
 * produced after every input. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "common/rpc/rpc_impl.h"
#include "dispatcher/config.h"
#include "dispatcher/disp.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service.h"
#include "dispatcher/status/status.h"
#include "proto/sluice.pb-c.h"
#include "tests/fuzz/fuzz.h"

#define FZ_RPC_MAX_CALLS 64
#define FZ_RPC_TICK_UNIT_MS 50

#define FZ_RPC_OPS 10
#define FZ_RPC_TICK 7

static const ProtobufCMessageDescriptor *const FZ_RPC_REQ[FZ_RPC_OPS] = {
    &sluice__register_worker_request__descriptor, &sluice__heartbeat_request__descriptor,
    &sluice__submit_job_request__descriptor,      &sluice__get_assignment_request__descriptor,
    &sluice__ack_splits_request__descriptor,      &sluice__report_rates_request__descriptor,
    &sluice__close_job_request__descriptor,       NULL,
    &sluice__plan_context_request__descriptor,    &sluice__submit_job_request__descriptor,
};

static void fz_rpc_reply(int rc, const ProtobufCMessage *resp, const char *err, size_t errlen)
{
    int code = sl_rpc_status_from_errno(rc);
    FZ_CHECK(code == SL_RPC_OK || code == SL_RPC_INVALID_ARGUMENT || code == SL_RPC_NOT_FOUND ||
                 code == SL_RPC_RESOURCE_EXHAUSTED || code == SL_RPC_UNIMPLEMENTED ||
                 code == SL_RPC_FAILED_PRECONDITION || code == SL_RPC_PERMISSION_DENIED,
             "%s: status %d (%s)", resp->descriptor->name, code, err);
    if (code != SL_RPC_OK) {
        FZ_CHECK(fz_err_ok(err, errlen), "%s: unprintable status details",
                 resp->descriptor->name);
        return;
    }
    size_t n = protobuf_c_message_get_packed_size(resp);
    uint8_t *buf = malloc(n > 0 ? n : 1);
    FZ_CHECK(buf != NULL, "out of memory");
    FZ_CHECK(protobuf_c_message_pack(resp, buf) == n, "%s: packed size changed",
             resp->descriptor->name);
    ProtobufCMessage *back = protobuf_c_message_unpack(resp->descriptor, NULL, n, buf);
    FZ_CHECK(back != NULL, "%s: the reply does not unpack", resp->descriptor->name);
    protobuf_c_message_free_unpacked(back, NULL);
    free(buf);
}

/* One call of method op on d with the request bytes. */
static void fz_rpc_call(disp_t *d, unsigned op, const uint8_t *p, size_t len, int64_t now)
{
    ProtobufCMessage *req = protobuf_c_message_unpack(FZ_RPC_REQ[op], NULL, len, p);
    if (req == NULL) {
        return; /* the server answers INVALID_ARGUMENT without a handler */
    }
    char err[1024] = "";
    if (sl_rpc_pb_check_version(req, err, sizeof(err)) < 0) {
        protobuf_c_message_free_unpacked(req, NULL);
        return; /* FAILED_PRECONDITION without a handler */
    }
    disp_arena_t a = {0};
    int code;
    switch (op) {
    case 0: {
        Sluice__RegisterWorkerResponse r = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
        code = disp_svc_register_worker(d, (const Sluice__RegisterWorkerRequest *)req, &r, &a,
                                        now, err, sizeof(err));
        fz_rpc_reply(code, &r.base, err, sizeof(err));
        break;
    }
    case 1: {
        Sluice__HeartbeatResponse r = SLUICE__HEARTBEAT_RESPONSE__INIT;
        code = disp_svc_heartbeat(d, (const Sluice__HeartbeatRequest *)req, &r, &a, now, err,
                                  sizeof(err));
        fz_rpc_reply(code, &r.base, err, sizeof(err));
        break;
    }
    case 2: {
        Sluice__SubmitJobResponse r = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
        code = disp_svc_submit_job(d, (const Sluice__SubmitJobRequest *)req, &r, &a, now, err,
                                   sizeof(err));
        fz_rpc_reply(code, &r.base, err, sizeof(err));
        break;
    }
    case 3: {
        Sluice__GetAssignmentResponse r = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
        code = disp_svc_get_assignment(d, (const Sluice__GetAssignmentRequest *)req, &r, &a,
                                       now, err, sizeof(err));
        fz_rpc_reply(code, &r.base, err, sizeof(err));
        break;
    }
    case 4: {
        Sluice__AckSplitsResponse r = SLUICE__ACK_SPLITS_RESPONSE__INIT;
        code = disp_svc_ack_splits(d, (const Sluice__AckSplitsRequest *)req, &r, &a, now, err,
                                   sizeof(err));
        fz_rpc_reply(code, &r.base, err, sizeof(err));
        break;
    }
    case 5: {
        Sluice__ReportRatesResponse r = SLUICE__REPORT_RATES_RESPONSE__INIT;
        code = disp_svc_report_rates(d, (const Sluice__ReportRatesRequest *)req, &r, &a, now,
                                     err, sizeof(err));
        fz_rpc_reply(code, &r.base, err, sizeof(err));
        break;
    }
    case 6: {
        Sluice__CloseJobResponse r = SLUICE__CLOSE_JOB_RESPONSE__INIT;
        code = disp_svc_close_job(d, (const Sluice__CloseJobRequest *)req, &r, &a, now, err,
                                  sizeof(err));
        fz_rpc_reply(code, &r.base, err, sizeof(err));
        break;
    }
    case 8: {
        Sluice__PlanContextResponse r = SLUICE__PLAN_CONTEXT_RESPONSE__INIT;
        code = disp_svc_get_plan_context(d, (const Sluice__PlanContextRequest *)req, &r, &a,
                                         now, err, sizeof(err));
        fz_rpc_reply(code, &r.base, err, sizeof(err));
        break;
    }
    default: {
        Sluice__SubmitJobResponse r = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
        code = disp_svc_plan_job(d, (const Sluice__SubmitJobRequest *)req, &r, &a, now, err,
                                 sizeof(err));
        fz_rpc_reply(code, &r.base, err, sizeof(err));
        break;
    }
    }
    disp_arena_free(&a);
    protobuf_c_message_free_unpacked(req, NULL);
}

static void fz_rpc_json_ok(char *js, size_t len, const char *what)
{
    FZ_CHECK(js != NULL && strlen(js) == len, "no %s JSON", what);
    json_error_t jerr;
    json_t *root = json_loadb(js, len, 0, &jerr);
    FZ_CHECK(root != NULL, "%s is not JSON: %s at %d: %.300s", what, jerr.text, jerr.position,
             js);
    json_decref(root);
    free(js);
}

static void fz_rpc_status(disp_t *d, disp_status_t *st, int64_t now)
{
    size_t len = 0;
    char *js = disp_status_json(d, now, &len);
    fz_rpc_json_ok(js, len, "/status");
    js = disp_status_render_json(st, now, &len);
    fz_rpc_json_ok(js, len, "/status (sampled)");
    char *m = disp_status_metrics(d, now, &len);
    FZ_CHECK(m != NULL && strlen(m) == len, "no /metrics text");
    free(m);
    m = disp_status_render_metrics(st, now, &len);
    FZ_CHECK(m != NULL && strlen(m) == len, "no /metrics text (sampled)");
    free(m);
    char line[256];
    disp_status_summary(d, line, sizeof(line));
}

int fuzz_rpc_one(const uint8_t *data, size_t size)
{
    /* Handlers log; nothing they log is LOG_EMERG. FUZZ_RPC_LOG=1 shows it
     * all when replaying one input by hand. */
    sl_log_set_level(getenv("FUZZ_RPC_LOG") != NULL ? LOG_DEBUG : LOG_EMERG);
    disp_config_t cfg;
    char err[256];
    memset(&cfg, 0, sizeof(cfg));
    FZ_CHECK(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)) == 0, "%s", err);
    /* Small splits: a few dozen samples already make several splits per
     * epoch, so short inputs reach assignment, stealing and epoch turnover. */
    cfg.split_size = 8;
    disp_t d;
    int64_t now = 1000000;
    FZ_CHECK(disp_init(&d, &cfg, 1, now) == 0, "disp_init failed");
    disp_status_t *st = disp_status_new(&d, now);
    FZ_CHECK(st != NULL, "disp_status_new failed");
    fz_reader_t r = {data, size};
    for (int i = 0; i < FZ_RPC_MAX_CALLS && r.n > 0; i++) {
        unsigned op = fz_take(&r, 1) % FZ_RPC_OPS;
        uint32_t dt = fz_take(&r, 1);
        size_t len = fz_take(&r, 2);
        len = len < r.n ? len : r.n;
        if (dt > 0) {
            now += (int64_t)dt * FZ_RPC_TICK_UNIT_MS;
            disp_tick(&d, now);
            disp_status_sample(st, now);
        }
        if (op != FZ_RPC_TICK) {
            fz_rpc_call(&d, op, r.p, len, now);
        }
        r.p += len;
        r.n -= len;
    }
    fz_rpc_status(&d, st, now);
    disp_status_free(st);
    disp_destroy(&d);
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_rpc_one)
