/* device/reader.cuh - the reader: the housekeeper warp reads the H2D
 * mirror (rk_abi.h) a little after each idle read the dispatcher makes
 * after a reply, and hands what it read to the dispatcher, which takes it
 * only when its own read missed the request.
 *
 * Why: after a reply the dispatcher's read is placed where ~0.5 % of
 * requests come after it (idle.cuh, idle_adapt), and such a miss cost a
 * whole second read (~1.1 us), because a second read of the same memory
 * queues behind the first (device/NOTES.md, "A second mapping of the same
 * memory is not a copy"). A read of the mirror, other memory, goes out
 * RK_KERNEL_READER_DELAY cycles after the dispatcher's, beside it. The
 * hand-over keeps the dispatcher's path to its first read free of
 * anything but one shared store, and its path after a find free of
 * anything at all: an earlier reader that answered requests itself needed
 * a shared-memory claim there, which cost 670-800 cycles a round trip
 * (device/NOTES.md, "The second reader again, in the ring kernel"). The
 * reader never answers and never writes host memory; what the dispatcher
 * takes from it it checks as it checks its own read (every line's flag).
 *
 * The hand-over, in block 0's shared memory (shared0):
 *  - rd_stamp (dispatcher lane 0 -> reader): a stamp per read, before
 *    the dispatcher's wait: 1 (never 0) | the position's low 24 bits
 *    (the mirror's slot: slots <= 2^24) | the low 39 bits of the clock64
 *    at which the read goes out (one SM: one clock);
 *  - rd_miss (dispatcher lane 0 -> reader): the stamp of a read that
 *    missed; the reader then reads the slot again for the dispatcher, at
 *    once, instead of it (a read of the slot by the dispatcher after
 *    waiting for the mirror's would come later; one while the reader's is
 *    out would queue behind it);
 *  - mir[32], then mir_tag (reader -> dispatcher): the mirror slot's lines
 *    as lane i read line i, then the stamp they were read for; slo[32]
 *    and slot_tag the same for the reader's read of the slot. */
#ifndef RK_DEVICE_READER_CUH
#define RK_DEVICE_READER_CUH

#include <stdint.h>

#include "block0.cuh"
#include "ring.cuh"

