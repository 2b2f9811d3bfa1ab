/* spec_offload: where a job's stages run: the spec's "offload" value
 * ("auto", "off", "all", "fastflow" or {"split": K, "local_share": F}) and
 * the CLI's --offload form (off|all|auto|fastflow|K:F). Called on the
 * parsing thread only. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/spec/spec_impl.h"

static const char *const offload_keys[] = {"split", "local_share", NULL};

const char *const sl_spec_offload_names[SL_SPEC_NOFFLOAD] = {
    [SL_OFFLOAD_AUTO] = "auto",
    [SL_OFFLOAD_OFF] = "off",
    [SL_OFFLOAD_ALL] = "all",
    [SL_OFFLOAD_FASTFLOW] = "fastflow",
    [SL_OFFLOAD_FIXED] = "fixed",
};

int sl_spec_parse_offload(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    json_t *v = json_object_get(root, "offload");
    if (v == NULL) {
        return 0;
    }
    sl_spec_push(c, "offload");
    if (json_is_object(v)) {
        int rc = sl_spec_check_keys(c, v, offload_keys, "");
        if (rc < 0) {
            return rc;
        }
        rc = sl_spec_get_u32(c, v, "split", true, 0, spec->nstages, &spec->split);
        if (rc < 0) {
            return rc;
        }
        json_t *share = json_object_get(v, "local_share");
        if (share == NULL) {
            return sl_spec_ferr(c, "local_share",
                                "missing (required): the fraction of samples done "
                                "locally, 0..1");
        }
        if (!sl_spec_as_number(share, &spec->local_share) || spec->local_share < 0 ||
            spec->local_share > 1) {
            char got[SPEC_SHOWN_MAX + 8];
            return sl_spec_ferr(c, "local_share", "must be a number in 0..1, got %s",
                                sl_spec_describe(share, got, sizeof(got)));
        }
        spec->offload = SL_OFFLOAD_FIXED;
        sl_spec_pop(c);
        return 0;
    }
    /* "fixed" is not a string value: it needs split and local_share. */
    if (json_is_string(v)) {
        for (size_t i = 0; i < SL_SPEC_NOFFLOAD; i++) {
            if (i != SL_OFFLOAD_FIXED &&
                strlen(sl_spec_offload_names[i]) == json_string_length(v) &&
                strcmp(sl_spec_offload_names[i], json_string_value(v)) == 0) {
                spec->offload = (sl_offload_e)i;
                sl_spec_pop(c);
                return 0;
            }
        }
    }
    char got[SPEC_SHOWN_MAX + 8];
    return sl_spec_perr(c,
                        "must be \"auto\", \"off\", \"all\", \"fastflow\" or "
                        "{\"split\": K, \"local_share\": F}, got %s",
                        sl_spec_describe(v, got, sizeof(got)));
}

const char *sl_offload_name(sl_offload_e o)
{
    if ((int)o < 0 || (size_t)o >= SL_SPEC_NOFFLOAD) {
        return "unknown";
    }
    return sl_spec_offload_names[o];
}

int sl_offload_parse(const char *s, sl_offload_e *ret_mode, uint32_t *ret_split,
                     double *ret_share, char *err, size_t errlen)
{
    if (s == NULL) {
        return sl_err(err, errlen, -EINVAL, "offload: no value given");
    }
    char shown[SPEC_SHOWN_MAX];
    sl_spec_quote(s, strlen(s), shown, sizeof(shown));
    for (size_t i = 0; i < SL_SPEC_NOFFLOAD; i++) {
        if (i != SL_OFFLOAD_FIXED && strcmp(s, sl_spec_offload_names[i]) == 0) {
            *ret_mode = (sl_offload_e)i;
            if (ret_split != NULL) {
                *ret_split = 0;
            }
            if (ret_share != NULL) {
                *ret_share = 0.0;
            }
            return 0;
        }
    }
    /* K:F. strtoul/strtod accept signs and spaces; insist on plain digits. */
    const char *colon = strchr(s, ':');
    if (s[0] < '0' || s[0] > '9' || colon == NULL ||
        ((colon[1] < '0' || colon[1] > '9') && colon[1] != '.')) {
        return sl_err(err, errlen, -EINVAL,
                      "offload \"%s\": expected off, all, auto, fastflow or K:F (e.g. 2:0.5)",
                      shown);
    }
    errno = 0;
    char *end;
    unsigned long k = strtoul(s, &end, 10);
    if (end != colon) {
        return sl_err(err, errlen, -EINVAL,
                      "offload \"%s\": K in K:F must be a whole number of stages", shown);
    }
    if (errno == ERANGE || k > SL_SPEC_MAX_STAGES) {
        return sl_err(err, errlen, -EINVAL, "offload \"%s\": split K must be in 0..%d", shown,
                      SL_SPEC_MAX_STAGES);
    }
    errno = 0;
    double f = strtod(colon + 1, &end);
    if (*end != '\0' || end == colon + 1) {
        return sl_err(err, errlen, -EINVAL,
                      "offload \"%s\": F in K:F must be a number (the local share, 0..1)", shown);
    }
    if (!isfinite(f) || f < 0 || f > 1) {
        return sl_err(err, errlen, -EINVAL, "offload \"%s\": local share F must be in 0..1",
                      shown);
    }
    *ret_mode = SL_OFFLOAD_FIXED;
    if (ret_split != NULL) {
        *ret_split = (uint32_t)k;
    }
    if (ret_share != NULL) {
        *ret_share = f;
    }
    return 0;
}
