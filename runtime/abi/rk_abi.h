/* runtime/abi/rk_abi.h - the host/device contract: everything the host
 * side (librk, the worker program) and the device side (the ring kernel)
 * both read or write, byte for byte, and nothing else. Plain C, included
 * by C and by CUDA C++; every layout is pinned by static_asserts, as NCCL
 * pins its shared structs, so a change on one side that the other does not
 * know about fails to compile instead of failing at run time.
 *
 * The shared region is ONE memfd mapping (MAP_SHARED) that the process
 * owning the clients creates and a worker process maps again from an
 * inherited fd; the device sees it through cudaHostRegister(Mapped):
 *
 *   [rk__region header | H2D ring | D2H ring 0 .. D2H ring R-1 | data arena]
 *
 * R reply rings (rk_config.reply_rings, a power of two up to
 * RK__D2H_RINGS_MAX): the reply to a request of actor a goes to D2H ring
 * a & (R - 1) (RK__REPLY_RING), so host threads driving different actors
 * drain different rings and never touch each other's replies. The rings
 * have the same geometry, d2h_stride bytes apart.
 *
 * Offsets, never pointers, cross from one side to another. The ring
 * layout itself is rk/ring.h's; the message header is rk/msg.h's. */
#ifndef RK_ABI_H
#define RK_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "rk/msg.h"

