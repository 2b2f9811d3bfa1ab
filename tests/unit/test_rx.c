/* The client's receive path over a real gRPC stream: a Fetch handler sends
 * Batch messages (one large enough to arrive in many slices) and one that is
 * not a Batch; the client receives them raw (sl_rpc_cstream_recv_raw) and
 * indexes them (client/lib/rx.h): the large one reads back byte for byte, the
 * broken one is refused with a clear error. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/rx.h"
#include "common/rpc/rpc.h"
#include "common/rpc/rpc_client.h"
#include "common/sample/tensor.h"
#include "proto/sluice.pb-c.h"
#include "tests/unit/fixtures.h"

#define M_FETCH "/sluice.Worker/Fetch"
#define BIG_H 256
#define BIG_W 256
#define NBIG 3

static float *big_data(int i)
{
    float *d = malloc(BIG_H * BIG_W * 3 * sizeof(float));
    ck_assert_ptr_nonnull(d);
    for (size_t k = 0; k < (size_t)BIG_H * BIG_W * 3; k++) {
        d[k] = (float)(k % 9973) + (float)i * 0.25f;
    }
    return d;
}

/* Sends: a Batch of NBIG float32 samples of 768 KiB each, then a message of
 * another type whose field 3 is a varint (a Batch's field 3 is a sample). */
static int fetch_handler(void *ctx, sl_rpc_stream_t *st, const ProtobufCMessage *first)
{
    (void)ctx;
    (void)first;
    Sluice__Batch b = SLUICE__BATCH__INIT;
    Sluice__Sample s[NBIG];
    Sluice__Sample *ptrs[NBIG];
    float *data[NBIG];
    for (int i = 0; i < NBIG; i++) {
        data[i] = big_data(i);
        sluice__sample__init(&s[i]);
        s[i].epoch = 1;
        s[i].position = (uint64_t)i;
        s[i].dtype = SL_DT_F32;
        s[i].layout = SL_LAYOUT_CHW;
        s[i].h = BIG_H;
        s[i].w = BIG_W;
        s[i].c = 3;
        s[i].data.data = (uint8_t *)data[i];
        s[i].data.len = BIG_H * BIG_W * 3 * sizeof(float);
        ptrs[i] = &s[i];
    }
    b.job_id = 9;
    b.split_id = 42;
    b.stage_to = 5;
    b.samples = ptrs;
    b.n_samples = NBIG;
    int rc = sl_rpc_stream_send(st, &b.base, 10000);
    for (int i = 0; i < NBIG; i++) {
        free(data[i]);
    }
    if (rc == 0) {
        Sluice__FetchRequest bad = SLUICE__FETCH_REQUEST__INIT;
        bad.credits = 5;
        rc = sl_rpc_stream_send(st, &bad.base, 10000);
    }
    return rc == 0 ? SL_RPC_OK : SL_RPC_INTERNAL;
}

