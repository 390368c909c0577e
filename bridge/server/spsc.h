/* bridge/server/spsc.h - a bounded single-producer/single-consumer ring of
 * fixed-size items (rkb_spsc_ = bridge internal). rk-bridge hands request
 * and reply frames between its frontend and each worker through two of
 * them (--io-threads > 1); nothing here knows about ZeroMQ.
 *
 * Shape (liburing / DPDK rte_ring, single-producer single-consumer only):
 * - free-running 32-bit indices, masked only on access; "full" is
 *   tail - head == entries (entries is a power of two, at most 2^31);
 * - the producer owns tail, the consumer owns head; each publishes its index
 *   on a cache line of its own (128 bytes: the adjacent-line prefetcher
 *   pulls lines in pairs) and keeps a private shadow of the other side's
 *   index on a third and fourth line, so the shared index of the other side
 *   is read only when the shadow says full (producer) or empty (consumer);
 * - items are filled and read in place (slot + commit, peek + release), so
 *   an item is written once and read once, never copied through the ring;
 *   an item may hold zmq_msg_t frames moved into it by struct copy;
 * - a side that moves a burst may publish its index every `every` items and
 *   once at the burst's end (sp_push ... sp_publish, sc_pop ...
 *   sc_publish): the index line then crosses to the other core a few times
 *   per burst, not once per item;
 * - the ring lives in memory the caller provides:
 *       rkb_spsc *r = aligned_alloc(RKB_SPSC_ALIGN, rkb_spsc_memsize(n, sz));
 *       rkb_spsc_init(r, n, sz);
 *
 * Ordering (every edge has a pair):
 *   (P) the producer's item stores, then rkb__st_release(tail) in
 *       rkb_spsc_sp_commit, pair with the consumer's rkb__ld_acquire(tail)
 *       in rkb_spsc_sc_peek: a consumer that sees the index sees the item.
 *   (C) the consumer's item loads, then rkb__st_release(head) in
 *       rkb_spsc_sc_release, pair with the producer's rkb__ld_acquire(head)
 *       in rkb_spsc_sp_slot: the consumer has finished reading a slot before
 *       the producer writes it again.
 * Nothing here sleeps; a caller that blocks when its ring is empty adds its
 * own wake-up handshake (rk-bridge: server/handoff.c, rkb_wake / rkb_sleep_prepare).
 */
#ifndef RKB_SPSC_H
#define RKB_SPSC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The host's memory-ordering vocabulary, named as in runtime/src/barrier.h
 * (GCC/clang __atomic builtins on plain aligned integers). */
#define rkb__ld_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define rkb__ld_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define rkb__st_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define rkb__st_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define rkb__fence_seq_cst() __atomic_thread_fence(__ATOMIC_SEQ_CST)

#define RKB_SPSC_ALIGN 128 /* the ring header's lines, and the ring's memory */
#define RKB_SPSC_ITEM_ALIGN 64 /* item stride: neighbours never share a line */
#define RKB_SPSC_MAX_ENTRIES (UINT32_C(1) << 31)

typedef struct rkb_spsc {
    /* read-only after rkb_spsc_init */
    _Alignas(RKB_SPSC_ALIGN) uint32_t mask; /* entries - 1 */
    uint32_t stride;                         /* item size rounded up to RKB_SPSC_ITEM_ALIGN */
    /* the producer's own: its next tail, its shadow of head, and the tail
     * it last published */
    _Alignas(RKB_SPSC_ALIGN) uint32_t p_tail;
    uint32_t p_head;
    uint32_t p_pub;
    /* shared: written by the producer (release), read by the consumer (acquire) */
    _Alignas(RKB_SPSC_ALIGN) uint32_t tail;
    /* the consumer's own: its next head, its shadow of tail, and the head
     * it last published */
    _Alignas(RKB_SPSC_ALIGN) uint32_t c_head;
    uint32_t c_tail;
    uint32_t c_pub;
    /* shared: written by the consumer (release), read by the producer (acquire) */
    _Alignas(RKB_SPSC_ALIGN) uint32_t head;
    /* entries x stride bytes of items */
    _Alignas(RKB_SPSC_ALIGN) unsigned char items[];
} rkb_spsc;

