/* fuzz_record: a record from a peer (common/sample/record.c's sl_rec_parse)
 * through every record unit of two pipelines (common/engine/pipe_record.c,
 * pipe_text.c, the image units of pipeline.c, tiles.c, the decoders) -- what
 * a worker or the client runs on a record another host sent, from any split
 * point. The input is the record's bytes; seed, epoch and index come from a
 * hash of them.
 *   A: decode_image+random_resized_crop 24, flip, image_tiles 16 (1..4,
 *      thumbnail), tokenize (a 256-byte vocabulary, max_tokens 64),
 *      template (bos 1, image 7 x 3 per tile, eos 2), normalize;
 *   B (unfused): decode_image, resize 20, center_crop 16, normalize, to_chw.
 * Each pipeline runs on the input from unit 0 to the end, split in two at
 * every unit boundary, and from every unit k to the end (a peer's record
 * arriving at unit k). Contracts (record.h, pipeline.h, docs/records.md):
 *   - a run returns 0 or a documented code (the decoders', -EINVAL for a
 *     record a unit cannot take, -EDOM for text that is not UTF-8, -EFBIG)
 *     with a printable message; a record that sl_rec_parse refuses is
 *     -EINVAL at every unit;
 *   - sl_rec_parse of what a run returns succeeds, and key, label, text and
 *     meta pass through byte for byte;
 *   - a split run gives the same bytes as the whole run (or fails alike);
 *   - A from unit 0: every encoded image became tiles (1..5 float32 CHW
 *     16x16 tiles each), no pixels or encoded images are left, tokens are at
 *     most 64 and input_ids is [1] 7 x (3 x tiles) tokens [2];
 *   - B from unit 0: every encoded image became one 3x16x16 float32 CHW
 *     image with its decoded size in src_h/src_w. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/source.h"
#include "common/engine/pipeline.h"
#include "common/sample/record.h"
#include "common/spec/spec.h"
#include "tests/fuzz/fuzz.h"
#include "tests/unit/fixtures.h"

#define FZ_REC_MAX_PIXELS (256u << 10)

static char fz_rec_root[64];
static sl_pipeline_t *fz_rec_pipe[2];

static void fz_rec_cleanup(void)
{
    for (int i = 0; i < 2; i++) {
        sl_pipeline_free(fz_rec_pipe[i]);
        fz_rec_pipe[i] = NULL;
    }
    if (fz_rec_root[0] != '\0') {
        (void)fx_rmtree(fz_rec_root);
        fz_rec_root[0] = '\0';
    }
}

static const char *const FZ_REC_SPECS[2] = {
    "{\"source\": {\"type\": \"webdataset\", \"path\": \"x\"},"
    " \"stages\": [{\"op\": \"decode_image\"}, {\"op\": \"random_resized_crop\", \"size\": 24},"
    " {\"op\": \"flip\"},"
    " {\"op\": \"image_tiles\", \"tile\": 16, \"min_tiles\": 1, \"max_tiles\": 4,"
    " \"thumbnail\": true},"
    " {\"op\": \"tokenize\", \"vocab\": \"v.tiktoken\", \"max_tokens\": 64},"
    " {\"op\": \"template\", \"image_token\": 7, \"tokens_per_tile\": 3, \"bos\": 1,"
    " \"eos\": 2},"
    " {\"op\": \"normalize\"}], \"max_pixels\": 262144}",
    "{\"source\": {\"type\": \"jsonl\", \"path\": \"x\"},"
    " \"stages\": [{\"op\": \"decode_image\"}, {\"op\": \"resize\", \"size\": 20},"
    " {\"op\": \"center_crop\", \"size\": 16}, {\"op\": \"normalize\"}, {\"op\": \"to_chw\"}],"
    " \"max_pixels\": 262144}",
};

/* The ranks file (every byte its own rank) and both pipelines, once. */
static void fz_rec_setup(void)
{
    if (fz_rec_pipe[0] != NULL) {
        return;
    }
    snprintf(fz_rec_root, sizeof(fz_rec_root), "/tmp/sluice-fuzz-record-XXXXXX");
    FZ_CHECK(mkdtemp(fz_rec_root) != NULL, "mkdtemp failed");
    atexit(fz_rec_cleanup);
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char buf[4096];
    size_t o = 0;
    for (unsigned b = 0; b < 256; b++) {
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%c%c== %u\n", A[b >> 2],
                              A[(b & 3) << 4], b);
    }
    char path[160];
    snprintf(path, sizeof(path), "%s/v.tiktoken", fz_rec_root);
    FZ_CHECK(fx_write_file(path, buf, o) == 0, "cannot write %s", path);
    snprintf(path, sizeof(path), "%s/m.jsonl", fz_rec_root);
    FZ_CHECK(fx_write_file(path, "{\"text\": \"x\"}\n", 14) == 0, "cannot write %s", path);
    char err[512];
    sl_source_t *src = NULL;
    FZ_CHECK(sl_source_open(fz_rec_root, SL_SRC_JSONL, "m.jsonl", &src, err, sizeof(err)) == 0,
             "%s", err);
    for (int i = 0; i < 2; i++) {
        sl_spec_t spec;
        FZ_CHECK(sl_spec_parse("fuzz", FZ_REC_SPECS[i], strlen(FZ_REC_SPECS[i]), &spec, err,
                               sizeof(err)) == 0,
                 "%s", err);
        FZ_CHECK(sl_pipeline_new(&spec, i == 1 ? SL_PIPE_NO_FUSE : 0, &fz_rec_pipe[i], err,
                                 sizeof(err)) == 0,
                 "%s", err);
        sl_spec_clear(&spec); /* the pipeline holds its own copy */
        FZ_CHECK(sl_pipeline_load(fz_rec_pipe[i], src, err, sizeof(err)) == 0, "%s", err);
    }
    sl_source_free(src);
}

