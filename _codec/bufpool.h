/* A small pool of large column buffers for the columnar decoder.
 *
 * Decoding a fetch allocates a few buffers of about its size (up to ~10 per decode, and a
 * consumer keeps a few decodes alive). glibc serves such sizes with fresh mmap'ed pages and
 * returns them on free, so every decode page-faulted its buffers in again (the cost measured is
 * in bench/RESULTS.md, "Codec design measurements"). Released buffers of 64 KiB or more are kept
 * here (at most 48, 64 MiB in all) and handed to the next decode. Arrow may release an array
 * from any thread, hence the mutex.
 */
#ifndef KAFKA_CORE_BUFPOOL_H
#define KAFKA_CORE_BUFPOOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>
#define KC_USABLE_SIZE(p) malloc_usable_size(p)
#elif defined(__APPLE__)
#include <malloc/malloc.h>
#define KC_USABLE_SIZE(p) malloc_size(p)
#else
#define KC_USABLE_SIZE(p) ((size_t)0) /* no way to ask: never pooled */
#endif

#define KC_POOL_SLOTS 48
#define KC_POOL_MIN ((size_t)64 * 1024)
#define KC_POOL_MAX_TOTAL ((size_t)64 * 1024 * 1024)

static void* kc_pool_ptr[KC_POOL_SLOTS];
static size_t kc_pool_cap[KC_POOL_SLOTS];
static size_t kc_pool_total = 0;
static pthread_mutex_t kc_pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* What an empty column buffer points at: Arrow wants a pointer even for no bytes, and a malloc
 * per empty buffer (every decode has a few: no headers, no nulls) is not worth it. */
static char kc_empty_buf[64] __attribute__((aligned(64)));

/* Free a buffer, or keep it for the next decode. */
static void kc_buf_free(void* p) {
    size_t cap;
    int i;
    if (p == NULL || p == (void*)kc_empty_buf) return;
    cap = KC_USABLE_SIZE(p);
    if (cap >= KC_POOL_MIN) {
        pthread_mutex_lock(&kc_pool_lock);
        if (kc_pool_total + cap <= KC_POOL_MAX_TOTAL) {
            for (i = 0; i < KC_POOL_SLOTS; i++) {
                if (kc_pool_ptr[i] == NULL) {
                    kc_pool_ptr[i] = p;
                    kc_pool_cap[i] = cap;
                    kc_pool_total += cap;
                    pthread_mutex_unlock(&kc_pool_lock);
                    return;
                }
            }
        }
        pthread_mutex_unlock(&kc_pool_lock);
    }
    free(p);
}

/* The smallest pooled buffer of at least `size` bytes (and at most 4x it, so a small column
 * does not pin a huge buffer), or NULL. Its usable size goes to *cap. */
static void* kc_buf_take(size_t size, size_t* cap) {
    int i, best = -1;
    void* p = NULL;
    if (size < KC_POOL_MIN) return NULL;
    pthread_mutex_lock(&kc_pool_lock);
    for (i = 0; i < KC_POOL_SLOTS; i++) {
        if (kc_pool_ptr[i] != NULL && kc_pool_cap[i] >= size && kc_pool_cap[i] / 4 <= size &&
            (best < 0 || kc_pool_cap[i] < kc_pool_cap[best])) {
            best = i;
        }
    }
    if (best >= 0) {
        p = kc_pool_ptr[best];
        *cap = kc_pool_cap[best];
        kc_pool_ptr[best] = NULL;
        kc_pool_total -= kc_pool_cap[best];
    }
    pthread_mutex_unlock(&kc_pool_lock);
    return p;
}

#endif
