/* cli_plan_mix: a mixed job's per-source costs in --explain (cli_plan_mix.h). */
#include "client/cli/cli_plan_mix.h"

#include <stdio.h>

#include <jansson.h>

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

/* " 1.234 0.000 ..." of an array of numbers. */
static void print_ms(const json_t *a)
{
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) { printf(" %8.3f", json_number_value(v)); }
}

void cli_plan_print_mix(const char *doc)
{
    json_t *root = json_loads(doc != NULL ? doc : "{}", 0, NULL);
    const json_t *m = json_object_get(root, "mix");
    if (m == NULL) {
        json_decref(root);
        return;
    }
    printf("mix: the planner's costs per source (ms per sample by unit, on the client), the "
           "weights in force at step %lld\n",
           json_integer_value(json_object_get(m, "step")));
    printf("  %-16s %7s %9s %9s %12s  %s\n", "source", "weight", "cpu ms", "read ms", "out bytes",
           "unit ms");
    size_t i;
    const json_t *s;
    json_array_foreach(json_object_get(m, "sources"), i, s)
    {
        const json_t *bytes = json_object_get(s, "bytes_per_sample");
        const char *name = json_string_value(json_object_get(s, "name"));
        printf("  %-16s %7.3f %9.3f %9.3f %12.0f ", name != NULL ? name : "?",
               num(s, "weight_share"), num(s, "cpu_ms_per_sample"), num(s, "read_ms"),
               json_number_value(json_array_get(bytes, json_array_size(bytes) - 1)));
        print_ms(json_object_get(s, "unit_ms"));
        printf("\n");
    }
    printf("  %-16s %7s %9s %9s %12s ", "weighted", "", "", "", "");
    print_ms(json_object_get(m, "unit_ms"));
    printf("\n  %-16s %7s %9s %9s %12s ", "blend profiled", "", "", "", "");
    print_ms(json_object_get(m, "profiled_unit_ms"));
    printf("\n");
    if (json_integer_value(json_object_get(m, "weights_changes")) > 0) {
        printf("  the weights changed %lld times since submission: costs measured while the job "
               "ran (under the old weights) are not used\n",
               json_integer_value(json_object_get(m, "weights_changes")));
    }
    json_decref(root);
}
