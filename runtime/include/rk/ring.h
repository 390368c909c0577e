/* rk/ring.h - lock-free rings of fixed-size slots in caller-provided memory.
 *
 * One ring carries messages in one direction: host-to-device (H2D: many
 * host producers, one consumer) or device-to-host (D2H: one producer, one
 * host consumer). The same layout is read and written by host code (this
 * header, C11 atomics) and by device code (device/ring.cuh, PTX
 * ld.acquire/st.release at system scope), so it is specified byte for byte
 * here.
 *
 * Layout of the memory given to rk_ring_init (128-byte aligned):
 *
 *   offset   0  rk_ring header (constants, written once by init)
 *   offset 128  prod_tail   u64   next position to reserve. Host-side RMW
 *                                 only (CAS by many host producers, or a
 *                                 plain store by a single producer).
 *   offset 256  cons_head   u64   positions below it are consumed; written
 *                                 only by the consumer (store-release),
 *                                 read by producers (load-acquire).
 *   offset 384  cons_sleeping u32 + doorbell u32: host consumers that
 *                                 sleep raise cons_sleeping (a count: the
 *                                 D2H ring's consumers are many actors)
 *                                 and wait on the doorbell futex (shared,
 *                                 not process-private); producers ring it.
 *                                 A device consumer never sleeps here.
 *   offset 512  slots[slots], each slot_size bytes.
 *
 * Each field the two sides share sits on its own 128-byte line (NCCL's
 * padding) so a producer's writes never invalidate the consumer's line.
 *
 * Slot format ("LL" lines, as NCCL's low-latency protocol): a slot is
 * slot_size / 8 lines of 8 bytes; each line is { u32 data; u32 flag; } and
 * is written with ONE 64-bit store, so data and flag arrive together. The
 * flag of every line of the message at position pos is
 *
 *     rk_ring_flag(pos) = (uint32_t)(pos >> log2(slots)) + 1    (never 0)
 *
 * Line 0's data word is the message length in bytes; lines 1.. carry the
 * message, 4 bytes per line (so a slot holds slot_size / 2 - 4 bytes).
 * A consumer learns "a message is here" and reads it in ONE pass: it loads
 * every line it needs (a warp loads the whole slot in one PCIe round trip),
 * and the message is complete when every needed line carries the expected
 * flag. Lines may become visible in any order; no fence is needed between
 * them, and the consumer never reads prod_tail. Stale lines carry the flag
 * of an older lap and fail the check.
 *
 * Ordering edges (each side's code repeats the pairing in a comment):
 *  - producer: reserve pos (CAS on prod_tail, host only); load-acquire
 *    cons_head so the slot's previous lap is fully read before it is
 *    overwritten (pairs with the consumer's store-release of cons_head);
 *    then store-release each line (orders data the message points to -
 *    arena payloads - before the line; a device producer may instead issue
 *    one release fence and then relaxed line stores).
 *  - consumer: load-acquire the lines (a device consumer: relaxed loads,
 *    then one acquire fence once the flags check out), use the message,
 *    then store-release cons_head = pos + 1.
 *  - free space: a producer may write pos only when pos - cons_head < slots.
 *    Producers keep a cached copy of cons_head and refresh it only when the
 *    cached value says "full" (a device producer pays a PCIe read for it).
 *
 * Positions are free-running u64 counters, masked only on access
 * (pos & (slots - 1)); "full" is pos - head >= slots.
 *
 * Thread-safety: rk_ring_mp_enqueue may be called by any number of threads
 * at once. rk_ring_sp_enqueue assumes one producer at a time. The consumer
 * calls (rk_ring_sc_*) assume one consumer at a time. None of them block.
 */
#ifndef RK_RING_H
#define RK_RING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RK_RING_MAGIC 0x524b5247u /* "RKRG" */
#define RK_RING_ALIGN 128u
#define RK_RING_HDR_BYTES 512u
#define RK_RING_SLOT_MIN 64u
#define RK_RING_SLOT_MAX 4096u
#define RK_RING_SLOTS_MAX (1u << 24)

/* rk_ring.flags: the consumer never sleeps on the doorbell (a device
 * consumer polls), so producers skip the doorbell's seq_cst fence. */
#define RK_RING_F_NO_SLEEP 1u

