/* decode_video (issue #37): the frame picks (common/video/video.h
 * sl_video_pick: numpy's round(linspace), the random offset, fps); the
 * decode of the seed clips (tests/fuzz/corpus/video/, made by
 * tests/fuzz/make-video-corpus.sh with Debian's ffmpeg), where frames
 * reached by keyframe jumps equal the same frames of a decode of every
 * frame; every broken clip's code; the stage's spec (defaults, errors
 * naming the field, canonical JSON); the unit on records (still images and
 * clips, the resize done by swscale, random_offset per sample); the skip
 * reasons. The frames' equality with PyAV's is
 * tests/integration/test_video_pyav.sh's. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/skip.h"
#include "common/engine/pipeline.h"
#include "common/profile/features.h"
#include "common/sample/record.h"
#include "common/spec/spec.h"
#include "common/video/video.h"
#include "tests/unit/fixtures.h"

static const char *const SEEDS[] = {"h264.mp4", "vp9.webm", "hevc.mkv", "av1.mkv"};
#define NSEEDS (sizeof(SEEDS) / sizeof(SEEDS[0]))

static uint8_t *seed(const char *name, size_t *len)
{
    char path[256];
    snprintf(path, sizeof(path), "tests/fuzz/corpus/video/%s", name);
    uint8_t *buf = NULL;
    ck_assert_msg(fx_read_file(path, &buf, len) == 0, "cannot read %s", path);
    return buf;
}

static void expect_pick(uint32_t n, const sl_video_req_t *req, const uint32_t *want, uint32_t nwant)
{
    double t[256];
    for (uint32_t i = 0; i < n; i++) {
        t[i] = i / 25.0;
    }
    uint32_t idx[64], got = 0;
    ck_assert_int_eq(sl_video_pick(n, t, req, idx, 64, &got), 0);
    ck_assert_uint_eq(got, nwant);
    for (uint32_t i = 0; i < got; i++) {
        ck_assert_msg(idx[i] == want[i], "pick %u: %u, want %u", i, idx[i], want[i]);
    }
}

START_TEST(test_pick)
{
    /* numpy: np.round(np.linspace(0, n - 1, k)) */
    sl_video_req_t u = {.sampling = SL_VIDEO_SAMPLE_UNIFORM, .frames = 8, .offset = -1};
    expect_pick(100, &u, (const uint32_t[]){0, 14, 28, 42, 57, 71, 85, 99}, 8);
    u.frames = 3; /* linspace(0, 5, 3) = [0, 2.5, 5]: half to even */
    expect_pick(6, &u, (const uint32_t[]){0, 2, 5}, 3);
    u.frames = 5; /* more frames than the clip: repeats, as decord gives */
    expect_pick(3, &u, (const uint32_t[]){0, 0, 1, 2, 2}, 5);
    u.frames = 1;
    expect_pick(50, &u, (const uint32_t[]){0}, 1);
    u.frames = 4; /* random offset: frame floor((k + u) n / frames) of each segment */
    u.offset = 0.5;
    expect_pick(100, &u, (const uint32_t[]){12, 37, 62, 87}, 4);
    u.offset = 0.999;
    expect_pick(4, &u, (const uint32_t[]){0, 1, 2, 3}, 4);
    /* fps: the frame shown at k / fps (25 fps clip, 2 a second), capped */
    sl_video_req_t f = {.sampling = SL_VIDEO_SAMPLE_FPS, .fps = 2, .max_frames = 3, .offset = -1};
    expect_pick(100, &f, (const uint32_t[]){0, 12, 25}, 3);
    f.max_frames = 32; /* 4 s clip, 0..3.96 s: times 0, 0.5, .., 3.5 */
    expect_pick(100, &f, (const uint32_t[]){0, 12, 25, 37, 50, 62, 75, 87}, 8);
    f.offset = 0.5; /* times 0.25, 0.75, ... */
    f.max_frames = 2;
    expect_pick(100, &f, (const uint32_t[]){6, 18}, 2);
    /* Requests out of range */
    double t[4] = {0, 1, 2, 3};
    uint32_t idx[8], n;
    sl_video_req_t bad = {.sampling = SL_VIDEO_SAMPLE_UNIFORM, .frames = 0, .offset = -1};
    ck_assert_int_eq(sl_video_pick(4, t, &bad, idx, 8, &n), -EINVAL);
    bad.frames = 9;
    ck_assert_int_eq(sl_video_pick(4, t, &bad, idx, 8, &n), -EINVAL);
    bad.frames = 2;
    ck_assert_int_eq(sl_video_pick(0, t, &bad, idx, 8, &n), -EINVAL);
    bad.offset = 1;
    ck_assert_int_eq(sl_video_pick(4, t, &bad, idx, 8, &n), -EINVAL);
    sl_video_req_t badf = {.sampling = SL_VIDEO_SAMPLE_FPS,
                           .fps = 0,
                           .max_frames = 2,
                           .offset = -1};
    ck_assert_int_eq(sl_video_pick(4, t, &badf, idx, 8, &n), -EINVAL);
}
END_TEST