static inline size_t rkb_spsc__stride(size_t item_size)
{
    return (item_size + RKB_SPSC_ITEM_ALIGN - 1) & ~(size_t)(RKB_SPSC_ITEM_ALIGN - 1);
}

/* Bytes of memory (a multiple of RKB_SPSC_ALIGN, to be aligned to it) for a
 * ring of `entries` items of item_size bytes; 0 when entries is not a power
 * of two in [1, RKB_SPSC_MAX_ENTRIES] or item_size is 0 or too large. */
static inline size_t rkb_spsc_memsize(uint32_t entries, size_t item_size)
{
    if (entries == 0 || (entries & (entries - 1)) || entries > RKB_SPSC_MAX_ENTRIES ||
        item_size == 0 || item_size > UINT32_MAX / 2)
        return 0;
    size_t stride = rkb_spsc__stride(item_size);
    if ((size_t)entries > (SIZE_MAX - sizeof(rkb_spsc)) / stride)
        return 0;
    size_t n = sizeof(rkb_spsc) + (size_t)entries * stride;
    return (n + RKB_SPSC_ALIGN - 1) & ~(size_t)(RKB_SPSC_ALIGN - 1);
}

/* Makes r (rkb_spsc_memsize(entries, item_size) bytes aligned to
 * RKB_SPSC_ALIGN) an empty ring. Returns 0, or -1 when the sizes are
 * invalid (see rkb_spsc_memsize). Call before either side starts; the
 * threads must then be started (or told) through a synchronising step such
 * as pthread_create. Items are left uninitialised. */
static inline int rkb_spsc_init(rkb_spsc *r, uint32_t entries, size_t item_size)
{
    if (!rkb_spsc_memsize(entries, item_size))
        return -1;
    r->mask = entries - 1;
    r->stride = (uint32_t)rkb_spsc__stride(item_size);
    r->p_tail = r->p_head = r->p_pub = r->tail = 0;
    r->c_head = r->c_tail = r->c_pub = r->head = 0;
    return 0;
}

static inline uint32_t rkb_spsc_entries(const rkb_spsc *r) { return r->mask + 1; }

static inline void *rkb_spsc__item(rkb_spsc *r, uint32_t i)
{
    return r->items + (size_t)(i & r->mask) * r->stride;
}

/* ---- producer side (one thread) ---------------------------------------- */

/* The slot the next item goes into, or NULL when the ring is full. The
 * slot is the producer's until rkb_spsc_sp_commit; asking again without a
 * commit returns the same slot (nothing is reserved). */
static inline void *rkb_spsc_sp_slot(rkb_spsc *r)
{
    if (r->p_tail - r->p_head > r->mask) {
        /* (C) pairs with the consumer's release of head: the slot we are
         * about to fill has been read to the end */
        r->p_head = rkb__ld_acquire(&r->head);
        if (r->p_tail - r->p_head > r->mask)
            return NULL;
    }
    return rkb_spsc__item(r, r->p_tail);
}

/* Hands every pushed item over to the consumer. */
static inline void rkb_spsc_sp_publish(rkb_spsc *r)
{
    if (r->p_pub != r->p_tail) {
        r->p_pub = r->p_tail;
        /* (P) pairs with the consumer's acquire of tail: the items' bytes
         * are visible before the index that hands them over */
        rkb__st_release(&r->tail, r->p_tail);
    }
}

/* Adds the slot from rkb_spsc_sp_slot (which must have returned it) to the
 * items the next rkb_spsc_sp_publish hands over, and publishes them all
 * once `every` wait; until then the consumer does not see them. Returns
 * how many items wait for a publish. */
static inline uint32_t rkb_spsc_sp_push(rkb_spsc *r, uint32_t every)
{
    if (++r->p_tail - r->p_pub >= every)
        rkb_spsc_sp_publish(r);
    return r->p_tail - r->p_pub;
}

