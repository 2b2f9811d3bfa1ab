/* pb_wire + batch_wire: the client's protobuf reader over received slices.
 * Real Batch messages are packed with protobuf-c (what workers send), cut
 * into segments of many sizes, and read back; broken ones must give
 * -EBADMSG, never a read past the end (run under ASan by make asan). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/batch_wire.h"
#include "common/rpc/pb_wire.h"
#include "common/sample/tensor.h"
#include "proto/sluice.pb-c.h"
#include "tests/unit/fixtures.h"

/* The bytes of buf cut into pieces of `piece` bytes (0: one segment), each
 * piece copied to its own allocation so ASan sees any overrun; empty
 * segments interleaved to exercise skipping them. */
typedef struct {
    sl_pbw_seg_t segs[4096];
    size_t n;
    uint8_t *owned[4096];
    size_t nowned;
} cut_t;

static void cut(cut_t *c, const uint8_t *buf, size_t len, size_t piece)
{
    memset(c, 0, sizeof(*c));
    if (piece == 0) {
        piece = len ? len : 1;
    }
    for (size_t off = 0; off < len; off += piece) {
        size_t k = len - off < piece ? len - off : piece;
        uint8_t *p = malloc(k);
        ck_assert_ptr_nonnull(p);
        memcpy(p, buf + off, k);
        c->owned[c->nowned++] = p;
        ck_assert_uint_lt(c->n + 2, 4096);
        c->segs[c->n++] = (sl_pbw_seg_t){p, k};
        if ((off / piece) % 3 == 1) {
            c->segs[c->n++] = (sl_pbw_seg_t){NULL, 0};
        }
    }
}

static void uncut(cut_t *c)
{
    for (size_t i = 0; i < c->nowned; i++) {
        free(c->owned[i]);
    }
}

/* ---------------------------------------------------------------- reader */

