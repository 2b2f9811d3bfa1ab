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
    default:
        return SL_SKIP_IO;
    }
}

const char *sl_skip_name(sl_skip_e reason)
{
    static const char *const NAMES[SL_SKIP__COUNT] = {
        "empty", "not_jpeg", "truncated", "too_large", "corrupt", "io", "outside_root",
    };
    return (unsigned)reason < SL_SKIP__COUNT ? NAMES[reason] : "unknown";
}
