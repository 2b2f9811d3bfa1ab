/* fuzz_jpeg: JPEG probe, full decode, region decode (common/image/jpeg.c) and the
 * fused decode+crop pipeline units (common/engine/pipeline.c) on arbitrary bytes --
 * what a worker or the client decodes from a data set it does not control.
 * Regions, scales, crop sizes and sample indices come from a hash of the
 * input, so every input tries different geometry. Contracts (jpeg.h):
 *   - every call returns 0 or a documented code with a printable message;
 *   - above max_pixels a decode is -EFBIG (nothing image-sized allocated);
 *   - a full decode is width x height x 3 U8 HWC as the probe said;
 *   - a region decode returns the documented covering rectangle, and at
 *     scale 1 its pixels equal the same rectangle of the full decode;
 *   - decode+random_resized_crop / decode+center_crop give size x size x 3. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/image/jpeg.h"
#include "common/engine/pipeline.h"
#include "common/spec/spec.h"
#include "tests/fuzz/fuzz.h"

/* Small enough that a 2048x2048 bomb costs the fuzzer nothing. */
#define FZ_JPEG_MAX_PIXELS (4u << 20)

static uint32_t fz_jpeg_div_up(uint32_t a, uint32_t b)
{
    return (uint32_t)(((uint64_t)a + b - 1) / b);
}

static void fz_jpeg_region(const uint8_t *data, size_t size, const sl_jpeg_info_t *info,
                           const sl_tensor_t *full, uint64_t *seed)
{
    static const uint32_t SCALES[] = {1, 2, 4, 8};
    uint32_t iw = info != NULL ? info->width : 64;
    uint32_t ih = info != NULL ? info->height : 64;
    uint64_t r = fz_next(seed);
    uint32_t s = SCALES[r & 3];
    uint32_t x = (uint32_t)((r >> 8) % iw);
    uint32_t y = (uint32_t)((r >> 24) % ih);
    uint32_t w = 1 + (uint32_t)((r >> 40) % (iw - x));
    uint32_t h = 1 + (uint32_t)(fz_next(seed) % (ih - y));
    int outside = (r & 0x1c) == 0; /* one in eight: a region past the edge */
    if (outside) {
        w = iw - x + 1;
    }
    sl_tensor_t out;
    sl_tensor_init(&out);
    uint32_t x0 = 0, y0 = 0;
    char err[512];
    int rc = sl_jpeg_decode_region(data, size, FZ_JPEG_MAX_PIXELS, x, y, w, h, s, &out, &x0,
                                   &y0, err, sizeof(err));
    FZ_CHECK(fz_image_code_ok(rc) || rc == -EINVAL, "region returned %d: %s", rc, err);
    if (rc != 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
        FZ_CHECK(!(info != NULL && outside && rc != -EINVAL && full != NULL),
                 "region outside a decodable image returned %d", rc);
        goto out;
    }
    FZ_CHECK(info != NULL && !outside, "region decode succeeded where probe failed");
    uint32_t want_w = fz_jpeg_div_up(x + w, s);
    uint32_t want_h = fz_jpeg_div_up(y + h, s);
    want_w = want_w < fz_jpeg_div_up(iw, s) ? want_w : fz_jpeg_div_up(iw, s);
    want_h = want_h < fz_jpeg_div_up(ih, s) ? want_h : fz_jpeg_div_up(ih, s);
    FZ_CHECK(x0 == x / s && y0 == y / s && out.w == want_w - x0 && out.h == want_h - y0 &&
                 out.c == 3 && out.dtype == SL_DT_U8 && out.layout == SL_LAYOUT_HWC &&
                 out.nbytes == (size_t)out.w * out.h * 3,
             "region %u,%u %ux%u at 1/%u of %ux%u: got %ux%ux%u at %u,%u", x, y, w, h, s, iw,
             ih, out.h, out.w, out.c, x0, y0);
    if (s == 1 && full != NULL) {
        for (uint32_t row = 0; row < out.h; row++) {
            const uint8_t *a = out.data + (size_t)row * out.w * 3;
            const uint8_t *b = full->data + ((size_t)(y0 + row) * full->w + x0) * 3;
            FZ_CHECK(memcmp(a, b, (size_t)out.w * 3) == 0,
                     "region %u,%u %ux%u row %u differs from the full decode", x, y, w, h, row);
        }
    }
out:
    sl_tensor_free(&out);
}

