/* url_pins: the one version of each URL object a job delivers
 * (docs/sources.md "One version per job"). Jsonl images and filelist
 * entries named by URL are fetched when a sample is read, on whichever host
 * reads it, so two hosts (or a run and its resume) may read an image before
 * and after it changed. Every delivered sample passes through the client
 * with the (URL hash, validator) pairs its read got (common/data/url_vers.h,
 * Sample.url_versions), so the client keeps here the first validator it
 * sees per URL for the job and judges every later sample against it:
 *   - all its pairs agree (or are new: pinned now)      -> CL_UPINS_OK
 *   - a URL pinned by this run with another validator   -> CL_UPINS_CHANGED:
 *     the sample is a counted skip, its bytes never delivered
 *   - a URL the resumed state saved with another one    -> CL_UPINS_SAVED:
 *     the data set changed across the resume; the job fails, as --resume
 *     refuses a changed data set at open.
 * A sample that differs pins none of its URLs.
 *
 * Bounded: at most `max` URLs (CL_UPINS_MAX by default: 8 MiB of a saved
 * state, at most 12 MiB of memory). A URL first seen when the table is full is not
 * pinned: its samples are delivered unchecked (as the host read them, each
 * host still pins its own reads) and counted (cl_upins_unpinned), so the
 * job goes on and the user can see how much was not held to one version.
 *
 * Saved with the client's resume state (client/lib/state.c, key
 * "url_pins"): 32 lowercase hex digits per pin, the URL hash then the
 * validator, each 16 digits big-endian. Thread-safe (a mutex): the consumer
 * checks, the training loop's thread saves. */
#ifndef CL_URL_PINS_H
#define CL_URL_PINS_H

#include <stddef.h>
#include <stdint.h>

#include "common/data/url_vers.h"

#define CL_UPINS_MAX (1u << 18)
#define CL_UPINS_HEX 32 /* hex digits per saved pin */

typedef struct cl_upins_s cl_upins_t;

typedef enum {
    CL_UPINS_OK = 0,
    CL_UPINS_CHANGED = 1,
    CL_UPINS_SAVED = 2,
} cl_upins_verdict_e;

/* A table of at most max URLs (0: CL_UPINS_MAX). 0 or -ENOMEM. */
int cl_upins_new(uint32_t max, cl_upins_t **ret);
void cl_upins_free(cl_upins_t *p); /* NULL ok */

/* Judges a sample's pairs (above); on a verdict other than OK, *ret_at is
 * the pair that differs and *ret_pinned the validator the job holds for it.
 * Out of memory growing the table counts the new URLs as unpinned. */
cl_upins_verdict_e cl_upins_check(cl_upins_t *p, const sl_url_vers_t *v, uint32_t *ret_at,
                                  uint64_t *ret_pinned);

uint64_t cl_upins_count(const cl_upins_t *p);
/* URLs not pinned because the table was full. */
uint64_t cl_upins_unpinned(const cl_upins_t *p);

/* Every pin as hex (above), malloc'd and NUL-terminated. 0 or -ENOMEM. */
int cl_upins_save(const cl_upins_t *p, char **ret, size_t *ret_len);
/* Adds the pins hex[0, len) names, as saved ones (CL_UPINS_SAVED when a
 * sample differs); several states load into one table. -EINVAL with err
 * saying what when the text is not a whole number of pins, has a character
 * that is not a lowercase hex digit, a zero hash or validator, or more pins
 * than the table holds (one client never saves more; several states whose
 * union is over the bound load what fits, the rest unpinned); -ESTALE for a URL pinned to two validators (two
 * ranks read two versions: the data set changed under the job); the table
 * is then unchanged. -ENOMEM. */
int cl_upins_load(cl_upins_t *p, const char *hex, size_t len, char *err, size_t errlen);

#endif
