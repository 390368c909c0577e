/* device/kernel_desc.h - what the host side (runtime/src/cuda) knows about a
 * ring kernel: its launch arguments and a descriptor with the entry points
 * compiled in the kernel's own translation unit. Plain C.
 *
 * Every ring kernel (the library's built-in one, or one a user instantiates
 * with RK_GPU_ACTOR_HANDLE in their own .cu, device/actor.cuh) exports one
 * rk_kernel_desc. The CUDA backend launches, sizes and validates the kernel
 * only through it, so the CUDA runtime calls that touch the kernel function
 * run in the module (and CUDA runtime instance) that registered it. */
#ifndef RK_KERNEL_DESC_H
#define RK_KERNEL_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "rk_abi.h" /* rk_kargs, RK_KF_MUTE / RK_KF_TEST_FAULTS, the region */

#ifdef __cplusplus
extern "C" {
#endif

#define RK_KDESC_MAGIC 0x524b4b44u /* "RKKD" */
#define RK_KDESC_VERSION 2u /* 2: features */
#define RK_KDESC_MAX_TYPES 32
/* Where the dispatcher's counters lie in the scratch (8 x u64; rk-bench). */
#define RK_KERNEL_STATS_OFFSET (128u + 128u + 128u + 16u * 64u)
/* ... and the idle wait it came to, cycles (u64, after them). */
#define RK_KERNEL_IDLE_WAIT_OFFSET (RK_KERNEL_STATS_OFFSET + 8u * 8u)
/* ... and with RK_KF_READ1_HIST (experiments build) a histogram (u32
 * [RK_READ1_ROWS][RK_READ1_BINS], after it): the first read's cycles after
 * an idle-path reply, RK_READ1_BIN cycles a bin (the last: all above), for
 * polls that took 1, 2 (counted as a miss), 2 (its first read slow: not
 * counted), 3+ reads. */
#define RK_KERNEL_READ1_HIST_OFFSET (RK_KERNEL_IDLE_WAIT_OFFSET + 8u)
#define RK_READ1_ROWS 4u
#define RK_READ1_BINS 48u
#define RK_READ1_BIN 128u
/* The ring kernel's smallest block: a dispatcher warp and a housekeeper warp. */
#define RK_KERNEL_MIN_BLOCK 64u

/* rk_kargs.flags. RK_KF_MUTE is a test hook every kernel honours; the
 * others are experiment / comparison switches (rk-bench gpu --variants,
 * --idle-variants) that only a kernel built with experiments honours
 * (meson -Dkernel_experiments=true, device/experiments.cuh; its descriptor
 * then has RK_KDESC_F_EXPERIMENTS): any other kernel ignores them. */
enum {
    RK_KF_WR_V2 = 1u << 1, /* experiment: crew replies with 16-byte stores (two lines per lane) */
    RK_KF_SERIAL = 1u << 2, /* comparison: the serial busy path (64-slot polls, load then reply) */
    RK_KF_NOPF = 1u << 3,   /* comparison: pipelined busy path without the next poll's prefetch */
    RK_KF_KP64 = 1u << 4,   /* comparison: pipelined busy polls of at most 64 slots (default 128) */
    RK_KF_NARROW = 1u << 5, /* experiment: pipelined polls read lines 0..23 of a slot (an 88-byte
                             * message's 23), the rest only for a message that needs them */
    /* the idle path (one message answered from the dispatcher's registers) */
    RK_KF_IDLE_SC = 1u << 6,  /* comparison: weak reply lines + fence.sc.sys (the path before
                               * 2026-11; default: st.relaxed.sys reply lines, no fence) */
    RK_KF_STAMP = 1u << 8,    /* measure: cycles from the idle poll's find to its echo reply's
                               * stores, summed in the dispatcher's counter 3 (rk-bench prints
                               * them per message) */
    RK_KF_IDLE_NOLAT = 1u << 9, /* comparison: the adaptive wait steps up on every second-read
                                 * find, its first read slow or not (before 2026-11-27) */
    RK_KF_READ1_HIST = 1u << 10, /* measure: the first read's cycles after each idle-path reply,
                                  * by the reads the poll took (scratch, RK_KERNEL_READ1_HIST_OFFSET) */
    RK_KF_IDLE_CHAIN = 1u << 11, /* comparison: the idle poll answers an echo/NOP only through
                                  * idle_check (before 2026-11-27; default: echo_fast first) */
    RK_KF_EARLY_FENCE = 1u << 12, /* comparison: after an idle answer, the dispatcher loop's two
                                   * block fences (h2d_done's publish, the stop check) before the
                                   * next poll read (before 2026-11-27; default: once it is out,
                                   * idle.cuh after_read); implies RK_KF_IDLE_ONE */
    RK_KF_WAIT_MIN150 = 1u << 13, /* comparison: the adaptive idle wait's least 150 cycles (before
                                   * 2026-11-27; default: IDLE_WAIT_MIN, 0) */
    RK_KF_GAP = 1u << 14, /* measure: cycles from an echo_fast answer's stores to the next poll's
                           * first read (its wait included), summed in the dispatcher's counter 3
                           * (instead of RK_KF_STAMP's) */
    RK_KF_IDLE_ONE = 1u << 15, /* comparison: idle_poll returns to the dispatcher loop after each
                                * answer (before 2026-11-27; default: it polls the next slot
                                * itself while nothing else waits) */
};
/* comparison: after an idle-path reply, wait (flags >> 16 & 0xff) x 100 cycles before the
 * next poll read (0: the default, RK_KERNEL_IDLE_DELAY in dispatch.cuh; 0xff: none) */
#define RK_KF_IDLE_DELAY(x) ((uint32_t)(x) << 16)


typedef struct rk_kernel_desc {
    uint32_t magic;   /* RK_KDESC_MAGIC */
    uint32_t version; /* RK_KDESC_VERSION */
    const char *name;
    uint32_t n_types; /* user message types this kernel serves on the GPU */
    uint16_t types[RK_KDESC_MAX_TYPES];
    /* The entry points return a cudaError_t as int (0 = success). */
    int (*launch)(const rk_kargs *args, unsigned grid, unsigned block, unsigned smem, void *stream);
    int (*attrs)(int *max_threads, size_t *static_smem, int *num_regs);
    int (*occupancy)(int *blocks_per_sm, int block, size_t dyn_smem);
    int (*set_max_dyn_smem)(int bytes);
    uint32_t features; /* RK_KDESC_F_* (version 2) */
} rk_kernel_desc;

/* rk_kernel_desc.features */
enum {
    /* the kernel was compiled with its experiment switches (RK_KF_* other than
     * RK_KF_MUTE); without it, it ignores them */
    RK_KDESC_F_EXPERIMENTS = 1u << 0,
};

/* The library's kernel: echo, vadd, the test-only fault, the self-test NOP. */
extern const rk_kernel_desc rk_builtin_kernel;

#ifdef __cplusplus
}
#endif
#endif
