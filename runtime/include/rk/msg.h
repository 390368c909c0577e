/* rk/msg.h - the message format carried by the rings.
 *
 * Shared byte for byte by host code and device code (device/ includes this
 * header too), so it holds only fixed-size types and no pointers: payloads
 * that do not fit a slot live in the data arena and are named by offsets
 * from the arena's base, which means the same message is valid in every
 * address space that maps the arena (host, device, another process).
 */
#ifndef RK_MSG_H
#define RK_MSG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Message types (operations). Types below RK_OP_USER are the library's. */
enum {
    RK_OP_NOP = 0,    /* internal: self-test ping, replied with no payload */
    RK_OP_ECHO = 1,   /* reply = the request's bytes */
    RK_OP_VADD = 2,   /* request = a || b (float32, same length); reply = a + b */
    RK_OP_FAULT = 3,  /* test only (rk_config.test_faults): the worker faults on purpose:
                       * an illegal address on the GPU, SIGSEGV in a CPU worker */
    RK_OP_HANG = 4,   /* test only (rk_config.test_faults): the handler never returns; with a
                       * payload of 4 bytes or more, it returns (an empty reply) after the
                       * milliseconds its first 4 bytes say (host byte order) */
    RK_OP_USER = 256, /* first user-defined type; types are < 65536 */
    RK_OP_MAX = 65535
};

/* rk_msg_hdr.flags */
enum {
    RK_MSG_ARENA = 1u << 0, /* payload in the arena; inline part is rk_arena_ref */
};

/* First 24 bytes of every ring message, request or reply. */
typedef struct rk_msg_hdr {
    uint16_t type;   /* RK_OP_* or a user type */
    uint16_t flags;  /* RK_MSG_* */
    uint16_t actor;  /* sending host actor's index: replies are routed by it */
    uint16_t tag;    /* the actor's pending-request slot */
    uint64_t id;     /* correlation id, echoed in the reply */
    union {
        int32_t status; /* reply: 0 or a negative RK_E* code from the GPU/CPU actor */
        uint32_t gen;   /* request: the worker generation it is for, set by the
                         * runtime (0 on raw rings). A worker serves only its own
                         * generation and drops the rest; after a recovery the
                         * runtime re-posts what it still owes, so nothing runs
                         * twice (runtime/abi/rk_abi.h). */
    };
    uint32_t len;    /* request: payload bytes; reply: reply bytes */
} rk_msg_hdr;

/* Inline part of an RK_MSG_ARENA message (request and reply alike). The
 * request's payload is hdr.len bytes at in_off; the reply is written at
 * out_off, at most out_cap bytes, and its length is the reply's hdr.len.
 * Offsets are multiples of RK_ARENA_ALIGN. */
typedef struct rk_arena_ref {
    uint64_t in_off;
    uint64_t out_off;
    uint64_t out_cap;
} rk_arena_ref;

#define RK_ARENA_ALIGN 256u

#ifdef __cplusplus
}
#endif
#endif /* RK_MSG_H */
