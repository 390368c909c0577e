/* launch_check.c - launch validation for the ring kernel: every classic
 * cooperative-launch failure becomes a distinct code with a sentence that
 * names the value and the limit (architecture.md, "Launch validation"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "launch_check.h"

bool rk__cuda_fake(const char *what)
{
    const char *e = getenv("RK_CUDA_FAKE");
    if (!e || !*e)
        return false;
    size_t n = strlen(what);
    for (const char *p = e; (p = strstr(p, what)); p += n)
        if ((p == e || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return true;
    return false;
}

int rk__cuda_check_device(int device, rk__cuda_limits *lim)
{
    memset(lim, 0, sizeof *lim);
    lim->device = device;
    int drv = 0, rtv = 0;
    cudaRuntimeGetVersion(&rtv);
    if (rk__cuda_fake("nodriver"))
        return rk__fail(RK_ENODRIVER, "no CUDA driver is installed (simulated by RK_CUDA_FAKE=nodriver)");
    cudaError_t e = cudaDriverGetVersion(&drv);
    if (e != cudaSuccess || drv == 0)
        return rk__fail(RK_ENODRIVER, "no CUDA driver is installed (libcuda.so not found; CUDA runtime %d.%d)",
                        rtv / 1000, rtv % 1000 / 10);
    int count = 0;
    e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0))
        return rk__fail(RK_ENODEV, "no CUDA device is visible (driver %d.%d%s)", drv / 1000,
                        drv % 1000 / 10, getenv("CUDA_VISIBLE_DEVICES") ? ", CUDA_VISIBLE_DEVICES is set" : "");
    if (e == cudaErrorInsufficientDriver)
        return rk__fail(RK_ENODRIVER, "CUDA driver %d.%d is older than the CUDA runtime %d.%d librk was built with",
                        drv / 1000, drv % 1000 / 10, rtv / 1000, rtv % 1000 / 10);
    if (e != cudaSuccess)
        return rk__fail(RK_ENODRIVER, "CUDA initialisation failed: %s (%s)", cudaGetErrorString(e),
                        cudaGetErrorName(e));
    if (device < 0 || device >= count)
        return rk__fail(RK_ENODEV, "CUDA device %d does not exist: %d device(s) visible (0..%d)", device,
                        count, count - 1);
    struct cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return rk__fail(RK_ENODEV, "CUDA device %d: cannot read its properties: %s", device,
                        cudaGetErrorString(e));
    snprintf(lim->name, sizeof lim->name, "%.127s", p.name);
    lim->cc_major = p.major;
    lim->cc_minor = p.minor;
    int v = 0;
    cudaDeviceGetAttribute(&lim->sm_count, cudaDevAttrMultiProcessorCount, device);
    cudaDeviceGetAttribute(&lim->max_block_dev, cudaDevAttrMaxThreadsPerBlock, device);
    cudaDeviceGetAttribute(&lim->smem_default, cudaDevAttrMaxSharedMemoryPerBlock, device);
    cudaDeviceGetAttribute(&lim->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    cudaDeviceGetAttribute(&v, cudaDevAttrCooperativeLaunch, device);
    if (!v || rk__cuda_fake("nocoop"))
        return rk__fail(RK_ENOCOOP, "CUDA device %d (%s) does not support cooperative launch%s", device,
                        lim->name, v ? " (simulated by RK_CUDA_FAKE=nocoop)" : "");
    v = 0;
    cudaDeviceGetAttribute(&v, cudaDevAttrCanMapHostMemory, device);
    if (!v)
        return rk__fail(RK_ENOTMAPPED, "CUDA device %d (%s) cannot map host memory", device, lim->name);
    return 0;
}

int rk__cuda_check_config(const rk_kernel_desc *kd, rk__cuda_limits *lim, uint32_t *grid,
                          uint32_t *blockp, uint32_t smem)
{
    int e = kd->attrs(&lim->max_block_kernel, &lim->static_smem, &lim->num_regs);
    if (e)
        return rk__fail(RK_EDEVICE, "ring kernel \"%s\": cudaFuncGetAttributes failed: %s", kd->name,
                        cudaGetErrorString((cudaError_t)e));
    lim->max_smem = lim->smem_optin > (int)lim->static_smem ? (uint32_t)(lim->smem_optin - (int)lim->static_smem) : 0;
    const int wmax = lim->max_block_kernel < lim->max_block_dev ? lim->max_block_kernel : lim->max_block_dev;
    /* 0: the largest block the kernel and the device allow, up to
     * RK_KERNEL_AUTO_BLOCK: its crew reads 128 slots per busy poll (block
     * 256: 30), and pipelined echo through the API needs them (H200,
     * benchmarks/MEASURED.md, "Reply rings: the API at 20 M msg/s") */
    if (*blockp == 0)
        *blockp = (uint32_t)(wmax < (int)RK_KERNEL_AUTO_BLOCK ? wmax : (int)RK_KERNEL_AUTO_BLOCK) & ~31u;
    const uint32_t block = *blockp;
    if (block > (uint32_t)lim->max_block_dev)
        return rk__fail(RK_EBLOCK, "block size %u exceeds the per-block limit %d threads of %s", block,
                        lim->max_block_dev, lim->name);
    if (block > (uint32_t)lim->max_block_kernel)
        return rk__fail(RK_EBLOCK,
                        "block size %u exceeds the ring kernel's own limit %d threads (kernel \"%s\", %d registers per thread)",
                        block, lim->max_block_kernel, kd->name, lim->num_regs);
    if (block < RK_KERNEL_MIN_BLOCK)
        return rk__fail(RK_EBLOCK,
                        "block size %u is below the ring kernel's minimum %u threads (a dispatcher and a housekeeper warp)",
                        block, RK_KERNEL_MIN_BLOCK);
    if (block % 32)
        return rk__fail(RK_EBLOCK, "block size %u is not a multiple of the warp size 32", block);
    if (smem > lim->max_smem)
        return rk__fail(RK_ESMEM,
                        "shared memory %u B exceeds the per-block limit %u B of %s (%d B opt-in minus %zu B the ring kernel declares statically)",
                        smem, lim->max_smem, lim->name, lim->smem_optin, lim->static_smem);
    /* above the default 48 KiB a kernel must opt in; set it either way so a
     * relaunch with less shared memory does not keep a larger carve-out */
    e = kd->set_max_dyn_smem((int)smem);
    if (e)
        return rk__fail(RK_ESMEM, "shared memory %u B: cudaFuncSetAttribute(MaxDynamicSharedMemorySize) failed on %s: %s",
                        smem, lim->name, cudaGetErrorString((cudaError_t)e));
    lim->per_sm = 0;
    e = kd->occupancy(&lim->per_sm, (int)block, smem);
    if (e)
        return rk__fail(RK_EGRID, "occupancy query for block %u, shared memory %u B failed: %s", block, smem,
                        cudaGetErrorString((cudaError_t)e));
    if (lim->per_sm <= 0)
        return rk__fail(RK_EGRID,
                        "not one block of %u threads with %u B shared memory fits on an SM of %s (%d registers per thread)",
                        block, smem, lim->name, lim->num_regs);
    lim->max_grid = (uint32_t)lim->per_sm * (uint32_t)lim->sm_count;
    if (*grid == 0)
        *grid = lim->max_grid;
    if (*grid > lim->max_grid)
        return rk__fail(RK_EGRID,
                        "grid %u blocks exceeds the co-residency limit %u of %s (%d blocks of %u threads with %u B shared memory per SM x %d SMs)",
                        *grid, lim->max_grid, lim->name, lim->per_sm, block, smem, lim->sm_count);
    return 0;
}
