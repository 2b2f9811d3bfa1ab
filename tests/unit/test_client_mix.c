/* client/lib/mix: the MixUp / CutMix math on small synthetic batches (exact
 * values for a given lambda and box, as torchvision's RandomMixup /
 * RandomCutmix compute them in float32) and the per-batch draws. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "client/lib/mix.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures.h"

/* 3 samples, 1 x 2 x 2: sample j's pixels are 10j + (0..3). */
START_TEST(test_mixup_values)
{
    float d[12], scratch[4], soft[3 * 4];
    for (int i = 0; i < 12; i++) {
        d[i] = (float)(10 * (i / 4) + i % 4);
    }
    const int32_t labels[3] = {2, 0, 0};
    cl_mix_t m = {.op = CL_MIX_MIXUP, .lam = 0.25};
    ck_assert_int_eq(cl_mix_apply(&m, d, 3, 1, 2, 2, 1, labels, 4, soft, scratch), 0);
    /* torch.roll(batch, 1, 0): sample 0 with sample 2, 1 with 0, 2 with 1. */
    const int partner[3] = {2, 0, 1};
    for (int j = 0; j < 3; j++) {
        for (int p = 0; p < 4; p++) {
            float mine = (float)(10 * j + p), other = (float)(10 * partner[j] + p);
            float want = mine * 0.25f + other * 0.75f;
            ck_assert_float_eq(d[j * 4 + p], want);
        }
    }
    /* lam * onehot(y_j) + (1 - lam) * onehot(y_{j-1}) */
    const float want_soft[3][4] = {{0.75f, 0, 0.25f, 0}, {0.25f, 0, 0.75f, 0}, {1.0f, 0, 0, 0}};
    ck_assert_mem_eq(soft, want_soft, sizeof(want_soft));
}
END_TEST

/* 2 samples, 2 x 3 x 4, box x 1..3, y 0..2: pasted from the other sample in
 * both layouts; labels weighted by the corrected lambda. */
START_TEST(test_cutmix_box)
{
    for (int chw = 0; chw < 2; chw++) {
        float d[2 * 24], scratch[24], soft[2 * 3];
        for (int i = 0; i < 48; i++) {
            d[i] = (float)i;
        }
        const int32_t labels[2] = {1, 2};
        cl_mix_t m = {.op = CL_MIX_CUTMIX, .lam = 1.0 - 4.0 / 12.0, .box = {1, 0, 3, 2}};
        ck_assert_int_eq(cl_mix_apply(&m, d, 2, 2, 3, 4, chw, labels, 3, soft, scratch), 0);
        int pasted = 0;
        for (int j = 0; j < 2; j++) {
            for (int ch = 0; ch < 2; ch++) {
                for (int y = 0; y < 3; y++) {
                    for (int x = 0; x < 4; x++) {
                        int at = chw ? (ch * 3 + y) * 4 + x : (y * 4 + x) * 2 + ch;
                        int in = x >= 1 && x < 3 && y < 2;
                        int src = in ? 1 - j : j;
                        ck_assert_float_eq(d[j * 24 + at], (float)(src * 24 + at));
                        pasted += in;
                    }
                }
            }
        }
        ck_assert_int_eq(pasted, 2 * 2 * 4);
        float a = (float)(1.0 - 4.0 / 12.0), b = (float)(4.0 / 12.0);
        const float want_soft[2][3] = {{0, a, b}, {0, b, a}};
        ck_assert_mem_eq(soft, want_soft, sizeof(want_soft));
    }
}
END_TEST

/* Not applied (p failed): images untouched, labels one-hot (torchvision
 * converts the targets first). A label out of range writes nothing. */
START_TEST(test_none_and_bad_label)
{
    float d[4] = {1, 2, 3, 4}, scratch[2], soft[2 * 2];
    const int32_t labels[2] = {1, 0};
    cl_mix_t m = {.op = CL_MIX_NONE, .lam = 1.0};
    ck_assert_int_eq(cl_mix_apply(&m, d, 2, 1, 1, 2, 1, labels, 2, soft, scratch), 0);
    const float want_d[4] = {1, 2, 3, 4}, want_soft[4] = {0, 1, 1, 0};
    ck_assert_mem_eq(d, want_d, sizeof(d));
    ck_assert_mem_eq(soft, want_soft, sizeof(soft));
    const int32_t bad[2] = {0, 2};
    m.op = CL_MIX_MIXUP;
    m.lam = 0.5;
    ck_assert_int_eq(cl_mix_apply(&m, d, 2, 1, 1, 2, 1, bad, 2, soft, scratch), -EINVAL);
    ck_assert_mem_eq(d, want_d, sizeof(d));
}
END_TEST

/* Draws: a function of (seed, epoch, first position, rank); p 0 never
 * applies; the CutMix box stays inside the image and lambda is 1 - its area
 * ratio; with both transforms each is drawn for some batch. */
START_TEST(test_draws)
{
    sl_spec_t s;
    sl_spec_init(&s);
    s.seed = 11;
    s.num_classes = 10;
    s.nbatch_tfs = 2;
    s.batch_tfs[0] = (sl_batch_tf_t){.op = SL_BATCH_TF_MIXUP, .alpha = 0.2, .p = 1.0};
    s.batch_tfs[1] = (sl_batch_tf_t){.op = SL_BATCH_TF_CUTMIX, .alpha = 1.0, .p = 1.0};
    int seen[3] = {0, 0, 0};
    for (uint64_t pos = 0; pos < 64 * 8; pos += 8) {
        cl_mix_t a, b;
        cl_mix_draw(&s, 3, pos, 30, 40, &a);
        cl_mix_draw(&s, 3, pos, 30, 40, &b);
        ck_assert_mem_eq(&a, &b, sizeof(a));
        ck_assert(a.op == CL_MIX_MIXUP || a.op == CL_MIX_CUTMIX);
        seen[a.op]++;
        ck_assert(a.lam >= 0.0 && a.lam <= 1.0);
        if (a.op == CL_MIX_CUTMIX) {
            ck_assert(a.box[0] <= a.box[2] && a.box[2] <= 40);
            ck_assert(a.box[1] <= a.box[3] && a.box[3] <= 30);
            double area = (double)(a.box[2] - a.box[0]) * (a.box[3] - a.box[1]);
            ck_assert(a.lam == 1.0 - area / 1200.0);
        }
    }
    ck_assert_int_gt(seen[CL_MIX_MIXUP], 10);
    ck_assert_int_gt(seen[CL_MIX_CUTMIX], 10);
    cl_mix_t a, b;
    cl_mix_draw(&s, 3, 0, 30, 40, &a);
    s.rank = 1;
    cl_mix_draw(&s, 3, 0, 30, 40, &b);
    ck_assert(a.lam != b.lam);
    s.batch_tfs[0].p = 0.0;
    s.batch_tfs[1].p = 0.0;
    for (uint64_t pos = 0; pos < 32; pos++) {
        cl_mix_draw(&s, 0, pos, 30, 40, &a);
        ck_assert_int_eq(a.op, CL_MIX_NONE);
        ck_assert(a.lam == 1.0);
    }
    s.nbatch_tfs = 0;
    cl_mix_draw(&s, 0, 0, 30, 40, &a);
    ck_assert_int_eq(a.op, CL_MIX_NONE);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_mix");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_mixup_values);
    tcase_add_test(tc, test_cutmix_box);
    tcase_add_test(tc, test_none_and_bad_label);
    tcase_add_test(tc, test_draws);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
