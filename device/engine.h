/* device/engine.h - the CUDA engine: everything that calls CUDA to run the
 * ring kernel on a shared region (validate the device and the launch,
 * register the region mapped, launch, watch, stop, relaunch). Plain C.
 *
 * It lives in two places and never in librk itself (librk links no CUDA
 * library): linked into the worker program (device/worker.c), the default;
 * and built as a module (rk-cuda.so) that librk loads on demand for the
 * in-process mode (rk_config.isolation = RK_ISOLATION_NONE), whose one
 * exported symbol is `rk_cuda_engine` (an rk__engine_api).
 *
 * Errors are a negative RK_E* code plus a sentence in `err` naming the
 * value and the limit. Not thread-safe: one owner per engine. */
#ifndef RK_ENGINE_H
#define RK_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "kernel_desc.h"
#include "rk_abi.h"
#include "worker_proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RK_ENGINE_ABI 2u

typedef struct rk__engine rk__engine;

typedef struct rk__engine_cfg {
    int device;
    uint32_t grid, block, smem;   /* grid 0: every co-resident block */
    uint32_t kflags;              /* RK_KF_* */
    const rk_kernel_desc *kernel; /* NULL: the built-in kernel */
    int64_t hb_deadline_ns;       /* unused by the engine; the watcher's */
} rk__engine_cfg;

typedef struct rk__engine_api {
    uint32_t abi;  /* RK_ENGINE_ABI */
    uint32_t size; /* sizeof(rk__engine_api) */
    /* Validates the device and cfg, registers the whole region mapped and
     * sets up what a launch needs; fills *dev. Nothing runs yet. */
    int (*open)(rk__engine **out, const rk__engine_cfg *cfg, rk__region *region, size_t region_size,
                rk__wdev *dev, char *err, size_t errcap);
    /* Launches the ring kernel for generation gen (producing each reply
     * ring from its prod_tail), with cfg's (or the last relaunch's)
     * configuration, or with grid/block/smem when block != 0; waits until
     * it runs. */
    int (*launch)(rk__engine *e, uint32_t gen, uint32_t grid, uint32_t block,
                  uint32_t smem, rk__wdev *dev, char *err, size_t errcap);
    /* 0 while the kernel runs; 1 when it returned; a negative code (and the
     * CUDA error in err) when it faulted. Never blocks. */
    int (*poll)(rk__engine *e, char *err, size_t errcap);
    /* Stops the kernel at a message boundary; its positions go back to the
     * rings (queued requests stay for the next kernel). */
    int (*halt)(rk__engine *e, char *err, size_t errcap);
    /* Validates a new configuration, then halts and launches with it; an
     * invalid one changes nothing. */
    int (*relaunch)(rk__engine *e, uint32_t grid, uint32_t block, uint32_t smem, rk__wdev *dev, char *err,
                    size_t errcap);
    void (*close)(rk__engine *e);
} rk__engine_api;

/* The engine as linked into the worker; the module exports the same table
 * as `rk_cuda_engine`. */
extern const rk__engine_api rk__engine_v1;

#ifdef __cplusplus
}
#endif
#endif
