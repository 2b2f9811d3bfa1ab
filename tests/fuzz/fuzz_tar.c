/* fuzz_tar: the tar shard reader (common/data/source_tar.c) on arbitrary bytes.
 * The input becomes DIR/shard.tar; the source is opened and every indexed
 * sample read back. Contracts (source.h):
 *   - open returns 0 or a documented code, with a printable message;
 *   - reads return 0 with exactly sl_source_size() encoded bytes, or one of
 *     the documented errors (-ENODATA, -ENOMSG, -EFBIG, ...), and never
 *     reserve more memory than the shard has bytes;
 *   - names, labels and the fingerprint are there for every index. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/data/source.h"
#include "tests/fuzz/fuzz.h"

/* One directory per process, removed at exit. */
static fz_tmpfile_t fz_tar_file;

static void fz_tar_cleanup(void) { fz_tmpfile_remove(&fz_tar_file); }

int fuzz_tar_one(const uint8_t *data, size_t size)
{
    fz_tmpfile_setup(&fz_tar_file, "tar", "shard.tar", fz_tar_cleanup);
    fz_tmpfile_write(&fz_tar_file, data, size);
    sl_source_t *src = NULL;
    char err[512];
    int rc = sl_source_open(fz_tar_file.dir, SL_SRC_TAR, "shard.tar", &src, err, sizeof(err));
    FZ_CHECK(rc == 0 || rc == -E2BIG || rc == -ENOMEM, "open returned %d: %s", rc, err);
    if (rc != 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
        return 0;
    }
    uint64_t n = sl_source_count(src);
    /* Every sample needs its own 512-byte header. */
    FZ_CHECK(n <= size / 512, "%llu samples from %zu bytes", (unsigned long long)n, size);
    const char *warn = sl_source_open_warnings(src);
    FZ_CHECK(warn != NULL && fz_err_ok(warn, strlen(warn) + 1), "bad warnings line");
    (void)sl_source_fingerprint(src);
    (void)sl_source_num_classes(src);
    sl_tensor_t t;
    sl_tensor_init(&t);
    for (uint64_t i = 0; i < n; i++) {
        const char *name = sl_source_name(src, i);
        FZ_CHECK(name != NULL && strncmp(name, "shard.tar:", 10) == 0, "bad name");
        int32_t label = sl_source_label(src, i);
        FZ_CHECK(label >= -1, "label %d", label);
        uint64_t want = sl_source_size(src, i);
        rc = sl_source_read(src, i, &t, err, sizeof(err));
        FZ_CHECK(rc == 0 || rc == -ENODATA || rc == -ENOMSG || rc == -EFBIG || rc == -ENOMEM,
                 "read %llu returned %d: %s", (unsigned long long)i, rc, err);
        /* Whatever a member declares, a read reserves no more than the shard
         * (tensors grow by doubling from 4 KiB). */
        FZ_CHECK(t.cap <= 4096 || t.cap < 2 * size,
                 "a %zu-byte shard made a read reserve %zu bytes", size, t.cap);
        if (rc == 0) {
            FZ_CHECK(t.dtype == SL_DT_BYTES && t.nbytes == want && t.h == want && want > 0,
                     "read %zu bytes, index says %llu", t.nbytes, (unsigned long long)want);
        } else {
            FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
        }
    }
    rc = sl_source_read(src, n, &t, err, sizeof(err));
    FZ_CHECK(rc == -ERANGE, "read past the end returned %d", rc);
    sl_tensor_free(&t);
    sl_source_free(src);
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_tar_one)
