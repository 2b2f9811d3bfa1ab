/* Compressed samples end to end without sockets: the worker compresses and
 * packs (worker/msg.c), the client indexes and decompresses the packed
 * message (client/lib/rx.c). Every sample reads back byte for byte; every
 * broken field a peer can send -- a damaged or truncated payload, a
 * raw_size that disagrees with the shape, one past the client's limit, an
 * unknown codec, a codec on encoded bytes -- refuses the whole message
 * (the stream is then treated as broken and the split retried). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/rx.h"
#include "common/data/skip.h"
#include "common/spec/spec.h"
#include "worker/msg.h"
#include "tests/unit/fixtures.h"

#define H 32
#define W 40

/* A smooth image-like tensor with a little noise. */
static sl_sample_t mk(uint64_t pos, sl_dtype_e dt, sl_layout_e layout)
{
    sl_sample_t s = {.epoch = 1, .position = pos, .index = pos + 100, .label = 3, .skip = -1};
    sl_tensor_init(&s.t);
    ck_assert_int_eq(sl_tensor_reshape(&s.t, dt, layout, H, W, 3), 0);
    uint32_t x = (uint32_t)pos + 1;
    size_t n = (size_t)H * W * 3;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        uint8_t v = (uint8_t)((i / 3) % W * 3 + i / (3 * W) + ((x >> 16) & 3));
        if (dt == SL_DT_F32) {
            ((float *)s.t.data)[i] = (float)v / 255.0f;
        } else {
            s.t.data[i] = v;
        }
    }
    return s;
}

typedef struct packed_s {
    wk_msglist_t out;
    uint8_t *want[4]; /* each sample's raw bytes */
    size_t want_n[4];
    uint32_t codec[4];
} packed_t;

/* Packs four samples of one split into one message: u8 HWC, u8 CHW, f32,
 * and a skip; the first three compressed. */
static void pack(packed_t *p)
{
    memset(p, 0, sizeof(*p));
    wk_msglist_init(&p->out);
    wk_packer_t pk;
    wk_packer_init(&pk, 7, 9, 3, 8, 1 << 24);
    sl_codec_t *z = sl_codec_new();
    const sl_dtype_e dt[3] = {SL_DT_U8, SL_DT_U8, SL_DT_F32};
    const sl_layout_e lay[3] = {SL_LAYOUT_HWC, SL_LAYOUT_CHW, SL_LAYOUT_CHW};
    for (int i = 0; i < 4; i++) {
        sl_sample_t s;
        if (i < 3) {
            s = mk((uint64_t)i, dt[i], lay[i]);
            p->want_n[i] = s.t.nbytes;
            p->want[i] = malloc(s.t.nbytes);
            memcpy(p->want[i], s.t.data, s.t.nbytes);
        } else {
            s = (sl_sample_t){.epoch = 1, .position = 3, .index = 103, .skip = SL_SKIP_CORRUPT};
            sl_tensor_init(&s.t);
        }
        wk_coding_t cd;
        ck_assert_int_eq(wk_sample_compress(z, 0, &s, &cd), 0);
        p->codec[i] = cd.codec;
        if (i < 3) {
            ck_assert_uint_eq(cd.raw_size, p->want_n[i]);
            ck_assert_uint_lt(s.t.nbytes, p->want_n[i]);
        }
        ck_assert_int_eq(wk_packer_add(&pk, &s, "bad", &cd, &p->out), 0);
    }
    ck_assert_int_eq(wk_packer_finish(&pk, &p->out), 0);
    ck_assert_uint_eq(p->out.count, 1);
    ck_assert_uint_eq(p->codec[0], SL_CODEC_ZSTD_DELTA);
    ck_assert_uint_eq(p->codec[1], SL_CODEC_ZSTD_DELTA);
    ck_assert_uint_eq(p->codec[2], SL_CODEC_ZSTD);
    ck_assert_uint_eq(p->codec[3], SL_CODEC_NONE);
    sl_codec_free(z);
}

static void unpack_free(packed_t *p)
{
    wk_msglist_clear(&p->out);
    for (int i = 0; i < 4; i++) {
        free(p->want[i]);
    }
}

START_TEST(test_round_trip)
{
    packed_t p;
    pack(&p);
    cl_rx_t *rx = NULL;
    char err[256];
    ck_assert_int_eq(cl_rx_from_batch(&p.out.head->batch, NULL, &rx, err, sizeof(err)), 0);
    ck_assert_uint_eq(rx->wb.n_samples, 4);
    for (int i = 0; i < 3; i++) {
        sl_wire_sample_t *s = &rx->wb.samples[i];
        ck_assert_uint_eq(sl_pbw_left(&s->data), p.want_n[i]);
        ck_assert_int_eq(sl_wire_sample_check(s, 3, 3, err, sizeof(err)), 0);
        uint8_t *got = malloc(p.want_n[i]);
        ck_assert_int_eq(sl_pbw_copy(&s->data, got, p.want_n[i]), 0);
        ck_assert(memcmp(got, p.want[i], p.want_n[i]) == 0);
        free(got);
    }
    ck_assert_uint_gt(sl_pbw_left(&rx->wb.samples[3].skip_reason), 0);
    cl_rx_free(rx);
    unpack_free(&p);
}
END_TEST

