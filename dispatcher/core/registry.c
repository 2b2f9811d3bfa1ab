#include "dispatcher/core/registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int disp_registry_init(disp_registry_t *r, size_t max_workers, uint64_t first_id, int64_t now_ms)
{
    memset(r, 0, sizeof(*r));
    if (max_workers == 0) {
        return -EINVAL;
    }
    r->workers = calloc(max_workers, sizeof(*r->workers));
    if (r->workers == NULL) {
        return -ENOMEM;
    }
    size_t slots = 16;
    while (slots < 2 * max_workers) {
        slots *= 2;
    }
    r->index = calloc(slots, sizeof(*r->index));
    if (r->index == NULL) {
        free(r->workers);
        r->workers = NULL;
        return -ENOMEM;
    }
    r->index_mask = slots - 1;
    r->cap = max_workers;
    r->next_id = first_id != 0 ? first_id : 1;
    r->no_live_since_ms = now_ms;
    return 0;
}

void disp_registry_destroy(disp_registry_t *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->workers[i]);
    }
    free(r->workers);
    free(r->index);
    memset(r, 0, sizeof(*r));
}

/* Ids are handed out in sequence (or chosen by workers): mix them so
 * neighbours do not fill one run of slots. */
static size_t home_slot(const disp_registry_t *r, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & r->index_mask;
}

static void index_put(disp_registry_t *r, disp_worker_t *w)
{
    size_t i = home_slot(r, w->id);
    while (r->index[i] != NULL) {
        i = (i + 1) & r->index_mask;
    }
    r->index[i] = w;
}

/* Backward-shift deletion: every entry after the hole that could live in
 * it moves up, so a probe never stops early at a stale gap. */
static void index_del(disp_registry_t *r, uint64_t id)
{
    size_t i = home_slot(r, id);
    while (r->index[i] != NULL && r->index[i]->id != id) {
        i = (i + 1) & r->index_mask;
    }
    if (r->index[i] == NULL) {
        return;
    }
    r->index[i] = NULL;
    for (size_t j = (i + 1) & r->index_mask; r->index[j] != NULL; j = (j + 1) & r->index_mask) {
        size_t home = home_slot(r, r->index[j]->id);
        /* j's entry may fill the hole at i when its home is not in (i, j]. */
        int between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!between) {
            r->index[i] = r->index[j];
            r->index[j] = NULL;
            i = j;
        }
    }
}

const char *disp_worker_state_name(disp_worker_state_e s)
{
    switch (s) {
    case DISP_WORKER_LIVE:
        return "live";
    case DISP_WORKER_LOST:
        return "lost";
    case DISP_WORKER_LEFT:
        return "left";
    }
    return "?";
}

void disp_text_copy(char *dst, size_t dstlen, const char *src)
{
    size_t i = 0;
    if (dstlen == 0) {
        return;
    }
    for (; src != NULL && src[i] != '\0' && i + 1 < dstlen; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    dst[i] = '\0';
}

int disp_addr_ok(const char *addr)
{
    if (addr == NULL || addr[0] == '\0' || strlen(addr) >= DISP_ADDR_MAX) {
        return 0;
    }
    for (const char *p = addr; *p != '\0'; p++) {
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) {
            return 0;
        }
    }
    return 1;
}

disp_worker_t *disp_registry_find(disp_registry_t *r, uint64_t id)
{
    for (size_t i = home_slot(r, id); r->index[i] != NULL; i = (i + 1) & r->index_mask) {
        if (r->index[i]->id == id) {
            return r->index[i];
        }
    }
    return NULL;
}

disp_worker_t *disp_registry_live(disp_registry_t *r, uint64_t id)
{
    disp_worker_t *w = disp_registry_find(r, id);
    return w != NULL && w->state == DISP_WORKER_LIVE ? w : NULL;
}

static void remove_at(disp_registry_t *r, size_t i)
{
    index_del(r, r->workers[i]->id);
    free(r->workers[i]);
    memmove(&r->workers[i], &r->workers[i + 1], (r->n - i - 1) * sizeof(*r->workers));
    r->n--;
}

