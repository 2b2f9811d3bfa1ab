/* spec_layout: a spec's units from its stages and the op table's rows
 * (fusion, no-unit stages, unit names). Any thread; only reads spec. */
#include "common/spec/spec_layout.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/spec/spec_impl.h"

static const char *stage_unit_name(const sl_stage_spec_t *st)
{
    const sl_op_def_t *d = sl_spec_op_def(st->op);
    return d->unit_name != NULL ? d->unit_name(st) : d->name;
}

int sl_spec_layout(const sl_spec_t *spec, unsigned flags, sl_layout_t *ret)
{
    if (spec->nstages > SL_SPEC_MAX_STAGES) {
        return -EINVAL;
    }
    for (uint32_t i = 0; i < spec->nstages; i++) {
        if (sl_spec_op_def(spec->stages[i].op) == NULL) {
            return -EINVAL;
        }
    }
    bool fuse = !(flags & SL_LAYOUT_NO_FUSE);
    uint32_t n = 0;
    for (uint32_t i = 0; i < spec->nstages; i++) {
        const sl_stage_spec_t *st = &spec->stages[i];
        const sl_op_def_t *d = sl_spec_op_def(st->op);
        if (d->no_unit != NULL && d->no_unit(st)) {
            continue;
        }
        sl_layout_unit_t *u = &ret->units[n++];
        memset(u, 0, sizeof(*u));
        u->op = st->op;
        u->first_stage = u->param_stage = u->rng_stream = i;
        u->nstages = 1;
        snprintf(u->name, sizeof(u->name), "%s", stage_unit_name(st));
        const sl_stage_spec_t *next = i + 1 < spec->nstages ? &spec->stages[i + 1] : NULL;
        /* The fused region decode resamples bilinearly (DCT scaling, then
         * the bilinear filter): another filter runs unfused. */
        if (fuse && (d->flags & SL_OPF_DECODE) && next != NULL &&
            (sl_op_flags(next->op) & SL_OPF_FUSES_DECODE) &&
            (next->op != SL_OP_RANDOM_RESIZED_CROP ||
             next->resize_interp == SL_RESIZE_INTERP_BILINEAR)) {
            u->nstages = 2;
            u->param_stage = u->rng_stream = i + 1;
            snprintf(u->name, sizeof(u->name), "%s+%s", d->name, sl_op_name(next->op));
            i++;
        }
    }
    ret->nunits = n;
    for (uint32_t k = 0; fuse && k + 1 < n; k++) {
        ret->units[k].pass_with_next = ret->units[k].op == SL_OP_NORMALIZE &&
                                       ret->units[k + 1].op == SL_OP_TO_CHW;
    }
    return 0;
}

const char *sl_layout_unit_name(const sl_layout_t *l, uint32_t unit)
{
    return unit < l->nunits ? l->units[unit].name : "?";
}

uint32_t sl_layout_unit_for_split(const sl_layout_t *l, uint32_t spec_split)
{
    for (uint32_t u = 0; u < l->nunits; u++) {
        if (l->units[u].first_stage >= spec_split) {
            return u;
        }
        if (l->units[u].first_stage + l->units[u].nstages > spec_split) {
            return u + 1; /* inside a fused unit: move to its end */
        }
    }
    return l->nunits;
}
