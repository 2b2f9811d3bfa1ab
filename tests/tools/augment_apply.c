/* augment_apply: decodes one image and applies one augmentation op of
 * common/image/augment.h with explicit parameters (the draws torchvision
 * would make), for the torchvision oracle in
 * tests/integration/test_augment_torchvision.sh.
 *
 *   augment_apply IMAGE IN.raw OUT.raw OP [ARG...]
 *
 * IN.raw gets the decoded RGB HWC bytes (what torchvision is given), OUT.raw
 * the op's output. OPs and ARGs:
 *   brightness|contrast|saturation|hue|sharpness F    grayscale
 *   solarize T   posterize BITS   autocontrast   equalize
 *   blur KX KY SIGMA_X SIGMA_Y
 *   rotate ANGLE nearest|bilinear FILL [CX CY]
 *   affine ANGLE TX TY SCALE SHEAR_X SHEAR_Y nearest|bilinear FILL
 *   erase X Y W H VALUE
 *   policy OPINDEX MAGNITUDE nearest|bilinear      (autoaugment's _apply_op, fill None)
 *   jitter ORDER B C S H       ORDER: 4 digits, 0 brightness .. 3 hue
 *   vflip                      (vertical flip, common/image/imgops.h)
 *   erase_norm X Y W H VALUE   (normalize (ImageNet mean/std), to_chw, then erase: IN.raw
 *                              and OUT.raw are float32 CHW; prints W H C)
 *   crop L T R B constant|edge|reflect|symmetric FILL PAD_IF_NEEDED TH TW X Y
 *                              (random_crop after its draws: pad, pad if needed, crop)
 *   resize X Y W H OUT_H OUT_W bilinear|bicubic|nearest
 *                              (the crop then the resize: random_resized_crop, resize)
 * Prints "W H C" on stdout (the output's size). Exit status: 0 ok, 1 failure, 2 usage. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/file.h"
#include "common/image/augment.h"
#include "common/image/image_decode.h"
#include "common/image/imgops.h"

#define MAX_FILE ((size_t)1 << 30)
#define MAX_PIXELS 100000000ull

static int usage(void)
{
    fprintf(stderr, "usage: augment_apply IMAGE IN.raw OUT.raw OP [ARG...] (see the source)\n");
    return 2;
}

static int write_raw(const char *path, const sl_tensor_t *t)
{
    FILE *f = fopen(path, "wbe");
    if (f == NULL) {
        return -errno;
    }
    size_t wrote = fwrite(t->data, 1, t->nbytes, f);
    if (fclose(f) != 0 || wrote != t->nbytes) {
        return -EIO;
    }
    return 0;
}

/* Numbers from argv[first..]; -EINVAL when there are not n or one is bad. */
static int nums(int argc, char **argv, int first, int n, double *out)
{
    if (argc != first + n) {
        return -EINVAL;
    }
    for (int i = 0; i < n; i++) {
        char *end;
        out[i] = strtod(argv[first + i], &end);
        if (end == argv[first + i] || *end != '\0') {
            return -EINVAL;
        }
    }
    return 0;
}

static sl_aug_interp_e interp_arg(const char *s)
{
    return strcmp(s, "bilinear") == 0 ? SL_AUG_BILINEAR : SL_AUG_NEAREST;
}