/* Applies one breakage to sample 0 (or 2) and expects the message refused. */
static void expect_refused(int which, const char *needle)
{
    packed_t p;
    pack(&p);
    Sluice__Sample *s = p.out.head->batch.samples[0];
    switch (which) {
    case 0: s->data.data[s->data.len / 2] ^= 0x5a; break;     /* damaged payload */
    case 1: s->data.len /= 2; break;                           /* truncated */
    case 2: s->raw_size += 3; break;                           /* disagrees with shape */
    case 3: s->raw_size = 0; break;
    case 4: s->codec = 7; break;                               /* unknown codec */
    case 5: s->dtype = SL_DT_BYTES; break;                     /* codec on encoded bytes */
    case 6:                                                    /* past the limit */
        s->h = 1u << 15; /* a valid tensor size, above CL_RX_MAX_RAW_BYTES */
        s->w = 1u << 14;
        s->c = 3;
        s->raw_size = (uint64_t)3 << 29;
        break;
    case 7: p.out.head->batch.samples[2]->raw_size /= 2; break; /* f32 frame vs raw_size */
    default: break;
    }
    cl_rx_t *rx = (cl_rx_t *)1;
    char err[256] = "";
    ck_assert_int_eq(cl_rx_from_batch(&p.out.head->batch, NULL, &rx, err, sizeof(err)), -EBADMSG);
    ck_assert_ptr_null(rx);
    ck_assert_msg(strstr(err, needle) != NULL, "case %d: %s", which, err);
    unpack_free(&p);
}

START_TEST(test_broken_fields_refused)
{
    expect_refused(0, "compressed sample");
    expect_refused(1, "compressed sample");
    expect_refused(2, "disagrees");
    expect_refused(3, "disagrees");
    expect_refused(4, "unknown codec");
    expect_refused(5, "disagrees");
    expect_refused(6, "limit");
    expect_refused(7, "disagrees");
}
END_TEST

START_TEST(test_worker_fault_injection_and_raw_fallbacks)
{
    sl_codec_t *z = sl_codec_new();
    /* The test-only corruption: the client refuses what it produces. */
    sl_sample_t s = mk(0, SL_DT_U8, SL_LAYOUT_HWC);
    wk_coding_t cd;
    ck_assert_int_eq(wk_sample_compress(z, 1, &s, &cd), 0);
    ck_assert_uint_eq(cd.codec, SL_CODEC_ZSTD_DELTA);
    wk_msglist_t out;
    wk_msglist_init(&out);
    wk_packer_t pk;
    wk_packer_init(&pk, 7, 9, 3, 8, 1 << 24);
    ck_assert_int_eq(wk_packer_add(&pk, &s, NULL, &cd, &out), 0);
    ck_assert_int_eq(wk_packer_finish(&pk, &out), 0);
    cl_rx_t *rx = NULL;
    char err[256];
    ck_assert_int_eq(cl_rx_from_batch(&out.head->batch, NULL, &rx, err, sizeof(err)), -EBADMSG);
    wk_msglist_clear(&out);

    /* Encoded bytes and incompressible pixels travel raw. */
    sl_sample_t b = {.skip = -1};
    sl_tensor_init(&b.t);
    ck_assert_int_eq(sl_tensor_reshape(&b.t, SL_DT_BYTES, SL_LAYOUT_HWC, 500, 1, 1), 0);
    memset(b.t.data, 0, 500);
    ck_assert_int_eq(wk_sample_compress(z, 0, &b, &cd), 0);
    ck_assert_uint_eq(cd.codec, SL_CODEC_NONE);
    ck_assert_uint_eq(b.t.nbytes, 500);
    ck_assert_int_eq(sl_tensor_reshape(&b.t, SL_DT_U8, SL_LAYOUT_HWC, 10, 10, 5), 0);
    uint32_t x = 9;
    for (size_t i = 0; i < 500; i++) {
        x = x * 1664525u + 1013904223u;
        b.t.data[i] = (uint8_t)(x >> 24);
    }
    ck_assert_int_eq(wk_sample_compress(z, 0, &b, &cd), 0);
    ck_assert_uint_eq(cd.codec, SL_CODEC_NONE);
    ck_assert_uint_eq(b.t.nbytes, 500);
    sl_tensor_free(&b.t);
    sl_codec_free(z);
}
END_TEST