static const sl_video_limits_t LIM = {.max_pixels = 100000000ull, .max_sec = 0, .threads = 1};

static int decode(const uint8_t *buf, size_t len, const sl_video_req_t *req,
                  const sl_video_limits_t *lim, sl_tensor_t *out, uint32_t *n, sl_video_stats_t *st,
                  char *err)
{
    uint32_t fh, fw, sh, sw;
    return sl_video_decode(buf, len, req, lim, out, n, &fh, &fw, &sh, &sw, st, err, 256);
}

/* Every seed: the frames picked with jumps equal those of a decode of the
 * whole clip; the header's facts match. */
START_TEST(test_decode_seeds)
{
    size_t len;
    uint8_t *buf = seed(SEEDS[_i], &len);
    char err[256];
    sl_video_info_t info;
    ck_assert_msg(sl_video_probe(buf, len, &info, err, sizeof(err)) == 0, "%s", err);
    ck_assert(info.supported && info.width >= 64 && info.height >= 48);
    sl_tensor_t all, some;
    sl_tensor_init(&all);
    sl_tensor_init(&some);
    sl_video_stats_t st;
    uint32_t n = 0;
    /* Every frame: uniform with as many frames as the clip has. */
    sl_video_req_t req = {.sampling = SL_VIDEO_SAMPLE_UNIFORM, .frames = 1, .offset = -1};
    ck_assert_msg(decode(buf, len, &req, &LIM, &all, &n, &st, err) == 0, "%s", err);
    uint32_t total = st.nframes;
    ck_assert_uint_ge(total, 10);
    req.frames = total;
    ck_assert_msg(decode(buf, len, &req, &LIM, &all, &n, &st, err) == 0, "%s", err);
    ck_assert_uint_eq(n, total);
    ck_assert_uint_eq(st.decoded, total);
    ck_assert_uint_eq(st.seeks, 0);
    size_t fb = all.nbytes / total;
    ck_assert_uint_eq(fb, (size_t)info.width * info.height * 3);
    /* The last frames only, and a spread with an offset: keyframe jumps. */
    const double offsets[] = {-1, 0.9, 0.3};
    const uint32_t counts[] = {2, 3, 4};
    for (int k = 0; k < 3; k++) {
        req.frames = counts[k];
        req.offset = offsets[k];
        double t[256];
        uint32_t idx[8], m;
        for (uint32_t i = 0; i < total; i++) {
            t[i] = i;
        }
        ck_assert_int_eq(sl_video_pick(total, t, &req, idx, 8, &m), 0);
        ck_assert_msg(decode(buf, len, &req, &LIM, &some, &n, &st, err) == 0, "%s", err);
        ck_assert_uint_eq(n, m);
        ck_assert_uint_le(st.decoded, total);
        for (uint32_t i = 0; i < n; i++) {
            ck_assert_msg(memcmp(some.data + i * fb, all.data + idx[i] * fb, fb) == 0,
                          "%s: frame %u (pick %u) differs from the full decode's", SEEDS[_i],
                          idx[i], i);
        }
    }
    /* A scaled decode: the requested size, stacked. */
    req = (sl_video_req_t){.sampling = SL_VIDEO_SAMPLE_FPS,
                           .fps = 4,
                           .max_frames = 3,
                           .offset = -1,
                           .out_h = 17,
                           .out_w = 31};
    ck_assert_msg(decode(buf, len, &req, &LIM, &some, &n, &st, err) == 0, "%s", err);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(some.h, 3 * 17);
    ck_assert_uint_eq(some.w, 31);
    sl_tensor_free(&all);
    sl_tensor_free(&some);
    free(buf);
}
END_TEST

