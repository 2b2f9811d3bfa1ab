/* json_doc: building a JSON document (jansson) where any failed allocation
 * drops the whole document rather than serving half of it: every set and
 * push records failure in one jb_t the builder checks at the end. Used by
 * /status (status_json.c) and the planner's explanation (planner_job_json.c). */
#ifndef DISP_JSON_DOC_H
#define DISP_JSON_DOC_H

#include <jansson.h>

typedef struct jb_s {
    int failed; /* any allocation failed: the whole document is dropped */
} jb_t;

static inline void jset(jb_t *b, json_t *o, const char *key, json_t *v)
{
    if (o == NULL || v == NULL || json_object_set_new(o, key, v) != 0) {
        b->failed = 1;
    }
}

static inline void jpush(jb_t *b, json_t *a, json_t *v)
{
    if (a == NULL || v == NULL || json_array_append_new(a, v) != 0) {
        b->failed = 1;
    }
}

#endif