/* The ring header as it lies in memory. Fields below prod_tail are
 * constants after rk_ring_init; the rest are the shared indices. */
typedef struct rk_ring {
    uint32_t magic;      /* RK_RING_MAGIC once initialised */
    uint32_t slots;      /* power of two */
    uint32_t slot_size;  /* power of two, RK_RING_SLOT_MIN..RK_RING_SLOT_MAX */
    uint32_t order;      /* log2(slots) */
    uint32_t flags;      /* RK_RING_F_*, set by the ring's owner (atomically, relaxed) */
    uint8_t pad0[RK_RING_ALIGN - 20];
    uint64_t prod_tail;  /* offset 128 */
    uint8_t pad1[RK_RING_ALIGN - 8];
    uint64_t cons_head;  /* offset 256 */
    uint8_t pad2[RK_RING_ALIGN - 8];
    uint32_t cons_sleeping; /* offset 384 */
    uint32_t doorbell;
    uint8_t pad3[RK_RING_ALIGN - 8];
    /* offset 512: slots */
} rk_ring;

/* Bytes of memory a ring of `slots` slots of `slot_size` bytes needs, or 0
 * when either is not a power of two in range. */
size_t rk_ring_memsize(uint32_t slots, uint32_t slot_size);

/* Lays a ring out in `mem` (RK_RING_ALIGN-aligned, at least
 * rk_ring_memsize() bytes, owned by the caller, who frees it after the
 * last user is gone). Zeroes the slots. Returns 0 or -RK_EINVAL (with
 * rk_last_detail() naming the bad value). Not thread-safe: initialise
 * before any producer or consumer runs. */
int rk_ring_init(void *mem, size_t memsize, uint32_t slots, uint32_t slot_size);

/* Checks that `mem` holds an initialised ring whose constants are sane
 * (for a ring mapped from another process). Returns 0 or -RK_EPROTO. */
int rk_ring_check(const rk_ring *r, size_t memsize);

/* Largest message, in bytes, one slot carries: slot_size / 2 - 4. */
static inline uint32_t rk_ring_msg_max(const rk_ring *r) { return r->slot_size / 2 - 4; }

/* The flag every line of the message at position pos carries. */
static inline uint32_t rk_ring_flag(const rk_ring *r, uint64_t pos)
{
    return (uint32_t)(pos >> r->order) + 1u;
}

/* Slot of position pos. */
static inline uint64_t *rk_ring_slot(rk_ring *r, uint64_t pos)
{
    return (uint64_t *)((char *)r + RK_RING_HDR_BYTES +
                        (size_t)(pos & (r->slots - 1)) * r->slot_size);
}

/* Multi-producer enqueue of len bytes (len <= rk_ring_msg_max). Never
 * blocks: returns 0, -RK_EAGAIN when the ring is full, -RK_EMSGSIZE when
 * len is too large. Wakes a sleeping host consumer. */
int rk_ring_mp_enqueue(rk_ring *r, const void *msg, uint32_t len);

/* Single-producer enqueue: as above, for a ring with one producer. */
int rk_ring_sp_enqueue(rk_ring *r, const void *msg, uint32_t len);

/* Single-consumer peek: when the message at cons_head is complete, copies
 * it into buf (cap bytes), stores its length in *len and returns 0;
 * -RK_EAGAIN when no complete message is there yet; -RK_EMSGSIZE when cap
 * is too small (the message stays). Does not consume. */
int rk_ring_sc_peek(rk_ring *r, void *buf, uint32_t cap, uint32_t *len);

/* Single-consumer release of the message rk_ring_sc_peek returned. */
void rk_ring_sc_release(rk_ring *r);

/* Peek + release in one call. */
int rk_ring_sc_dequeue(rk_ring *r, void *buf, uint32_t cap, uint32_t *len);

/* Messages reserved but not yet consumed (a snapshot; racy by nature). */
uint64_t rk_ring_count(const rk_ring *r);

/* Consumer-side sleep: waits until a producer rings the doorbell or
 * timeout_ns passes (futex; spurious wake-ups return too). The caller
 * re-checks the ring afterwards. Host consumer only. */
void rk_ring_sc_sleep(rk_ring *r, int64_t timeout_ns);

#ifdef __cplusplus
}
#endif
#endif /* RK_RING_H */
