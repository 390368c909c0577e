/* launch_check.h - launch validation of the ring kernel (launch_check.c):
 * every classic cooperative-launch failure as a distinct code. C; talks to
 * the CUDA runtime API; used by the engine (engine.c). */
#ifndef RK_LAUNCH_CHECK_H
#define RK_LAUNCH_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "kernel_desc.h"

/* What validation learns about the device and the kernel. */
typedef struct rk__cuda_limits {
    int device;
    char name[128];
    int cc_major, cc_minor;
    int sm_count;
    int max_block_dev;    /* cudaDevAttrMaxThreadsPerBlock */
    int max_block_kernel; /* cudaFuncGetAttributes().maxThreadsPerBlock */
    int num_regs;
    size_t static_smem;   /* the kernel's static shared memory */
    int smem_default;     /* cudaDevAttrMaxSharedMemoryPerBlock (48 KiB) */
    int smem_optin;       /* cudaDevAttrMaxSharedMemoryPerBlockOptin */
    int per_sm;           /* co-resident blocks per SM for this block/smem */
    uint32_t max_grid;    /* per_sm x sm_count */
    uint32_t max_smem;    /* smem_optin - static_smem */
} rk__cuda_limits;

/* Test hooks (env RK_CUDA_FAKE=nodriver|nocoop|notmapped|mute, comma
 * separated): simulate the machines the GPU machine is not. */
RK__HIDDEN bool rk__cuda_fake(const char *what);

/* Driver, device, cooperative launch. Fills lim's device fields. */
RK__HIDDEN int rk__cuda_check_device(int device, rk__cuda_limits *lim);

/* Block (0 = the largest the kernel and device allow, at most
 * RK_KERNEL_AUTO_BLOCK: *block is set), shared memory, grid (0 = all
 * co-resident blocks: *grid is set) for the kernel kd on the device of lim
 * (check_device first). */
#define RK_KERNEL_AUTO_BLOCK 1024u
RK__HIDDEN int rk__cuda_check_config(const rk_kernel_desc *kd, rk__cuda_limits *lim, uint32_t *grid,
                                     uint32_t *block, uint32_t smem);

#endif
