/* ring.c - host side of the rings (layout and protocol: rk/ring.h). */
#include <limits.h>
#include <string.h>

#include "barrier.h"
#include "internal.h"

static int rk__is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

size_t rk_ring_memsize(uint32_t slots, uint32_t slot_size)
{
    if (!rk__is_pow2(slots) || slots > RK_RING_SLOTS_MAX || !rk__is_pow2(slot_size) ||
        slot_size < RK_RING_SLOT_MIN || slot_size > RK_RING_SLOT_MAX)
        return 0;
    return RK_RING_HDR_BYTES + (size_t)slots * slot_size;
}

int rk_ring_init(void *mem, size_t memsize, uint32_t slots, uint32_t slot_size)
{
    if (!mem || ((uintptr_t)mem & (RK_RING_ALIGN - 1)))
        return rk__fail(RK_EINVAL, "ring memory %p is not %u-byte aligned", mem, RK_RING_ALIGN);
    if (!rk__is_pow2(slots) || slots > RK_RING_SLOTS_MAX)
        return rk__fail(RK_EINVAL, "ring slots %u is not a power of two in 1..%u", slots,
                        RK_RING_SLOTS_MAX);
    if (!rk__is_pow2(slot_size) || slot_size < RK_RING_SLOT_MIN || slot_size > RK_RING_SLOT_MAX)
        return rk__fail(RK_EINVAL, "slot size %u B is not a power of two in %u..%u B", slot_size,
                        RK_RING_SLOT_MIN, RK_RING_SLOT_MAX);
    size_t need = rk_ring_memsize(slots, slot_size);
    if (memsize < need)
        return rk__fail(RK_EINVAL, "ring memory %zu B is below the %zu B that %u slots of %u B need",
                        memsize, need, slots, slot_size);
    memset(mem, 0, need); /* flag 0 = never written: no lap matches it */
    rk_ring *r = mem;
    r->slots = slots;
    r->slot_size = slot_size;
    r->order = (uint32_t)__builtin_ctz(slots);
    /* release: a consumer or producer that sees the magic sees the constants */
    rk__st_release(&r->magic, RK_RING_MAGIC);
    return 0;
}

int rk_ring_check(const rk_ring *r, size_t memsize)
{
    if (!r || rk__ld_acquire(&r->magic) != RK_RING_MAGIC)
        return rk__fail(RK_EPROTO, "ring magic missing: memory is not an initialised ring");
    size_t need = rk_ring_memsize(r->slots, r->slot_size);
    /* order from shared memory: a shift of 32 or more is undefined (x86
     * takes it mod 32, and order 32 passed for one slot) */
    if (!need || r->order >= 32 || (1u << r->order) != r->slots || need > memsize)
        return rk__fail(RK_EPROTO, "ring header corrupt: %u slots of %u B (order %u) in %zu B",
                        r->slots, r->slot_size, r->order, memsize);
    return 0;
}

/* Lines line[0..] from p's len bytes, 4 per line, each one 64-bit store
 * of {data, flag}. release on every line: whatever this thread wrote
 * before (the arena payload the message points to) is visible to a
 * consumer that load-acquires any line of it. Pairs with rk_ring_sc_peek's
 * load-acquire of each line. (On x86 both are plain moves.) The pointers
 * walk: indexing by i / 4 took 15 instructions per two lines, and this
 * loop and the peek's were a third of rk_actor_call's instructions. */
static void rk__ring_put(uint64_t *line, uint64_t flag, const uint8_t *p, uint32_t len)
{
    for (; len >= 8; len -= 8, p += 8, line += 2) { /* two lines per 8-byte load */
        uint64_t w;
        memcpy(&w, p, 8);
        rk__st_release(&line[0], flag | (uint32_t)w);
        rk__st_release(&line[1], flag | (w >> 32));
    }
    if (len >= 4) {
        uint32_t d;
        memcpy(&d, p, 4);
        rk__st_release(&line[0], flag | d);
        len -= 4, p += 4, line++;
    }
    if (len) {
        uint32_t d = 0;
        memcpy(&d, p, len);
        rk__st_release(&line[0], flag | d);
    }
}

/* Writes the message m at pos: the consumer validates line by line, so
 * lines may land in any order. Line 0 (the length) goes last so a poller
 * that sees it usually finds the rest already there. */
void rk__ring_write2(rk_ring *r, uint64_t pos, const rk__ring_msg *m)
{
    uint64_t *slot = rk_ring_slot(r, pos);
    const uint64_t flag = (uint64_t)rk_ring_flag(r, pos) << 32;
    rk__ring_put(slot + 1, flag, m->head, m->hlen);
    rk__ring_put(slot + 1 + m->hlen / 4, flag, m->body, m->blen);
    if (m->edge)
        rk__tsan_release(m->edge); /* after the reads of the parts, before line 0 */
    rk__st_release(&slot[0], flag | (m->hlen + m->blen));
}

/* Wakes the host consumers sleeping on the doorbell (H2D: the CPU worker;
 * D2H: any number of actors, which count themselves in cons_sleeping). */
