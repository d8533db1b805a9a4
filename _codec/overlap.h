/* A helper thread that scans a batch's records while the decoding thread checks its CRC.
 *
 * The two are independent: the CRC reads the batch, the scan (fastscan.h) reads the same bytes
 * and fills the columns, and the scan's result is only used once the CRC has matched. Serially
 * they add up (with large values the CRC is a large part of a decode); side by side a decode
 * takes about as long as the longer of the two. The helper never touches Python objects, so it
 * needs no GIL, and the CRC call may release the GIL as it likes.
 *
 * One helper per process, used by one decode at a time (others run serially meanwhile), and only
 * for a records region of min_region bytes or more (KC_OVERLAP_MIN, 256 KiB): below that the
 * handover and the second core's CPU cost more than the CRC they hide (measured in
 * bench/RESULTS.md, "Codec design measurements"). After a job it spins for KC_SPIN_NS waiting for
 * the next one, then sleeps on a condition variable and is signalled by the next post. The
 * decoding thread never waits for a helper that has not started its job: it takes the job back
 * and scans itself (kc_overlap_end), so a busy or descheduled helper costs nothing but the
 * attempt. After fork() the child has no helper thread; the atfork handler resets the state and
 * the first decode there starts a new one.
 */
#ifndef KAFKA_CORE_OVERLAP_H
#define KAFKA_CORE_OVERLAP_H

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "fastscan.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KC_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define KC_PAUSE() __asm__ __volatile__("yield")
#else
#define KC_PAUSE() ((void)0)
#endif

#define KC_OVERLAP_MIN ((ssize_t)256 * 1024) /* the default min_region */
#define KC_SPIN_NS 50000                     /* how long an idle helper waits before sleeping */

enum { KC_IDLE, KC_POSTED, KC_RUNNING, KC_DONE };

static struct {
    atomic_int state;     /* the job's: KC_IDLE -> POSTED -> RUNNING -> DONE -> IDLE */
    atomic_int sleeping;  /* the helper waits on cv (a post must signal it) */
    atomic_int busy;      /* a decode owns the helper */
    int enabled;          /* set_decode_helper(); off by default */
    int started;          /* the thread exists in this process (0 after fork, or if it failed) */
    int atfork;
    kc_scan* job;
    ssize_t j, count, result;
    ssize_t min_region;   /* smallest records region handed over */
    atomic_llong jobs;    /* scans the helper ran (tests and stats) */
    int wait_claim;       /* tests: wait for the helper instead of taking the job back */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} kc_helper = {KC_IDLE, 0, 0, 0, 0, 0, NULL, 0, 0, 0, KC_OVERLAP_MIN, 0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static int64_t kc_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void* kc_helper_main(void* unused) {
    int expected;
    int64_t deadline;
    unsigned spins;
    (void)unused;
    for (;;) {
        deadline = kc_now_ns() + KC_SPIN_NS;
        spins = 0;
        while (atomic_load_explicit(&kc_helper.state, memory_order_acquire) != KC_POSTED) {
            KC_PAUSE();
            if ((++spins & 63) == 0 && kc_now_ns() > deadline) {
                pthread_mutex_lock(&kc_helper.mu);
                atomic_store(&kc_helper.sleeping, 1); /* seq_cst: see kc_overlap_begin */
                while (atomic_load(&kc_helper.state) != KC_POSTED) {
                    pthread_cond_wait(&kc_helper.cv, &kc_helper.mu);
                }
                atomic_store(&kc_helper.sleeping, 0);
                pthread_mutex_unlock(&kc_helper.mu);
                deadline = kc_now_ns() + KC_SPIN_NS; /* the job may be taken back: spin again */
            }
        }
        expected = KC_POSTED;
        if (!atomic_compare_exchange_strong(&kc_helper.state, &expected, KC_RUNNING)) {
            continue; /* taken back by the decoding thread */
        }
        kc_helper.result = kc_scan_records(kc_helper.job, kc_helper.j, kc_helper.count);
        kc_helper.jobs++;
        atomic_store_explicit(&kc_helper.state, KC_DONE, memory_order_release);
    }
    return NULL;
}

static void kc_helper_after_fork(void) {
    atomic_store(&kc_helper.state, KC_IDLE);
    atomic_store(&kc_helper.sleeping, 0);
    atomic_store(&kc_helper.busy, 0);
    kc_helper.started = 0;
    pthread_mutex_init(&kc_helper.mu, NULL);
    pthread_cond_init(&kc_helper.cv, NULL);
}

/* Start the helper (the caller owns it, holding busy); 0 if no thread could be made. */
static int kc_helper_start(void) {
    pthread_t thread;
    pthread_attr_t attr;
    sigset_t all, old;
    int rc;
    if (!kc_helper.atfork) {
        if (pthread_atfork(NULL, NULL, kc_helper_after_fork) != 0) return 0;
        kc_helper.atfork = 1;
    }
    if (pthread_attr_init(&attr) != 0) return 0;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* signals stay with Python's threads */
    rc = pthread_create(&thread, &attr, kc_helper_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        kc_helper.enabled = 0; /* do not try on every decode */
        return 0;
    }
    kc_helper.started = 1;
    return 1;
}

/* Hand rows j.. of s to the helper; 1 if it took the job (then kc_overlap_end must follow,
 * and s, its buffers and its records must stay untouched until then), 0 to scan serially. */
static int kc_overlap_begin(kc_scan* s, ssize_t j, ssize_t count) {
    int expected = 0;
    if (!kc_helper.enabled || s->end - s->pos < kc_helper.min_region) return 0;
    if (!atomic_compare_exchange_strong(&kc_helper.busy, &expected, 1)) return 0;
    if (!kc_helper.started && !kc_helper_start()) {
        atomic_store(&kc_helper.busy, 0);
        return 0;
    }
    kc_helper.job = s;
    kc_helper.j = j;
    kc_helper.count = count;
    /* seq_cst store, then load: either the helper sees POSTED before it sleeps, or this sees
     * it sleeping and signals it (under the mutex it holds until it waits). */
    atomic_store(&kc_helper.state, KC_POSTED);
    if (atomic_load(&kc_helper.sleeping)) {
        pthread_mutex_lock(&kc_helper.mu);
        pthread_cond_signal(&kc_helper.cv);
        pthread_mutex_unlock(&kc_helper.mu);
    }
    return 1;
}

/* The scan's result (the row reached, as kc_scan_records returns): the helper's, or, if it had
 * not started the job, the caller's own. Releases the helper. */
static ssize_t kc_overlap_end(kc_scan* s, ssize_t j, ssize_t count) {
    ssize_t result;
    int expected = KC_POSTED;
    unsigned spins = 0;
    while (kc_helper.wait_claim && atomic_load(&kc_helper.state) == KC_POSTED) {
        sched_yield();
    }
    if (atomic_compare_exchange_strong(&kc_helper.state, &expected, KC_IDLE)) {
        result = kc_scan_records(s, j, count);
    } else {
        /* the helper is scanning: it finishes in about the time this thread took for the CRC,
         * unless it was descheduled, which is when yielding beats spinning */
        while (atomic_load_explicit(&kc_helper.state, memory_order_acquire) != KC_DONE) {
            if (++spins < 100000) {
                KC_PAUSE();
            } else {
                sched_yield();
            }
        }
        result = kc_helper.result;
        atomic_store_explicit(&kc_helper.state, KC_IDLE, memory_order_relaxed);
    }
    atomic_store(&kc_helper.busy, 0);
    return result;
}

#endif