/* Push and publish: hands the slot from rkb_spsc_sp_slot over now. */
static inline void rkb_spsc_sp_commit(rkb_spsc *r) { rkb_spsc_sp_push(r, 1); }

/* The slot after the one rkb_spsc_sp_slot returns (room or not): for a
 * prefetch only. */
static inline void *rkb_spsc_sp_next(rkb_spsc *r)
{
    return rkb_spsc__item(r, r->p_tail + 1);
}

/* Items committed and not yet released by the consumer, as far as the
 * producer knows: its cached view, refreshed only when that says `upto` or
 * more (so a producer that stays below `upto` reads no shared line). */
static inline uint32_t rkb_spsc_sp_pending(rkb_spsc *r, uint32_t upto)
{
    if (r->p_tail - r->p_head >= upto)
        r->p_head = rkb__ld_acquire(&r->head); /* (C), as in rkb_spsc_sp_slot */
    return r->p_tail - r->p_head;
}

/* ---- consumer side (one thread) ---------------------------------------- */

/* The oldest item, or NULL when the ring is empty. It stays in the ring
 * (the consumer may read or move out of it) until rkb_spsc_sc_release. */
static inline void *rkb_spsc_sc_peek(rkb_spsc *r)
{
    if (r->c_head == r->c_tail) {
        /* (P) pairs with the producer's release of tail */
        r->c_tail = rkb__ld_acquire(&r->tail);
        if (r->c_head == r->c_tail)
            return NULL;
    }
    return rkb_spsc__item(r, r->c_head);
}

/* The item k places after the oldest when this side already knows it is
 * there (no shared line is read), else NULL: for a prefetch. */
static inline void *rkb_spsc_sc_ahead(rkb_spsc *r, uint32_t k)
{
    return r->c_tail - r->c_head > k ? rkb_spsc__item(r, r->c_head + k) : NULL;
}

/* Gives every popped slot back to the producer. */
static inline void rkb_spsc_sc_publish(rkb_spsc *r)
{
    if (r->c_pub != r->c_head) {
        r->c_pub = r->c_head;
        /* (C) pairs with the producer's acquire of head: every load from
         * the slots is done before the producer may overwrite them */
        rkb__st_release(&r->head, r->c_head);
    }
}

/* Done with the item from rkb_spsc_sc_peek: the next peek returns the one
 * after it; the producer gets the popped slots back at the next
 * rkb_spsc_sc_publish, which this makes once `every` wait. Returns how
 * many slots wait for a publish. */
static inline uint32_t rkb_spsc_sc_pop(rkb_spsc *r, uint32_t every)
{
    if (++r->c_head - r->c_pub >= every)
        rkb_spsc_sc_publish(r);
    return r->c_head - r->c_pub;
}

/* Pop and publish: gives the item from rkb_spsc_sc_peek back now. */
static inline void rkb_spsc_sc_release(rkb_spsc *r) { rkb_spsc_sc_pop(r, 1); }

/* ---- either thread ----------------------------------------------------- */

/* Items in the ring at some instant during the call (a snapshot for
 * statistics; a side that acts on it uses its own calls above). */
static inline uint32_t rkb_spsc_count(const rkb_spsc *r)
{
    uint32_t h = rkb__ld_relaxed(&r->head);
    uint32_t t = rkb__ld_relaxed(&r->tail);
    /* head is read first, so t - h never underflows; it can exceed the
     * size when both sides moved in between */
    return t - h > r->mask ? r->mask + 1 : t - h;
}

/* For tests: an empty ring whose indices start at `start` (wrap-around of
 * the 32-bit indices without moving 2^32 items). Same rules as init. */
static inline void rkb_spsc__seek(rkb_spsc *r, uint32_t start)
{
    r->p_tail = r->p_head = r->p_pub = r->tail = start;
    r->c_head = r->c_tail = r->c_pub = r->head = start;
}

#endif
