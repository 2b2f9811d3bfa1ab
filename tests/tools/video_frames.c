/* video_frames: decodes the frames decode_video would pick from one clip
 * (common/video/video.h), for the PyAV oracle in
 * tests/integration/test_video_pyav.sh and for scripts/bench-video.
 *
 *   video_frames CLIP OUT.raw uniform FRAMES [OFFSET [OUT_H OUT_W [REPEAT]]]
 *   video_frames CLIP OUT.raw fps FPS MAX_FRAMES [OFFSET [OUT_H OUT_W [REPEAT]]]
 *
 * OFFSET: random_offset's draw in [0, 1), or -1 for none; OUT_H OUT_W: 0 0
 * for the stream's size; REPEAT: decode that many times (the benchmark).
 * OUT.raw gets the frames (uint8 RGB, stacked); stdout one line:
 * "frames FH FW src SH SW clip N decoded D seeks S sec T" (T: wall time of
 * all repeats). Exit status: 0 ok, 1 failure (the message on stderr, its
 * errno name first), 2 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/file.h"
#include "common/video/video.h"

#define MAX_FILE ((size_t)1 << 30)

static int usage(void)
{
    fprintf(stderr, "usage: video_frames CLIP OUT.raw uniform FRAMES [OFFSET [OUT_H OUT_W "
                    "[REPEAT]]]\n       video_frames CLIP OUT.raw fps FPS MAX_FRAMES [OFFSET "
                    "[OUT_H OUT_W [REPEAT]]]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        return usage();
    }
    sl_video_req_t req = {.offset = -1};
    int a = 4;
    if (strcmp(argv[3], "uniform") == 0) {
        req.sampling = SL_VIDEO_SAMPLE_UNIFORM;
        req.frames = (uint32_t)atoi(argv[a++]);
    } else if (strcmp(argv[3], "fps") == 0 && argc >= 6) {
        req.sampling = SL_VIDEO_SAMPLE_FPS;
        req.fps = atof(argv[a++]);
        req.max_frames = (uint32_t)atoi(argv[a++]);
    } else {
        return usage();
    }
    if (argc > a) {
        req.offset = atof(argv[a++]);
    }
    if (argc > a + 1) {
        req.out_h = (uint32_t)atoi(argv[a]);
        req.out_w = (uint32_t)atoi(argv[a + 1]);
        a += 2;
    }
    int repeat = argc > a ? atoi(argv[a]) : 1;
    char err[512];
    char *buf;
    size_t len;
    if (sl_file_read(argv[1], MAX_FILE, &buf, &len, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    sl_video_limits_t lim = {.max_pixels = 100000000ull, .max_sec = 0, .threads = 1};
    sl_tensor_t out;
    sl_tensor_init(&out);
    uint32_t n = 0, fh = 0, fw = 0, sh = 0, sw = 0;
    sl_video_stats_t st = {0};
    int rc = 0;
    double t0 = sl_mono_sec();
    for (int r = 0; r < repeat && rc == 0; r++) {
        rc = sl_video_decode((const uint8_t *)buf, len, &req, &lim, &out, &n, &fh, &fw, &sh, &sw,
                             &st, err, sizeof(err));
    }
    double sec = sl_mono_sec() - t0;
    free(buf);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", strerrorname_np(-rc), err);
        sl_tensor_free(&out);
        return 1;
    }
    FILE *f = fopen(argv[2], "wb");
    if (f == NULL || fwrite(out.data, 1, out.nbytes, f) != out.nbytes || fclose(f) != 0) {
        fprintf(stderr, "%s: cannot write\n", argv[2]);
        sl_tensor_free(&out);
        return 1;
    }
    printf("frames %u %u %u src %u %u clip %u decoded %u seeks %u sec %.6f\n", n, fh, fw, sh, sw,
           st.nframes, st.decoded, st.seeks, sec);
    sl_tensor_free(&out);
    return 0;
}