/* The jumps save work: the last frame of the h264 seed (GOP 4) decodes
 * fewer frames than the clip has. */
START_TEST(test_decode_skips_work)
{
    size_t len;
    uint8_t *buf = seed("h264.mp4", &len);
    sl_tensor_t out;
    sl_tensor_init(&out);
    sl_video_req_t req = {.sampling = SL_VIDEO_SAMPLE_UNIFORM, .frames = 1, .offset = 0.99};
    sl_video_stats_t st;
    uint32_t n;
    char err[256];
    ck_assert_msg(decode(buf, len, &req, &LIM, &out, &n, &st, err) == 0, "%s", err);
    ck_assert_uint_eq(st.seeks, 1);
    ck_assert_uint_lt(st.decoded, st.nframes / 2);
    ck_assert_uint_ge(st.keyframes, 3);
    sl_tensor_free(&out);
    free(buf);
}
END_TEST

static void expect_bad(const uint8_t *buf, size_t len, const sl_video_limits_t *lim, int want,
                       const char *msg)
{
    sl_tensor_t out;
    sl_tensor_init(&out);
    sl_video_req_t req = {.sampling = SL_VIDEO_SAMPLE_UNIFORM, .frames = 4, .offset = -1};
    uint32_t n;
    char err[256] = "";
    int rc = decode(buf, len, &req, lim, &out, &n, NULL, err);
    ck_assert_msg(rc == want, "want %d, got %d: %s", want, rc, err);
    ck_assert_msg(strstr(err, msg) != NULL, "'%s' not in '%s'", msg, err);
    for (const char *p = err; *p; p++) {
        ck_assert((unsigned char)*p >= 0x20);
    }
    sl_tensor_free(&out);
}

START_TEST(test_bad_clips)
{
    size_t len;
    uint8_t *buf = seed("h264.mp4", &len);
    expect_bad(buf, 0, &LIM, -ENODATA, "empty");
    expect_bad((const uint8_t *)"hello, not a clip", 17, &LIM, -EBADMSG, "not a clip");
    /* mp4 with its index at the end: cut, the index is gone */
    expect_bad(buf, len / 2, &LIM, -EBADMSG, "not a clip");
    sl_video_limits_t small = LIM;
    small.max_pixels = 64 * 48 - 1;
    expect_bad(buf, len, &small, -EFBIG, "exceed");
    sl_video_limits_t slow = LIM;
    slow.max_sec = 1e-9;
    expect_bad(buf, len, &slow, -ETIME, "too long");
    sl_video_limits_t threads = LIM;
    threads.threads = 9;
    expect_bad(buf, len, &threads, -EINVAL, "threads");
    /* The frames' data overwritten after the header: corrupt, not garbage out. */
    uint8_t *junk = malloc(len);
    memcpy(junk, buf, len);
    for (size_t i = 4; i < len; i++) {
        if (memcmp(junk + i - 4, "mdat", 4) == 0) {
            for (size_t k = i + 16; k < len && k < i + 3000; k++) {
                junk[k] = (uint8_t)(k * 131u + 7u);
            }
            break;
        }
    }
    sl_tensor_t out;
    sl_tensor_init(&out);
    sl_video_req_t req = {.sampling = SL_VIDEO_SAMPLE_UNIFORM, .frames = 4, .offset = -1};
    uint32_t n;
    char err[256] = "";
    int rc = decode(junk, len, &req, &LIM, &out, &n, NULL, err);
    ck_assert_msg(rc == -EBADMSG || rc == -ENOMSG, "garbage frames: %d %s", rc, err);
    sl_tensor_free(&out);
    free(junk);
    free(buf);
}
END_TEST