static int fz_rec_code_ok(int rc)
{
    return rc == 0 || rc == -EINVAL || rc == -ENODATA || rc == -EILSEQ || rc == -EFBIG ||
           rc == -ENOMSG || rc == -EBADMSG || rc == -ENOMEM || rc == -EDOM;
}

typedef struct fz_rec_ctx_s {
    const uint8_t *data;
    size_t size;
    uint64_t epoch, index;
    int parsed; /* the input parses */
    sl_rec_t in;
} fz_rec_ctx_t;

static void fz_rec_load(const fz_rec_ctx_t *x, sl_tensor_t *io)
{
    FZ_CHECK(sl_tensor_reshape(io, SL_DT_RECORD, SL_LAYOUT_HWC, (uint32_t)x->size, 1, 1) == 0,
             "out of memory");
    if (x->size > 0) {
        memcpy(io->data, x->data, x->size);
    }
}

/* Runs [from, to) on io; checks the code and, on success, the output. */
static int fz_rec_run(const fz_rec_ctx_t *x, int pi, uint32_t from, uint32_t to,
                      sl_tensor_t *io, sl_pipe_scratch_t *sc)
{
    const sl_pipeline_t *p = fz_rec_pipe[pi];
    char err[512] = "";
    sl_unit_stat_t stats[SL_PIPE_MAX_UNITS];
    memset(stats, 0, sizeof(stats));
    int rc = sl_pipeline_run(p, from, to, x->epoch, x->index, io, sc, stats, err, sizeof(err));
    FZ_CHECK(fz_rec_code_ok(rc), "%c: units %u..%u (%s) returned %d: %s", 'A' + pi, from, to,
             sl_pipeline_unit_name(p, from), rc, err);
    if (rc != 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)) && err[0] != '\0', "%c: bad error message",
                 'A' + pi);
        return rc;
    }
    FZ_CHECK(from == to || x->parsed, "%c: units %u..%u took a record that does not parse",
             'A' + pi, from, to);
    FZ_CHECK(io->dtype == SL_DT_RECORD && io->h == io->nbytes && io->w == 1 && io->c == 1,
             "%c: units %u..%u: not a record tensor", 'A' + pi, from, to);
    sl_rec_t out;
    FZ_CHECK(sl_rec_parse(io->data, io->nbytes, &out, err, sizeof(err)) == 0,
             "%c: units %u..%u wrote a record that does not parse: %s", 'A' + pi, from, to, err);
    static const sl_rf_kind_e KEEP[] = {SL_RF_KEY, SL_RF_LABEL, SL_RF_TEXT, SL_RF_META};
    for (size_t k = 0; k < sizeof(KEEP) / sizeof(KEEP[0]); k++) {
        const sl_rfield_t *a = sl_rec_find(&x->in, KEEP[k]);
        const sl_rfield_t *b = sl_rec_find(&out, KEEP[k]);
        FZ_CHECK((a == NULL) == (b == NULL) &&
                     (a == NULL || (a->nbytes == b->nbytes &&
                                    memcmp(a->data, b->data, a->nbytes) == 0)),
                 "%c: units %u..%u changed the %s", 'A' + pi, from, to,
                 sl_rf_kind_name(KEEP[k]));
    }
    return 0;
}