void rk__ring_wake(rk_ring *r)
{
    /* seq_cst: pairs with the sleeper's fence between raising
     * cons_sleeping and re-checking the ring (Dekker): either the sleeper
     * sees our lines, or we see it sleeping and wake it */
    rk__fence_seq_cst();
    if (rk__ld_relaxed(&r->cons_sleeping)) {
        rk__fetch_add(&r->doorbell, 1u);
        rk__futex_wake(&r->doorbell, INT32_MAX);
    }
}

void rk__ring_doorbell(rk_ring *r)
{
    /* relaxed: the owner switches it when the consumer changes (a GPU
     * kernel never sleeps, a CPU consumer does); a producer that read the
     * old value costs a sleeping CPU consumer one sleep period at most */
    if (!(rk__ld_relaxed(&r->flags) & RK_RING_F_NO_SLEEP))
        rk__ring_wake(r);
}

void rk__ring_set_flags(rk_ring *r, uint32_t flags) { rk__st_relaxed(&r->flags, flags); }

/* Fetches slot pos's lines for writing, but for its first 64 bytes (the
 * consumer polls line 0 there) and at most 512 bytes: the next message
 * (this producer's, most likely) then finds them in its cache instead of
 * waiting for them on its way out. On an H100 host this took
 * rk_actor_call's requests that missed the kernel's poll from 9-13 % to
 * 1-2 % (device/NOTES.md, "The host's turn"). */
static void rk__ring_prefetch_w(rk_ring *r, uint64_t pos)
{
    const char *s = (const char *)rk_ring_slot(r, pos);
    for (uint32_t k = 64; k < r->slot_size && k < 512; k += 64)
        __builtin_prefetch(s + k, 1, 3);
}

int rk_ring_mp_enqueue(rk_ring *r, const void *msg, uint32_t len)
{
    const rk__ring_msg m = {.head = msg, .hlen = len};
    return rk__ring_mp_enqueue2(r, &m, NULL);
}

int rk__ring_mp_enqueue2(rk_ring *r, const rk__ring_msg *m, uint64_t *at)
{
    const uint32_t len = m->hlen + m->blen;
    if (len > rk_ring_msg_max(r))
        return rk__fail(RK_EMSGSIZE, "message of %u B exceeds the slot's %u B", len,
                        rk_ring_msg_max(r));
    uint64_t pos;
    if (!rk__ring_mp_reserve(r, 1, &pos))
        return -RK_EAGAIN;
    rk__ring_write2(r, pos, m);
    rk__ring_doorbell(r);
    rk__ring_prefetch_w(r, pos + 1);
    if (at)
        *at = pos;
    return 0;
}

uint32_t rk__ring_mp_reserve(rk_ring *r, uint32_t n, uint64_t *first)
{
    uint64_t pos = rk__ld_relaxed(&r->prod_tail);
    for (;;) {
        /* acquire: pairs with the consumer's store-release of cons_head, so
         * the previous lap of every reserved slot is fully read before we
         * overwrite it */
        uint64_t head = rk__ld_acquire(&r->cons_head);
        uint64_t used = pos - head;
        if (used >= r->slots) {
            /* full, or pos is stale (another producer moved on, and the
             * consumer with it, making pos - head wrap): re-read the tail */
            uint64_t now = rk__ld_relaxed(&r->prod_tail);
            if (now == pos)
                return 0;
            pos = now;
            continue;
        }
        uint64_t k = r->slots - used < n ? r->slots - used : n;
        /* one CAS reserves the whole burst. The reservation is host-only
         * RMW: the device never touches prod_tail of an H2D ring */
        if (rk__cas_acq_rel(&r->prod_tail, &pos, pos + k)) {
            *first = pos;
            return (uint32_t)k;
        }
    }
}

int rk_ring_sp_enqueue(rk_ring *r, const void *msg, uint32_t len)
{
    if (len > rk_ring_msg_max(r))
        return rk__fail(RK_EMSGSIZE, "message of %u B exceeds the slot's %u B", len,
                        rk_ring_msg_max(r));
    uint64_t pos = rk__ld_relaxed(&r->prod_tail);
    /* acquire: pairs with the consumer's store-release of cons_head */
    if (pos - rk__ld_acquire(&r->cons_head) >= r->slots)
        return -RK_EAGAIN;
    /* prod_tail is informational for a single producer (rk_ring_count) */
    rk__st_relaxed(&r->prod_tail, pos + 1);
    const rk__ring_msg m = {.head = msg, .hlen = len};
    rk__ring_write2(r, pos, &m);
    rk__ring_doorbell(r);
    return 0;
}

bool rk__ring_ready(rk_ring *r) { return rk__ring_ready_at(r, rk__ld_relaxed(&r->cons_head)); }

bool rk__ring_ready_at(rk_ring *r, uint64_t pos)
{
    uint32_t len;
    return rk__ring_there(r, pos, &len);
}

/* Line 0 of the message at pos: 0 and its length in *lenp, -RK_EAGAIN
 * when it is not there, -RK_EPROTO (rk__fail) for a length over the
 * slot's. acquire: pairs with the producer's store-release of the line
 * (rk__ring_write2), as the loads of the other lines do. */