/* Makes room by dropping the oldest LOST entry; -ENOSPC if all are live. */
static int make_room(disp_registry_t *r)
{
    size_t oldest = r->n;
    for (size_t i = 0; i < r->n; i++) {
        if (r->workers[i]->state != DISP_WORKER_LIVE &&
            (oldest == r->n || r->workers[i]->lost_ms < r->workers[oldest]->lost_ms)) {
            oldest = i;
        }
    }
    if (oldest == r->n) {
        return -ENOSPC;
    }
    remove_at(r, oldest);
    return 0;
}

static int id_taken(disp_registry_t *r, uint64_t id) { return disp_registry_find(r, id) != NULL; }

int disp_registry_register(disp_registry_t *r, const char *address, const char *hostname,
                           uint32_t threads, uint64_t want_id, int64_t now_ms,
                           disp_worker_t **ret, int *ret_new)
{
    if (!disp_addr_ok(address)) {
        return -EINVAL;
    }
    if (hostname == NULL) {
        hostname = "";
    }
    if (want_id != 0) {
        disp_worker_t *w = disp_registry_find(r, want_id);
        if (w != NULL && w->state == DISP_WORKER_LIVE && strcmp(w->address, address) == 0) {
            /* A retried register (the reply was lost): same worker. */
            w->threads = threads;
            w->last_heartbeat_ms = now_ms;
            disp_text_copy(w->hostname, sizeof(w->hostname), hostname);
            *ret = w;
            *ret_new = 0;
            return 0;
        }
        if (w != NULL) {
            want_id = 0; /* lost, or another worker's id: never reuse */
        }
    }
    if (r->n == r->cap && make_room(r) != 0) {
        return -ENOSPC;
    }
    disp_worker_t *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return -ENOMEM;
    }
    if (want_id == 0) {
        while (r->next_id == 0 || id_taken(r, r->next_id)) {
            r->next_id++;
        }
        want_id = r->next_id++;
    } else if (want_id >= r->next_id) {
        r->next_id = want_id + 1;
    }
    w->id = want_id;
    w->state = DISP_WORKER_LIVE;
    snprintf(w->address, sizeof(w->address), "%s", address);
    disp_text_copy(w->hostname, sizeof(w->hostname), hostname);
    w->threads = threads;
    w->registered_ms = now_ms;
    w->last_heartbeat_ms = now_ms;
    r->workers[r->n++] = w;
    index_put(r, w);
    r->nlive++;
    *ret = w;
    *ret_new = 1;
    return 0;
}

size_t disp_registry_expire(disp_registry_t *r, int64_t now_ms, int64_t timeout_ms,
                            uint64_t *lost_ids, size_t max)
{
    size_t nlost = 0;
    for (size_t i = 0; i < r->n;) {
        disp_worker_t *w = r->workers[i];
        if (w->state != DISP_WORKER_LIVE && now_ms - w->lost_ms >= DISP_LOST_LINGER_MS) {
            remove_at(r, i);
            continue;
        }
        if (w->state == DISP_WORKER_LIVE && now_ms - w->last_heartbeat_ms >= timeout_ms &&
            nlost < max) {
            w->state = DISP_WORKER_LOST;
            w->lost_ms = now_ms;
            r->nlive--;
            if (r->nlive == 0) {
                /* Its last sign of life, not now: it has already been
                 * silent for a whole timeout. */
                r->no_live_since_ms = w->last_heartbeat_ms;
            }
            lost_ids[nlost++] = w->id;
        }
        i++;
    }
    return nlost;
}

void disp_registry_leave(disp_registry_t *r, disp_worker_t *w, int64_t now_ms)
{
    if (w->state != DISP_WORKER_LIVE) {
        return;
    }
    w->state = DISP_WORKER_LEFT;
    w->lost_ms = now_ms;
    r->nlive--;
    if (r->nlive == 0) {
        r->no_live_since_ms = now_ms;
    }
}

int disp_registry_no_workers(const disp_registry_t *r, int64_t now_ms, int64_t timeout_ms)
{
    return r->nlive == 0 && now_ms - r->no_live_since_ms >= timeout_ms;
}
