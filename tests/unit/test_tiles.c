/* test_tiles: sl_tiles_grid spot checks (tests/integration/test_tiles_grid.sh
 * compares it with InternVL's Python over thousands of inputs) and
 * sl_tiles_make: tiles equal crops of the resized image, row-major order,
 * the thumbnail, tiny and extreme images, limits. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/image/imgops.h"
#include "common/image/tiles.h"
#include "tests/unit/fixtures.h"

static void make_rgb(sl_tensor_t *t, uint32_t w, uint32_t h, uint32_t seed)
{
    ck_assert_int_eq(sl_tensor_reshape(t, SL_DT_U8, SL_LAYOUT_HWC, h, w, 3), 0);
    fx_pattern_rgb(w, h, seed, t->data);
}

/* Tile k of out, as a plain CHW tensor of its own. */
static const uint8_t *tile_at(const sl_tensor_t *out, uint32_t k)
{
    return out->data + (size_t)k * 3 * out->h * out->w;
}

/* The same tile computed the long way: resize, crop, HWC -> CHW. */
static void expect_tile(const sl_tensor_t *resized, uint32_t x, uint32_t y, uint32_t tile,
                        sl_tensor_t *chw)
{
    sl_tensor_t crop;
    sl_tensor_init(&crop);
    ck_assert_int_eq(sl_img_crop(resized, x, y, tile, tile, &crop), 0);
    ck_assert_int_eq(sl_img_to_chw(&crop, chw), 0);
    sl_tensor_free(&crop);
}

static int make(const sl_tensor_t *in, uint32_t tile, uint32_t mn, uint32_t mx, bool thumb,
                sl_tensor_t *out, uint32_t *n, uint32_t *cols, uint32_t *rows)
{
    char err[256] = "";
    int rc = sl_tiles_make(in, tile, mn, mx, thumb, out, n, cols, rows, err, sizeof(err));
    if (rc < 0) {
        ck_assert_msg(err[0] != '\0', "rc %d without a message", rc);
    }
    return rc;
}

START_TEST(test_grid_known)
{
    uint32_t c, r;
    ck_assert_int_eq(sl_tiles_grid(800, 600, 448, 1, 12, &c, &r), 0);
    ck_assert(c == 4 && r == 3);
    ck_assert_int_eq(sl_tiles_grid(300, 200, 64, 1, 6, &c, &r), 0);
    ck_assert(c == 3 && r == 2);
    ck_assert_int_eq(sl_tiles_grid(1, 4000, 32, 1, 12, &c, &r), 0);
    ck_assert(c == 1 && r == 12);
    ck_assert_int_eq(sl_tiles_grid(4000, 1, 32, 1, 12, &c, &r), 0);
    ck_assert(c == 12 && r == 1);
    /* 5:4 is exactly halfway between 1x2 (0.5) and 2x1 (2.0). InternVL's set
     * yields (1, 2) first; the later (2, 1) wins only for an area above
     * 0.5 * 448^2 * 2. */
    ck_assert_int_eq(sl_tiles_grid(1250, 1000, 448, 2, 2, &c, &r), 0);
    ck_assert(c == 2 && r == 1);
    ck_assert_int_eq(sl_tiles_grid(5, 4, 448, 2, 2, &c, &r), 0);
    ck_assert(c == 1 && r == 2);
    ck_assert_int_eq(sl_tiles_grid(640, 480, 448, 1, 1, &c, &r), 0);
    ck_assert(c == 1 && r == 1);
    /* Refused. */
    ck_assert_int_eq(sl_tiles_grid(0, 1, 448, 1, 12, &c, &r), -EINVAL);
    ck_assert_int_eq(sl_tiles_grid(1, 1, 0, 1, 12, &c, &r), -EINVAL);
    ck_assert_int_eq(sl_tiles_grid(1, 1, 4097, 1, 12, &c, &r), -EINVAL);
    ck_assert_int_eq(sl_tiles_grid(1, 1, 448, 0, 12, &c, &r), -EINVAL);
    ck_assert_int_eq(sl_tiles_grid(1, 1, 448, 13, 12, &c, &r), -EINVAL);
    ck_assert_int_eq(sl_tiles_grid(1, 1, 448, 1, 65, &c, &r), -EINVAL);
    ck_assert_int_eq(sl_tiles_grid(1, 1, 4096, 64, 64, &c, &r), 0);
}
END_TEST

/* Every tile is the crop of the image resized onto the grid, in row-major
 * order; the thumbnail is the whole image resized to tile x tile. */