static void fz_jpeg_pipeline(const uint8_t *data, size_t size, const char *crop,
                             unsigned flags, uint64_t *seed)
{
    uint64_t r = fz_next(seed);
    uint32_t crop_size = 1 + (uint32_t)(r % 64);
    char json[512];
    snprintf(json, sizeof(json),
             "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\", \"seed\": %u},"
             " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"%s\", \"size\": %u}],"
             " \"max_pixels\": %u}",
             (unsigned)(r >> 32), crop, crop_size, FZ_JPEG_MAX_PIXELS);
    sl_spec_t spec;
    sl_pipeline_t *p = NULL;
    char err[512];
    FZ_CHECK(sl_spec_parse("fuzz", json, strlen(json), &spec, err, sizeof(err)) == 0, "%s", err);
    FZ_CHECK(sl_pipeline_new(&spec, flags, &p, err, sizeof(err)) == 0, "%s", err);
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    sl_tensor_t io;
    sl_tensor_init(&io);
    FZ_CHECK(sl_tensor_reshape(&io, SL_DT_BYTES, SL_LAYOUT_HWC, (uint32_t)size, 1, 1) == 0,
             "out of memory");
    if (size > 0) {
        memcpy(io.data, data, size);
    }
    sl_unit_stat_t stats[SL_PIPE_MAX_UNITS];
    memset(stats, 0, sizeof(stats));
    uint32_t n = sl_pipeline_nunits(p);
    int rc = sl_pipeline_run(p, 0, n, r & 7, (r >> 3) & 0xffff, &io, &sc, stats, err,
                             sizeof(err));
    FZ_CHECK(fz_image_code_ok(rc) || rc == -EINVAL, "%s pipeline returned %d: %s",
             sl_pipeline_unit_name(p, 0), rc, err);
    if (rc == 0) {
        FZ_CHECK(io.dtype == SL_DT_U8 && io.layout == SL_LAYOUT_HWC && io.h == crop_size &&
                     io.w == crop_size && io.c == 3 &&
                     io.nbytes == (size_t)crop_size * crop_size * 3,
                 "%s: %ux%ux%u output for size %u", sl_pipeline_unit_name(p, 0), io.h, io.w,
                 io.c, crop_size);
    } else {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
    }
    sl_tensor_free(&io);
    sl_pipe_scratch_free(&sc);
    sl_pipeline_free(p);
}

int fuzz_jpeg_one(const uint8_t *data, size_t size)
{
    uint64_t seed = fz_hash(FZ_FNV_BASIS, data, size);
    char err[512];
    sl_jpeg_info_t info;
    int prc = sl_jpeg_probe(data, size, &info, err, sizeof(err));
    FZ_CHECK(fz_image_code_ok(prc), "probe returned %d: %s", prc, err);
    if (prc == 0) {
        FZ_CHECK(info.width > 0 && info.height > 0 && info.components >= 1 &&
                     info.components <= 4 && info.subsamp_h >= 1 && info.subsamp_v >= 1,
                 "probe: %ux%u, %u components", info.width, info.height, info.components);
    } else {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
    }

    sl_tensor_t full;
    sl_tensor_init(&full);
    int rc = sl_jpeg_decode(data, size, FZ_JPEG_MAX_PIXELS, &full, err, sizeof(err));
    FZ_CHECK(fz_image_code_ok(rc), "decode returned %d: %s", rc, err);
    if (rc == 0) {
        FZ_CHECK(prc == 0, "decode succeeded where probe failed");
        FZ_CHECK(full.w == info.width && full.h == info.height && full.c == 3 &&
                     full.dtype == SL_DT_U8 && full.layout == SL_LAYOUT_HWC &&
                     full.nbytes == (size_t)full.w * full.h * 3,
                 "decoded %ux%ux%u, probe said %ux%u", full.h, full.w, full.c, info.height,
                 info.width);
        FZ_CHECK((uint64_t)info.width * info.height <= FZ_JPEG_MAX_PIXELS, "bomb decoded");
    } else {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
        FZ_CHECK(prc != 0 || (uint64_t)info.width * info.height <= FZ_JPEG_MAX_PIXELS ||
                     rc == -EFBIG,
                 "a %ux%u bomb returned %d, not -EFBIG", info.width, info.height, rc);
    }

    for (int i = 0; i < 3; i++) {
        fz_jpeg_region(data, size, prc == 0 ? &info : NULL, rc == 0 ? &full : NULL, &seed);
    }
    sl_tensor_free(&full);

    fz_jpeg_pipeline(data, size, "random_resized_crop", 0, &seed);
    fz_jpeg_pipeline(data, size, "center_crop", 0, &seed);
    fz_jpeg_pipeline(data, size, "random_resized_crop", SL_PIPE_NO_FUSE, &seed);
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_jpeg_one)
