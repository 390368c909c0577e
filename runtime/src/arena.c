/* arena.c - the data arena: first-fit allocator over a fixed byte range.
 *
 * Large payloads (vadd operands, long echoes) live here, and ring messages
 * carry their offsets. The bookkeeping stays on the host heap, never in the
 * arena itself, because the arena is shared with the device (and possibly
 * another process) that must not be able to corrupt the allocator. The
 * arena never grows: a full arena makes senders wait, then fail. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static uint64_t rk__round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

int rk__arena_init(rk__arena *ar, void *base, size_t size)
{
    memset(ar, 0, sizeof *ar);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* deadlines are rk__now_ns */
    pthread_cond_init(&ar->freed, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&ar->lock, NULL);
    ar->base = base;
    ar->size = size / RK_ARENA_ALIGN * RK_ARENA_ALIGN;
    ar->cap_free = 16;
    ar->free = malloc(ar->cap_free * sizeof *ar->free);
    if (!ar->free)
        return rk__fail(RK_ENOMEM, "arena bookkeeping: out of memory");
    if (ar->size) {
        ar->free[0] = (rk__extent){0, ar->size};
        ar->n_free = 1;
    }
    return 0;
}

void rk__arena_destroy(rk__arena *ar)
{
    free(ar->free);
    ar->free = NULL;
    pthread_cond_destroy(&ar->freed);
    pthread_mutex_destroy(&ar->lock);
}

static size_t rk__arena_largest(const rk__arena *ar)
{
    size_t m = 0;
    for (size_t i = 0; i < ar->n_free; i++)
        if (ar->free[i].size > m)
            m = ar->free[i].size;
    return m;
}

int rk__arena_alloc(rk__arena *ar, size_t size, int64_t deadline, uint64_t *off)
{
    return rk__arena_alloc_help(ar, size, deadline, off, NULL, NULL);
}

int rk__arena_alloc_help(rk__arena *ar, size_t size, int64_t deadline, uint64_t *off, void (*help)(void *),
                         void *arg)
{
    uint64_t need = rk__round_up(size ? size : 1, RK_ARENA_ALIGN);
    if (need > ar->size)
        return rk__fail(RK_EMSGSIZE, "payload needs %llu B of arena, the arena is %zu B",
                        (unsigned long long)need, ar->size);
    int64_t t0 = rk__now_ns();
    bool helped = false;
    pthread_mutex_lock(&ar->lock);
    for (;;) {
        for (size_t i = 0; i < ar->n_free; i++) {
            rk__extent *e = &ar->free[i];
            if (e->size < need)
                continue;
            *off = e->off;
            e->off += need;
            e->size -= need;
            if (!e->size) {
                memmove(e, e + 1, (ar->n_free - i - 1) * sizeof *e);
                ar->n_free--;
            }
            ar->used += need;
            if (ar->used > ar->peak)
                ar->peak = ar->used;
            pthread_mutex_unlock(&ar->lock);
            return 0;
        }
        int64_t now = rk__now_ns();
        if (ar->fault) {
            const int fault = ar->fault;
            size_t used = ar->used;
            pthread_mutex_unlock(&ar->lock);
            return rk__fail(fault, "arena full (%llu B requested, %zu of %zu B in use) and the backend "
                            "failed (%s): nothing will free space", (unsigned long long)need, used, ar->size,
                            rk_strerror(fault));
        }
        if (now >= deadline) {
            size_t used = ar->used, largest = rk__arena_largest(ar);
            pthread_mutex_unlock(&ar->lock);
            return rk__fail(RK_ENOSPC,
                            "arena full: %llu B requested, %zu of %zu B in use, largest free "
                            "extent %zu B, after waiting %lld ms",
                            (unsigned long long)need, used, ar->size, largest,
                            (long long)((now - t0) / 1000000));
        }
        if (help && !helped) { /* then a look at what it freed, before a wait */
            pthread_mutex_unlock(&ar->lock);
            help(arg);
            pthread_mutex_lock(&ar->lock);
            helped = true;
            continue;
        }
        helped = false;
        int64_t until = help && deadline - now > RK__ARENA_HELP_NS ? now + RK__ARENA_HELP_NS : deadline;
        if (until == INT64_MAX) {
            pthread_cond_wait(&ar->freed, &ar->lock);
        } else {
            struct timespec ts = {.tv_sec = until / 1000000000, .tv_nsec = until % 1000000000};
            pthread_cond_timedwait(&ar->freed, &ar->lock, &ts);
        }
    }
}

void rk__arena_free(rk__arena *ar, uint64_t off, size_t size)
{
    uint64_t len = rk__round_up(size ? size : 1, RK_ARENA_ALIGN);
    pthread_mutex_lock(&ar->lock);
    /* first extent after the freed range */
    size_t lo = 0, hi = ar->n_free;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ar->free[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    rk__extent *prev = lo > 0 ? &ar->free[lo - 1] : NULL;
    rk__extent *next = lo < ar->n_free ? &ar->free[lo] : NULL;
    if (prev && prev->off + prev->size == off) {
        prev->size += len;
        if (next && off + len == next->off) { /* bridges prev and next */
            prev->size += next->size;
            memmove(next, next + 1, (ar->n_free - lo - 1) * sizeof *next);
            ar->n_free--;
        }
    } else if (next && off + len == next->off) {
        next->off = off;
        next->size += len;
    } else {
        if (ar->n_free == ar->cap_free) {
            size_t cap = ar->cap_free * 2;
            rk__extent *n = realloc(ar->free, cap * sizeof *n);
            if (!n) { /* keep going: the range is lost, not corrupted */
                rk__log(RK__LOG_ERROR, "arena: out of memory recording a free extent; %llu B lost",
                        (unsigned long long)len);
                ar->used -= len;
                pthread_mutex_unlock(&ar->lock);
                return;
            }
            ar->free = n;
            ar->cap_free = cap;
        }
        memmove(&ar->free[lo + 1], &ar->free[lo], (ar->n_free - lo) * sizeof *ar->free);
        ar->free[lo] = (rk__extent){off, len};
        ar->n_free++;
    }
    ar->used -= len;
    pthread_cond_broadcast(&ar->freed);
    pthread_mutex_unlock(&ar->lock);
}

void rk__arena_fail(rk__arena *ar, int code)
{
    /* under the lock: a waiter checks it before it waits (no lost wake) */
    pthread_mutex_lock(&ar->lock);
    if (!ar->fault)
        ar->fault = code < 0 ? code : -code;
    pthread_cond_broadcast(&ar->freed);
    pthread_mutex_unlock(&ar->lock);
}

void rk__arena_usage(rk__arena *ar, size_t *used, size_t *peak)
{
    pthread_mutex_lock(&ar->lock);
    *used = ar->used;
    *peak = ar->peak;
    pthread_mutex_unlock(&ar->lock);
}
