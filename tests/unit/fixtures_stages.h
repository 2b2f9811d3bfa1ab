/* fixtures_stages: a spec made of a decode_jpeg and the stages given as
 * JSON text, parsed expecting success or a given error: what the
 * augmentation and recipe suites both check their ops' keys with. */
#ifndef SL_FIXTURES_STAGES_H
#define SL_FIXTURES_STAGES_H

#include "common/spec/spec.h"

/* The spec's text: an imagefolder source (seed 5), decode_jpeg, then
 * stages. A static buffer: valid until the next call. */
const char *fx_stages_spec(const char *stages);
/* Parses it into *spec; fails the test with the parser's error. */
void fx_stages_parse_ok(const char *stages, sl_spec_t *spec);
/* Parses it expecting -EINVAL with want in the error; fails the test otherwise. */
void fx_stages_parse_err(const char *stages, const char *want);

#endif