#define RECORD_SPEC(stages)                                                                        \
    "{\"source\": {\"type\": \"webdataset\", \"path\": \"x\", \"seed\": 5}, \"stages\": [" stages  \
    "]}"

static int parse(const char *json, sl_spec_t *spec, char *err, size_t errlen)
{
    return sl_spec_parse("t.json", json, strlen(json), spec, err, errlen);
}

static void expect_spec_err(const char *json, const char *want)
{
    sl_spec_t spec;
    char err[2048];
    int rc = parse(json, &spec, err, sizeof(err));
    ck_assert_msg(rc == -EINVAL, "accepted: %s", json);
    ck_assert_msg(strstr(err, want) != NULL, "'%s' not in '%s'", want, err);
}

START_TEST(test_spec)
{
    sl_spec_t spec;
    char err[2048];
    ck_assert_msg(parse(RECORD_SPEC("{\"op\": \"decode_video\"}"), &spec, err, sizeof(err)) == 0,
                  "%s", err);
    const sl_stage_spec_t *st = &spec.stages[0];
    ck_assert_int_eq(st->op, SL_OP_DECODE_VIDEO);
    ck_assert_uint_eq(st->v_sampling, 0);
    ck_assert_uint_eq(st->v_frames, 8);
    ck_assert_uint_eq(st->v_threads, 1);
    ck_assert(!st->v_random_offset);
    ck_assert(st->v_timeout_sec == 60);
    ck_assert(sl_op_draws_random(SL_OP_DECODE_VIDEO));
    /* Canonical JSON reads back equal. */
    const char *fps = RECORD_SPEC("{\"op\": \"decode_video\", \"sampling\": \"fps\", \"fps\": 1.5,"
                                  " \"max_frames\": 12, \"random_offset\": true, \"threads\": 2,"
                                  " \"timeout_sec\": 5}, {\"op\": \"resize\", \"size\": 224}");
    sl_spec_clear(&spec);
    ck_assert_msg(parse(fps, &spec, err, sizeof(err)) == 0, "%s", err);
    char *canon = sl_spec_to_json(&spec);
    ck_assert_ptr_nonnull(canon);
    ck_assert_msg(strstr(canon, "\"sampling\": \"fps\"") || strstr(canon, "\"sampling\":\"fps\""),
                  "%s", canon);
    sl_spec_t again;
    ck_assert_msg(parse(canon, &again, err, sizeof(err)) == 0, "%s", err);
    ck_assert_mem_eq(&again.stages[0], &spec.stages[0], sizeof(sl_stage_spec_t));
    ck_assert(again.stages[0].v_fps == 1.5 && again.stages[0].v_max_frames == 12 &&
              again.stages[0].v_random_offset && again.stages[0].v_threads == 2);
    free(canon);
    sl_spec_clear(&again);
    sl_spec_clear(&spec);
    /* Broken stages name their field. */
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"frames\": 0}"),
                    "stages[0].frames: must be an integer in 1..256");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"frames\": 257}"),
                    "stages[0].frames: must be an integer in 1..256");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"sampling\": \"fps\", \"fps\": 2,"
                                " \"max_frames\": 257}"),
                    "stages[0].max_frames: must be an integer in 1..256");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"sampling\": \"fps\"}"),
                    "stages[0].fps: missing");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"fps\": 2}"),
                    "stages[0].fps: only with \"sampling\": \"fps\"");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"sampling\": \"fps\", \"fps\": 2,"
                                " \"frames\": 4}"),
                    "stages[0].frames: only with \"sampling\": \"uniform\"");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"sampling\": \"fps\", \"fps\": -1}"),
                    "stages[0].fps: must be a number above 0");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"sampling\": \"every\"}"),
                    "stages[0].sampling");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"threads\": 9}"), "stages[0].threads");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"timeout_sec\": 0}"),
                    "stages[0].timeout_sec");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"random_offset\": 1}"),
                    "stages[0].random_offset");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\", \"size\": 3}"), "size");
    expect_spec_err(RECORD_SPEC("{\"op\": \"decode_video\"}, {\"op\": \"decode_image\"}"),
                    "appears twice");
    expect_spec_err("{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\"}, \"stages\": "
                    "[{\"op\": \"decode_video\"}]}",
                    "decode_video needs a multimodal source");
}
END_TEST

