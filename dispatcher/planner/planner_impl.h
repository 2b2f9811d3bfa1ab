/* planner_impl: the throughput model's pieces (planner_model.c) that the
 * search (planner.c) and FastFlow (planner_fastflow.c) share. Pure
 * functions over a sanitized disp_pl_input_t. */
#ifndef DISP_PLANNER_IMPL_H
#define DISP_PLANNER_IMPL_H

#include <stdint.h>

#include "dispatcher/planner/planner.h"

/* in with every number cleaned (NaN, Inf or negative is 0) into out;
 * -EINVAL when its unit or class count is out of bounds. */
int disp_pl_sanitize(const disp_pl_input_t *in, disp_pl_input_t *out);
/* Boundary k ships compressed under these inputs. */
int disp_pl_zipped(const disp_pl_input_t *in, uint32_t k);
/* Bytes per sample on the wire at boundary k. */
double disp_pl_wire_bytes(const disp_pl_input_t *in, uint32_t k);
/* Client CPU s per sample running everything itself. */
double disp_pl_client_all(const disp_pl_input_t *in);
/* Client CPU s per received sample cut at boundary k: units [k, n), the
 * receive, the decompress and the per-sample overhead. */
double disp_pl_client_after(const disp_pl_input_t *in, uint32_t k);
/* Live workers over all classes. */
uint32_t disp_pl_total_workers(const disp_pl_input_t *in);
/* Samples/s the workers produce at boundary k (the client taking none of
 * their machines' CPU). */
double disp_pl_remote_cpu(const disp_pl_input_t *in, uint32_t k);
/* The client shares a machine with at least one worker. */
int disp_pl_client_shares(const disp_pl_input_t *in);
/* Samples/s the links can carry at boundary k (F = 0). An unmeasured link
 * does not limit; the client's ingress cap limits the sum. */
double disp_pl_remote_net(const disp_pl_input_t *in, uint32_t k);
/* The rate terms at boundary k and local share f (inputs sanitized). */
void disp_pl_terms_clean(const disp_pl_input_t *in, uint32_t k, double f, disp_pl_terms_t *t);
/* planner_read.c: the measured source read rates as bounds (remote
 * sources): the workers' encoded-byte reads cap the worker term, the
 * client's own reads (its share f) the client term. */
double disp_pl_read_remote(const disp_pl_input_t *in, double f);
double disp_pl_read_client(const disp_pl_input_t *in, double f);
void disp_pl_read_bound(const disp_pl_input_t *in, double f, disp_pl_terms_t *t);
/* Ties (within 1e-9) go to the consumer (nothing stalls), then to the
 * remote resources (the operator can add workers or bandwidth), then the
 * client. At an interior balance point client and remote are equal by
 * construction; naming the remote one points at what would lift it. */
double disp_pl_terms_min(const disp_pl_terms_t *t, disp_bind_e *ret);

#endif
