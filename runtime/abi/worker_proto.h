/* runtime/abi/worker_proto.h - the supervisor <-> worker control protocol.
 *
 * librk (the supervisor) starts the worker program (rk-worker) with the
 * shared region's memfd as fd RK__WORKER_REGION_FD and one end of a
 * SOCK_SEQPACKET socketpair as fd RK__WORKER_CTL_FD. Every control message
 * is one rk__wmsg datagram. The socket is also the worker's lifeline: when
 * the supervisor dies its end closes, the worker reads EOF and exits; when
 * the worker dies the supervisor sees POLLHUP at once.
 *
 *   supervisor                    worker
 *   INIT {backend, device, ...} ->
 *                              <- HELLO {rc, text, device info}  (validated, region
 *                                                                 registered; waiting:
 *                                                                 a warm standby stays here)
 *   GO {gen, ...}               ->  (each reply ring from its prod_tail)
 *                              <- RUNNING {rc, text, info}       (kernel launched /
 *                                                                 CPU loop started)
 *   RELAUNCH {grid, block, smem}->
 *                              <- RELAUNCHED {rc, text, info}
 *   STOP                        ->
 *                              <- STOPPED                        (positions handed back)
 *                              <- FAULT {rc, text}               (any time: a sticky
 *                                                                 error; it then exits)
 *                              <- LOG {level, text}              (any time)
 *
 * Both sides are built from one tree, so the struct is exchanged as is;
 * INIT and HELLO carry RK_ABI_VERSION and a mismatch is refused. */
#ifndef RK_WORKER_PROTO_H
#define RK_WORKER_PROTO_H

#include <stdint.h>

#include "rk_abi.h"

#define RK__WORKER_REGION_FD 3
#define RK__WORKER_CTL_FD 4

enum rk__wmsg_kind {
    RK__WM_INIT = 1,
    RK__WM_HELLO = 2,
    RK__WM_GO = 3,
    RK__WM_RUNNING = 4,
    RK__WM_RELAUNCH = 5,
    RK__WM_RELAUNCHED = 6,
    RK__WM_STOP = 7,
    RK__WM_STOPPED = 8,
    RK__WM_FAULT = 9,
    RK__WM_LOG = 10,
};

enum rk__wbackend { RK__WB_CPU = 1, RK__WB_CUDA = 2 };

/* INIT/GO flags */
enum {
    RK__WF_TEST_FAULTS = 1u << 0, /* serve RK_OP_FAULT / RK_OP_HANG (tests only) */
    RK__WF_BUILTINS_ONLY = 1u << 1, /* CPU: answer every non-built-in op with -RK_EDEVICE */
    /* FAULT: the kernel may still run (a stop gave up on it): the worker is
     * ended and waited for, not abandoned, so that nothing of its kernel
     * runs beside a fresh one (runtime/src/supervisor.c, rk__bury) */
    RK__WF_MAY_RUN = 1u << 2,
};

/* What a CUDA worker learned about its device (HELLO, RUNNING, RELAUNCHED). */
typedef struct rk__wdev {
    char name[128];
    char uuid[48];  /* "GPU-xxxxxxxx-xxxx-...", the per-GPU lock's key */
    int32_t cc_major, cc_minor, sm_count;
    uint32_t grid, block, smem;             /* the configuration in use */
    uint32_t max_grid, max_block, max_smem; /* the device's limits for this kernel */
} rk__wdev;

typedef struct rk__wmsg {
    uint32_t kind;    /* rk__wmsg_kind */
    uint32_t abi;     /* RK_ABI_VERSION (INIT, HELLO) */
    int32_t rc;       /* 0 or a negative RK_E* code */
    uint32_t backend; /* rk__wbackend (INIT) */
    int32_t device;   /* CUDA ordinal (INIT) */
    uint32_t grid, block, smem; /* INIT, GO, RELAUNCH */
    uint32_t flags;   /* RK__WF_* (INIT, GO) */
    uint32_t gen;     /* GO */
    int32_t level;    /* LOG: the line's rk_log_level; INIT: the level to log at */
    uint32_t hb_period_us; /* INIT: how often the consumer stamps the heartbeat */
    rk__wdev dev;
    char text[512];   /* rc != 0: the detail naming value and limit; LOG: the line */
} rk__wmsg;

#ifdef __cplusplus
static_assert(sizeof(rk__wmsg) <= 4096, "one control datagram");
#else
_Static_assert(sizeof(rk__wmsg) <= 4096, "one control datagram");
#endif

#endif