/* A record: key, text, one JPEG, then two clips. */
static void make_record(sl_tensor_t *t, const uint8_t *clip1, size_t len1, const uint8_t *clip2,
                        size_t len2)
{
    fx_jpeg_opts_t o = {.width = 40, .height = 30, .quality = 90, .seed = 4};
    uint8_t *jpg = NULL;
    size_t len = 0;
    ck_assert_int_eq(fx_make_jpeg(&o, &jpg, &len), 0);
    ck_assert_int_eq(sl_rec_begin(t), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_KEY, "k", 1), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_TEXT, "a clip", 6), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_IMAGE_ENC, jpg, len), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_VIDEO_ENC, clip1, len1), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_VIDEO_ENC, clip2, len2), 0);
    sl_rec_finish(t);
    free(jpg);
}

static sl_pipeline_t *compile(const char *json)
{
    sl_spec_t spec;
    char err[1024];
    ck_assert_msg(parse(json, &spec, err, sizeof(err)) == 0, "%s", err);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, err, sizeof(err)), 0);
    sl_spec_clear(&spec);
    return p;
}

static int run(const sl_pipeline_t *p, uint32_t to, uint64_t epoch, sl_tensor_t *io, char *err)
{
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    int rc = sl_pipeline_run(p, 0, to, epoch, 17, io, &sc, NULL, err, 256);
    sl_pipe_scratch_free(&sc);
    return rc;
}

START_TEST(test_unit)
{
    size_t l1, l2;
    uint8_t *c1 = seed("h264.mp4", &l1), *c2 = seed("vp9.webm", &l2);
    sl_pipeline_t *p = compile(RECORD_SPEC("{\"op\": \"decode_video\", \"frames\": 3,"
                                           " \"random_offset\": true},"
                                           " {\"op\": \"resize\", \"size\": 24}"));
    ck_assert_uint_eq(sl_pipeline_nunits(p), 2);
    sl_tensor_t a, b, c;
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    sl_tensor_init(&c);
    char err[256];
    make_record(&a, c1, l1, c2, l2);
    make_record(&b, c1, l1, c2, l2);
    make_record(&c, c1, l1, c2, l2);
    ck_assert_msg(run(p, 2, 0, &a, err) == 0, "%s", err);
    ck_assert_msg(run(p, 1, 0, &b, err) == 0, "%s", err); /* decode_video alone */
    ck_assert_msg(run(p, 2, 1, &c, err) == 0, "%s", err); /* another epoch */
    sl_rec_t r, rb, rc;
    ck_assert_int_eq(sl_rec_parse(a.data, a.nbytes, &r, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_rec_parse(b.data, b.nbytes, &rb, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_rec_parse(c.data, c.nbytes, &rc, err, sizeof(err)), 0);
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_IMAGE), 1 + 3 + 3);
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_VIDEO_ENC), 0);
    ck_assert_ptr_nonnull(sl_rec_find(&r, SL_RF_TEXT));
    /* The still image first, then the frames, each 24 on its short side;
     * swscale scaled the frames already: the resize unit copied them. */
    ck_assert_uint_eq(r.f[2].h, 24);
    ck_assert_uint_eq(r.f[2].w, 32);
    for (uint32_t i = 3; i < r.n; i++) {
        ck_assert_uint_eq(r.f[i].kind, SL_RF_IMAGE);
        ck_assert_uint_eq(r.f[i].h, 24);
        ck_assert_uint_eq(r.f[i].src_w, i < 6 ? 64 : 66);
        ck_assert_uint_eq(rb.f[i].h, 24);
        ck_assert_mem_eq(r.f[i].data, rb.f[i].data, r.f[i].nbytes);
    }
    /* Another epoch draws other offsets: some frame differs. */
    int differ = 0;
    for (uint32_t i = 3; i < r.n; i++) {
        differ |= memcmp(r.f[i].data, rc.f[i].data, r.f[i].nbytes) != 0;
    }
    ck_assert(differ);
    /* A broken clip names itself; its code is the skip's. */
    sl_tensor_free(&a);
    sl_tensor_init(&a);
    make_record(&a, c1, l1, (const uint8_t *)"junk", 4);
    int rcode = run(p, 2, 0, &a, err);
    ck_assert_int_eq(rcode, -EBADMSG);
    ck_assert_msg(strstr(err, "video 1: not a clip") != NULL, "%s", err);
    ck_assert_int_eq(sl_skip_from_errno(rcode), SL_SKIP_CORRUPT);
    sl_tensor_free(&a);
    sl_tensor_free(&b);
    sl_tensor_free(&c);
    sl_pipeline_free(p);
    free(c1);
    free(c2);
}
END_TEST

