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
 *  - mir[32], then mir_tag (reader -> dispatcher): the mirror slot's lines
 *    as lane i read line i, then the stamp they were read for. */
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
#define RK_KERNEL_READER_WAIT 5000u /* cycles the dispatcher waits for the reader at most */
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

/* strong shared-memory words of the hand-over: one warp writes, another
 * reads, with no barrier between them */
__device__ __forceinline__ void sh_st(unsigned long long *p, unsigned long long v)
{
    *(volatile unsigned long long *)p = v;
}

/* ---- the dispatcher's side ---- */

/* Before the wait ahead of an idle read at position pos, going out at
 * clock t_go: lane 0 tells the reader (a plain shared store). Returns the
 * stamp, which the dispatcher's take names. */
__device__ __forceinline__ uint64_t reader_arm(shared0 &sh, uint64_t pos, long long t_go, uint32_t lane)
{
    const uint64_t s = reader_stamp_of(pos, (uint64_t)t_go);
    if (lane == 0)
        sh_st(&sh.rd_stamp, s);
    return s;
}

/* After the dispatcher's own read missed: waits (at most
 * RK_KERNEL_READER_WAIT cycles) for the reader's lines of this read
 * (stamp) and returns lane i's line i in *a; false when the reader did
 * not come (its read slow, or it was late): the dispatcher reads again
 * itself. Warp-uniform: lane 0 looks, the warp follows. */
__device__ __forceinline__ bool reader_take(shared0 &sh, uint64_t stamp, uint32_t lane, uint64_t *a)
{
    const long long t0 = clock64();
    uint32_t seen;
    do {
        seen = lane == 0 && vol_ld(&sh.mir_tag) == stamp;
        seen = __shfl_sync(FULL, seen, 0);
    } while (!seen && clock64() - t0 < (long long)RK_KERNEL_READER_WAIT);
    if (!seen)
        return false;
    __threadfence_block(); /* acquire: pairs with the reader's fence before mir_tag */
    *a = vol_ld(&sh.mir[lane]);
    return true;
}

/* ---- the reader's side (the housekeeper warp, housekeeper.cuh) ---- */

/* The stamp the dispatcher left, the same in every lane. */
__device__ __forceinline__ uint64_t reader_look(shared0 &sh, uint32_t lane)
{
    uint64_t s = lane == 0 ? vol_ld(&sh.rd_stamp) : 0ull;
    return __shfl_sync(FULL, s, 0);
}

/* Serves stamp s: waits for its read time + RK_KERNEL_READER_DELAY, reads
 * the mirror's slot (lane i line i), and with it, when stop_p is not NULL,
 * the stop word (lane 0: the housekeeper's own read of host memory rides
 * along, never on its own while the reader may be wanted). Stores the
 * lines, then the tag. Returns the stop word lane 0 read (0 otherwise). */
__device__ __forceinline__ uint32_t reader_serve(shared0 &sh, const uint64_t *mirror, uint32_t mask, uint64_t s,
                                                 const uint32_t *stop_p, uint32_t lane)
{
    const long long t = clock64();
    const long long wait = (long long)stamp_wait(s, (uint64_t)t, RK_KERNEL_READER_DELAY);
    while (clock64() - t < wait)
        ;
    const uint64_t a = rk__ld_relaxed_sys(mirror + (size_t)stamp_slot(s, mask) * RK__MIRROR_LINES + lane);
    uint32_t stop = 0;
    if (stop_p && lane == 0) /* acquire: pairs with the host's store-release of stop */
        stop = rk__ld_acquire_sys(stop_p);
    sh.mir[lane] = a;
    __syncwarp();
    __threadfence_block(); /* release: the lines before the tag; pairs with reader_take's fence */
    if (lane == 0)
        sh_st(&sh.mir_tag, s);
    __syncwarp();
    return stop;
}

} // namespace dev
} // namespace rk

#endif
