/* normalize_bench: the CPU normalize + CHW kernels side by side.
 *
 *   normalize_bench [--size N] [--rounds R] [--iters I]
 *
 * On one N x N x 3 uint8 HWC image (default 224) of pseudo-random pixels,
 * times per image, in rounds that alternate the contenders (medians):
 *   two_pass    sl_img_normalize (HWC float32) then sl_img_to_chw: what ran
 *               before the one pass
 *   one_pass    sl_img_normalize_chw: the fused kernel the pipeline runs
 *   arithmetic  the same formula computed per element, (x / 255 - m) / s, in
 *               a loop gcc can vectorise: why the kernel uses a table
 * and checks that all three give the same bits. Prints one JSON line:
 *   {"size": N, "two_pass_us": A, "one_pass_us": B, "arithmetic_us": C,
 *    "one_pass_speedup": A / B, "identical": true}
 * Exit status: 0 ok, 1 the outputs differ or a kernel failed, 2 usage. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/image/imgops.h"

#define MAX_ROUNDS 101

static const float MEAN[3] = {0.485f, 0.456f, 0.406f};
static const float STD[3] = {0.229f, 0.224f, 0.225f};

/* The division formula in a plain loop (three planes, no table). */
static void arithmetic(const uint8_t *restrict s, float *restrict d, size_t plane)
{
    for (uint32_t ch = 0; ch < 3; ch++) {
        const float m = MEAN[ch], sd = STD[ch];
        float *restrict dc = d + ch * plane;
        for (size_t i = 0; i < plane; i++) {
            dc[i] = ((float)s[3 * i + ch] / 255.0f - m) / sd;
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    long size = 224, rounds = 15, iters = 200;
    for (int i = 1; i < argc; i++) {
        long *dst = NULL;
        if (strcmp(argv[i], "--size") == 0) {
            dst = &size;
        } else if (strcmp(argv[i], "--rounds") == 0) {
            dst = &rounds;
        } else if (strcmp(argv[i], "--iters") == 0) {
            dst = &iters;
        }
        if (dst == NULL || i + 1 >= argc) {
            fprintf(stderr, "usage: normalize_bench [--size N] [--rounds R] [--iters I]\n");
            return 2;
        }
        *dst = strtol(argv[++i], NULL, 10);
    }
    if (size < 1 || size > 8192 || rounds < 1 || rounds > MAX_ROUNDS || iters < 1) {
        fprintf(stderr, "normalize_bench: size 1..8192, rounds 1..%d, iters >= 1\n", MAX_ROUNDS);
        return 2;
    }
    sl_tensor_t in, mid, two, one, ari;
    sl_tensor_init(&in);
    sl_tensor_init(&mid);
    sl_tensor_init(&two);
    sl_tensor_init(&one);
    sl_tensor_init(&ari);
    int rc = 1;
    if (sl_tensor_reshape(&in, SL_DT_U8, SL_LAYOUT_HWC, (uint32_t)size, (uint32_t)size, 3) < 0 ||
        sl_tensor_reshape(&ari, SL_DT_F32, SL_LAYOUT_CHW, (uint32_t)size, (uint32_t)size, 3) < 0) {
        fprintf(stderr, "normalize_bench: out of memory\n");
        goto out;
    }
    uint32_t x = 12345;
    for (size_t i = 0; i < in.nbytes; i++) {
        x = x * 1103515245u + 12345u;
        in.data[i] = (uint8_t)(x >> 16);
    }
    const size_t plane = (size_t)size * (size_t)size;
    double t[3][MAX_ROUNDS];
    for (long r = 0; r < rounds; r++) {
        for (int k = 0; k < 3; k++) {
            double t0 = sl_thread_cpu_sec();
            for (long it = 0; it < iters; it++) {
                int e = 0;
                if (k == 0) {
                    e = sl_img_normalize(&in, MEAN, STD, &mid);
                    e = e < 0 ? e : sl_img_to_chw(&mid, &two);
                } else if (k == 1) {
                    e = sl_img_normalize_chw(&in, MEAN, STD, &one);
                } else {
                    arithmetic(in.data, (float *)(void *)ari.data, plane);
                }
                if (e < 0) {
                    fprintf(stderr, "normalize_bench: kernel %d failed: %d\n", k, e);
                    goto out;
                }
            }
            t[k][r] = (sl_thread_cpu_sec() - t0) / (double)iters * 1e6;
        }
    }
    int same = two.nbytes == one.nbytes && one.nbytes == ari.nbytes &&
               memcmp(two.data, one.data, one.nbytes) == 0 &&
               memcmp(one.data, ari.data, one.nbytes) == 0;
    double a = median(t[0], (int)rounds), b = median(t[1], (int)rounds);
    double c = median(t[2], (int)rounds);
    printf("{\"size\": %ld, \"two_pass_us\": %.1f, \"one_pass_us\": %.1f, "
           "\"arithmetic_us\": %.1f, \"one_pass_speedup\": %.2f, \"identical\": %s}\n",
           size, a, b, c, a / b, same ? "true" : "false");
    rc = same ? 0 : 1;
out:
    sl_tensor_free(&in);
    sl_tensor_free(&mid);
    sl_tensor_free(&two);
    sl_tensor_free(&one);
    sl_tensor_free(&ari);
    return rc;
}