#ifdef __cplusplus
extern "C" {
#define RK__ABI_ASSERT(c, m) static_assert(c, m)
#else
#define RK__ABI_ASSERT(c, m) _Static_assert(c, m)
#endif

#define RK_ABI_VERSION 3u
#define RK__REGION_MAGIC 0x524b5247494f4e33ull /* "RKRGION3" */

/* Reply (D2H) rings: at most this many; the ring of an actor's replies. */
#define RK__D2H_RINGS_MAX 8u
#define RK__REPLY_RING(actor, n_rings) ((uint32_t)(actor) & ((n_rings)-1u))

/* Lines of the running-request table (below). */
#define RK__RUNNING_SLOTS 32u

/* The region header. Each word that one side writes and the other polls
 * sits on its own 128-byte line (NCCL's padding), so a write never
 * invalidates the line the other side is polling. */
typedef struct rk__region {
    uint64_t magic; /* RK__REGION_MAGIC, stored last (release) by the creator */
    uint32_t abi;   /* RK_ABI_VERSION */
    uint32_t pad_a;
    uint64_t size;
    uint64_t h2d_off, d2h_off, arena_off, arena_size;
    uint64_t d2h_stride; /* bytes from one D2H ring to the next */
    uint32_t d2h_rings;  /* reply rings, a power of two in 1..RK__D2H_RINGS_MAX */
    uint8_t pad0[128 - 68];
    /* Consumer -> host, about every 0.2 ms (kernel) or 20 ms (CPU worker)
     * while it runs: a host that sees it stop knows the consumer is dead
     * or wedged. Any monotonic nanosecond clock; only changes matter. */
    uint64_t heartbeat; /* offset 128 */
    uint8_t pad1[120];
    /* Host -> consumer: 1 asks it to return at a message boundary (the
     * kernel finishes the grid jobs it posted first), 2 to give up a wait
     * on the host (reply room nobody makes, a request's lines never
     * finished): the kernel then ends with an error, never by writing
     * past the host (device/block0.cuh, stop_abort_check). */
    uint32_t stop; /* offset 256 */
    uint8_t pad2[124];
    /* Consumer -> host: RK__STATE_*, or a negative RK_E* code on a fault. */
    int32_t state; /* offset 384 */
    uint8_t pad3[124];
    /* Host -> consumer: the generation a request must carry (rk_msg_hdr.gen)
     * to be served. A consumer drops (consumes without a reply) requests of
     * any other generation: after a recovery the host re-posts those it
     * still owes with the new generation, so nothing runs twice. */
    uint32_t gen; /* offset 512 */
    uint8_t pad4[124];
    /* Consumer -> host: the requests it is running now that are not
     * trusted built-ins (user actors, test ops), so that after a fault the
     * host knows which requests are suspects. One word per running slot
     * (RK__RUN_* below), written with one 64-bit store before the handler
     * starts and cleared after its reply is posted. Slot 0: the
     * dispatcher warp (or the CPU worker); 1..16: grid jobs. */
    uint64_t running[RK__RUNNING_SLOTS]; /* offset 640 */
} rk__region;

enum { RK__STATE_INIT = 0, RK__STATE_RUNNING = 1, RK__STATE_STOPPED = 2 };

/* A running-slot word: actor (16) | tag (16) | 1 (running) | id's low 31
 * bits. The host matches it to the pending record (actor, tag) and checks
 * the id bits, so a stale word never names the wrong request. */
#define RK__RUN_BIT 0x80000000ull
#define RK__RUN_WORD(actor, tag, id)                                                               \
    (((uint64_t)(actor) << 48) | ((uint64_t)(tag) << 32) | RK__RUN_BIT | ((uint64_t)(id)&0x7fffffffull))
#define RK__RUN_ACTOR(w) ((uint16_t)((w) >> 48))
#define RK__RUN_TAG(w) ((uint16_t)((w) >> 32))
#define RK__RUN_ID31(w) ((uint32_t)((w)&0x7fffffffu))

RK__ABI_ASSERT(offsetof(rk__region, d2h_stride) == 56 && offsetof(rk__region, d2h_rings) == 64,
               "region: reply rings");
RK__ABI_ASSERT(offsetof(rk__region, heartbeat) == 128, "region: heartbeat line");
RK__ABI_ASSERT(offsetof(rk__region, stop) == 256, "region: stop line");
RK__ABI_ASSERT(offsetof(rk__region, state) == 384, "region: state line");
RK__ABI_ASSERT(offsetof(rk__region, gen) == 512, "region: gen line");
RK__ABI_ASSERT(offsetof(rk__region, running) == 640, "region: running table");
RK__ABI_ASSERT(sizeof(rk__region) == 640 + 8 * RK__RUNNING_SLOTS, "region header size");

/* A ring message as the kernel sees it: 32-bit words, word 0 the length
 * (the LL line 0 data), then rk_msg_hdr, then the payload or an
 * rk_arena_ref. These are the word indices the kernel reads. */
enum {
    RK__W_LEN = 0,      /* message bytes */
    RK__W_TYPE = 1,     /* type (low 16) | flags (high 16) */
    RK__W_ACTOR = 2,    /* actor (low 16) | tag (high 16) */
    RK__W_ID_LO = 3,
    RK__W_ID_HI = 4,
    RK__W_STATUS = 5,   /* reply: status; request: gen */
    RK__W_PLEN = 6,     /* payload bytes (rk_msg_hdr.len) */
    RK__W_PAYLOAD = 7,  /* inline payload, or the rk_arena_ref: */
    RK__W_IN_OFF = 7,   /* in_off lo, hi (8) */
    RK__W_OUT_OFF = 9,  /* out_off lo, hi (10) */
    RK__W_OUT_CAP = 11, /* out_cap lo, hi (12) */
    RK__W_ARENA_END = 13
};
RK__ABI_ASSERT(sizeof(rk_msg_hdr) == 24, "message header: 6 words");
RK__ABI_ASSERT(offsetof(rk_msg_hdr, type) == 4 * (RK__W_TYPE - 1), "word 1: type");
RK__ABI_ASSERT(offsetof(rk_msg_hdr, actor) == 4 * (RK__W_ACTOR - 1), "word 2: actor");
RK__ABI_ASSERT(offsetof(rk_msg_hdr, id) == 4 * (RK__W_ID_LO - 1), "words 3-4: id");
RK__ABI_ASSERT(offsetof(rk_msg_hdr, status) == 4 * (RK__W_STATUS - 1), "word 5: status / gen");
RK__ABI_ASSERT(offsetof(rk_msg_hdr, len) == 4 * (RK__W_PLEN - 1), "word 6: len");
RK__ABI_ASSERT(sizeof(rk_arena_ref) == 4 * (RK__W_ARENA_END - RK__W_IN_OFF), "arena ref: 6 words");

/* Kernel flags (rk_kargs.flags). */
enum {
    RK_KF_MUTE = 1u << 0,        /* test only: never poll H2D (the self-test must time out) */
    RK_KF_TEST_FAULTS = 1u << 7, /* serve the test-only ops (RK_OP_FAULT, RK_OP_HANG) */
};

/* Device scratch (cudaMalloc, zeroed before each launch) the kernel needs. */
#define RK_KERNEL_SCRATCH_BYTES 8192u

/* The ring kernel's one parameter. Every pointer is a device pointer into
 * the registered region, except scratch (device memory). */
typedef struct rk_kargs {
    void *h2d;           /* rk_ring */
    void *d2h;           /* rk_ring: reply ring 0; ring r at d2h + r * d2h_stride */
    uint8_t *arena;      /* data arena */
    uint64_t arena_size;
    rk__region *region;  /* heartbeat, stop, state, running */
    void *scratch;       /* RK_KERNEL_SCRATCH_BYTES of device memory, zeroed */
    uint64_t d2h_stride; /* bytes between reply rings; each ring's first position to
                          * produce is its prod_tail at launch (the host's) */
    uint32_t flags;      /* RK_KF_* */
    uint32_t nan_bits;   /* the host's default NaN (inf - inf), for bit-identical vadd */
    uint32_t gen;        /* the request generation to serve (rk__region.gen) */
    uint32_t d2h_rings;  /* reply rings (a power of two, <= RK__D2H_RINGS_MAX) */
} rk_kargs;
RK__ABI_ASSERT(sizeof(rk_kargs) == 72, "kernel arguments");
RK__ABI_ASSERT(offsetof(rk_kargs, d2h_stride) == 48, "kernel arguments: d2h_stride");
RK__ABI_ASSERT(offsetof(rk_kargs, d2h_rings) == 68, "kernel arguments: d2h_rings");

#undef RK__ABI_ASSERT
#ifdef __cplusplus
}
#endif
#endif /* RK_ABI_H */
