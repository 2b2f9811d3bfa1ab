/* whatif_ingress: see whatif_ingress.h. */
#include "dispatcher/planner/whatif_ingress.h"

#include <math.h>

double disp_wi_ingress(const disp_pl_input_t *in, int *ret_assumed)
{
    *ret_assumed = 0;
    if (isfinite(in->client_bandwidth) && in->client_bandwidth > 0.0) {
        return in->client_bandwidth;
    }
    uint32_t workers = 0;
    double fastest = 0.0;
    for (uint32_t c = 0; c < in->nclasses && c < DISP_PL_MAX_CLASSES; c++) {
        const disp_pl_class_t *cl = &in->classes[c];
        workers += cl->workers;
        if (cl->workers > 0 && isfinite(cl->bandwidth) && cl->bandwidth > fastest) {
            fastest = cl->bandwidth;
        }
    }
    /* Two or more workers: the client's probe measures its ingress; a 0
     * then means it could not (an older client), and nothing is assumed. */
    if (workers >= 2 || fastest <= 0.0) {
        return 0.0;
    }
    *ret_assumed = 1;
    return fastest;
}
