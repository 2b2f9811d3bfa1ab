/* source: the samples of a data set, indexed once, read by index from many
 * threads. Five kinds (docs/design.md, docs/sources.md): imagefolder, tar shards
 * (WebDataset convention, one image per sample) and filelist give encoded
 * images; webdataset and jsonl give multimodal records (text + 0..N images,
 * common/sample/record.h). Every path is resolved under a data root and
 * anything that escapes it ("..", absolute paths, symlinks leading out) is
 * refused: the source path itself at open, a sample (a file of an
 * imagefolder or a list that resolves outside) when it is read, so one such
 * file is a counted skip rather than a failed job. Indexing is
 * deterministic (sorted), so every host that opens the same data gets the
 * same index -> (file, label) mapping. */
#ifndef SL_SOURCE_H
#define SL_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/spec/spec.h"
#include "common/sample/tensor.h"
#include "common/remote/remote.h"
#include "common/data/url_vers.h"

typedef struct sl_source_s sl_source_t;

/* Largest encoded sample we read; a bigger file is a counted skip (-EFBIG). */
#define SL_SOURCE_MAX_FILE_BYTES ((uint64_t)256 << 20)
/* Most samples one source may index. */
#define SL_SOURCE_MAX_SAMPLES (50u * 1000u * 1000u)
/* Longest jsonl manifest line; a longer one is a bad_manifest sample. */
#define SL_SOURCE_MAX_LINE_BYTES ((uint64_t)16 << 20)

/* What the index knows of a record sample before reading it (the cost
 * model's features): sl_source_record_features. */
typedef struct sl_src_features_s {
    uint32_t nimages;       /* images the sample names (webdataset: at most
                             * SL_REC_MAX_IMAGES + 1, which means "too many") */
    uint64_t image_bytes;   /* encoded image bytes (webdataset); 0 for jsonl */
    bool image_bytes_known; /* false for jsonl: image files are not stat'ed at open */
    uint64_t text_bytes;    /* webdataset: the .txt member's size (without one, the
                             * .json's, an upper bound); jsonl: the manifest line's
                             * length, an upper bound */
    bool text_bytes_exact;  /* true when text_bytes is the text's size itself */
} sl_src_features_t;

/* Opens and indexes a source.
 *  - imagefolder: path is a directory indexed like torchvision's ImageFolder
 *    (source_imagefolder.c): its sub-directories, hidden ones too, sorted by
 *    name (strcmp), are classes 0..N-1; each is walked recursively and every
 *    file whose name ends in .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp
 *    (any case) is a sample. Other files are ignored.
 *  - tar: path is a .tar file or a directory of *.tar shards (sorted). Members
 *    "KEY.jpg"/"KEY.jpeg" are samples in shard order; an optional "KEY.cls"
 *    holds the decimal label (absent: label -1). Members whose data runs past
 *    the end of the shard are indexed and fail to read with -ENOMSG; a shard
 *    with a corrupt header stops indexing that shard and is reported in
 *    sl_source_open_warnings.
 *  - filelist: path is a text file of "RELPATH LABEL" lines (# comments and
 *    blank lines allowed); RELPATH is relative to the data root. A malformed
 *    line is an error naming file:line.
 *  - webdataset: path is a .tar, a directory of *.tar shards (sorted) or a
 *    brace pattern ("s/shard-{000000..000099}.tar", "{a,b}"; at most 100 000
 *    shards, each must exist). Consecutive members sharing a key (basename up
 *    to its first '.') form a sample: KEY.txt text, KEY.json metadata (its
 *    "conversations" give the text when there is no .txt), KEY.cls label,
 *    images KEY.jpg/.jpeg/.png and KEY.N.jpg/.N.png in N order. Other
 *    extensions are ignored and counted in the warnings.
 *  - jsonl: path is a manifest, one JSON object per line ("id", "text" or
 *    "conversations", "images" or "image" relative to the data root,
 *    "label"). Every non-blank line is a sample; a malformed one fails to
 *    read (-EPROTO) instead of failing the open.
 * docs/sources.md has the details of each.
 * Returns 0, -ENOENT/-ENOTDIR/-EACCES (path), -EPERM (path, a class or a
 * directory in one, or a tar shard escapes the root), -EINVAL (malformed
 * list, bad brace pattern), -E2BIG (too many samples or shards). */
