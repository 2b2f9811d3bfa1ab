/* fuzz_video: the demuxer path of decode_video (common/video/video.h) on
 * arbitrary bytes -- what a worker decodes from a data set it does not
 * control: the container header (sl_video_probe), the packet index and the
 * decode of a few frames (sl_video_decode), with the request drawn from a
 * hash of the input so each input tries other picks, offsets and sizes.
 * Contracts (video.h):
 *   - every call returns 0 or a documented code with a printable message;
 *   - a probe that fails for a reason the header shows, the decode fails
 *     too (never a decode of what the header refused);
 *   - a decode gives n frames (1..the request) of fh x fw x 3 uint8,
 *     stacked: out is n*fh x fw x 3, the requested size when one was asked;
 *   - decoding twice gives the same bytes (nothing depends on memory left
 *     over from an earlier frame or call). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/video/video.h"
#include "tests/fuzz/fuzz.h"

/* Small enough that a bomb costs the fuzzer nothing; the wall-time limit
 * keeps a slow input under libFuzzer's timeout (a hang is a bug). */
#define FZ_VIDEO_MAX_PIXELS (1u << 20)
#define FZ_VIDEO_MAX_SEC 5.0

static int fz_video_code_ok(int rc)
{
    return rc == 0 || rc == -ENODATA || rc == -EBADMSG || rc == -ENOMSG || rc == -ENOMEDIUM ||
           rc == -EPROTONOSUPPORT || rc == -EFBIG || rc == -ETIME || rc == -ENOMEM;
}

int fuzz_video_one(const uint8_t *data, size_t size)
{
    uint64_t seed = FZ_FNV_BASIS;
    for (size_t i = 0; i < size && i < 4096; i++) {
        seed = (seed ^ data[i]) * 0x100000001b3ull;
    }
    char err[512];
    sl_video_info_t info;
    int prc = sl_video_probe(data, size, &info, err, sizeof(err));
    FZ_CHECK(fz_video_code_ok(prc) && prc != -ETIME, "probe returned %d: %s", prc, err);
    if (prc != 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable probe message");
    } else {
        FZ_CHECK(info.supported && info.width > 0 && info.height > 0 &&
                     info.width <= SL_VIDEO_MAX_SIDE && info.height <= SL_VIDEO_MAX_SIDE,
                 "probe: %ux%u %s", info.width, info.height, info.codec);
    }
    uint64_t r = fz_next(&seed);
    sl_video_req_t req = {.offset = (r & 1) ? (double)((r >> 8) % 1000) / 1000.0 : -1};
    if (r & 2) {
        req.sampling = SL_VIDEO_SAMPLE_FPS;
        req.fps = 0.5 + (double)((r >> 20) % 60);
        req.max_frames = 1 + (uint32_t)((r >> 30) % 8);
    } else {
        req.sampling = SL_VIDEO_SAMPLE_UNIFORM;
        req.frames = 1 + (uint32_t)((r >> 20) % 8);
    }
    if (r & 4) {
        req.out_h = 1 + (uint32_t)((r >> 40) % 64);
        req.out_w = 1 + (uint32_t)((r >> 48) % 64);
    }
    sl_video_limits_t lim = {.max_pixels = FZ_VIDEO_MAX_PIXELS,
                             .max_sec = FZ_VIDEO_MAX_SEC,
                             .threads = 1 + (uint32_t)((r >> 56) % 2)};
    sl_tensor_t a, b;
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    uint32_t n = 0, fh = 0, fw = 0, sh = 0, sw = 0;
    int rc = sl_video_decode(data, size, &req, &lim, &a, &n, &fh, &fw, &sh, &sw, NULL, err,
                             sizeof(err));
    FZ_CHECK(fz_video_code_ok(rc), "decode returned %d: %s", rc, err);
    if (prc == -ENODATA || prc == -EBADMSG || prc == -ENOMEDIUM || prc == -EPROTONOSUPPORT) {
        FZ_CHECK(rc == prc, "probe said %d, decode %d", prc, rc);
    }
    if (rc != 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable decode message");
        goto out;
    }
    uint32_t cap = req.sampling == SL_VIDEO_SAMPLE_FPS ? req.max_frames : req.frames;
    FZ_CHECK(n >= 1 && n <= cap, "%u frames for a request of %u", n, cap);
    FZ_CHECK(a.dtype == SL_DT_U8 && a.c == 3 && a.h == n * fh && a.w == fw &&
                 a.nbytes == (size_t)n * fh * fw * 3,
             "output %ux%ux%u for %u frames of %ux%u", a.h, a.w, a.c, n, fh, fw);
    if (req.out_h != 0) {
        FZ_CHECK(fh == req.out_h && fw == req.out_w, "asked %ux%u, got %ux%u", req.out_h, req.out_w,
                 fh, fw);
    } else {
        FZ_CHECK(fh == sh && fw == sw, "frames %ux%u, stream %ux%u", fh, fw, sh, sw);
    }
    uint32_t n2 = 0;
    int rc2 = sl_video_decode(data, size, &req, &lim, &b, &n2, &fh, &fw, &sh, &sw, NULL, err,
                              sizeof(err));
    /* A second run may only differ by hitting the time limit under load. */
    FZ_CHECK(rc2 == 0 || rc2 == -ETIME, "second decode returned %d: %s", rc2, err);
    if (rc2 == 0) {
        FZ_CHECK(n2 == n && b.nbytes == a.nbytes && memcmp(a.data, b.data, a.nbytes) == 0,
                 "two decodes differ");
    }
out:
    sl_tensor_free(&a);
    sl_tensor_free(&b);
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_video_one)
