/* common/sample/record: a record written field by field parses back to the
 * same fields and bytes; the writer refuses what the format forbids; and
 * every damaged record a peer could send -- bad magic, wrong sizes, fields
 * out of order, a shape that does not fit its bytes, non-zero padding,
 * trailing bytes, every single-byte truncation -- is refused with -EBADMSG,
 * never read past its end. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/sample/record.h"
#include "tests/unit/fixtures.h"

/* key, label, text, tokens, two images (encoded), one decoded image. */
static void build(sl_tensor_t *t)
{
    ck_assert_int_eq(sl_rec_begin(t), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_KEY, "s000001", 7), 0);
    ck_assert_int_eq(sl_rec_add_label(t, -3), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_TEXT, "h\xc3\xa9llo", 6), 0);
    uint32_t ids[3] = {15339, 1917, 0};
    sl_rfield_t tok = {.kind = SL_RF_TOKENS, .dtype = SL_DT_U32, .count = 1, .h = 3, .w = 1,
                       .c = 1, .nbytes = sizeof(ids), .data = (const uint8_t *)ids};
    ck_assert_int_eq(sl_rec_add_copy(t, &tok), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_IMAGE_ENC, "\xff\xd8jpeg", 6), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_IMAGE_ENC, "\x89PNG", 4), 0);
    uint8_t px[2 * 3 * 3];
    for (size_t i = 0; i < sizeof(px); i++) {
        px[i] = (uint8_t)(i * 7);
    }
    sl_rfield_t img = {.kind = SL_RF_IMAGE, .dtype = SL_DT_U8, .layout = SL_LAYOUT_HWC,
                       .count = 1, .h = 2, .w = 3, .c = 3, .src_h = 20, .src_w = 30,
                       .nbytes = sizeof(px), .data = px};
    ck_assert_int_eq(sl_rec_add_copy(t, &img), 0);
    sl_rec_finish(t);
}

START_TEST(test_round_trip)
{
    sl_tensor_t t;
    sl_tensor_init(&t);
    build(&t);
    ck_assert_int_eq(t.dtype, SL_DT_RECORD);
    ck_assert_uint_eq(t.nbytes % 8, 0);
    ck_assert_uint_eq(t.h, t.nbytes);
    sl_rec_t r;
    char err[256];
    ck_assert_int_eq(sl_rec_parse(t.data, t.nbytes, &r, err, sizeof(err)), 0);
    ck_assert_uint_eq(r.n, 7);
    ck_assert_int_eq(sl_rec_label(&r), -3);
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_IMAGE_ENC), 2);
    const sl_rfield_t *k = sl_rec_find(&r, SL_RF_KEY);
    ck_assert_mem_eq(k->data, "s000001", 7);
    const sl_rfield_t *tok = sl_rec_find(&r, SL_RF_TOKENS);
    ck_assert_uint_eq(tok->h, 3);
    uint32_t id;
    memcpy(&id, tok->data + 4, 4);
    ck_assert_uint_eq(id, 1917);
    ck_assert_uint_eq((uintptr_t)tok->data % 4, 0); /* ids are readable in place */
    const sl_rfield_t *img = sl_rec_find(&r, SL_RF_IMAGE);
    ck_assert_uint_eq(img->src_h, 20);
    ck_assert_uint_eq(img->data[5], 35);
    ck_assert(sl_rec_find(&r, SL_RF_TILES) == NULL);
    /* The same content is the same bytes. */
    sl_tensor_t u;
    sl_tensor_init(&u);
    build(&u);
    ck_assert_uint_eq(u.nbytes, t.nbytes);
    ck_assert_mem_eq(u.data, t.data, t.nbytes);
    sl_tensor_free(&u);
    sl_tensor_free(&t);
}
END_TEST

