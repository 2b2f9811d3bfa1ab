/* The fused normalize + CHW kernel (sl_img_normalize_chw): the same float
 * bits as sl_img_normalize followed by sl_img_to_chw, for every uint8 value
 * of every channel, every input kind it accepts, and the same refusals. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/image/imgops.h"
#include "tests/unit/fixtures.h"

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

/* in with h x w x c of pseudo-random values (every byte value appears in a
 * 256-pixel image: value = (i * 167 + seed) mod 256 walks all of them). */
static void fill(sl_tensor_t *t, sl_dtype_e dt, sl_layout_e layout, uint32_t h, uint32_t w,
                 uint32_t c, uint32_t seed)
{
    ck_assert_int_eq(sl_tensor_reshape(t, dt, layout, h, w, c), 0);
    size_t n = (size_t)h * w * c;
    for (size_t i = 0; i < n; i++) {
        uint8_t v = (uint8_t)((i * 167 + seed) % 256);
        if (dt == SL_DT_U8) {
            t->data[i] = v;
        } else {
            ((float *)(void *)t->data)[i] = (float)v / 255.0f + (float)(i % 7) * 0.01f;
        }
    }
}

/* The reference: the two separate stages. */
static void two_stages(const sl_tensor_t *in, const float mean[3], const float sd[3],
                       sl_tensor_t *out)
{
    sl_tensor_t mid;
    sl_tensor_init(&mid);
    ck_assert_int_eq(sl_img_normalize(in, mean, sd, &mid), 0);
    ck_assert_int_eq(sl_img_to_chw(&mid, out), 0);
    sl_tensor_free(&mid);
}

static void expect_same(const sl_tensor_t *in, const float mean[3], const float sd[3])
{
    sl_tensor_t want, got;
    sl_tensor_init(&want);
    sl_tensor_init(&got);
    two_stages(in, mean, sd, &want);
    ck_assert_int_eq(sl_img_normalize_chw(in, mean, sd, &got), 0);
    ck_assert_int_eq(got.dtype, SL_DT_F32);
    ck_assert_int_eq(got.layout, SL_LAYOUT_CHW);
    ck_assert_uint_eq(got.h, in->h);
    ck_assert_uint_eq(got.w, in->w);
    ck_assert_uint_eq(got.c, in->c);
    ck_assert_uint_eq(got.nbytes, want.nbytes);
    /* Bit for bit (memcmp, not a tolerance): the digests of every spec
     * with normalize + to_chw depend on it. */
    ck_assert_mem_eq(got.data, want.data, want.nbytes);
    sl_tensor_free(&want);
    sl_tensor_free(&got);
}

START_TEST(test_every_value_bit_identical)
{
    sl_tensor_t in;
    sl_tensor_init(&in);
    /* 16 x 16 pixels x 3 channels: each channel sees all 256 values. */
    fill(&in, SL_DT_U8, SL_LAYOUT_HWC, 16, 16, 3, 0);
    expect_same(&in, imagenet_mean, imagenet_std);
    const float odd_mean[3] = {-3.5f, 0.0f, 1e-7f};
    const float odd_std[3] = {1e-3f, 7.0f, 0.333f};
    expect_same(&in, odd_mean, odd_std);
    /* Shapes that are no multiple of any vector width, and a 224 crop. */
    const uint32_t dims[][2] = {{1, 1}, {3, 5}, {7, 33}, {224, 224}, {1, 1001}};
    for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
        fill(&in, SL_DT_U8, SL_LAYOUT_HWC, dims[d][0], dims[d][1], 3, (uint32_t)d * 31);
        expect_same(&in, imagenet_mean, imagenet_std);
    }
    sl_tensor_free(&in);
}
END_TEST

START_TEST(test_other_inputs)
{
    sl_tensor_t in;
    sl_tensor_init(&in);
    /* F32 HWC (only a peer sends it: the formula without the table). */
    fill(&in, SL_DT_F32, SL_LAYOUT_HWC, 9, 13, 3, 5);
    expect_same(&in, imagenet_mean, imagenet_std);
    /* Already planar: CHW input, and one channel (both layouts alike). */
    fill(&in, SL_DT_U8, SL_LAYOUT_CHW, 9, 13, 3, 1);
    expect_same(&in, imagenet_mean, imagenet_std);
    fill(&in, SL_DT_F32, SL_LAYOUT_CHW, 4, 4, 3, 2);
    expect_same(&in, imagenet_mean, imagenet_std);
    fill(&in, SL_DT_U8, SL_LAYOUT_HWC, 16, 16, 1, 3);
    expect_same(&in, imagenet_mean, imagenet_std);
    /* The output tensor is reused (grown, never shrunk) across calls. */
    sl_tensor_t out;
    sl_tensor_init(&out);
    fill(&in, SL_DT_U8, SL_LAYOUT_HWC, 64, 64, 3, 4);
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, imagenet_std, &out), 0);
    fill(&in, SL_DT_U8, SL_LAYOUT_HWC, 2, 3, 3, 4);
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, imagenet_std, &out), 0);
    ck_assert_uint_eq(out.nbytes, 2 * 3 * 3 * sizeof(float));
    ck_assert_uint_ge(out.cap, 64 * 64 * 3 * sizeof(float));
    sl_tensor_free(&out);
    sl_tensor_free(&in);
}
END_TEST

START_TEST(test_bad_args)
{
    sl_tensor_t in, out;
    sl_tensor_init(&in);
    sl_tensor_init(&out);
    const float zero_std[3] = {0.2f, 0.0f, 0.2f};
    const float inf_std[3] = {0.2f, INFINITY, 0.2f};
    const float nan_mean[3] = {0.2f, 0.2f, NAN};
    fill(&in, SL_DT_U8, SL_LAYOUT_HWC, 2, 2, 2, 0);
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, imagenet_std, &out), -EINVAL);
    fill(&in, SL_DT_U8, SL_LAYOUT_HWC, 2, 2, 4, 0);
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, imagenet_std, &out), -EINVAL);
    fill(&in, SL_DT_U8, SL_LAYOUT_HWC, 2, 2, 3, 0);
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, zero_std, &out), -EINVAL);
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, inf_std, &out), -EINVAL);
    ck_assert_int_eq(sl_img_normalize_chw(&in, nan_mean, imagenet_std, &out), -EINVAL);
    ck_assert_int_eq(sl_img_normalize_chw(&in, NULL, imagenet_std, &out), -EINVAL);
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, NULL, &out), -EINVAL);
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, imagenet_std, NULL), -EINVAL);
    ck_assert_int_eq(sl_img_normalize_chw(NULL, imagenet_mean, imagenet_std, &out), -EINVAL);
    /* In place would overwrite pixels not yet read. */
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, imagenet_std, &in), -EINVAL);
    /* Encoded bytes, and a shape that does not match the bytes (a peer's
     * lie): refused before any pixel is read. */
    in.dtype = SL_DT_BYTES;
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, imagenet_std, &out), -EINVAL);
    in.dtype = SL_DT_U8;
    in.w = 3;
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, imagenet_std, &out), -EINVAL);
    in.w = 2;
    in.layout = (sl_layout_e)9;
    ck_assert_int_eq(sl_img_normalize_chw(&in, imagenet_mean, imagenet_std, &out), -EINVAL);
    sl_tensor_free(&in);
    sl_tensor_free(&out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("imgops_normalize");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_every_value_bit_identical);
    tcase_add_test(tc, test_other_inputs);
    tcase_add_test(tc, test_bad_args);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