/* codec and raw_size are varints: any other wire type for them is a
 * malformed message (as for every known field), a huge value is judged
 * like any other raw_size. */
START_TEST(test_new_fields_wire_types)
{
    /* Batch{samples: Sample{codec (field 13) as a length-delimited value}} */
    const uint8_t codec_len[] = {0x1a, 0x04, 0x6a, 0x02, 0x01, 0x02};
    /* ... raw_size (field 14) as a fixed64 */
    const uint8_t raw_i64[] = {0x1a, 0x09, 0x71, 1, 2, 3, 4, 5, 6, 7, 8};
    /* ... codec 1, raw_size 2^64 - 1, no shape */
    const uint8_t huge[] = {0x1a, 0x0d, 0x68, 0x01, 0x70, 0xff, 0xff, 0xff, 0xff, 0xff,
                            0xff, 0xff, 0xff, 0xff, 0x01};
    const struct { const uint8_t *p; size_t n; const char *needle; } cases[] = {
        {codec_len, sizeof(codec_len), "field 13"},
        {raw_i64, sizeof(raw_i64), "field 14"},
        {huge, sizeof(huge), "disagrees"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Sluice__Batch *b = sluice__batch__unpack(NULL, cases[i].n, cases[i].p);
        sl_pbw_seg_t seg = {cases[i].p, cases[i].n};
        sl_wire_batch_t wb;
        char err[256] = "";
        int rc = sl_wire_batch_parse(&seg, 1, 16, &wb, err, sizeof(err));
        if (i < 2) {
            ck_assert_int_eq(rc, -EBADMSG);
            ck_assert_msg(strstr(err, cases[i].needle) != NULL, "%s", err);
            ck_assert_ptr_null(b); /* protobuf-c refuses it too */
            continue;
        }
        ck_assert_int_eq(rc, 0);
        ck_assert_uint_eq(wb.samples[0].raw_size, UINT64_MAX);
        sl_wire_batch_free(&wb);
        ck_assert_ptr_nonnull(b);
        cl_rx_t *rx = NULL;
        ck_assert_int_eq(cl_rx_from_batch(b, NULL, &rx, err, sizeof(err)), -EBADMSG);
        ck_assert_msg(strstr(err, cases[i].needle) != NULL, "%s", err);
        sluice__batch__free_unpacked(b, NULL);
    }
}
END_TEST

/* The spec's "compress": off by default and then absent from the canonical
 * JSON (spec hashes of existing jobs unchanged); "zstd" travels to the
 * workers in it; anything else is a spec error naming the field. */
START_TEST(test_spec_key)
{
    const char *base = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"t\"}, "
                       "\"stages\": [{\"op\": \"decode_jpeg\"}]%s}";
    char text[512], err[256] = "";
    sl_spec_t spec;
    snprintf(text, sizeof(text), base, "");
    ck_assert_int_eq(sl_spec_parse("t.json", text, strlen(text), &spec, err, sizeof(err)), 0);
    ck_assert_int_eq(spec.compress, SL_COMPRESS_OFF);
    char *j = sl_spec_to_json(&spec);
    ck_assert_ptr_null(strstr(j, "compress"));
    free(j);
    snprintf(text, sizeof(text), base, ", \"compress\": \"zstd\"");
    ck_assert_int_eq(sl_spec_parse("t.json", text, strlen(text), &spec, err, sizeof(err)), 0);
    ck_assert_int_eq(spec.compress, SL_COMPRESS_ZSTD);
    j = sl_spec_to_json(&spec);
    ck_assert_ptr_nonnull(strstr(j, "\"compress\":\"zstd\""));
    sl_spec_t again;
    ck_assert_int_eq(sl_spec_parse("j", j, strlen(j), &again, err, sizeof(err)), 0);
    ck_assert_int_eq(again.compress, SL_COMPRESS_ZSTD);
    free(j);
    snprintf(text, sizeof(text), base, ", \"compress\": \"lz4\"");
    ck_assert_int_eq(sl_spec_parse("t.json", text, strlen(text), &spec, err, sizeof(err)),
                     -EINVAL);
    ck_assert_msg(strstr(err, "compress") != NULL, "%s", err);
    snprintf(text, sizeof(text), base, ", \"compress\": true");
    ck_assert_int_eq(sl_spec_parse("t.json", text, strlen(text), &spec, err, sizeof(err)),
                     -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compressed_samples");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_broken_fields_refused);
    tcase_add_test(tc, test_worker_fault_injection_and_raw_fallbacks);
    tcase_add_test(tc, test_spec_key);
    tcase_add_test(tc, test_new_fields_wire_types);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
