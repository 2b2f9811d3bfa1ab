/* url_vers: the versions of the URL objects one sample read whole (jsonl
 * images, filelist entries, imagefolder-over-S3 files): pairs of (URL hash,
 * validator). A host's read fills them in (sl_source_read_v), the sample
 * carries them to the client (Sample.url_versions, proto field 50), and
 * the client holds the job to the first validator it saw per URL
 * (client/lib/url_pins.h): docs/sources.md "One version per job". The
 * hash is FNV-1a 64 of the URL as the manifest names it (after the path
 * normalisation every host applies alike), never 0; a validator is
 * common/remote/remote.h's tag (ETag, Last-Modified, size), never 0. */
#ifndef SL_URL_VERS_H
#define SL_URL_VERS_H

#include <stdint.h>

#include "common/sample/record.h"

/* At most one per image or clip of a record; a sample naming more is a
 * too_many_images skip before it is read, so a read never overflows. */
#define SL_URL_VERS_MAX SL_REC_MAX_IMAGES

typedef struct sl_url_ver_s {
    uint64_t url; /* sl_url_hash */
    uint64_t tag; /* the validator the read got */
} sl_url_ver_t;

typedef struct sl_url_vers_s {
    uint32_t n;
    sl_url_ver_t v[SL_URL_VERS_MAX];
} sl_url_vers_t;

uint64_t sl_url_hash(const char *url);
/* Records a read of url at validator tag (the same URL twice: once).
 * -ENOSPC when v is full (the pair is not kept). */
int sl_url_vers_add(sl_url_vers_t *v, uint64_t url, uint64_t tag);

#endif
