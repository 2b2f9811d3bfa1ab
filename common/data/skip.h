/* skip: why a sample was not delivered. Readers and decoders return negative
 * errno codes; this module is the one place that maps them to the reasons that
 * are counted in --json output, /status and /metrics. Peers exchange reasons
 * by name (Sample.skip_reason), so a new reason is added here and nowhere
 * else; a peer that does not know a name counts it as "io". */
#ifndef SL_SKIP_H
#define SL_SKIP_H

/* The comments keep their columns (clang-format would realign them all). */
/* clang-format off */
typedef enum {
    SL_SKIP_EMPTY = 0,    /* -ENODATA: zero-byte file or member */
    SL_SKIP_NOT_JPEG,     /* -EILSEQ: bytes are not a JPEG (no SOI marker, unknown format) */
    SL_SKIP_TRUNCATED,    /* -ENOMSG: file ends before the image data does */
    SL_SKIP_TOO_LARGE,    /* -EFBIG: width x height above max_pixels (decompression bomb), or
                         * file too big */
    SL_SKIP_CORRUPT,      /* -EBADMSG: the decoder rejected the data */
    SL_SKIP_IO,           /* anything else: I/O errors, unreadable or dangling files */
    SL_SKIP_OUTSIDE_ROOT, /* -EPERM: the file resolves outside the data root (a symlink
                           * leading out); last, so older peers' numbering still holds */
    /* Multimodal records (webdataset, jsonl); appended for the same reason. */
    SL_SKIP_BAD_TEXT,        /* -EDOM: the text is not valid UTF-8 */
    SL_SKIP_NO_TEXT,         /* -ENOSTR: a sample without its text (or conversations) */
    SL_SKIP_BAD_MANIFEST,    /* -EPROTO: a manifest line that is not a JSON object of the
                           * documented shape */
    SL_SKIP_TOO_MANY_IMAGES, /* -ETOOMANYREFS: more images than SL_REC_MAX_IMAGES */
    /* -ECANCELED: a hole of a resumed job's epoch (common/order/ranks.h
     * SL_POS_HOLE): no sample, consumed before the resume. Not an error:
     * never counted as skipped nor failing an on_error "fail" job. */
    SL_SKIP_RESUMED,
    /* -ECHILD: a plugin stage's host process crashed or hung
     * (common/plugin/plugin.h). Not a skip either: a worker refuses the
     * job (its splits go elsewhere), a client fails it naming the plugin. */
    SL_SKIP_PLUGIN_FAILED,
    /* -EMSGSIZE: over template's max_seq_len with "overflow": "skip". */
    SL_SKIP_TOO_LONG,
    /* Video clips (decode_video, common/video/video.h); appended. A clip
     * that is empty, truncated, corrupt or too large counts under the
     * reasons above. */
    /* -ENOMEDIUM: a clip without a video stream */
    SL_SKIP_NO_VIDEO_STREAM,
    /* -EPROTONOSUPPORT: a codec other than H.264, HEVC, VP8, VP9 or AV1 */
    SL_SKIP_OTHER_CODEC,
    /* -ETIME: a clip's decode took longer than its "timeout_sec". Names
     * stay under 16 bytes (sluice_skip_t.reason). */
    SL_SKIP_DECODE_TIMEOUT,
    /* -ENOLINK: a URL's data server could not be reached (connect,
     * timeout, cut body, 5xx after every retry: common/remote/remote.h).
     * Not this sample's fault: like plugin_failed, a worker refuses the
     * job (its splits go to other workers or the client), a client fails
     * it naming the URL. */
    SL_SKIP_SOURCE_DOWN,
    SL_SKIP__COUNT
} sl_skip_e;
/* clang-format on */

sl_skip_e sl_skip_from_errno(int rc);
/* Short snake_case name used as a JSON key / metrics label: "empty", "not_jpeg", ... */
const char *sl_skip_name(sl_skip_e reason);

#endif
