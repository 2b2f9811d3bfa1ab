/* fixtures_stages: see fixtures_stages.h. */
#include "tests/unit/fixtures_stages.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define FX_STAGES_ERRLEN 1024

const char *fx_stages_spec(const char *stages)
{
    static char buf[8192];
    int n = snprintf(buf, sizeof(buf),
                     "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\", \"seed\": 5},\n"
                     " \"stages\": [\n  {\"op\": \"decode_jpeg\"},\n  %s\n ]}\n",
                     stages);
    ck_assert(n > 0 && (size_t)n < sizeof(buf));
    return buf;
}

void fx_stages_parse_ok(const char *stages, sl_spec_t *spec)
{
    char err[FX_STAGES_ERRLEN] = "";
    const char *text = fx_stages_spec(stages);
    int rc = sl_spec_parse("t.json", text, strlen(text), spec, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", stages, err);
}

void fx_stages_parse_err(const char *stages, const char *want)
{
    char err[FX_STAGES_ERRLEN] = "";
    sl_spec_t spec;
    const char *text = fx_stages_spec(stages);
    int rc = sl_spec_parse("t.json", text, strlen(text), &spec, err, sizeof(err));
    ck_assert_msg(rc == -EINVAL, "%s: rc %d", stages, rc);
    ck_assert_msg(strstr(err, want) != NULL, "%s:\n  error \"%s\"\n  lacks \"%s\"", stages, err,
                  want);
}
