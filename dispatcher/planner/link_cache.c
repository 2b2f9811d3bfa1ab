#include "dispatcher/planner/link_cache.h"

#include <math.h>
#include <string.h>

static int fresh(const disp_link_t *e, int64_t now_ms)
{
    return e->client[0] != '\0' && now_ms - e->stored_ms < DISP_LINK_TTL_MS;
}

void disp_lcache_put(disp_lcache_t *c, const char *client, const char *class_key,
                     double bandwidth, double recv_cpu_per_byte, uint32_t streams,
                     int64_t now_ms)
{
    if (c == NULL || client == NULL || class_key == NULL || client[0] == '\0' ||
        strlen(client) >= DISP_LINK_KEY_MAX || strlen(class_key) >= DISP_LINK_KEY_MAX ||
        !isfinite(bandwidth) || bandwidth <= 0.0) {
        return;
    }
    disp_link_t *slot = NULL;
    for (size_t i = 0; i < DISP_LINK_MAX; i++) {
        disp_link_t *e = &c->e[i];
        if (e->client[0] != '\0' && strcmp(e->client, client) == 0 &&
            strcmp(e->class_key, class_key) == 0) {
            slot = e;
            break;
        }
        if (slot == NULL || (slot->client[0] != '\0' &&
                             (e->client[0] == '\0' || e->stored_ms < slot->stored_ms))) {
            slot = e; /* a free slot, else the oldest */
        }
    }
    memset(slot, 0, sizeof(*slot));
    strcpy(slot->client, client);
    strcpy(slot->class_key, class_key);
    slot->bandwidth = bandwidth;
    slot->recv_cpu_per_byte =
        isfinite(recv_cpu_per_byte) && recv_cpu_per_byte > 0.0 ? recv_cpu_per_byte : 0.0;
    slot->streams = streams;
    slot->stored_ms = now_ms;
}

void disp_lcache_note_recv(disp_lcache_t *c, const char *client, double recv_cpu_per_byte,
                           int64_t now_ms)
{
    if (c == NULL || client == NULL || client[0] == '\0' || !isfinite(recv_cpu_per_byte) ||
        recv_cpu_per_byte <= 0.0) {
        return;
    }
    for (size_t i = 0; i < DISP_LINK_MAX; i++) {
        disp_link_t *e = &c->e[i];
        if (fresh(e, now_ms) && e->class_key[0] != '\0' && strcmp(e->client, client) == 0) {
            e->recv_cpu_per_byte = recv_cpu_per_byte;
        }
    }
}

size_t disp_lcache_list(const disp_lcache_t *c, const char *client, int64_t now_ms,
                        const disp_link_t **ret, size_t max)
{
    size_t n = 0;
    if (c == NULL || client == NULL || client[0] == '\0') {
        return 0;
    }
    for (size_t i = 0; i < DISP_LINK_MAX && n < max; i++) {
        const disp_link_t *e = &c->e[i];
        if (fresh(e, now_ms) && strcmp(e->client, client) == 0) {
            ret[n++] = e;
        }
    }
    return n;
}