static int apply(int argc, char **argv, sl_tensor_t *io, sl_tensor_t *scratch)
{
    const char *op = argv[4];
    double a[12];
    double m[6];
    if (strcmp(op, "grayscale") == 0 || strcmp(op, "autocontrast") == 0 ||
        strcmp(op, "equalize") == 0) {
        if (argc != 5) {
            return -EINVAL;
        }
        return op[0] == 'g'   ? sl_aug_grayscale(io)
               : op[0] == 'a' ? sl_aug_autocontrast(io)
                              : sl_aug_equalize(io);
    }
    if (strcmp(op, "crop") == 0) {
        static const char *const modes[4] = {"constant", "edge", "reflect", "symmetric"};
        int mode = -1;
        for (int i = 0; argc == 16 && i < 4; i++) {
            mode = strcmp(argv[9], modes[i]) == 0 ? i : mode;
        }
        if (mode < 0 || nums(9, argv, 5, 4, a) < 0 || nums(16, argv, 10, 6, a + 4) < 0) {
            return -EINVAL;
        }
        const uint32_t pad[4] = {(uint32_t)a[0], (uint32_t)a[1], (uint32_t)a[2], (uint32_t)a[3]};
        const double fill[3] = {a[4], a[4], a[4]};
        int rc = sl_aug_pad_for_crop(io, pad, a[5] != 0, (uint32_t)a[6], (uint32_t)a[7],
                                     (sl_aug_pad_e)mode, fill, scratch);
        if (rc == 0) {
            rc = sl_img_crop(io, (uint32_t)a[8], (uint32_t)a[9], (uint32_t)a[7], (uint32_t)a[6],
                             scratch);
        }
        if (rc == 0) {
            sl_tensor_swap(io, scratch);
        }
        return rc;
    }
    if (strcmp(op, "resize") == 0) {
        static const char *const modes[3] = {"bilinear", "bicubic", "nearest"};
        int mode = -1;
        for (int i = 0; argc == 12 && i < 3; i++) {
            mode = strcmp(argv[11], modes[i]) == 0 ? i : mode;
        }
        if (mode < 0 || nums(11, argv, 5, 6, a) < 0) {
            return -EINVAL;
        }
        int rc = sl_img_resize_interp(io, a[0], a[1], a[2], a[3], (uint32_t)a[4], (uint32_t)a[5],
                                      SL_RESIZE_CLIP, (sl_img_interp_e)mode, NULL, scratch);
        if (rc == 0) {
            sl_tensor_swap(io, scratch);
        }
        return rc;
    }
    if (strcmp(op, "erase_norm") == 0) {
        return nums(argc, argv, 5, 5, a) < 0
                   ? -EINVAL
                   : sl_aug_erase_f32(io, (uint32_t)a[0], (uint32_t)a[1], (uint32_t)a[2],
                                      (uint32_t)a[3], (const double[3]){a[4], a[4], a[4]}, NULL);
    }
    if (strcmp(op, "vflip") == 0) {
        return argc == 5 ? sl_img_flip_v(io) : -EINVAL;
    }
    if (strcmp(op, "rotate") == 0) {
        /* An optional centre: CX CY in pixels. */
        const bool centred = argc == 10;
        if ((argc != 8 && !centred) || nums(6, argv, 5, 1, a) < 0 ||
            nums(8, argv, 7, 1, a + 1) < 0 || (centred && nums(10, argv, 8, 2, a + 2) < 0)) {
            return -EINVAL;
        }
        const double fill[3] = {a[1], a[1], a[1]};
        sl_aug_affine_matrix(io->h, io->w, centred ? a + 2 : NULL, -a[0], 0, 0, 1, 0, 0, m);
        return sl_aug_warp(io, m, interp_arg(argv[6]), fill, scratch);
    }
    if (strcmp(op, "affine") == 0) {
        if (argc != 13 || nums(11, argv, 5, 6, a) < 0 || nums(13, argv, 12, 1, a + 6) < 0) {
            return -EINVAL;
        }
        const double fill[3] = {a[6], a[6], a[6]};
        sl_aug_affine_matrix(io->h, io->w, NULL, a[0], a[1], a[2], a[3], a[4], a[5], m);
        return sl_aug_warp(io, m, interp_arg(argv[11]), fill, scratch);
    }
    if (strcmp(op, "policy") == 0) {
        if (argc != 8 || nums(7, argv, 5, 2, a) < 0 || a[0] < 0 || a[0] >= SL_AUG_OP__COUNT) {
            return -EINVAL;
        }
        return sl_aug_apply_op(io, (sl_aug_op_e)a[0], a[1], interp_arg(argv[7]), NULL, scratch);
    }
    if (strcmp(op, "jitter") == 0) {
        if (argc != 10 || strlen(argv[5]) != 4 || nums(argc, argv, 6, 4, a) < 0) {
            return -EINVAL;
        }
        /* Ranges that are not the identity point: every factor applies. */
        const double ranges[4][2] = {{0, 2}, {0, 2}, {0, 2}, {-0.5, 0.5}};
        sl_aug_jitter_t j;
        for (int i = 0; i < 4; i++) {
            j.order[i] = argv[5][i] - '0';
            j.factor[i] = a[i];
        }
        return sl_aug_jitter_apply(io, ranges, &j);
    }
    if (strcmp(op, "blur") == 0) {
        return nums(argc, argv, 5, 4, a) < 0
                   ? -EINVAL
                   : sl_aug_gaussian_blur(io, (uint32_t)a[0], (uint32_t)a[1], a[2], a[3], scratch);
    }
    if (strcmp(op, "erase") == 0) {
        if (nums(argc, argv, 5, 5, a) < 0) {
            return -EINVAL;
        }
        const double v[3] = {a[4], a[4], a[4]};
        return sl_aug_erase(io, (uint32_t)a[0], (uint32_t)a[1], (uint32_t)a[2], (uint32_t)a[3], v,
                            NULL);
    }
    if (nums(argc, argv, 5, 1, a) < 0) {
        return -EINVAL;
    }
    if (strcmp(op, "brightness") == 0) {
        return sl_aug_brightness(io, a[0]);
    }
    if (strcmp(op, "contrast") == 0) {
        return sl_aug_contrast(io, a[0]);
    }
    if (strcmp(op, "saturation") == 0) {
        return sl_aug_saturation(io, a[0]);
    }
    if (strcmp(op, "hue") == 0) {
        return sl_aug_hue(io, a[0]);
    }
    if (strcmp(op, "sharpness") == 0) {
        return sl_aug_sharpness(io, a[0], scratch);
    }
    if (strcmp(op, "solarize") == 0) {
        return sl_aug_solarize(io, a[0]);
    }
    if (strcmp(op, "posterize") == 0) {
        return sl_aug_posterize(io, (uint32_t)a[0]);
    }
    return -EINVAL;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        return usage();
    }
    char err[256];
    char *buf = NULL;
    size_t len = 0;
    int rc = sl_file_read(argv[1], MAX_FILE, &buf, &len, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "augment_apply: %s\n", err);
        return 1;
    }
    sl_tensor_t io, scratch;
    sl_tensor_init(&io);
    sl_tensor_init(&scratch);
    int status = 1;
    rc = sl_image_decode((const uint8_t *)buf, len, MAX_PIXELS, &io, NULL, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "augment_apply: '%s': %s\n", argv[1], err);
        goto out;
    }
    if (strcmp(argv[4], "erase_norm") == 0) {
        /* The op's input is the normalized CHW tensor. */
        static const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
        rc = sl_img_normalize_chw(&io, mean, sd, &scratch);
        if (rc < 0) {
            fprintf(stderr, "augment_apply: normalize: %s\n", strerror(-rc));
            goto out;
        }
        sl_tensor_swap(&io, &scratch);
    }
    rc = write_raw(argv[2], &io);
    if (rc < 0) {
        fprintf(stderr, "augment_apply: cannot write '%s': %s\n", argv[2], strerror(-rc));
        goto out;
    }
    rc = apply(argc, argv, &io, &scratch);
    if (rc == -EINVAL) {
        fprintf(stderr, "augment_apply: bad op or arguments for '%s'\n", argv[4]);
        status = 2;
        goto out;
    }
    if (rc < 0) {
        fprintf(stderr, "augment_apply: %s: %s\n", argv[4], strerror(-rc));
        goto out;
    }
    rc = write_raw(argv[3], &io);
    if (rc < 0) {
        fprintf(stderr, "augment_apply: cannot write '%s': %s\n", argv[3], strerror(-rc));
        goto out;
    }
    printf("%u %u %u\n", io.w, io.h, io.c);
    status = 0;
out:
    sl_tensor_free(&scratch);
    sl_tensor_free(&io);
    free(buf);
    return status;
}
