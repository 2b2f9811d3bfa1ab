/* fuzz: what the fuzz targets share (prefix fz_).
 *
 * Each tests/fuzz/fuzz_<name>.c defines `int fuzz_<name>_one(const uint8_t *,
 * size_t)`: one input through the code under test, asserting the contracts
 * the headers promise (error codes, output shapes, round trips). Under
 * -DSL_LIBFUZZER (make fuzz) the file also defines LLVMFuzzerTestOneInput;
 * without it tests/unit/test_fuzz_regressions.c #includes every target and
 * replays tests/fuzz/regressions/<name>/ through the same bodies.
 *
 * A broken contract is a crash (FZ_CHECK aborts), so libFuzzer saves the
 * input like any other crash. Targets keep no state between inputs except
 * read-only set-up (temp directories, parsed constant specs). */
#ifndef SL_TESTS_FUZZ_H
#define SL_TESTS_FUZZ_H

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define FZ_CHECK(cond, ...)                                                              \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: fuzz check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
            abort();                                                                     \
        }                                                                                \
    } while (0)

/* The error buffer is one NUL-terminated line without control characters:
 * it ends up in logs and in gRPC status details, so control bytes from the
 * input must have been escaped or replaced on the way in (sl_err does).
 * Bytes from 0x80 up pass: names may be UTF-8. */
/* The codes the image decoders return (common/image/jpeg.h, png.h share them). */
static inline int fz_image_code_ok(int rc)
{
    return rc == 0 || rc == -ENODATA || rc == -EILSEQ || rc == -EFBIG || rc == -ENOMSG ||
           rc == -EBADMSG || rc == -ENOMEM;
}

/* FNV-1a of the input from h (FZ_FNV_BASIS, or a target's own start): the
 * seed from which a target draws its geometry, so each input tries other
 * crops, scales and splits. */
#define FZ_FNV_BASIS 0xcbf29ce484222325ull
static inline uint64_t fz_hash(uint64_t h, const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        h = (h ^ data[i]) * 0x100000001b3ull;
    }
    return h;
}

/* Next pseudo-random number from that seed (splitmix64). */
static inline uint64_t fz_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline int fz_err_ok(const char *err, size_t errlen)
{
    const char *end = memchr(err, '\0', errlen);
    if (end == NULL) {
        return 0;
    }
    for (const char *p = err; p < end; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20 || ch == 0x7f) {
            return 0;
        }
    }
    return 1;
}

/* A list of errors, one a line (a spec parse reports every error it finds):
 * each line as fz_err_ok wants it, non-empty, and starting with prefix. */
static inline int fz_err_lines_ok(const char *err, size_t errlen, const char *prefix)
{
    if (memchr(err, '\0', errlen) == NULL) {
        return 0;
    }
    size_t plen = strlen(prefix);
    for (const char *line = err;;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl != NULL ? (size_t)(nl - line) : strlen(line);
        if (n < plen || strncmp(line, prefix, plen) != 0) {
            return 0;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)line[i];
            if (ch < 0x20 || ch == 0x7f) {
                return 0;
            }
        }
        if (nl == NULL) {
            return 1;
        }
        line = nl + 1;
    }
}

/* Reads input bytes as little-endian integers without running off the end
 * (missing bytes read as zero). */
typedef struct fz_reader_s {
    const uint8_t *p;
    size_t n;
} fz_reader_t;

static inline uint32_t fz_take(fz_reader_t *r, unsigned bytes)
{
    uint32_t v = 0;
    for (unsigned i = 0; i < bytes; i++) {
        uint32_t b = 0;
        if (r->n > 0) {
            b = *r->p++;
            r->n--;
        }
        v |= b << (8 * i);
    }
    return v;
}

/* A file the code under test reads, in a directory of its own made on
 * first use (read-only set-up: it lives for the whole process). */
typedef struct fz_tmpfile_s {
    char dir[64];
    char path[96];
} fz_tmpfile_t;

/* Makes /tmp/sluice-fuzz-TAG-XXXXXX/NAME's directory once; cleanup (which
 * calls fz_tmpfile_remove, atexit takes no argument) runs at exit. */
static inline void fz_tmpfile_setup(fz_tmpfile_t *t, const char *tag, const char *name,
                                    void (*cleanup)(void))
{
    if (t->dir[0] != '\0') {
        return;
    }
    snprintf(t->dir, sizeof(t->dir), "/tmp/sluice-fuzz-%s-XXXXXX", tag);
    FZ_CHECK(mkdtemp(t->dir) != NULL, "mkdtemp failed");
    snprintf(t->path, sizeof(t->path), "%s/%s", t->dir, name);
    atexit(cleanup);
}

static inline void fz_tmpfile_remove(const fz_tmpfile_t *t)
{
    unlink(t->path);
    rmdir(t->dir);
}

/* Replaces the file's contents with the input. */
static inline void fz_tmpfile_write(const fz_tmpfile_t *t, const uint8_t *data, size_t size)
{
    int fd = open(t->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FZ_CHECK(fd >= 0, "cannot create %s", t->path);
    size_t off = 0;
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);
        FZ_CHECK(n > 0, "write failed");
        off += (size_t)n;
    }
    close(fd);
}

int fuzz_spec_one(const uint8_t *data, size_t size);
int fuzz_tar_one(const uint8_t *data, size_t size);
int fuzz_jpeg_one(const uint8_t *data, size_t size);
int fuzz_rpc_one(const uint8_t *data, size_t size);
int fuzz_conf_one(const uint8_t *data, size_t size);
int fuzz_remote_one(const uint8_t *data, size_t size);
int fuzz_record_one(const uint8_t *data, size_t size);
int fuzz_png_one(const uint8_t *data, size_t size);
int fuzz_tokenizer_one(const uint8_t *data, size_t size);
int fuzz_records_one(const uint8_t *data, size_t size);

#ifdef SL_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#define FZ_LIBFUZZER_ENTRY(fn)                                           \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)         \
    {                                                                    \
        return fn(data, size);                                           \
    }
#else
#define FZ_LIBFUZZER_ENTRY(fn)
#endif

#endif