/* More frames than the old 32 images: 64 per clip (a 12-frame seed's
 * frames repeat) make a record of 129 images; 200 per clip would make 401,
 * over SL_REC_MAX_FRAMES: a too_many_images skip naming the count. */
START_TEST(test_many_frames)
{
    size_t l1, l2;
    uint8_t *c1 = seed("h264.mp4", &l1), *c2 = seed("vp9.webm", &l2);
    sl_pipeline_t *p = compile(RECORD_SPEC("{\"op\": \"decode_video\", \"frames\": 64},"
                                           " {\"op\": \"resize\", \"size\": 16}"));
    sl_tensor_t a;
    sl_tensor_init(&a);
    char err[256];
    make_record(&a, c1, l1, c2, l2);
    ck_assert_msg(run(p, 2, 0, &a, err) == 0, "%s", err);
    sl_rec_t r;
    ck_assert_int_eq(sl_rec_parse(a.data, a.nbytes, &r, err, sizeof(err)), 0);
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_IMAGE), 1 + 64 + 64);
    ck_assert_uint_eq(r.f[r.n - 1].h, 16);
    sl_pipeline_free(p);
    sl_tensor_free(&a);
    sl_tensor_init(&a);
    p = compile(RECORD_SPEC("{\"op\": \"decode_video\", \"frames\": 200}"));
    make_record(&a, c1, l1, c2, l2);
    int rc = run(p, 1, 0, &a, err);
    ck_assert_int_eq(rc, -ETOOMANYREFS);
    ck_assert_msg(strstr(err, "video 1: 200 frames after 201 images make more than 256") != NULL,
                  "%s", err);
    ck_assert_int_eq(sl_skip_from_errno(rc), SL_SKIP_TOO_MANY_IMAGES);
    sl_tensor_free(&a);
    sl_pipeline_free(p);
    free(c1);
    free(c2);
}
END_TEST

/* The cost features of a clip come from its header: codec, size, frame
 * count and keyframe spacing (the h264 seed: 12 frames, a keyframe every
 * 4), so 8 wanted frames cost every frame; a record sums its parts. */
