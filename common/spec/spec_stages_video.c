/* spec_stages_video: decode_video's keys, parse and canonical JSON
 * (docs/reference/spec.md "decode_video"). The frames it picks become the
 * record's images, so it takes the decode slot of the order rules: the
 * image stages after it run per frame, and it decodes a record's still
 * images too (one decode stage per spec). Parsing thread only. */
#include <math.h>
#include <stdint.h>

#include "common/spec/spec_impl.h"

/* Frames become images: at most a record's decoded images
 * (SL_REC_MAX_FRAMES in common/sample/record.h, which the spec module does
 * not include) and the frames one decode returns (SL_VIDEO_MAX_WANTED). */
#define VIDEO_FRAMES_MAX 256
#define VIDEO_MAX_FRAMES_DEFAULT 32
#define VIDEO_THREADS_MAX 8
#define VIDEO_FPS_MAX 1000.0
#define VIDEO_TIMEOUT_MAX 3600.0

static const char *const sampling_names[] = {"uniform", "fps"};

/* A number in (0, max]; absent keeps *out. */
static int get_positive(sl_spec_pctx_t *c, json_t *st, const char *key, double max, double *out)
{
    json_t *v = json_object_get(st, key);
    if (v == NULL) {
        return 0;
    }
    double x;
    if (!sl_spec_as_number(v, &x) || !(x > 0) || x > max || !isfinite(x)) {
        char got[SPEC_SHOWN_MAX + 8];
        char maxs[32];
        sl_spec_fmt_real(max, maxs, sizeof(maxs));
        return sl_spec_ferr(c, key, "must be a number above 0, at most %s, got %s", maxs,
                            sl_spec_describe(v, got, sizeof(got)));
    }
    *out = x;
    return 0;
}

/* A key of the other sampling mode is an error, not silently ignored. */
static int refuse_key(sl_spec_pctx_t *c, json_t *st, const char *key, const char *mode)
{
    if (json_object_get(st, key) != NULL) {
        return sl_spec_ferr(c, key, "only with \"sampling\": \"%s\"", mode);
    }
    return 0;
}

/* Defaults: 8 frames uniformly (LLaVA-Video's convention), one decoder
 * thread (the pool runs clips in parallel), 60 s per clip. */
static int parse_video(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    int mode = 0;
    out->v_frames = 8;
    out->v_max_frames = VIDEO_MAX_FRAMES_DEFAULT;
    out->v_threads = 1;
    out->v_timeout_sec = 60;
    int rc = sl_spec_get_enum(c, st, "sampling", false, sampling_names, 2, &mode);
    out->v_sampling = (uint32_t)mode;
    if (rc == 0 && mode == 0) {
        rc = sl_spec_get_u32(c, st, "frames", false, 1, VIDEO_FRAMES_MAX, &out->v_frames);
        if (rc == 0) {
            rc = refuse_key(c, st, "fps", "fps");
        }
        if (rc == 0) {
            rc = refuse_key(c, st, "max_frames", "fps");
        }
    } else if (rc == 0) {
        out->v_frames = 0;
        rc = refuse_key(c, st, "frames", "uniform");
        if (rc == 0 && json_object_get(st, "fps") == NULL) {
            rc = sl_spec_ferr(c, "fps", "missing (required with \"sampling\": \"fps\")");
        }
        if (rc == 0) {
            rc = get_positive(c, st, "fps", VIDEO_FPS_MAX, &out->v_fps);
        }
        if (rc == 0) {
            rc = sl_spec_get_u32(c, st, "max_frames", false, 1, VIDEO_FRAMES_MAX,
                                 &out->v_max_frames);
        }
    }
    if (rc == 0) {
        rc = sl_spec_get_bool(c, st, "random_offset", &out->v_random_offset);
    }
    if (rc == 0) {
        rc = sl_spec_get_u32(c, st, "threads", false, 1, VIDEO_THREADS_MAX, &out->v_threads);
    }
    if (rc == 0) {
        rc = get_positive(c, st, "timeout_sec", VIDEO_TIMEOUT_MAX, &out->v_timeout_sec);
    }
    if (mode == 0) {
        out->v_max_frames = 0;
    }
    return rc;
}

static json_t *video_json(const sl_stage_spec_t *st)
{
    json_t *o = json_pack("{s:s, s:s}", "op", "decode_video", "sampling",
                          sampling_names[st->v_sampling == 1 ? 1 : 0]);
    int rc = o != NULL ? 0 : -1;
    if (rc == 0 && st->v_sampling == 1) {
        rc = json_object_set_new(o, "fps", json_real(st->v_fps));
        rc |= json_object_set_new(o, "max_frames", json_integer(st->v_max_frames));
    } else if (rc == 0) {
        rc = json_object_set_new(o, "frames", json_integer(st->v_frames));
    }
    if (rc == 0) {
        rc = json_object_set_new(o, "random_offset", json_boolean(st->v_random_offset));
        rc |= json_object_set_new(o, "threads", json_integer(st->v_threads));
        rc |= json_object_set_new(o, "timeout_sec", json_real(st->v_timeout_sec));
    }
    if (rc != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Records only; draws from the sample's stream when random_offset is set
 * (the flag is the op's: it may draw). */
const sl_op_def_t sl_op_def_decode_video = {
    .name = "decode_video",
    .keys = (const char *const[]){"op", "sampling", "frames", "fps", "max_frames", "random_offset",
                                  "threads", "timeout_sec", NULL},
    .parse = parse_video,
    .to_json = video_json,
    .flags = SL_OPF_RECORD | SL_OPF_RANDOM,
    .slot = SL_ORD_DECODE,
};
