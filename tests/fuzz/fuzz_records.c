/* fuzz_records: the multimodal record sources (common/data/source_wds*.c,
 * source_jsonl.c, over tar_walk.c) on arbitrary bytes. Input: byte 0 picks
 * the source (bit 0 clear: webdataset, the rest is ROOT/shard.tar; set:
 * jsonl, the rest is the manifest ROOT/m.jsonl). ROOT also holds image files
 * a manifest may name: img/a.jpg, img/b.png, img/empty.jpg (0 bytes), img/dir
 * (a directory), img/in.jpg (a symlink to a.jpg) and img/out.jpg (a symlink
 * leading out of ROOT). The source is opened and every sample read.
 * Contracts (source.h, docs/records.md):
 *   - open returns 0 or a documented code, with a printable message, and the
 *     open warnings are one printable line;
 *   - every index has a name "shard.tar:KEY" / "m.jsonl:KEY", a label >= -1
 *     and record features with at most SL_REC_MAX_IMAGES + 1 images;
 *   - reads return 0 or a documented skip code with a printable message;
 *     img/out.jpg is never read (no jsonl image holds what it leads to);
 *   - a record read is a finished record that sl_rec_parse accepts: a KEY,
 *     the index's label, UTF-8 TEXT, a JSON object as META, at most
 *     SL_REC_MAX_IMAGES non-empty IMAGE_ENC and nothing else; its image count
 *     (and for webdataset the image bytes and an exact text size) is what
 *     the features said. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/utf8.h"
#include "common/data/source.h"
#include "common/sample/record.h"
#include "tests/fuzz/fuzz.h"
#include "tests/unit/fixtures.h"

static char fz_recs_root[64];
/* What img/out.jpg leads to: no jsonl record may hold it. */
static uint8_t *fz_recs_outside;
static size_t fz_recs_outside_len;

static void fz_recs_cleanup(void)
{
    if (fz_recs_root[0] != '\0') {
        (void)fx_rmtree(fz_recs_root);
        fz_recs_root[0] = '\0';
    }
    free(fz_recs_outside);
    fz_recs_outside = NULL;
}

static void fz_recs_put(const char *rel, const void *data, size_t size)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", fz_recs_root, rel);
    FZ_CHECK(fx_write_file(path, data, size) == 0, "cannot write %s", path);
}

