/* client/lib/steps: step times reported by a training loop fit the trainer
 * model (seconds = a tokens + b tokens^2 + c tiles + d samples summed over
 * the step); the error is measured on reports the fit had not seen; a bad
 * time is refused. Batches are real record batches built here. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/steps.h"
#include "common/base/rng.h"
#include "common/sample/record.h"
#include "tests/unit/fixtures.h"

/* A batch of n records with the given sequence lengths and tile counts. */
static sluice_batch_t *batch(uint32_t n, const uint32_t *seq, const uint32_t *tiles)
{
    sluice_batch_t *b = calloc(1, sizeof(*b));
    size_t *offs = calloc(n, sizeof(*offs)), *sizes = calloc(n, sizeof(*sizes));
    sl_tensor_t all;
    sl_tensor_init(&all);
    uint8_t *data = NULL;
    size_t len = 0;
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_int_eq(sl_rec_begin(&all), 0);
        uint32_t *ids = calloc(seq[i] + 1, 4);
        sl_rfield_t f = {.kind = SL_RF_INPUT_IDS, .dtype = SL_DT_U32, .count = 1, .h = seq[i],
                         .w = 1, .c = 1, .nbytes = (size_t)seq[i] * 4, .data = (void *)ids};
        ck_assert_int_eq(sl_rec_add_copy(&all, &f), 0);
        sl_rfield_t t = {.kind = SL_RF_TILES, .dtype = SL_DT_U8, .layout = SL_LAYOUT_CHW,
                         .count = tiles[i], .h = 2, .w = 2, .c = 3,
                         .nbytes = (size_t)tiles[i] * 12};
        uint8_t *tp = calloc(t.nbytes + 1, 1);
        t.data = tp;
        if (tiles[i] > 0) {
            ck_assert_int_eq(sl_rec_add_copy(&all, &t), 0);
        }
        sl_rec_finish(&all);
        data = realloc(data, len + all.nbytes);
        memcpy(data + len, all.data, all.nbytes);
        offs[i] = len;
        sizes[i] = all.nbytes;
        len += all.nbytes;
        free(ids);
        free(tp);
    }
    sl_tensor_free(&all);
    *b = (sluice_batch_t){.n = n, .dtype = SLUICE_DT_RECORD, .data = data, .nbytes = len,
                          .offsets = offs, .sizes = sizes};
    return b;
}

static void batch_free(sluice_batch_t *b)
{
    free((void *)b->data);
    free((void *)b->offsets);
    free((void *)b->sizes);
    free(b);
}

START_TEST(test_fit)
{
    cl_steps_t s;
    memset(&s, 0, sizeof(s));
    const double a = 2e-4, bq = 1e-8, c = 3e-3, d = 1e-3;
    sl_rng_t r;
    sl_rng_init(&r, 1, 0, 0, 0);
    for (int step = 0; step < 40; step++) {
        double want = 0;
        for (int k = 0; k < 2; k++) { /* two microbatches per step */
            uint32_t seq[4], tiles[4];
            for (int i = 0; i < 4; i++) {
                seq[i] = 20 + (uint32_t)sl_rng_below(&r, 3000);
                tiles[i] = (uint32_t)sl_rng_below(&r, 9);
                want += a * seq[i] + bq * seq[i] * (double)seq[i] + c * tiles[i] + d;
            }
            sluice_batch_t *b = batch(4, seq, tiles);
            cl_steps_add_batch(&s, b);
            batch_free(b);
        }
        ck_assert_int_eq(cl_steps_report(&s, want), 0);
    }
    ck_assert(s.fitted);
    ck_assert_uint_eq(s.n, 40);
    ck_assert(fabs(s.coef[0] - a) < 1e-6);
    ck_assert(fabs(s.coef[2] - c) < 1e-5);
    ck_assert_msg(s.abs_err / s.sum_y < 1e-3, "error %g", s.abs_err / s.sum_y);
    ck_assert_int_eq(cl_steps_report(&s, -1), -EINVAL);
    ck_assert_int_eq(cl_steps_report(&s, NAN), -EINVAL);
    ck_assert_uint_eq(s.n, 40);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("client_steps");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_fit);
    suite_add_tcase(su, tc);
    return fx_run_suite(su, 0);
}