/* The outputs of a whole run from unit 0. */
static void fz_rec_check_full(const fz_rec_ctx_t *x, int pi, const sl_tensor_t *io)
{
    sl_rec_t out;
    char err[256];
    FZ_CHECK(sl_rec_parse(io->data, io->nbytes, &out, err, sizeof(err)) == 0, "%s", err);
    uint32_t nenc = sl_rec_count(&x->in, SL_RF_IMAGE_ENC);
    FZ_CHECK(sl_rec_count(&out, SL_RF_IMAGE_ENC) == 0, "%c: encoded images left", 'A' + pi);
    if (pi == 1) {
        FZ_CHECK(sl_rec_count(&out, SL_RF_IMAGE) == nenc, "B: %u images from %u",
                 sl_rec_count(&out, SL_RF_IMAGE), nenc);
        for (uint32_t i = 0; i < out.n; i++) {
            const sl_rfield_t *f = &out.f[i];
            FZ_CHECK(f->kind != SL_RF_IMAGE ||
                         (f->dtype == SL_DT_F32 && f->layout == SL_LAYOUT_CHW && f->h == 16 &&
                          f->w == 16 && f->c == 3 && f->src_h > 0 && f->src_w > 0),
                     "B: image %ux%ux%u dtype %d layout %d from %ux%u", f->h, f->w, f->c,
                     f->dtype, f->layout, f->src_h, f->src_w);
        }
        return;
    }
    FZ_CHECK(sl_rec_count(&out, SL_RF_IMAGE) == 0, "A: pixels left");
    FZ_CHECK(sl_rec_count(&out, SL_RF_TILES) == nenc, "A: %u tiled images from %u",
             sl_rec_count(&out, SL_RF_TILES), nenc);
    uint64_t tiles = 0;
    for (uint32_t i = 0; i < out.n; i++) {
        const sl_rfield_t *f = &out.f[i];
        if (f->kind == SL_RF_TILES) {
            FZ_CHECK(f->dtype == SL_DT_F32 && f->layout == SL_LAYOUT_CHW && f->h == 16 &&
                         f->w == 16 && f->c == 3 && f->count >= 1 && f->count <= 5 &&
                         f->count != 2 && f->src_h > 0 && f->src_w > 0,
                     "A: %u tiles %ux%ux%u dtype %d", f->count, f->c, f->h, f->w, f->dtype);
            tiles += f->count;
        }
    }
    const sl_rfield_t *tok = sl_rec_find(&out, SL_RF_TOKENS);
    const sl_rfield_t *ids = sl_rec_find(&out, SL_RF_INPUT_IDS);
    FZ_CHECK(tok != NULL && ids != NULL && tok->h <= 64, "A: tokens/input_ids missing");
    uint64_t want = 1 + 3 * tiles + tok->h + 1;
    FZ_CHECK(ids->h == want, "A: %u input ids, want %llu", ids->h, (unsigned long long)want);
    uint32_t v;
    memcpy(&v, ids->data, 4);
    FZ_CHECK(v == 1, "A: bos %u", v);
    for (uint64_t i = 0; i < 3 * tiles; i++) {
        memcpy(&v, ids->data + 4 * (1 + i), 4);
        FZ_CHECK(v == 7, "A: image token %u", v);
    }
    FZ_CHECK(memcmp(ids->data + 4 * (1 + 3 * tiles), tok->data, tok->nbytes) == 0,
             "A: input_ids do not hold the tokens");
    memcpy(&v, ids->data + 4 * (want - 1), 4);
    FZ_CHECK(v == 2, "A: eos %u", v);
    /* The text, when there is one, is the vocabulary's bytes: id = byte. */
    const sl_rfield_t *text = sl_rec_find(&out, SL_RF_TEXT);
    uint32_t nt = text == NULL ? 0 : (uint32_t)(text->nbytes < 64 ? text->nbytes : 64);
    FZ_CHECK(tok->h == nt, "A: %u tokens for %u text bytes", tok->h, nt);
    for (uint32_t i = 0; i < nt; i++) {
        memcpy(&v, tok->data + 4 * i, 4);
        FZ_CHECK(v == text->data[i], "A: token %u is %u, the byte %u", i, v, text->data[i]);
    }
}

