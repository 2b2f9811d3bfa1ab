/* source_file: other files a job reads from the data root (tokenize's ranks
 * file), confined exactly like the samples. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

int sl_source_open_file(const sl_source_t *src, const char *rel, char *err, size_t errlen)
{
    char norm[SL_SRC_PATH_MAX];
    int rc = sl_src_normalize(rel, norm, sizeof(norm));
    if (rc == -EPERM) {
        return sl_err(err, errlen, rc, "'%s' escapes the data root", rel);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "'%.64s...' is too long", rel);
    }
    int fd = sl_src_open_beneath(src, norm, O_RDONLY, 0);
    if (fd == -EPERM) {
        return sl_err(err, errlen, fd, "'%s' resolves outside the data root", rel);
    }
    if (fd < 0) {
        return sl_err(err, errlen, fd, "'%s' under the data root: %s", rel, strerror(-fd));
    }
    return fd;
}
