/* common/sample/codec: the delta filter and zstd wrapper round-trip any
 * bytes; every broken payload a peer could send -- corrupt, truncated,
 * extended, a frame of another size, an unknown codec -- is refused with an
 * error, never decoded to other bytes or read past its end. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/sample/codec.h"
#include "tests/unit/fixtures.h"

#define W 64
#define H 48
#define C 3
#define N ((size_t)W * H * C)

/* A smooth image with some noise: compresses, like a crop of a photo. */
static uint8_t *image(void)
{
    uint8_t *p = malloc(N);
    ck_assert_ptr_nonnull(p);
    uint32_t x = 12345;
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        size_t px = i / C, ch = i % C;
        p[i] = (uint8_t)((px % W) * 2 + (px / W) + ch * 40 + ((x >> 16) & 3));
    }
    return p;
}

static int decompress(sl_codec_t *z, sl_codec_e codec, const uint8_t *in, size_t n, uint8_t *dst,
                      size_t raw, char *err)
{
    struct iovec iv = {(void *)in, n};
    return sl_codec_decompress(z, codec, &iv, 1, dst, raw, W * C, C, err, 200);
}

/* The undelta against the plain definition (each byte plus its restored
 * left neighbour, step bytes back), on geometries that take every path:
 * step 1 with rows of whole, partial and no 16-byte blocks; step 3 with a
 * row that is and one that is not a multiple of 3; other steps. */
START_TEST(test_undelta_matches_definition)
{
    static const uint32_t geo[][2] = {{W, 1}, {W * C, C}, {W * C, 1}, {17, 1}, {15, 1},
                                      {2, 1}, {14, 3},    {W * C, 4}, {8, 7},  {W * C / 2, 3}};
    uint8_t *a = image(), *b = malloc(N);
    for (size_t g = 0; g < sizeof(geo) / sizeof(geo[0]); g++) {
        uint32_t row = geo[g][0], step = geo[g][1];
        size_t n = N - N % row;
        memcpy(b, a, N);
        sl_codec_undelta(b, n, row, step);
        uint8_t *want = malloc(N);
        memcpy(want, a, N);
        for (size_t r = 0; r < n; r += row) {
            for (size_t i = r + step; i < r + row; i++) {
                want[i] = (uint8_t)(want[i] + want[i - step]);
            }
        }
        ck_assert_msg(memcmp(want, b, N) == 0, "row %u step %u", row, step);
        sl_codec_delta(b, n, row, step);
        ck_assert_msg(memcmp(a, b, N) == 0, "round trip: row %u step %u", row, step);
        free(want);
    }
    free(a);
    free(b);
}
END_TEST

START_TEST(test_delta_round_trip)
{
    uint8_t *a = image(), *b = malloc(N);
    memcpy(b, a, N);
    sl_codec_delta(b, N, W * C, C);
    ck_assert(memcmp(a, b, N) != 0);
    sl_codec_undelta(b, N, W * C, C);
    ck_assert(memcmp(a, b, N) == 0);
    /* A geometry that does not fit leaves the bytes alone on both ends. */
    sl_codec_delta(b, N, 7, C);
    ck_assert(memcmp(a, b, N) == 0);
    uint32_t row, step;
    sl_codec_delta_geometry(1, W, C, &row, &step);
    ck_assert_uint_eq(row, W);
    ck_assert_uint_eq(step, 1);
    sl_codec_delta_geometry(0, W, C, &row, &step);
    ck_assert_uint_eq(row, W * C);
    ck_assert_uint_eq(step, C);
    free(a);
    free(b);
}
END_TEST