static void fz_recs_setup(void)
{
    if (fz_recs_root[0] != '\0') {
        return;
    }
    snprintf(fz_recs_root, sizeof(fz_recs_root), "/tmp/sluice-fuzz-records-XXXXXX");
    FZ_CHECK(mkdtemp(fz_recs_root) != NULL, "mkdtemp failed");
    atexit(fz_recs_cleanup);
    char path[160];
    snprintf(path, sizeof(path), "%s/img", fz_recs_root);
    FZ_CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
    snprintf(path, sizeof(path), "%s/img/dir", fz_recs_root);
    FZ_CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
    static const uint8_t JPG[] = {0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0, 1};
    static const uint8_t PNG[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    fz_recs_put("img/a.jpg", JPG, sizeof(JPG));
    fz_recs_put("img/b.png", PNG, sizeof(PNG));
    fz_recs_put("img/empty.jpg", "", 0);
    snprintf(path, sizeof(path), "%s/img/in.jpg", fz_recs_root);
    FZ_CHECK(symlink("a.jpg", path) == 0, "symlink %s", path);
    snprintf(path, sizeof(path), "%s/img/out.jpg", fz_recs_root);
    FZ_CHECK(symlink("/etc/hostname", path) == 0, "symlink %s", path);
    if (fx_read_file("/etc/hostname", &fz_recs_outside, &fz_recs_outside_len) != 0) {
        fz_recs_outside = NULL;
        fz_recs_outside_len = 0;
    }
}

static int fz_recs_read_ok(int rc)
{
    return rc == 0 || rc == -ENODATA || rc == -ENOMSG || rc == -EFBIG || rc == -EPERM ||
           rc == -ENOENT || rc == -EINVAL || rc == -EISDIR || rc == -ENOTDIR || rc == -ELOOP ||
           rc == -ENAMETOOLONG || rc == -EDOM || rc == -ENOSTR || rc == -EPROTO ||
           rc == -ETOOMANYREFS || rc == -ENOMEM;
}

/* A record read: its fields against the index. */
static void fz_recs_check(const sl_source_t *src, sl_source_type_e type, uint64_t i,
                          const sl_tensor_t *t, const sl_src_features_t *feat)
{
    char err[512];
    FZ_CHECK(t->dtype == SL_DT_RECORD && t->nbytes == t->h && t->w == 1 && t->c == 1,
             "read %llu: not a record tensor (dtype %d, %zu bytes)", (unsigned long long)i,
             t->dtype, t->nbytes);
    sl_rec_t rec;
    FZ_CHECK(sl_rec_parse(t->data, t->nbytes, &rec, err, sizeof(err)) == 0,
             "read %llu: the record does not parse: %s", (unsigned long long)i, err);
    FZ_CHECK(rec.n > 0 && rec.f[0].kind == SL_RF_KEY, "read %llu: no key first",
             (unsigned long long)i);
    FZ_CHECK(sl_rec_label(&rec) == sl_source_label(src, i), "read %llu: label %d, index %d",
             (unsigned long long)i, sl_rec_label(&rec), sl_source_label(src, i));
    uint32_t nimg = 0;
    uint64_t img_bytes = 0;
    for (uint32_t k = 0; k < rec.n; k++) {
        const sl_rfield_t *f = &rec.f[k];
        switch (f->kind) {
        case SL_RF_KEY:
        case SL_RF_LABEL:
            break;
        case SL_RF_TEXT:
            FZ_CHECK(sl_utf8_check((const char *)f->data, f->nbytes, NULL) == 0,
                     "read %llu: text is not UTF-8", (unsigned long long)i);
            if (type == SL_SRC_WEBDATASET && feat->text_bytes_exact) {
                FZ_CHECK(f->nbytes == feat->text_bytes, "read %llu: %zu text bytes, index %llu",
                         (unsigned long long)i, f->nbytes,
                         (unsigned long long)feat->text_bytes);
            }
            break;
        case SL_RF_META: {
            json_t *m = json_loadb((const char *)f->data, f->nbytes, 0, NULL);
            FZ_CHECK(json_is_object(m), "read %llu: meta is not a JSON object",
                     (unsigned long long)i);
            json_decref(m);
            break;
        }
        case SL_RF_IMAGE_ENC:
        case SL_RF_VIDEO_ENC: /* clips count as images */
            FZ_CHECK(f->nbytes > 0, "read %llu: an empty image", (unsigned long long)i);
            FZ_CHECK(type != SL_SRC_JSONL || fz_recs_outside_len == 0 ||
                         f->nbytes != fz_recs_outside_len ||
                         memcmp(f->data, fz_recs_outside, f->nbytes) != 0,
                     "read %llu: an image from outside the data root", (unsigned long long)i);
            nimg++;
            img_bytes += f->nbytes;
            break;
        case SL_RF_TURNS: { /* a conversation's turns: spans inside the text */
            const sl_rfield_t *text = sl_rec_find(&rec, SL_RF_TEXT);
            for (uint32_t u = 0; text != NULL && u < f->h; u++) {
                size_t w = (size_t)u * SL_RF_TURN_WORDS;
                uint32_t off = sl_rec_u32(f, w + SL_RF_TURN_OFF);
                uint32_t len = sl_rec_u32(f, w + SL_RF_TURN_LEN);
                FZ_CHECK(sl_rec_u32(f, w + SL_RF_TURN_ROLE) < SL_ROLE__COUNT &&
                             off <= text->nbytes && len <= text->nbytes - off,
                         "read %llu: turn %u past the text", (unsigned long long)i, u);
            }
            FZ_CHECK(text != NULL, "read %llu: turns without text", (unsigned long long)i);
            break;
        }
        default:
            FZ_CHECK(0, "read %llu: a %s field from a source", (unsigned long long)i,
                     sl_rf_kind_name(f->kind));
        }
    }
    FZ_CHECK(nimg <= SL_REC_MAX_IMAGES, "read %llu: %u images", (unsigned long long)i, nimg);
    FZ_CHECK(nimg == feat->nimages, "read %llu: %u images, index said %u",
             (unsigned long long)i, nimg, feat->nimages);
    if (type == SL_SRC_WEBDATASET) {
        FZ_CHECK(img_bytes == feat->image_bytes, "read %llu: %llu image bytes, index said %llu",
                 (unsigned long long)i, (unsigned long long)img_bytes,
                 (unsigned long long)feat->image_bytes);
    }
}

int fuzz_records_one(const uint8_t *data, size_t size)
{
    fz_recs_setup();
    fz_reader_t r = {data, size};
    uint32_t flags = fz_take(&r, 1);
    sl_source_type_e type = (flags & 1) ? SL_SRC_JSONL : SL_SRC_WEBDATASET;
    const char *rel = type == SL_SRC_JSONL ? "m.jsonl" : "shard.tar";
    fz_recs_put(rel, r.p, r.n);
    sl_source_t *src = NULL;
    char err[512];
    int rc = sl_source_open(fz_recs_root, type, rel, &src, err, sizeof(err));
    FZ_CHECK(rc == 0 || rc == -E2BIG || rc == -ENOMEM, "open returned %d: %s", rc, err);
    if (rc != 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
        return 0;
    }
    FZ_CHECK(sl_source_is_record(src), "not a record source");
    uint64_t n = sl_source_count(src);
    /* webdataset: a sample needs a 512-byte header; jsonl: a non-blank byte. */
    FZ_CHECK(n <= (type == SL_SRC_JSONL ? r.n : r.n / 512), "%llu samples from %zu bytes",
             (unsigned long long)n, r.n);
    const char *warn = sl_source_open_warnings(src);
    FZ_CHECK(warn != NULL && fz_err_ok(warn, strlen(warn) + 1), "bad warnings line");
    (void)sl_source_fingerprint(src);
    (void)sl_source_num_classes(src);
    sl_tensor_t t;
    sl_tensor_init(&t);
    size_t plen = strlen(rel);
    for (uint64_t i = 0; i < n; i++) {
        const char *name = sl_source_name(src, i);
        FZ_CHECK(name != NULL && strncmp(name, rel, plen) == 0 && name[plen] == ':',
                 "bad name %s", name != NULL ? name : "(null)");
        int32_t label = sl_source_label(src, i);
        FZ_CHECK(label >= -1, "label %d", label);
        sl_src_features_t feat;
        FZ_CHECK(sl_source_record_features(src, i, &feat) == 0, "no features for %llu",
                 (unsigned long long)i);
        FZ_CHECK(feat.nimages <= SL_REC_MAX_IMAGES + 1, "%u images", feat.nimages);
        FZ_CHECK(feat.image_bytes_known == (type == SL_SRC_WEBDATASET), "image_bytes_known");
        err[0] = '\0';
        rc = sl_source_read(src, i, &t, err, sizeof(err));
        FZ_CHECK(fz_recs_read_ok(rc), "read %llu returned %d: %s", (unsigned long long)i, rc,
                 err);
        if (rc == 0) {
            fz_recs_check(src, type, i, &t, &feat);
        } else {
            FZ_CHECK(fz_err_ok(err, sizeof(err)) && err[0] != '\0',
                     "read %llu: bad error message", (unsigned long long)i);
            FZ_CHECK(rc != -ETOOMANYREFS || feat.nimages > SL_REC_MAX_IMAGES,
                     "too many images, index said %u", feat.nimages);
        }
        /* Heads: webdataset gives a record of its images' first bytes only;
         * jsonl has none. */
        rc = sl_source_read_head(src, i, 64, &t, err, sizeof(err));
        if (type == SL_SRC_JSONL) {
            FZ_CHECK(rc == -ENOTSUP, "read_head on a jsonl source returned %d", rc);
        } else if (rc == 0) {
            sl_rec_t hr;
            FZ_CHECK(sl_rec_parse(t.data, t.nbytes, &hr, NULL, 0) == 0, "head record parses");
            for (uint32_t k = 0; k < hr.n; k++) {
                FZ_CHECK((hr.f[k].kind == SL_RF_IMAGE_ENC || hr.f[k].kind == SL_RF_VIDEO_ENC) &&
                             hr.f[k].nbytes <= 64,
                         "head record: field %u is %d of %zu bytes", k, (int)hr.f[k].kind,
                         hr.f[k].nbytes);
            }
        } else {
            FZ_CHECK(fz_recs_read_ok(rc), "read_head %llu returned %d", (unsigned long long)i,
                     rc);
        }
    }
    rc = sl_source_read(src, n, &t, err, sizeof(err));
    FZ_CHECK(rc == -ERANGE, "read past the end returned %d", rc);
    sl_tensor_free(&t);
    sl_source_free(src);
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_records_one)