START_TEST(test_cost_features)
{
    size_t len;
    uint8_t *buf = seed("h264.mp4", &len);
    char err[256];
    sl_video_info_t info;
    ck_assert_msg(sl_video_probe(buf, len, &info, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(info.codec, "h264");
    ck_assert_uint_eq(info.nframes, 12);
    ck_assert_uint_eq(info.keyframes, 3);
    ck_assert(info.fps > 11.9 && info.fps < 12.1);
    ck_assert(sl_video_decode_estimate(&info, 8) == 12); /* 8 x (4 + 1) / 2 > 12 */
    ck_assert(sl_video_decode_estimate(&info, 1) == 2.5);
    double mp = 64.0 * 48 / 1e6;
    ck_assert(fabs(sl_video_work_mpix(&info, 8) - 12 * mp) < 1e-12);
    sl_video_info_t av1 = info;
    snprintf(av1.codec, sizeof(av1.codec), "av1");
    ck_assert(sl_video_work_mpix(&av1, 8) > sl_video_work_mpix(&info, 8));
    sl_video_info_t nokey = info;
    nokey.keyframes = 0; /* unknown spacing: x264's 250, capped by the clip */
    ck_assert(sl_video_decode_estimate(&nokey, 2) == 12);
    sl_tensor_t rec;
    sl_tensor_init(&rec);
    ck_assert_int_eq(sl_rec_begin(&rec), 0);
    ck_assert_int_eq(sl_rec_add_bytes(&rec, SL_RF_TEXT, "hello", 5), 0);
    ck_assert_int_eq(sl_rec_add_bytes(&rec, SL_RF_VIDEO_ENC, buf, len), 0);
    sl_rec_finish(&rec);
    sl_cost_features_t f;
    sl_cost_features(rec.data, rec.nbytes, &f);
    ck_assert(f.images == 1);
    ck_assert(fabs(f.kb - (double)len / 1000) < 1e-9);
    ck_assert(fabs(f.mpix - sl_video_work_mpix(&info, SL_COST_VIDEO_FRAMES)) < 1e-12);
    ck_assert(fabs(f.text_kb - 0.005) < 1e-12);
    /* A clip whose header cannot be read: its bytes only. */
    sl_tensor_free(&rec);
    sl_tensor_init(&rec);
    ck_assert_int_eq(sl_rec_begin(&rec), 0);
    ck_assert_int_eq(sl_rec_add_bytes(&rec, SL_RF_VIDEO_ENC, buf, 100), 0);
    sl_rec_finish(&rec);
    sl_cost_features(rec.data, rec.nbytes, &f);
    ck_assert(f.images == 1 && f.mpix == 0 && fabs(f.kb - 0.1) < 1e-12);
    sl_tensor_free(&rec);
    free(buf);
}
END_TEST

START_TEST(test_skip_reasons)
{
    ck_assert_int_eq(sl_skip_from_errno(-ENOMEDIUM), SL_SKIP_NO_VIDEO_STREAM);
    ck_assert_int_eq(sl_skip_from_errno(-EPROTONOSUPPORT), SL_SKIP_OTHER_CODEC);
    ck_assert_int_eq(sl_skip_from_errno(-ETIME), SL_SKIP_DECODE_TIMEOUT);
    ck_assert_str_eq(sl_skip_name(SL_SKIP_NO_VIDEO_STREAM), "no_video_stream");
    ck_assert_str_eq(sl_skip_name(SL_SKIP_OTHER_CODEC), "other_codec");
    ck_assert_str_eq(sl_skip_name(SL_SKIP_DECODE_TIMEOUT), "decode_timeout");
    /* Every name fits sluice_skip_t.reason (16 bytes with its NUL). */
    for (int i = 0; i < SL_SKIP__COUNT; i++) {
        ck_assert_uint_lt(strlen(sl_skip_name((sl_skip_e)i)), 16);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("video");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pick);
    tcase_add_loop_test(tc, test_decode_seeds, 0, (int)NSEEDS);
    tcase_add_test(tc, test_decode_skips_work);
    tcase_add_test(tc, test_bad_clips);
    tcase_add_test(tc, test_spec);
    tcase_add_test(tc, test_unit);
    tcase_add_test(tc, test_many_frames);
    tcase_add_test(tc, test_cost_features);
    tcase_add_test(tc, test_skip_reasons);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