namespace rk {
namespace dev {

#ifndef RK_KERNEL_READER_DELAY /* compile-time defines for A/B builds (-Dcuda_args=...) */
#define RK_KERNEL_READER_DELAY 1000u /* cycles after the dispatcher's read (~0.5 us) */
#endif
#ifndef RK_KERNEL_READER_WAIT
#define RK_KERNEL_READER_WAIT 8000u /* cycles the dispatcher waits for the reader at most */
#endif
#ifndef RK_KERNEL_READER_WATCH
#define RK_KERNEL_READER_WATCH 3000u /* cycles the reader looks for a miss while its read is out */
#endif

constexpr uint64_t STAMP_CLOCK = (1ull << 39) - 1ull;

__host__ __device__ constexpr uint64_t reader_stamp_of(uint64_t pos, uint64_t t_go)
{
    return 1ull << 63 | (pos & 0xffffffull) << 39 | (t_go & STAMP_CLOCK);
}
__host__ __device__ constexpr uint32_t stamp_slot(uint64_t stamp, uint32_t mask)
{
    return (uint32_t)(stamp >> 39) & 0xffffffu & mask;
}
/* Cycles from now until the stamp's read time plus delay, 0 when that has
 * passed (the clocks' low 39 bits, ~4.6 minutes at 2 GHz, wrap). */
__host__ __device__ constexpr uint64_t stamp_wait(uint64_t stamp, uint64_t now, uint32_t delay)
{
    return ((stamp + delay - now) & STAMP_CLOCK) < (STAMP_CLOCK >> 1) ? (stamp + delay - now) & STAMP_CLOCK : 0ull;
}

/* The hand-over's words are written and read with atomics, the lines
 * too (32 lanes at once), as block0.cuh's flag words are: so that
 * compute-sanitizer racecheck sees them as synchronisation (volatile
 * words were 10 race errors). Only the arm is on the dispatcher's path
 * to a read, and it lies in the wait before it. */
__device__ __forceinline__ void sh_put(unsigned long long *p, unsigned long long v) { atomicExch(p, v); }
__device__ __forceinline__ unsigned long long sh_get(unsigned long long *p) { return atomicOr(p, 0ull); }

/* ---- the dispatcher's side ---- */

/* Before the wait ahead of an idle read at position pos, going out at
 * clock t_go: lane 0 tells the reader (a plain shared store). Returns the
 * stamp, which the dispatcher's take names. */
__device__ __forceinline__ uint64_t reader_arm(shared0 &sh, uint64_t pos, long long t_go, uint32_t lane)
{
    const uint64_t s = reader_stamp_of(pos, (uint64_t)t_go);
    if (lane == 0)
        sh_put(&sh.rd_stamp, s);
    return s;
}

/* Waits until *tag is stamp (true) or RK_KERNEL_READER_WAIT cycles from
 * t0 have passed (false). Warp-uniform: lane 0 looks, the warp follows. */
__device__ __forceinline__ bool reader_wait_tag(unsigned long long *tag, uint64_t stamp, long long t0, uint32_t lane)
{
    uint32_t seen;
    do {
        seen = lane == 0 && sh_get(tag) == stamp;
        seen = __shfl_sync(FULL, seen, 0);
    } while (!seen && clock64() - t0 < (long long)RK_KERNEL_READER_WAIT);
    if (seen)
        __threadfence_block(); /* acquire: pairs with reader_put's fence before the tag */
    return seen;
}

/* After the dispatcher's own read (stamp) missed: tells the reader, which
 * then reads the slot again for it (the read the dispatcher would have
 * made, as soon), and returns in *a, lane i line i, the mirror's copy if
 * it holds the request (want: line 0's flag), else the slot's second
 * read. False when neither came in RK_KERNEL_READER_WAIT cycles (the
 * reader late, or its reads slow): the dispatcher reads again itself. */
__device__ __forceinline__ bool reader_take(shared0 &sh, uint64_t stamp, uint32_t want, uint32_t lane, uint64_t *a)
{
    if (lane == 0)
        sh_put(&sh.rd_miss, stamp);
    const long long t0 = clock64();
    if (reader_wait_tag(&sh.mir_tag, stamp, t0, lane)) {
        *a = sh_get(&sh.mir[lane]);
        if (__shfl_sync(FULL, (uint32_t)(*a >> 32), 0) == want)
            return true;
    }
    if (!reader_wait_tag(&sh.slot_tag, stamp, t0, lane))
        return false;
    *a = sh_get(&sh.slo[lane]);
    return true;
}

/* ---- the reader's side (the housekeeper warp, housekeeper.cuh) ---- */

/* The stamp the dispatcher left in *w (rd_stamp, rd_miss), the same in
 * every lane. */
__device__ __forceinline__ uint64_t reader_look(unsigned long long *w, uint32_t lane)
{
    uint64_t s = lane == 0 ? sh_get(w) : 0ull;
    return __shfl_sync(FULL, s, 0);
}

/* Stores lane i's line i in lines[], then stamp in *tag. */
__device__ __forceinline__ void reader_put(unsigned long long *lines, unsigned long long *tag, uint64_t a,
                                           uint64_t stamp, uint32_t lane)
{
    sh_put(&lines[lane], a);
    __syncwarp();
    __threadfence_block(); /* release: the lines before the tag; pairs with reader_wait_tag's fence */
    if (lane == 0)
        sh_put(tag, stamp);
    __syncwarp();
}

/* The reader's second read of the slot, for the dispatcher that missed
 * the request with its own (stamp). */
__device__ __forceinline__ void reader_slot(shared0 &sh, const ring_view &in, uint64_t s, uint32_t lane)
{
    const uint64_t *slot = in.base + (size_t)stamp_slot(s, in.mask) * in.slot_lines;
    reader_put(sh.slo, &sh.slot_tag, rk__ld_relaxed_sys(slot + lane), s, lane);
}

/* Serves stamp s: waits for its read time + RK_KERNEL_READER_DELAY and
 * reads the mirror's slot (lane i line i); while that read is out, looks
 * for the dispatcher's miss (RK_KERNEL_READER_WATCH cycles at most), and
 * on one reads the slot again at once (the dispatcher's read is back: a
 * read of it now does not queue behind one). Publishes the mirror's lines,
 * then the slot's. When stop_p is not NULL, lane 0 reads the stop word
 * with the mirror (weak, as the mirror: a strong read, an acquire above
 * all, would hold the slot's read or the watch behind it; the caller
 * reads a stop it sees again with acquire): the housekeeper's own read of
 * host memory rides along, never on its own while stamps come.
 * Returns whether it read the slot, and *stop. */
__device__ __forceinline__ bool reader_serve(shared0 &sh, const uint64_t *mirror, const ring_view &in, uint64_t s,
                                             const uint32_t *stop_p, uint32_t *stop, uint32_t lane)
{
    const long long t = clock64();
    const long long wait = (long long)stamp_wait(s, (uint64_t)t, RK_KERNEL_READER_DELAY);
    while (clock64() - t < wait)
        ;
    /* weak: a strong read would hold the slot's (below) until it is back
     * (strong reads of host memory are not kept in flight together:
     * crew.cuh); LL flags make a weak read safe */
    const uint64_t m = rk__ld_cv(mirror + (size_t)stamp_slot(s, in.mask) * RK__MIRROR_LINES + lane);
    uint32_t st = 0;
    if (stop_p && lane == 0)
        st = rk__ld_cv(stop_p);
    const long long t_m = clock64();
    bool missed;
    do {
        missed = reader_look(&sh.rd_miss, lane) == s;
    } while (!missed && clock64() - t_m < (long long)RK_KERNEL_READER_WATCH);
    uint64_t a = 0;
    if (missed) /* issued before m is used: both reads out together */
        a = rk__ld_relaxed_sys(in.base + (size_t)stamp_slot(s, in.mask) * in.slot_lines + lane);
    reader_put(sh.mir, &sh.mir_tag, m, s, lane);
    if (missed)
        reader_put(sh.slo, &sh.slot_tag, a, s, lane);
    *stop = st;
    return missed;
}

} // namespace dev
} // namespace rk

#endif