START_TEST(test_varints_across_segments)
{
    /* 300 = ac 02; 2^64-1 = ten bytes; 0 = 00 */
    const uint8_t b[] = {0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff,
                         0xff, 0xff, 0xff, 0xff, 0x01, 0x00};
    for (size_t piece = 0; piece <= 3; piece++) {
        cut_t c;
        cut(&c, b, sizeof(b), piece);
        sl_pbw_reader_t r;
        sl_pbw_init(&r, c.segs, c.n);
        uint64_t v;
        ck_assert_int_eq(sl_pbw_varint(&r, &v), 0);
        ck_assert_uint_eq(v, 300);
        ck_assert_int_eq(sl_pbw_varint(&r, &v), 0);
        ck_assert_uint_eq(v, UINT64_MAX);
        ck_assert_int_eq(sl_pbw_varint(&r, &v), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_uint_eq(sl_pbw_left(&r), 0);
        ck_assert_int_eq(sl_pbw_varint(&r, &v), -EBADMSG); /* nothing left */
        uncut(&c);
    }
}
END_TEST

START_TEST(test_broken_varints)
{
    uint64_t v;
    sl_pbw_reader_t r;
    const uint8_t trunc[] = {0x80, 0x80};
    sl_pbw_seg_t s1 = {trunc, sizeof(trunc)};
    sl_pbw_init(&r, &s1, 1);
    ck_assert_int_eq(sl_pbw_varint(&r, &v), -EBADMSG);

    const uint8_t eleven[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    sl_pbw_seg_t s2 = {eleven, sizeof(eleven)};
    sl_pbw_init(&r, &s2, 1);
    ck_assert_int_eq(sl_pbw_varint(&r, &v), -EBADMSG);

    /* Ten bytes whose last carries more than bit 63. */
    const uint8_t over[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    sl_pbw_seg_t s3 = {over, sizeof(over)};
    sl_pbw_init(&r, &s3, 1);
    ck_assert_int_eq(sl_pbw_varint(&r, &v), -EBADMSG);
}
END_TEST

START_TEST(test_tags_and_skips)
{
    uint32_t f, wt;
    sl_pbw_reader_t r;
    const uint8_t zero_field[] = {0x02, 0x00}; /* field 0, LEN */
    sl_pbw_seg_t s = {zero_field, sizeof(zero_field)};
    sl_pbw_init(&r, &s, 1);
    ck_assert_int_eq(sl_pbw_tag(&r, &f, &wt), -EBADMSG);

    const uint8_t group[] = {0x0b}; /* field 1, start group (3) */
    s = (sl_pbw_seg_t){group, sizeof(group)};
    sl_pbw_init(&r, &s, 1);
    ck_assert_int_eq(sl_pbw_tag(&r, &f, &wt), -EBADMSG);

    /* field 2 I64, field 3 I32, field 4 LEN(2), field 5 varint: all skipped */
    const uint8_t ok[] = {0x11, 1, 2, 3, 4, 5, 6, 7, 8, 0x1d, 1,
                          2, 3, 4, 0x22, 2, 9, 9, 0x28, 0x96, 0x01};
    s = (sl_pbw_seg_t){ok, sizeof(ok)};
    sl_pbw_init(&r, &s, 1);
    for (uint32_t want = 2; want <= 5; want++) {
        ck_assert_int_eq(sl_pbw_tag(&r, &f, &wt), 0);
        ck_assert_uint_eq(f, want);
        ck_assert_int_eq(sl_pbw_skip(&r, wt), 0);
    }
    ck_assert_uint_eq(sl_pbw_left(&r), 0);

    /* I64 with 7 bytes left; LEN claiming more than remains. */
    const uint8_t short64[] = {0x11, 1, 2, 3, 4, 5, 6, 7};
    s = (sl_pbw_seg_t){short64, sizeof(short64)};
    sl_pbw_init(&r, &s, 1);
    ck_assert_int_eq(sl_pbw_tag(&r, &f, &wt), 0);
    ck_assert_int_eq(sl_pbw_skip(&r, wt), -EBADMSG);
    const uint8_t longlen[] = {0x22, 0x05, 1, 2, 3, 4};
    s = (sl_pbw_seg_t){longlen, sizeof(longlen)};
    sl_pbw_init(&r, &s, 1);
    ck_assert_int_eq(sl_pbw_tag(&r, &f, &wt), 0);
    sl_pbw_reader_t sub;
    ck_assert_int_eq(sl_pbw_sub(&r, &sub), -EBADMSG);
}
END_TEST

START_TEST(test_copy_and_contig)
{
    uint8_t buf[1000];
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (uint8_t)(i * 7);
    }
    cut_t c;
    cut(&c, buf, sizeof(buf), 7);
    sl_pbw_reader_t r;
    sl_pbw_init(&r, c.segs, c.n);
    ck_assert_uint_eq(sl_pbw_left(&r), 1000);
    const uint8_t *p;
    ck_assert_int_eq(sl_pbw_contig(&r, 5, &p), 0); /* within the first piece */
    ck_assert_mem_eq(p, buf, 5);
    ck_assert_int_eq(sl_pbw_contig(&r, 5, &p), -EAGAIN); /* spans two */
    uint8_t out[1000];
    ck_assert_int_eq(sl_pbw_copy(&r, out, 996), -EBADMSG); /* more than left */
    ck_assert_uint_eq(sl_pbw_left(&r), 995);
    ck_assert_int_eq(sl_pbw_advance(&r, 3), 0);
    ck_assert_int_eq(sl_pbw_copy(&r, out, 992), 0);
    ck_assert_mem_eq(out, buf + 8, 992);
    ck_assert_int_eq(sl_pbw_advance(&r, 1), -EBADMSG);
    uncut(&c);
}
END_TEST

/* ---------------------------------------------------------------- Batch */

#define NS 3

/* A Batch as a worker packs it: three float32 CHW samples of 2x3x3 and
 * one skipped sample. Returns the packed bytes (caller frees). */
static uint8_t *pack_batch(size_t *len, float data[NS][18])
{
    Sluice__Batch b = SLUICE__BATCH__INIT;
    Sluice__Sample s[NS + 1];
    Sluice__Sample *ptrs[NS + 1];
    for (int i = 0; i < NS; i++) {
        sluice__sample__init(&s[i]);
        s[i].epoch = 2;
        s[i].index = 100 + (uint64_t)i;
        s[i].position = 10 + (uint64_t)i;
        s[i].label = -1 - i;
        s[i].dtype = SL_DT_F32;
        s[i].layout = SL_LAYOUT_CHW;
        s[i].h = 2;
        s[i].w = 3;
        s[i].c = 3;
        for (int k = 0; k < 18; k++) {
            data[i][k] = (float)(i * 100 + k) + 0.5f;
        }
        s[i].data.data = (uint8_t *)data[i];
        s[i].data.len = sizeof(data[i]);
        ptrs[i] = &s[i];
    }
    sluice__sample__init(&s[NS]);
    s[NS].position = 13;
    s[NS].skip_reason = "not_jpeg";
    s[NS].skip_detail = "x.jpg: no SOI marker";
    ptrs[NS] = &s[NS];
    b.job_id = 77;
    b.split_id = 1234567890123ull;
    b.samples = ptrs;
    b.n_samples = NS + 1;
    b.split_done = 1;
    b.stage_to = 4;
    *len = sluice__batch__get_packed_size(&b);
    uint8_t *buf = malloc(*len);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(sluice__batch__pack(&b, buf), *len);
    return buf;
}

START_TEST(test_batch_round_trip_any_cut)
{
    float data[NS][18];
    size_t len;
    uint8_t *buf = pack_batch(&len, data);
    const size_t pieces[] = {0, 1, 2, 3, 5, 13, 64};
    for (size_t pi = 0; pi < sizeof(pieces) / sizeof(pieces[0]); pi++) {
        cut_t c;
        cut(&c, buf, len, pieces[pi]);
        sl_wire_batch_t wb;
        char err[256];
        ck_assert_int_eq(sl_wire_batch_parse(c.segs, c.n, 16, &wb, err, sizeof(err)), 0);
        ck_assert_uint_eq(wb.job_id, 77);
        ck_assert_uint_eq(wb.split_id, 1234567890123ull);
        ck_assert_int_eq(wb.split_done, 1);
        ck_assert_uint_eq(wb.stage_to, 4);
        ck_assert_uint_eq(wb.n_samples, NS + 1);
        for (int i = 0; i < NS; i++) {
            const sl_wire_sample_t *s = &wb.samples[i];
            ck_assert_uint_eq(s->epoch, 2);
            ck_assert_uint_eq(s->index, 100 + (uint64_t)i);
            ck_assert_uint_eq(s->position, 10 + (uint64_t)i);
            ck_assert_int_eq(s->label, -1 - i);
            ck_assert_uint_eq(s->dtype, SL_DT_F32);
            ck_assert_uint_eq(s->layout, SL_LAYOUT_CHW);
            ck_assert_uint_eq(s->h * s->w * s->c, 18);
            ck_assert_uint_eq(sl_pbw_left(&s->skip_reason), 0);
            char detail[128];
            ck_assert_int_eq(sl_wire_sample_check(s, 4, 4, detail, sizeof(detail)), 0);
            float out[18];
            sl_pbw_reader_t d = s->data;
            ck_assert_uint_eq(sl_pbw_left(&d), sizeof(out));
            ck_assert_int_eq(sl_pbw_copy(&d, out, sizeof(out)), 0);
            ck_assert_mem_eq(out, data[i], sizeof(out));
        }
        const sl_wire_sample_t *k = &wb.samples[NS];
        char reason[8], detail[64];
        ck_assert_uint_eq(sl_wire_string(&k->skip_reason, reason, sizeof(reason)), 8);
        ck_assert_str_eq(reason, "not_jpe"); /* truncated to the buffer */
        sl_wire_string(&k->skip_detail, detail, sizeof(detail));
        ck_assert_str_eq(detail, "x.jpg: no SOI marker");
        ck_assert_uint_eq(k->position, 13);
        sl_wire_batch_free(&wb);
        uncut(&c);
    }
    free(buf);
}
END_TEST

/* Every prefix of a valid message: the reader agrees with protobuf-c on
 * which ones are messages at all, and never reads past the cut (ASan). */
START_TEST(test_batch_truncated_anywhere)
{
    float data[NS][18];
    size_t len;
    uint8_t *buf = pack_batch(&len, data);
    for (size_t n = 0; n < len; n++) {
        cut_t c;
        cut(&c, buf, n, 5);
        sl_wire_batch_t wb;
        char err[256] = "";
        int rc = sl_wire_batch_parse(c.segs, c.n, 16, &wb, err, sizeof(err));
        ProtobufCMessage *m = protobuf_c_message_unpack(&sluice__batch__descriptor, NULL, n, buf);
        ck_assert_msg((rc == 0) == (m != NULL), "prefix %zu: ours %d, protobuf-c %s", n, rc,
                      m ? "ok" : "refused");
        if (rc < 0) {
            ck_assert_int_eq(rc, -EBADMSG);
            ck_assert_ptr_nonnull(strstr(err, "malformed Batch"));
            ck_assert_ptr_null(wb.samples);
        } else {
            sl_wire_batch_free(&wb);
        }
        if (m != NULL) {
            protobuf_c_message_free_unpacked(m, NULL);
        }
        uncut(&c);
    }
    free(buf);
}
END_TEST

static int parse_bytes(const uint8_t *b, size_t n, size_t max, sl_wire_batch_t *wb)
{
    sl_pbw_seg_t s = {b, n};
    char err[256];
    int rc = sl_wire_batch_parse(&s, 1, max, wb, err, sizeof(err));
    if (rc < 0) {
        ck_assert_ptr_nonnull(strstr(err, "malformed Batch"));
    }
    return rc;
}

START_TEST(test_batch_wrong_wire_types)
{
    sl_wire_batch_t wb;
    /* samples (3) as a varint */
    const uint8_t a[] = {0x18, 0x01};
    ck_assert_int_eq(parse_bytes(a, sizeof(a), 16, &wb), -EBADMSG);
    /* job_id (1) as LEN */
    const uint8_t b[] = {0x0a, 0x01, 0x00};
    ck_assert_int_eq(parse_bytes(b, sizeof(b), 16, &wb), -EBADMSG);
    /* a sample whose data (10) is a varint */
    const uint8_t c[] = {0x1a, 0x02, 0x50, 0x01};
    ck_assert_int_eq(parse_bytes(c, sizeof(c), 16, &wb), -EBADMSG);
    /* a sample whose h (7) is I32 */
    const uint8_t d[] = {0x1a, 0x05, 0x3d, 1, 2, 3, 4};
    ck_assert_int_eq(parse_bytes(d, sizeof(d), 16, &wb), -EBADMSG);
    /* a sample's data length past the sample's end (but inside the message) */
    const uint8_t e[] = {0x1a, 0x03, 0x52, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    ck_assert_int_eq(parse_bytes(e, sizeof(e), 16, &wb), -EBADMSG);
    /* unknown fields at both levels are skipped */
    const uint8_t ok[] = {0xa2, 0x06, 0x01, 0x00,             /* field 100, LEN 1 */
                          0x1a, 0x06, 0xfd, 0x07, 1, 2, 3, 4, /* sample: field 127, I32 */
                          0x08, 0x07};                        /* job_id 7 */
    ck_assert_int_eq(parse_bytes(ok, sizeof(ok), 16, &wb), 0);
    ck_assert_uint_eq(wb.job_id, 7);
    ck_assert_uint_eq(wb.n_samples, 1);
    sl_wire_batch_free(&wb);
}
END_TEST

START_TEST(test_batch_too_many_samples)
{
    float data[NS][18];
    size_t len;
    uint8_t *buf = pack_batch(&len, data);
    sl_wire_batch_t wb;
    ck_assert_int_eq(parse_bytes(buf, len, NS + 1, &wb), 0);
    sl_wire_batch_free(&wb);
    ck_assert_int_eq(parse_bytes(buf, len, NS, &wb), -EBADMSG);
    free(buf);
}
END_TEST

/* A sample whose header lies about its data. */
START_TEST(test_sample_shape_checks)
{
    uint8_t bytes[72] = {0};
    sl_pbw_seg_t seg = {bytes, sizeof(bytes)};
    sl_wire_sample_t s = {.dtype = SL_DT_F32, .layout = SL_LAYOUT_CHW, .h = 2, .w = 3, .c = 3};
    sl_pbw_init(&s.data, &seg, 1);
    char d[256];
    ck_assert_int_eq(sl_wire_sample_check(&s, 4, 4, d, sizeof(d)), 0);
    s.h = 3; /* 3*3*3*4 = 108 != 72 */
    ck_assert_int_eq(sl_wire_sample_check(&s, 4, 4, d, sizeof(d)), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(d, "inconsistent shape"));
    /* Dimensions whose product overflows 64 bits to exactly 72 must not pass. */
    s.h = 0x80000000u;
    s.w = 0x80000000u;
    s.c = 0x80000000u;
    ck_assert_int_eq(sl_wire_sample_check(&s, 4, 4, d, sizeof(d)), -EBADMSG);
    /* Oversize: a shape beyond SL_TENSOR_MAX_BYTES. */
    s.h = 65536;
    s.w = 65536;
    s.c = 1;
    ck_assert_int_eq(sl_wire_sample_check(&s, 4, 4, d, sizeof(d)), -EBADMSG);
    s.h = 2;
    s.w = 3;
    s.c = 3;
    s.dtype = 3; /* unknown dtype */
    ck_assert_int_eq(sl_wire_sample_check(&s, 4, 4, d, sizeof(d)), -EBADMSG);
    s.dtype = SL_DT_F32;
    s.layout = 2;
    ck_assert_int_eq(sl_wire_sample_check(&s, 4, 4, d, sizeof(d)), -EBADMSG);
    s.layout = SL_LAYOUT_CHW;
    ck_assert_int_eq(sl_wire_sample_check(&s, 5, 4, d, sizeof(d)), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(d, "stage_to 5"));
    /* Encoded bytes exactly when no unit ran. */
    ck_assert_int_eq(sl_wire_sample_check(&s, 0, 4, d, sizeof(d)), -EBADMSG);
    s.dtype = SL_DT_BYTES;
    ck_assert_int_eq(sl_wire_sample_check(&s, 0, 4, d, sizeof(d)), 0);
    ck_assert_int_eq(sl_wire_sample_check(&s, 1, 4, d, sizeof(d)), -EBADMSG);
    /* Empty data. */
    sl_pbw_init(&s.data, &seg, 0);
    ck_assert_int_eq(sl_wire_sample_check(&s, 0, 4, d, sizeof(d)), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(d, "empty or oversized"));
}
END_TEST

/* url_versions (field 50): what protobuf-c packs reads back as pairs; a
 * broken list is refused per sample, never read past its end. */
static size_t pack_versions(const uint64_t *v, size_t n, uint8_t *buf)
{
    Sluice__Sample smp = SLUICE__SAMPLE__INIT;
    Sluice__Sample *ptr = &smp;
    Sluice__Batch b = SLUICE__BATCH__INIT;
    smp.url_versions = (uint64_t *)v;
    smp.n_url_versions = n;
    b.samples = &ptr;
    b.n_samples = 1;
    ck_assert_uint_le(sluice__batch__get_packed_size(&b), 1024);
    return sluice__batch__pack(&b, buf);
}

static int versions_of(const uint64_t *v, size_t n, sl_url_vers_t *ret, char *d, size_t dl)
{
    uint8_t buf[1024];
    size_t len = pack_versions(v, n, buf);
    sl_wire_batch_t wb;
    sl_pbw_seg_t seg = {buf, len}; /* the readers point at it: it must outlive them */
    char err[256];
    ck_assert_int_eq(sl_wire_batch_parse(&seg, 1, 16, &wb, err, sizeof(err)), 0);
    ck_assert_uint_eq(wb.n_samples, 1);
    int rc = sl_wire_url_versions(&wb.samples[0], ret, d, dl);
    sl_wire_batch_free(&wb);
    return rc;
}

START_TEST(test_url_versions)
{
    sl_url_vers_t got;
    char d[256] = "";
    const uint64_t two[] = {0x1122334455667788ULL, 0x99aabbccddeeff01ULL, 5, 6};
    ck_assert_int_eq(versions_of(two, 4, &got, d, sizeof(d)), 0);
    ck_assert_uint_eq(got.n, 2);
    ck_assert_uint_eq(got.v[0].url, 0x1122334455667788ULL);
    ck_assert_uint_eq(got.v[0].tag, 0x99aabbccddeeff01ULL);
    ck_assert_uint_eq(got.v[1].url, 5);
    ck_assert_uint_eq(got.v[1].tag, 6);
    ck_assert_int_eq(versions_of(two, 0, &got, d, sizeof(d)), 0); /* an older worker */
    ck_assert_uint_eq(got.n, 0);
    const uint64_t same[] = {5, 6, 5, 6}; /* one image named twice: one pair */
    ck_assert_int_eq(versions_of(same, 4, &got, d, sizeof(d)), 0);
    ck_assert_uint_eq(got.n, 1);
    const uint64_t odd[] = {5, 6, 7};
    ck_assert_int_eq(versions_of(odd, 3, &got, d, sizeof(d)), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(d, "not whole pairs"));
    const uint64_t zero[] = {5, 0};
    ck_assert_int_eq(versions_of(zero, 2, &got, d, sizeof(d)), -EBADMSG);
    const uint64_t zurl[] = {0, 6};
    ck_assert_int_eq(versions_of(zurl, 2, &got, d, sizeof(d)), -EBADMSG);
    const uint64_t twice[] = {5, 6, 5, 7};
    ck_assert_int_eq(versions_of(twice, 4, &got, d, sizeof(d)), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(d, "twice"));
    uint64_t many[2 * (SL_URL_VERS_MAX + 1)];
    for (size_t i = 0; i < 2 * (SL_URL_VERS_MAX + 1); i++) {
        many[i] = i + 1;
    }
    ck_assert_int_eq(versions_of(many, 2 * SL_URL_VERS_MAX, &got, d, sizeof(d)), 0);
    ck_assert_uint_eq(got.n, SL_URL_VERS_MAX);
    ck_assert_int_eq(versions_of(many, 2 * (SL_URL_VERS_MAX + 1), &got, d, sizeof(d)), -EBADMSG);
    /* Unpacked (wire type I64) is refused as a mistyped field; a length
     * past the sample's end as a broken message. */
    sl_wire_batch_t wb;
    const uint8_t i64[] = {0x1a, 0x0a, 0x91, 0x03, 1, 2, 3, 4, 5, 6, 7, 8};
    ck_assert_int_eq(parse_bytes(i64, sizeof(i64), 16, &wb), -EBADMSG);
    const uint8_t past[] = {0x1a, 0x04, 0x92, 0x03, 0x10, 0x00};
    ck_assert_int_eq(parse_bytes(past, sizeof(past), 16, &wb), -EBADMSG);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pb_wire");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_varints_across_segments);
    tcase_add_test(tc, test_broken_varints);
    tcase_add_test(tc, test_tags_and_skips);
    tcase_add_test(tc, test_copy_and_contig);
    tcase_add_test(tc, test_batch_round_trip_any_cut);
    tcase_add_test(tc, test_batch_truncated_anywhere);
    tcase_add_test(tc, test_batch_wrong_wire_types);
    tcase_add_test(tc, test_batch_too_many_samples);
    tcase_add_test(tc, test_sample_shape_checks);
    tcase_add_test(tc, test_url_versions);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