static int rk__ring_line0(rk_ring *r, uint64_t pos, uint32_t flag, uint32_t *lenp)
{
    uint64_t l0 = rk__ld_acquire(rk_ring_slot(r, pos));
    if ((uint32_t)(l0 >> 32) != flag)
        return -RK_EAGAIN;
    *lenp = (uint32_t)l0;
    if (*lenp > rk_ring_msg_max(r))
        return rk__fail(RK_EPROTO, "ring slot %llu claims %u B, the slot holds %u B",
                        (unsigned long long)pos, *lenp, rk_ring_msg_max(r));
    return 0;
}

int rk__ring_complete_at(rk_ring *r, uint64_t pos, uint32_t *lenp)
{
    const uint64_t *slot = rk_ring_slot(r, pos);
    const uint32_t flag = rk_ring_flag(r, pos);
    /* acquire on every line, as rk__ring_peek_at's: what the lines point
     * to is visible to this thread (and, through the claim's lock, to the
     * one that routes them) */
    uint32_t len;
    int rc = rk__ring_line0(r, pos, flag, &len);
    if (rc)
        return rc;
    if (!rk__slot_lines_there(slot, flag, len))
        return -RK_EAGAIN; /* the producer is still writing these lines */
    *lenp = len;
    return 0;
}

int rk_ring_sc_peek(rk_ring *r, void *buf, uint32_t cap, uint32_t *lenp)
{
    /* relaxed: only this consumer writes cons_head */
    return rk__ring_peek_at(r, rk__ld_relaxed(&r->cons_head), buf, cap, lenp);
}

int rk__ring_peek_at(rk_ring *r, uint64_t pos, void *buf, uint32_t cap, uint32_t *lenp)
{
    const uint64_t *slot = rk_ring_slot(r, pos);
    const uint32_t flag = rk_ring_flag(r, pos);
    /* acquire on every line: pairs with the producer's store-release of
     * the same line, so the payload the message points to (arena) is
     * visible once the flags check out */
    uint32_t len;
    int rc = rk__ring_line0(r, pos, flag, &len);
    if (rc)
        return rc;
    if (len > cap)
        return rk__fail(RK_EMSGSIZE, "message of %u B exceeds the %u B buffer", len, cap);
    /* the whole message, then one verdict: every line's flag is folded
     * into `miss` (its high half is 0 when they all match), so the loop has
     * no branch per line; on -RK_EAGAIN buf holds some of it */
    const uint64_t want = (uint64_t)flag << 32;
    uint64_t miss = 0;
    const uint64_t *line = slot + 1;
    uint8_t *out = buf;
    uint32_t n = len;
    for (; n >= 8; n -= 8, out += 8, line += 2) { /* two lines per 8-byte store */
        const uint64_t l0 = rk__ld_acquire(&line[0]);
        const uint64_t l1 = rk__ld_acquire(&line[1]);
        miss |= (l0 ^ want) | (l1 ^ want);
        const uint64_t w = (uint32_t)l0 | (l1 << 32);
        memcpy(out, &w, 8);
    }
    if (n >= 4) {
        const uint64_t l = rk__ld_acquire(&line[0]);
        miss |= l ^ want;
        const uint32_t d = (uint32_t)l;
        memcpy(out, &d, 4);
        n -= 4, out += 4, line++;
    }
    if (n) {
        const uint64_t l = rk__ld_acquire(&line[0]);
        miss |= l ^ want;
        const uint32_t d = (uint32_t)l;
        memcpy(out, &d, n);
    }
    if (miss >> 32)
        return -RK_EAGAIN; /* the producer is still writing some lines */
    *lenp = len;
    return 0;
}

void rk_ring_sc_release(rk_ring *r)
{
    uint64_t pos = rk__ld_relaxed(&r->cons_head);
    /* release: we are done reading the slot; pairs with the producers'
     * load-acquire of cons_head before they overwrite it */
    rk__st_release(&r->cons_head, pos + 1);
}

int rk_ring_sc_dequeue(rk_ring *r, void *buf, uint32_t cap, uint32_t *len)
{
    int rc = rk_ring_sc_peek(r, buf, cap, len);
    if (rc == 0)
        rk_ring_sc_release(r);
    return rc;
}

uint64_t rk_ring_count(const rk_ring *r)
{
    uint64_t head = rk__ld_relaxed(&r->cons_head);
    uint64_t tail = rk__ld_relaxed(&r->prod_tail);
    return tail - head < (uint64_t)r->slots + 1 ? tail - head : 0;
}

void rk_ring_sc_sleep(rk_ring *r, int64_t timeout_ns)
{
    uint32_t seq = rk__ld_acquire(&r->doorbell);
    rk__st_relaxed(&r->cons_sleeping, 1u);
    /* seq_cst: pairs with rk__ring_doorbell's fence (see there) */
    rk__fence_seq_cst();
    if (!rk__ring_ready(r))
        rk__futex_wait(&r->doorbell, seq, timeout_ns);
    rk__st_relaxed(&r->cons_sleeping, 0u);
}