int sl_source_open(const char *data_root, sl_source_type_e type, const char *path,
                   sl_source_t **ret_src, char *err, size_t errlen);
/* The same, where a source path (and a shard, a filelist entry, a manifest's
 * image) may also be a URL: http://, https:// or s3://bucket/key, fetched
 * through remote (the host's settings, common/remote/remote.h; NULL: every
 * URL is refused). A URL outside remote_roots is -EPERM before any request,
 * err naming the URL and the setting. A URL is read whole into the host's
 * shard cache and indexed from there (one streamed pass); its validator
 * (ETag, Last-Modified, size) is part of the fingerprint. An imagefolder at
 * s3://bucket/prefix/ is indexed from the bucket's listing in torchvision's
 * order, its images fetched when read; over http(s) it is -ENOTSUP (no
 * listing). Another URL ending in '/' is -EISDIR. Other
 * errors of a fetch: -ENOENT (404), -EACCES (401/403, a wrong S3 secret),
 * -ESTALE (changed while read), -ETIMEDOUT, -ECONNREFUSED, -ECONNRESET
 * (truncated after retries), -EIO. remote must outlive the source. */
int sl_source_open_at(const char *data_root, const sl_remote_t *remote, sl_source_type_e type,
                      const char *path, sl_source_t **ret_src, char *err, size_t errlen);
void sl_source_free(sl_source_t *src);

uint64_t sl_source_count(const sl_source_t *src);
sl_source_type_e sl_source_type(const sl_source_t *src);
/* Number of classes (imagefolder: directories; others: max label + 1). */
uint32_t sl_source_num_classes(const sl_source_t *src);
/* The name of class label: an imagefolder's class directory (torchvision's
 * ImageFolder.classes[label]); NULL for label >= the count and for kinds
 * whose labels have no names. Owned by the source. */
const char *sl_source_class_name(const sl_source_t *src, uint32_t label);
int32_t sl_source_label(const sl_source_t *src, uint64_t index);
/* Encoded size in bytes, known from indexing (a cost-model feature). */
uint64_t sl_source_size(const sl_source_t *src, uint64_t index);
/* A printable name for messages: the path relative to the root, or "shard.tar:KEY". */
const char *sl_source_name(const sl_source_t *src, uint64_t index);
/* A fingerprint over the ordered (name, size, label) list: two hosts with equal
 * fingerprints index the same samples in the same order. */
uint64_t sl_source_fingerprint(const sl_source_t *src);
/* One line describing problems met while indexing (corrupt shard headers,
 * skipped entries), or "" when there were none. */
const char *sl_source_open_warnings(const sl_source_t *src);

/* Reads the encoded bytes of one sample into out (dtype SL_DT_BYTES, h = bytes,
 * w = c = 1); for a record source (webdataset, jsonl) out becomes a finished
 * record (dtype SL_DT_RECORD: KEY, LABEL if any, TEXT, META if any, one
 * IMAGE_ENC per image; images are not decoded). Thread-safe for concurrent
 * calls with different out tensors. Returns 0, -ERANGE (bad index), -ENODATA
 * (zero bytes; an empty image member), -ENOMSG (truncated tar member), -EFBIG
 * (> SL_SOURCE_MAX_FILE_BYTES), -EPERM (the file resolves outside the root:
 * skip outside_root), -ENOENT (dangling), -EINVAL (not a regular file), other
 * -errno for I/O; records also -EDOM (text not UTF-8), -ENOSTR (no text),
 * -EPROTO (a manifest line or .json of the wrong shape), -ETOOMANYREFS (more
 * than SL_REC_MAX_IMAGES images). err names the file, "shard.tar:member" or
 * "manifest:line". */
int sl_source_read(const sl_source_t *src, uint64_t index, sl_tensor_t *out, char *err,
                   size_t errlen);