START_TEST(test_tiles_are_crops)
{
    const uint32_t sizes[][2] = {{300, 200}, {200, 300}, {517, 123}, {64, 64}, {33, 250}};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        for (int thumb = 0; thumb <= 1; thumb++) {
            sl_tensor_t in, out, resized, chw;
            sl_tensor_init(&in);
            sl_tensor_init(&out);
            sl_tensor_init(&resized);
            sl_tensor_init(&chw);
            make_rgb(&in, sizes[s][0], sizes[s][1], (uint32_t)s + 1);
            const uint32_t tile = 40;
            uint32_t n, cols, rows, gc, gr;
            ck_assert_int_eq(make(&in, tile, 1, 6, thumb, &out, &n, &cols, &rows), 0);
            ck_assert_int_eq(sl_tiles_grid(in.w, in.h, tile, 1, 6, &gc, &gr), 0);
            ck_assert(cols == gc && rows == gr);
            uint32_t grid = cols * rows;
            ck_assert_uint_eq(n, grid + (thumb && grid > 1 ? 1 : 0));
            ck_assert_int_eq(out.dtype, SL_DT_U8);
            ck_assert_int_eq(out.layout, SL_LAYOUT_CHW);
            ck_assert(out.h == tile && out.w == tile && out.c == 3 * n);
            ck_assert_uint_eq(out.nbytes, (size_t)n * 3 * tile * tile);

            ck_assert_int_eq(sl_img_resize_rect(&in, 0, 0, in.w, in.h, rows * tile,
                                                cols * tile, &resized),
                             0);
            for (uint32_t k = 0; k < grid; k++) {
                expect_tile(&resized, (k % cols) * tile, (k / cols) * tile, tile, &chw);
                ck_assert_msg(memcmp(tile_at(&out, k), chw.data, chw.nbytes) == 0,
                              "%ux%u: tile %u of %ux%u", in.w, in.h, k, cols, rows);
            }
            if (n > grid) {
                ck_assert_int_eq(sl_img_resize_rect(&in, 0, 0, in.w, in.h, tile, tile, &resized),
                                 0);
                ck_assert_int_eq(sl_img_to_chw(&resized, &chw), 0);
                ck_assert_mem_eq(tile_at(&out, grid), chw.data, chw.nbytes);
            }
            sl_tensor_free(&in);
            sl_tensor_free(&out);
            sl_tensor_free(&resized);
            sl_tensor_free(&chw);
        }
    }
}
END_TEST

/* An image that is already cols * tile x rows * tile and made of solid
 * blocks: the resize is the identity and tile k is block (k % cols, k / cols). */
START_TEST(test_order_row_major)
{
    const uint32_t tile = 8, cols = 3, rows = 2;
    sl_tensor_t in, out;
    sl_tensor_init(&in);
    sl_tensor_init(&out);
    ck_assert_int_eq(sl_tensor_reshape(&in, SL_DT_U8, SL_LAYOUT_HWC, rows * tile, cols * tile, 3),
                     0);
    for (uint32_t y = 0; y < in.h; y++) {
        for (uint32_t x = 0; x < in.w; x++) {
            uint8_t *p = in.data + ((size_t)y * in.w + x) * 3;
            uint32_t block = (y / tile) * cols + x / tile;
            p[0] = (uint8_t)(10 + block);
            p[1] = (uint8_t)(100 + block);
            p[2] = (uint8_t)(200 + block);
        }
    }
    uint32_t n, c, r;
    ck_assert_int_eq(make(&in, tile, 1, 6, false, &out, &n, &c, &r), 0);
    ck_assert(n == 6 && c == cols && r == rows);
    for (uint32_t k = 0; k < n; k++) {
        const uint8_t *t = tile_at(&out, k);
        for (uint32_t ch = 0; ch < 3; ch++) {
            for (uint32_t i = 0; i < tile * tile; i++) {
                uint32_t want = (ch == 0 ? 10 : ch == 1 ? 100 : 200) + k;
                ck_assert_uint_eq(t[ch * tile * tile + i], want);
            }
        }
    }
    sl_tensor_free(&in);
    sl_tensor_free(&out);
}
END_TEST

START_TEST(test_one_pixel)
{
    sl_tensor_t in, out;
    sl_tensor_init(&in);
    sl_tensor_init(&out);
    ck_assert_int_eq(sl_tensor_reshape(&in, SL_DT_U8, SL_LAYOUT_HWC, 1, 1, 3), 0);
    in.data[0] = 7;
    in.data[1] = 128;
    in.data[2] = 250;
    uint32_t n, c, r;
    /* thumbnail asked, but one tile needs none. */
    ck_assert_int_eq(make(&in, 16, 1, 12, true, &out, &n, &c, &r), 0);
    ck_assert(n == 1 && c == 1 && r == 1 && out.c == 3);
    for (uint32_t i = 0; i < 16 * 16; i++) {
        ck_assert(out.data[i] == 7 && out.data[256 + i] == 128 && out.data[512 + i] == 250);
    }
    /* min_tiles forces a grid even on one pixel. */
    ck_assert_int_eq(make(&in, 4, 4, 4, true, &out, &n, &c, &r), 0);
    ck_assert(c * r == 4 && n == 5 && out.c == 15);
    for (size_t i = 0; i < out.nbytes; i++) {
        uint32_t ch = (uint32_t)(i / 16) % 3;
        ck_assert_uint_eq(out.data[i], ch == 0 ? 7 : ch == 1 ? 128 : 250);
    }
    sl_tensor_free(&in);
    sl_tensor_free(&out);
}
END_TEST