START_TEST(test_raw_stream_messages)
{
    char err[256], addr[128];
    sl_rpc_init();
    sl_rpc_server_opts_t o = {.listen = "127.0.0.1:0"};
    sl_rpc_server_t *srv = sl_rpc_server_new(&o, err, sizeof(err));
    ck_assert_msg(srv != NULL, "%s", err);
    ck_assert_int_eq(sl_rpc_server_add_stream(srv, M_FETCH, &sluice__fetch_request__descriptor,
                                              fetch_handler, NULL),
                     0);
    ck_assert_int_eq(sl_rpc_server_start(srv, addr, sizeof(addr), err, sizeof(err)), 0);
    sl_rpc_channel_t *ch = sl_rpc_channel_new(addr, 0, NULL, 1, err, sizeof(err));
    ck_assert_msg(ch != NULL, "%s", err);
    Sluice__FetchRequest req = SLUICE__FETCH_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.credits = 4;
    sl_rpc_cstream_t *cs = NULL;
    sl_rpc_status_t st;
    ck_assert_int_eq(sl_rpc_cstream_open(ch, M_FETCH, &req.base, &sluice__batch__descriptor,
                                         30000, &cs, &st),
                     0);

    sl_rpc_raw_t *raw = NULL;
    ck_assert_int_eq(sl_rpc_cstream_recv_raw(cs, &raw, 10000, &st), 0);
    size_t nsegs, total = 0;
    const sl_pbw_seg_t *segs = sl_rpc_raw_segs(raw, &nsegs);
    for (size_t i = 0; i < nsegs; i++) {
        total += segs[i].n;
    }
    ck_assert_uint_gt(total, (size_t)NBIG * BIG_H * BIG_W * 12);
    ck_assert_uint_gt(nsegs, 1); /* the case that matters: samples spanning slices */
    cl_rx_t *rx = NULL;
    ck_assert_int_eq(cl_rx_from_raw(raw, NULL, &rx, err, sizeof(err)), 0);
    ck_assert_uint_eq(rx->wb.job_id, 9);
    ck_assert_uint_eq(rx->wb.split_id, 42);
    ck_assert_uint_eq(rx->wb.stage_to, 5);
    ck_assert_uint_eq(rx->wb.n_samples, NBIG);
    size_t n = BIG_H * BIG_W * 3 * sizeof(float);
    uint8_t *out = malloc(n);
    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < NBIG; i++) {
        const sl_wire_sample_t *s = &rx->wb.samples[i];
        ck_assert_int_eq(sl_wire_sample_check(s, 5, 5, err, sizeof(err)), 0);
        sl_pbw_reader_t d = s->data;
        ck_assert_int_eq(sl_pbw_copy(&d, out, n), 0);
        float *want = big_data(i);
        ck_assert_msg(memcmp(out, want, n) == 0, "sample %d differs", i);
        free(want);
    }
    free(out);
    cl_rx_free(rx);

    /* Not a Batch: refused, with the reason. */
    ck_assert_int_eq(sl_rpc_cstream_recv_raw(cs, &raw, 10000, &st), 0);
    ck_assert_int_eq(cl_rx_from_raw(raw, NULL, &rx, err, sizeof(err)), -EBADMSG);
    ck_assert_ptr_null(rx);
    ck_assert_ptr_nonnull(strstr(err, "malformed Batch"));

    ck_assert_int_eq(sl_rpc_cstream_recv_raw(cs, &raw, 10000, &st), 1); /* ended OK */
    ck_assert_ptr_null(raw);
    sl_rpc_cstream_free(cs);
    sl_rpc_channel_free(ch);
    sl_rpc_server_free(srv);
    sl_rpc_shutdown();
}
END_TEST

/* The unpacked form (tests and fuzz targets queue those) indexes the same. */
START_TEST(test_rx_from_unpacked_batch)
{
    uint8_t bytes[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    Sluice__Sample s = SLUICE__SAMPLE__INIT;
    s.dtype = SL_DT_U8;
    s.h = 2;
    s.w = 2;
    s.c = 3;
    s.position = 7;
    s.data.data = bytes;
    s.data.len = sizeof(bytes);
    Sluice__Sample *ptr = &s;
    Sluice__Batch b = SLUICE__BATCH__INIT;
    b.samples = &ptr;
    b.n_samples = 1;
    b.stage_to = 2;
    b.split_done = 1;
    cl_rx_t *rx = NULL;
    char err[256];
    ck_assert_int_eq(cl_rx_from_batch(&b, NULL, &rx, err, sizeof(err)), 0);
    ck_assert_uint_eq(rx->wb.n_samples, 1);
    ck_assert_int_eq(rx->wb.split_done, 1);
    ck_assert_uint_eq(rx->wb.samples[0].position, 7);
    uint8_t out[12];
    sl_pbw_reader_t d = rx->wb.samples[0].data;
    ck_assert_int_eq(sl_pbw_copy(&d, out, sizeof(out)), 0);
    ck_assert_mem_eq(out, bytes, sizeof(out));
    cl_rx_free(rx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rx");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_raw_stream_messages);
    tcase_add_test(tc, test_rx_from_unpacked_batch);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
