/* source_pins: the version each URL a source reads whole at sample time
 * (jsonl images, filelist entries) had at its first read on this host. Such
 * objects are not opened while indexing (a HEAD per image of a large
 * manifest would make opening cost as much as reading), so their validator
 * is not in the fingerprint; instead the first read pins it, and every
 * later read of the URL by the source must find that version: the cache
 * entry of (URL, pinned validator) with no request, else the server's
 * object with the same validator, else -ESTALE ("changed since the job
 * indexed it": a counted skip). So a job never mixes two versions of one
 * image on one host. Thread-safe: sample reads run on every thread. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/source_impl.h"

/* Open addressing over 64-bit URL hashes (0: empty slot). */
typedef struct sl_src_pins_s {
    pthread_mutex_t mu;
    uint64_t *key, *tag;
    size_t cap, n;
} sl_src_pins_t;

int sl_src_pins_new(sl_src_remote_t *rs)
{
    sl_src_pins_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return -ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    rs->pins = p;
    return 0;
}

void sl_src_pins_free(sl_src_remote_t *rs)
{
    sl_src_pins_t *p = rs != NULL ? rs->pins : NULL;
    if (p == NULL) {
        return;
    }
    pthread_mutex_destroy(&p->mu);
    free(p->key);
    free(p->tag);
    free(p);
    rs->pins = NULL;
}

static uint64_t url_key(const char *url)
{
    uint64_t h = sl_src_fnv1a(0xcbf29ce484222325ULL, url, strlen(url));
    return h != 0 ? h : 1;
}

/* The slot of key (mu held, cap > 0): its own or the empty one to use. */
static size_t slot_of(const sl_src_pins_t *p, uint64_t key)
{
    size_t i = (size_t)(key % p->cap);
    while (p->key[i] != 0 && p->key[i] != key) {
        i = (i + 1) % p->cap;
    }
    return i;
}

static int grow(sl_src_pins_t *p)
{
    size_t cap = p->cap > 0 ? p->cap * 2 : 1024;
    sl_src_pins_t bigger = {.cap = cap};
    bigger.key = calloc(cap, sizeof(uint64_t));
    bigger.tag = calloc(cap, sizeof(uint64_t));
    if (bigger.key == NULL || bigger.tag == NULL) {
        free(bigger.key);
        free(bigger.tag);
        return -ENOMEM;
    }
    for (size_t i = 0; i < p->cap; i++) {
        if (p->key[i] != 0) {
            size_t j = slot_of(&bigger, p->key[i]);
            bigger.key[j] = p->key[i];
            bigger.tag[j] = p->tag[i];
        }
    }
    free(p->key);
    free(p->tag);
    p->key = bigger.key;
    p->tag = bigger.tag;
    p->cap = cap;
    return 0;
}

uint64_t sl_src_pin_get(const sl_src_remote_t *rs, const char *url)
{
    sl_src_pins_t *p = rs != NULL ? rs->pins : NULL;
    if (p == NULL) {
        return 0;
    }
    uint64_t key = url_key(url), tag = 0;
    pthread_mutex_lock(&p->mu);
    if (p->cap > 0) {
        size_t i = slot_of(p, key);
        tag = p->key[i] == key ? p->tag[i] : 0;
    }
    pthread_mutex_unlock(&p->mu);
    return tag;
}

void sl_src_pin_put(const sl_src_remote_t *rs, const char *url, uint64_t tag)
{
    sl_src_pins_t *p = rs != NULL ? rs->pins : NULL;
    if (p == NULL || tag == 0) {
        return;
    }
    uint64_t key = url_key(url);
    pthread_mutex_lock(&p->mu);
    /* Kept at most half full; out of memory: this URL stays unpinned
     * (its reads are then only as safe as before). */
    if ((p->n + 1) * 2 <= p->cap || grow(p) == 0) {
        size_t i = slot_of(p, key);
        if (p->key[i] == 0) {
            p->key[i] = key;
            p->tag[i] = tag; /* the first read's version stays */
            p->n++;
        }
    }
    pthread_mutex_unlock(&p->mu);
}
