/* fuzz_wire: the client's Batch reader (client/lib/batch_wire.c over
 * common/rpc/pb_wire.c), which parses what a worker sends straight from gRPC's
 * slices. Input: byte 0 = segment size (0 → one segment), the rest = the
 * message, cut into separately allocated segments so ASan sees any read
 * past one. Contracts: 0 or -EBADMSG with a one-line "malformed Batch"
 * error; an accepted message has at most the sample limit, every sample's
 * data/string readers lie inside the message (their bytes equal the
 * message's bytes at that place), sl_wire_sample_check and sl_wire_string
 * never fail on them, sl_wire_url_versions gives 0 or -EBADMSG and the same
 * pairs, and the index is the same however the bytes are cut. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/batch_wire.h"
#include "common/rpc/pb_wire.h"
#include "tests/fuzz/fuzz.h"

#define FZ_WIRE_MAX_SEGS 4096
#define FZ_WIRE_MAX_SAMPLES 64

int fuzz_wire_one(const uint8_t *data, size_t size);

static size_t fz_wire_cut(const uint8_t *msg, size_t n, size_t piece, sl_pbw_seg_t *segs,
                          uint8_t **owned)
{
    size_t k = 0;
    if (piece == 0 || n / piece + 1 >= FZ_WIRE_MAX_SEGS) {
        piece = n ? n : 1;
    }
    for (size_t off = 0; off < n; off += piece) {
        size_t len = n - off < piece ? n - off : piece;
        owned[k] = malloc(len);
        FZ_CHECK(owned[k] != NULL, "out of memory");
        memcpy(owned[k], msg + off, len);
        segs[k] = (sl_pbw_seg_t){owned[k], len};
        k++;
    }
    return k;
}

/* A reader's bytes, flattened; they must be the message's bytes at some
 * offset (readers never invent bytes). */
static void fz_wire_reader_ok(const sl_pbw_reader_t *r, const uint8_t *msg, size_t n)
{
    size_t len = sl_pbw_left(r);
    FZ_CHECK(len <= n, "reader of %zu bytes in a %zu-byte message", len, n);
    uint8_t *buf = malloc(len ? len : 1);
    FZ_CHECK(buf != NULL, "out of memory");
    sl_pbw_reader_t c = *r;
    FZ_CHECK(sl_pbw_copy(&c, buf, len) == 0, "copy of what the reader holds failed");
    FZ_CHECK(sl_pbw_left(&c) == 0, "reader not empty after copying all");
    int found = len == 0;
    for (size_t off = 0; !found && off + len <= n; off++) {
        found = memcmp(msg + off, buf, len) == 0;
    }
    FZ_CHECK(found, "reader bytes are not in the message");
    free(buf);
}

int fuzz_wire_one(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    size_t piece = data[0];
    const uint8_t *msg = data + 1;
    size_t n = size - 1;
    static sl_pbw_seg_t segs[FZ_WIRE_MAX_SEGS];
    static uint8_t *owned[FZ_WIRE_MAX_SEGS];
    size_t nsegs = fz_wire_cut(msg, n, piece, segs, owned);

    sl_wire_batch_t wb, flat;
    char err[256] = "";
    int rc = sl_wire_batch_parse(segs, nsegs, FZ_WIRE_MAX_SAMPLES, &wb, err, sizeof(err));
    FZ_CHECK(rc == 0 || rc == -EBADMSG, "parse returned %d", rc);
    sl_pbw_seg_t one = {msg, n};
    char err2[256] = "";
    int rc2 = sl_wire_batch_parse(&one, 1, FZ_WIRE_MAX_SAMPLES, &flat, err2, sizeof(err2));
    FZ_CHECK(rc == rc2, "cut into %zu-byte pieces: %d, whole: %d", piece, rc, rc2);
    if (rc < 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)) && strstr(err, "malformed Batch") != NULL,
                 "bad error text: %s", err);
        FZ_CHECK(wb.samples == NULL && wb.n_samples == 0, "refused but not empty");
    } else {
        FZ_CHECK(wb.n_samples <= FZ_WIRE_MAX_SAMPLES, "%zu samples", wb.n_samples);
        FZ_CHECK(wb.n_samples == flat.n_samples && wb.job_id == flat.job_id &&
                     wb.split_id == flat.split_id && wb.stage_to == flat.stage_to &&
                     wb.split_done == flat.split_done,
                 "the index depends on how the bytes were cut");
        for (size_t i = 0; i < wb.n_samples; i++) {
            const sl_wire_sample_t *s = &wb.samples[i];
            const sl_wire_sample_t *f = &flat.samples[i];
            FZ_CHECK(s->epoch == f->epoch && s->position == f->position && s->h == f->h &&
                         s->w == f->w && s->c == f->c && s->dtype == f->dtype &&
                         sl_pbw_left(&s->data) == sl_pbw_left(&f->data),
                     "sample %zu depends on the cut", i);
            fz_wire_reader_ok(&s->data, msg, n);
            fz_wire_reader_ok(&s->skip_reason, msg, n);
            fz_wire_reader_ok(&s->skip_detail, msg, n);
            char d[256];
            int c = sl_wire_sample_check(s, wb.stage_to, 5, d, sizeof(d));
            FZ_CHECK(c == 0 || (c == -EBADMSG && fz_err_ok(d, sizeof(d))), "check %d", c);
            fz_wire_reader_ok(&s->url_versions, msg, n);
            sl_url_vers_t v, vf;
            int a = sl_wire_url_versions(s, &v, d, sizeof(d));
            FZ_CHECK(a == 0 || (a == -EBADMSG && fz_err_ok(d, sizeof(d))), "versions %d", a);
            FZ_CHECK(a == sl_wire_url_versions(f, &vf, d, sizeof(d)) &&
                         (a < 0 || (v.n == vf.n && v.n <= SL_URL_VERS_MAX &&
                                    memcmp(v.v, vf.v, v.n * sizeof(v.v[0])) == 0)),
                     "sample %zu's url_versions depend on the cut", i);
            char str[16];
            size_t full = sl_wire_string(&s->skip_detail, str, sizeof(str));
            FZ_CHECK(full == sl_pbw_left(&s->skip_detail) && strlen(str) < sizeof(str),
                     "string length");
        }
        sl_wire_batch_free(&wb);
        sl_wire_batch_free(&flat);
    }
    for (size_t i = 0; i < nsegs; i++) {
        free(owned[i]);
    }
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_wire_one)
