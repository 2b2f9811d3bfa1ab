/* `sluice run --save-state / --resume`: a job's state in files
 * (docs/protocol.md "Resume"). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/cli/cli.h"
#include "common/base/file.h"

#define STATE_FILE_MAX (16u << 20) /* as the library's limit */

int sl_cli_read_states(const char *const *paths, unsigned n, char ***ret_bufs,
                       size_t **ret_lens)
{
    char **bufs = calloc(n > 0 ? n : 1, sizeof(*bufs));
    size_t *lens = calloc(n > 0 ? n : 1, sizeof(*lens));
    if (bufs == NULL || lens == NULL) {
        free(bufs);
        free(lens);
        fprintf(stderr, "sluice run: out of memory\n");
        return -ENOMEM;
    }
    for (unsigned i = 0; i < n; i++) {
        char err[512];
        int rc = sl_file_read(paths[i], STATE_FILE_MAX, &bufs[i], &lens[i], err, sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "sluice run: --resume: %s\n", err);
            sl_cli_free_states(bufs, lens, n);
            return rc;
        }
    }
    *ret_bufs = bufs;
    *ret_lens = lens;
    return 0;
}

void sl_cli_free_states(char **bufs, size_t *lens, unsigned n)
{
    for (unsigned i = 0; bufs != NULL && i < n; i++) {
        free(bufs[i]);
    }
    free(bufs);
    free(lens);
}

/* Written next to path and renamed over it: a reader (or a rank killed
 * while writing) sees the old state or the new one, never half of one. */
int sl_cli_save_state(sluice_job_t *job, const char *path)
{
    char *state = NULL;
    size_t len = 0;
    if (sluice_state_save(job, &state, &len) < 0) {
        fprintf(stderr, "sluice run: --save-state: %s\n", sluice_last_error(job));
        return -1;
    }
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        sluice_state_free(state);
        fprintf(stderr, "sluice run: --save-state: path too long\n");
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0;
    for (size_t off = 0; ok && off < len;) {
        ssize_t w = write(fd, state + off, len - off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        ok = w > 0;
        off += ok ? (size_t)w : 0;
    }
    int e = errno;
    ok = ok && fsync(fd) == 0;
    if (fd >= 0 && close(fd) != 0) {
        ok = 0;
    }
    ok = ok && rename(tmp, path) == 0;
    if (!ok) {
        e = errno != 0 ? errno : e;
        fprintf(stderr, "sluice run: --save-state: cannot write '%s': %s\n", path, strerror(e));
        (void)unlink(tmp);
    }
    sluice_state_free(state);
    return ok ? 0 : -1;
}