START_TEST(test_round_trip_both_codecs_in_segments)
{
    sl_codec_t *z = sl_codec_new();
    uint8_t *a = image(), *out = malloc(N);
    size_t sizes[2];
    for (int codec = SL_CODEC_ZSTD; codec <= SL_CODEC_ZSTD_DELTA; codec++) {
        uint8_t *c = NULL;
        size_t cn = 0;
        ck_assert_int_eq(sl_codec_compress(z, codec, a, N, W * C, C, &c, &cn), 0);
        ck_assert_uint_lt(cn, N);
        sizes[codec - 1] = cn;
        /* The payload split over several segments, as gRPC's slices. */
        struct iovec iv[3] = {{c, 1}, {c + 1, cn / 2}, {c + 1 + cn / 2, cn - 1 - cn / 2}};
        char err[200];
        memset(out, 0, N);
        ck_assert_int_eq(sl_codec_decompress(z, codec, iv, 3, out, N, W * C, C, err, 200), 0);
        ck_assert(memcmp(a, out, N) == 0);
        free(c);
    }
    /* The filter is what makes image bytes compress better. */
    ck_assert_uint_lt(sizes[1], sizes[0]);
    /* Incompressible bytes are not worth sending compressed. */
    uint32_t x = 1;
    for (size_t i = 0; i < N; i++) {
        x = x * 1664525u + 1013904223u;
        a[i] = (uint8_t)(x >> 24);
    }
    uint8_t *c = NULL;
    size_t cn = 0;
    ck_assert_int_eq(sl_codec_compress(z, SL_CODEC_ZSTD, a, N, 0, 0, &c, &cn), -ENOSPC);
    ck_assert_int_eq(sl_codec_compress(z, SL_CODEC_NONE, a, N, 0, 0, &c, &cn), -EINVAL);
    ck_assert_ptr_null(c);
    free(a);
    free(out);
    sl_codec_free(z);
    sl_codec_free(NULL);
}
END_TEST

START_TEST(test_broken_payloads_refused)
{
    sl_codec_t *z = sl_codec_new();
    uint8_t *a = image(), *out = malloc(N + 64);
    uint8_t *c = NULL;
    size_t cn = 0;
    char err[200];
    ck_assert_int_eq(sl_codec_compress(z, SL_CODEC_ZSTD_DELTA, a, N, W * C, C, &c, &cn), 0);
    uint8_t *m = malloc(cn + 16);

    /* Every single flipped byte: refused (the frame checksum catches what
     * the format alone does not), never decoded to other bytes. A few bits
     * of an entropy-coded stream are padding that does not change the
     * output: those decode to the original, which is fine. */
    size_t refused = 0;
    for (size_t i = 0; i < cn; i++) {
        memcpy(m, c, cn);
        m[i] ^= 0x5a;
        int rc = decompress(z, SL_CODEC_ZSTD_DELTA, m, cn, out, N, err);
        ck_assert_msg(rc == -EBADMSG || (rc == 0 && memcmp(out, a, N) == 0),
                      "byte %zu of %zu flipped: rc %d", i, cn, rc);
        refused += rc == -EBADMSG;
    }
    ck_assert_uint_gt(refused, cn * 9 / 10);
    /* Every truncation. */
    for (size_t n = 0; n < cn; n++) {
        ck_assert_int_eq(decompress(z, SL_CODEC_ZSTD_DELTA, c, n, out, N, err), -EBADMSG);
    }
    /* Bytes after the frame. */
    memcpy(m, c, cn);
    memset(m + cn, 0, 16);
    ck_assert_int_eq(decompress(z, SL_CODEC_ZSTD_DELTA, m, cn + 16, out, N, err), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(err, "after the end"));
    /* A raw_size other than the frame's: smaller, larger. */
    ck_assert_int_eq(decompress(z, SL_CODEC_ZSTD_DELTA, c, cn, out, N - 1, err), -EBADMSG);
    ck_assert_int_eq(decompress(z, SL_CODEC_ZSTD_DELTA, c, cn, out, N + 64, err), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(err, "raw_size"));
    /* Unknown codecs. */
    ck_assert_int_eq(decompress(z, SL_CODEC_NONE, c, cn, out, N, err), -EBADMSG);
    ck_assert_int_eq(decompress(z, SL_CODEC__COUNT, c, cn, out, N, err), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(err, "unknown codec"));
    /* Not zstd at all. */
    ck_assert_int_eq(decompress(z, SL_CODEC_ZSTD, a, 100, out, N, err), -EBADMSG);
    /* The context still works after all that. */
    ck_assert_int_eq(decompress(z, SL_CODEC_ZSTD_DELTA, c, cn, out, N, err), 0);
    ck_assert(memcmp(a, out, N) == 0);
    free(m);
    free(c);
    free(a);
    free(out);
    sl_codec_free(z);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_delta_round_trip);
    tcase_add_test(tc, test_undelta_matches_definition);
    tcase_add_test(tc, test_round_trip_both_codecs_in_segments);
    tcase_add_test(tc, test_broken_payloads_refused);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