START_TEST(test_writer_refuses)
{
    sl_tensor_t t;
    sl_tensor_init(&t);
    ck_assert_int_eq(sl_rec_begin(&t), 0);
    ck_assert_int_eq(sl_rec_add_bytes(&t, SL_RF_TEXT, "x", 1), 0);
    /* Out of order, and a non-image kind twice. */
    ck_assert_int_eq(sl_rec_add_bytes(&t, SL_RF_KEY, "k", 1), -EINVAL);
    ck_assert_int_eq(sl_rec_add_bytes(&t, SL_RF_TEXT, "y", 1), -EINVAL);
    /* A shape that does not fit its bytes. */
    uint8_t px[4] = {0};
    sl_rfield_t img = {.kind = SL_RF_IMAGE, .dtype = SL_DT_U8, .count = 1, .h = 2, .w = 2,
                       .c = 3, .nbytes = 4, .data = px};
    ck_assert_int_eq(sl_rec_add_copy(&t, &img), -EINVAL);
    /* Too many images. */
    for (unsigned i = 0; i < SL_REC_MAX_FIELDS - 1; i++) {
        ck_assert_int_eq(sl_rec_add_bytes(&t, SL_RF_IMAGE_ENC, "j", 1), 0);
    }
    ck_assert_int_eq(sl_rec_add_bytes(&t, SL_RF_IMAGE_ENC, "j", 1), -EINVAL);
    sl_tensor_free(&t);
}
END_TEST

static void expect_bad(const uint8_t *buf, size_t len, const char *why)
{
    sl_rec_t r;
    char err[256] = "";
    ck_assert_msg(sl_rec_parse(buf, len, &r, err, sizeof(err)) == -EBADMSG, "%s: accepted", why);
    ck_assert_msg(strlen(err) > 0, "%s: no message", why);
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

START_TEST(test_damaged)
{
    sl_tensor_t t;
    sl_tensor_init(&t);
    build(&t);
    size_t n = t.nbytes;
    uint8_t *b = malloc(n + 16);
    /* Every truncation (the header's total disagrees, or a field runs out). */
    for (size_t cut = 0; cut < n; cut++) {
        memcpy(b, t.data, cut);
        expect_bad(b, cut, "truncated");
    }
    /* Every single-byte change of the headers (payload bytes are data). */
    sl_rec_t r;
    ck_assert_int_eq(sl_rec_parse(t.data, n, &r, NULL, 0), 0);
#define RESET() memcpy(b, t.data, n)
    RESET();
    b[0] = 'X';
    expect_bad(b, n, "magic");
    RESET();
    put32(b + 4, 99);
    expect_bad(b, n, "field count");
    RESET();
    memset(b + n, 0, 8);
    expect_bad(b, n + 8, "trailing bytes");
    size_t f0 = SL_REC_HEADER; /* the key field */
    RESET();
    b[f0] = 3; /* key -> text, then label after it: out of order */
    expect_bad(b, n, "order");
    RESET();
    b[f0] = 0;
    expect_bad(b, n, "kind 0");
    RESET();
    b[f0] = 42;
    expect_bad(b, n, "kind 42");
    RESET();
    b[f0 + 3] = 1;
    expect_bad(b, n, "reserved byte");
    RESET();
    put32(b + f0 + 8, 6); /* key's h no longer its nbytes */
    expect_bad(b, n, "byte-string shape");
    RESET();
    b[f0 + SL_REC_FIELD_HEADER + 7] = 1; /* the key's padding (7 bytes + 1 pad) */
    expect_bad(b, n, "padding");
    RESET();
    put32(b + f0 + 32, 0xffffff00u); /* nbytes beyond the end */
    expect_bad(b, n, "nbytes");
    /* The decoded image: a dtype that is no pixel type, a shape too big. */
    const sl_rfield_t *img = sl_rec_find(&r, SL_RF_IMAGE);
    size_t fi = (size_t)(img->data - t.data) - SL_REC_FIELD_HEADER;
    RESET();
    b[fi + 1] = SL_DT_U32;
    expect_bad(b, n, "image dtype");
    RESET();
    put32(b + fi + 8, 0x10000);
    expect_bad(b, n, "image shape");
    RESET();
    b[fi + 2] = 7;
    expect_bad(b, n, "image layout");
#undef RESET
    free(b);
    sl_tensor_free(&t);
}
END_TEST

/* Random bytes after a valid header never crash the parser (ASan run). */
START_TEST(test_noise)
{
    uint8_t b[512];
    uint32_t x = 12345;
    for (int round = 0; round < 2000; round++) {
        for (size_t i = 0; i < sizeof(b); i++) {
            x = x * 1103515245u + 12345u;
            b[i] = (uint8_t)(x >> 16);
        }
        memcpy(b, SL_REC_MAGIC, 4);
        uint64_t total = sizeof(b);
        memcpy(b + 8, &total, 8);
        put32(b + 4, (uint32_t)(round % 6));
        sl_rec_t r;
        (void)sl_rec_parse(b, sizeof(b), &r, NULL, 0);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("record");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_writer_refuses);
    tcase_add_test(tc, test_damaged);
    tcase_add_test(tc, test_noise);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