/* The same, adding to vers (which the caller empties) the (URL hash,
 * validator) of each URL the read fetched whole at sample time -- jsonl
 * images, filelist entries, an imagefolder's S3 objects -- the version of
 * its bytes this read got (url_vers.h). Shards are not listed: indexing
 * put their validators in the fingerprint. vers NULL: sl_source_read. */
int sl_source_read_v(const sl_source_t *src, uint64_t index, sl_tensor_t *out, sl_url_vers_t *vers,
                     char *err, size_t errlen);
/* The same for at most the first max (> 0) bytes: enough for a JPEG's
 * header without reading a large file (client/lib/costs.c). Same errors. */
/* webdataset: a record holding the first max bytes of each image member
 * (their headers, for the cost model), nothing else; jsonl: -ENOTSUP (use
 * sl_source_record_features). */
int sl_source_read_head(const sl_source_t *src, uint64_t index, size_t max, sl_tensor_t *out,
                        char *err, size_t errlen);

/* Opens another file under the data root (read-only, confined like the
 * samples): an fd the caller closes, or -EPERM (escapes the root), -ENOENT,
 * other -errno; err names the file. */
int sl_source_open_file(const sl_source_t *src, const char *rel, char *err, size_t errlen);

/* Asks the host's prefetcher (common/remote/remote.h) to fetch, in the
 * background, the whole URL shards (tar, webdataset) that the n samples
 * index[] will read, so their reads find them in the cache. Returns how
 * many shards were queued (0 for sources without URL shards, and for a
 * mix); a full queue or a shard over a quarter of cache_bytes is left to
 * the reads (range GETs). Thread-safe. */
size_t sl_source_prefetch(const sl_source_t *src, const uint64_t *index, size_t n);
/* Whether src has URL shards sl_source_prefetch can fetch ahead (tar or
 * webdataset shards named by URL, not a mix). */
bool sl_source_prefetchable(const sl_source_t *src);
/* What this host's remote reads cost so far (remote.h sl_remote_read_cost:
 * bytes/s while reading, mean HEAD time in s) when src has URLs; else 0s. */
void sl_source_read_cost(const sl_source_t *src, double *ret_bytes_per_sec,
                         double *ret_latency_sec);

/* ---- source_mix.c: a mixed spec's sources as one (docs/mixing.md) ---- */
struct sl_mix_s;
/* Opens every source of mix (its errors name "mix.sources[i] (NAME)") as
 * one source whose sample g is child j's g - offset_j (offset_j: the sizes
 * of the children before j), and resolves a copy of mix against the
 * children (sl_mix_resolve: -EINVAL for an empty one or one that does not
 * open, -ESTALE when a spec
 * that travelled holds other counts): sl_source_mix. */
int sl_source_open_mix(const char *data_root, const sl_remote_t *remote, const struct sl_mix_s *mix,
                       sl_source_t **ret_src, char *err, size_t errlen);
/* spec's source: sl_source_open_mix for a mixed spec, else sl_source_open_at
 * of its type and path (remote: URL settings, NULL refuses URLs). */
int sl_source_open_spec(const char *data_root, const sl_remote_t *remote, const sl_spec_t *spec,
                        sl_source_t **ret_src, char *err, size_t errlen);
/* A mixed source's resolved mix (counts, samples_per_epoch), else NULL. */
const struct sl_mix_s *sl_source_mix(const sl_source_t *src);
/* Copies src's resolved counts and samples_per_epoch into spec->mix (what
 * the opening host then sends). 0 (also for an unmixed spec), -EINVAL when
 * src is not spec's mix. */
int sl_source_mix_apply(const sl_source_t *src, sl_spec_t *spec);
/* The mix source (index into spec->mix->src) of sample index of a mixed
 * source: 0 or -EINVAL (not mixed, out of range). */
int sl_source_mix_child(const sl_source_t *src, uint64_t index, uint32_t *ret_child);

/* True for webdataset and jsonl sources (their reads give records). */
bool sl_source_is_record(const sl_source_t *src);
/* What the index knows of record sample index, without reading it.
 * Returns 0, -EINVAL (not a record source), -ERANGE. */
int sl_source_record_features(const sl_source_t *src, uint64_t index, sl_src_features_t *ret);

#endif