START_TEST(test_extreme_aspect)
{
    const uint32_t sizes[][2] = {{1, 4000}, {4000, 1}};
    for (int s = 0; s < 2; s++) {
        sl_tensor_t in, out;
        sl_tensor_init(&in);
        sl_tensor_init(&out);
        make_rgb(&in, sizes[s][0], sizes[s][1], 5);
        uint32_t n, c, r;
        ck_assert_int_eq(make(&in, 32, 1, 12, true, &out, &n, &c, &r), 0);
        ck_assert_uint_eq(n, 13);
        ck_assert(s == 0 ? (c == 1 && r == 12) : (c == 12 && r == 1));
        ck_assert(out.h == 32 && out.w == 32 && out.c == 39);
        /* max_tiles 1: one tile, no thumbnail, whatever the shape. */
        ck_assert_int_eq(make(&in, 32, 1, 1, true, &out, &n, &c, &r), 0);
        ck_assert(n == 1 && c == 1 && r == 1 && out.c == 3);
        sl_tensor_free(&in);
        sl_tensor_free(&out);
    }
}
END_TEST

/* The same bytes on every call, whatever the output buffer held. */
START_TEST(test_deterministic_reuse)
{
    sl_tensor_t in, a, b;
    sl_tensor_init(&in);
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    make_rgb(&in, 301, 177, 9);
    uint32_t n1, n2, c, r;
    ck_assert_int_eq(make(&in, 56, 1, 12, true, &a, &n1, &c, &r), 0);
    ck_assert_int_eq(sl_tensor_reserve(&b, a.nbytes * 2), 0);
    memset(b.data, 0xCC, b.cap);
    ck_assert_int_eq(make(&in, 56, 1, 12, true, &b, &n2, NULL, NULL), 0);
    ck_assert_uint_eq(n1, n2);
    ck_assert_uint_eq(a.nbytes, b.nbytes);
    ck_assert_mem_eq(a.data, b.data, a.nbytes);
    sl_tensor_free(&in);
    sl_tensor_free(&a);
    sl_tensor_free(&b);
}
END_TEST

START_TEST(test_refused)
{
    sl_tensor_t in, out;
    sl_tensor_init(&in);
    sl_tensor_init(&out);
    uint32_t n = 99, c, r;
    ck_assert_int_eq(make(&in, 32, 1, 12, false, &out, &n, &c, &r), -EINVAL); /* empty */
    make_rgb(&in, 20, 10, 1);
    ck_assert_int_eq(make(&in, 0, 1, 12, false, &out, &n, &c, &r), -EINVAL);
    ck_assert_int_eq(make(&in, 4097, 1, 12, false, &out, &n, &c, &r), -EINVAL);
    ck_assert_int_eq(make(&in, 32, 0, 12, false, &out, &n, &c, &r), -EINVAL);
    ck_assert_int_eq(make(&in, 32, 5, 4, false, &out, &n, &c, &r), -EINVAL);
    ck_assert_int_eq(make(&in, 32, 1, 65, false, &out, &n, &c, &r), -EINVAL);
    ck_assert_int_eq(make(&in, 32, 1, 12, false, &in, &n, &c, &r), -EINVAL);
    /* 64 tiles of 4096^2 RGB: 3 GiB, over SL_TENSOR_MAX_BYTES, refused
     * before anything is allocated. */
    ck_assert_int_eq(make(&in, 4096, 64, 64, false, &out, &n, &c, &r), -EFBIG);
    ck_assert_ptr_null(out.data);
    ck_assert_uint_eq(n, 99); /* untouched on failure */
    /* Not RGB HWC u8. */
    in.c = 1;
    in.nbytes = 200;
    ck_assert_int_eq(make(&in, 32, 1, 12, false, &out, &n, &c, &r), -EINVAL);
    make_rgb(&in, 20, 10, 1);
    in.layout = SL_LAYOUT_CHW;
    ck_assert_int_eq(make(&in, 32, 1, 12, false, &out, &n, &c, &r), -EINVAL);
    in.layout = SL_LAYOUT_HWC;
    in.dtype = SL_DT_F32;
    ck_assert_int_eq(make(&in, 32, 1, 12, false, &out, &n, &c, &r), -EINVAL);
    sl_tensor_free(&in);
    sl_tensor_free(&out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tiles");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_grid_known);
    tcase_add_test(tc, test_tiles_are_crops);
    tcase_add_test(tc, test_order_row_major);
    tcase_add_test(tc, test_one_pixel);
    tcase_add_test(tc, test_extreme_aspect);
    tcase_add_test(tc, test_deterministic_reuse);
    tcase_add_test(tc, test_refused);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