static void fz_rec_pipeline(const fz_rec_ctx_t *x, int pi)
{
    const sl_pipeline_t *p = fz_rec_pipe[pi];
    uint32_t n = sl_pipeline_nunits(p);
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    sl_tensor_t full, io;
    sl_tensor_init(&full);
    sl_tensor_init(&io);
    fz_rec_load(x, &full);
    int rc = fz_rec_run(x, pi, 0, n, &full, &sc);
    if (rc == 0) {
        fz_rec_check_full(x, pi, &full);
    } else if (!x->parsed) {
        FZ_CHECK(rc == -EINVAL, "%c: a record that does not parse gave %d", 'A' + pi, rc);
    }
    for (uint32_t k = 1; k < n; k++) {
        fz_rec_load(x, &io);
        int rc2 = fz_rec_run(x, pi, 0, k, &io, &sc);
        if (rc2 == 0) {
            rc2 = fz_rec_run(x, pi, k, n, &io, &sc);
        }
        FZ_CHECK(rc2 == rc, "%c: split at %u gave %d, the whole run %d", 'A' + pi, k, rc2, rc);
        FZ_CHECK(rc != 0 || (io.nbytes == full.nbytes &&
                             memcmp(io.data, full.data, full.nbytes) == 0),
                 "%c: split at %u gave other bytes", 'A' + pi, k);
        /* The input as a peer's record arriving at unit k. */
        fz_rec_load(x, &io);
        rc2 = fz_rec_run(x, pi, k, n, &io, &sc);
        FZ_CHECK(x->parsed || rc2 == -EINVAL, "%c: a record that does not parse gave %d at %u",
                 'A' + pi, rc2, k);
    }
    sl_tensor_free(&io);
    sl_tensor_free(&full);
    sl_pipe_scratch_free(&sc);
}

int fuzz_record_one(const uint8_t *data, size_t size)
{
    fz_rec_setup();
    fz_rec_ctx_t x = {.data = data, .size = size};
    uint64_t h = fz_hash(FZ_FNV_BASIS, data, size);
    x.epoch = h & 7;
    x.index = (h >> 3) & 0xffff;
    char err[512];
    memset(&x.in, 0, sizeof(x.in));
    int rc = sl_rec_parse(data, size, &x.in, err, sizeof(err));
    FZ_CHECK(rc == 0 || rc == -EBADMSG, "parse returned %d: %s", rc, err);
    if (rc != 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)) && err[0] != '\0', "bad error message");
        memset(&x.in, 0, sizeof(x.in));
    } else {
        FZ_CHECK(x.in.n <= SL_REC_MAX_FIELDS, "%u fields", x.in.n);
        for (uint32_t i = 0; i < x.in.n; i++) {
            const sl_rfield_t *f = &x.in.f[i];
            FZ_CHECK(f->data >= data && f->nbytes <= size &&
                         (size_t)(f->data - data) <= size - f->nbytes,
                     "field %u outside the buffer", i);
            FZ_CHECK(sl_rec_shape_bytes(f) == f->nbytes || f->dtype == SL_DT_BYTES,
                     "field %u: shape does not match", i);
        }
    }
    x.parsed = rc == 0;
    fz_rec_pipeline(&x, 0);
    fz_rec_pipeline(&x, 1);
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_record_one)
