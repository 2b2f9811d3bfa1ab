#include "common/data/skip.h"

#include <errno.h>

sl_skip_e sl_skip_from_errno(int rc)
{
    switch (-rc) {
    case ENODATA:
        return SL_SKIP_EMPTY;
    case EILSEQ:
        return SL_SKIP_NOT_JPEG;
    case ENOMSG:
        return SL_SKIP_TRUNCATED;
    case EFBIG:
        return SL_SKIP_TOO_LARGE;
    case EBADMSG:
        return SL_SKIP_CORRUPT;
    case EPERM:
        return SL_SKIP_OUTSIDE_ROOT;
    case EDOM:
        return SL_SKIP_BAD_TEXT;
    case ENOSTR:
        return SL_SKIP_NO_TEXT;
    case EPROTO:
        return SL_SKIP_BAD_MANIFEST;
    case ETOOMANYREFS:
        return SL_SKIP_TOO_MANY_IMAGES;
    case ECANCELED:
        return SL_SKIP_RESUMED;
    case ECHILD:
        return SL_SKIP_PLUGIN_FAILED;
    case EMSGSIZE:
        return SL_SKIP_TOO_LONG;
    case ENOMEDIUM:
        return SL_SKIP_NO_VIDEO_STREAM;
    case EPROTONOSUPPORT:
        return SL_SKIP_OTHER_CODEC;
    case ETIME:
        return SL_SKIP_DECODE_TIMEOUT;
    case ENOLINK:
        return SL_SKIP_SOURCE_DOWN;
    default:
        return SL_SKIP_IO;
    }
}

const char *sl_skip_name(sl_skip_e reason)
{
    static const char *const NAMES[SL_SKIP__COUNT] = {
        "empty",          "not_jpeg",     "truncated",       "too_large",
        "corrupt",        "io",           "outside_root",    "bad_text",
        "no_text",        "bad_manifest", "too_many_images", "resumed",
        "plugin_failed",  "too_long",     "no_video_stream", "other_codec",
        "decode_timeout", "source_down",
    };
    return (unsigned)reason < SL_SKIP__COUNT ? NAMES[reason] : "unknown";
}
