/* gpu_common.h - helpers shared by the gpu suite: skip (77) without a GPU,
 * open runtimes, fail loudly. */
#ifndef RK_GPU_COMMON_H
#define RK_GPU_COMMON_H

#ifndef RK_TEST_CPU_ONLY /* (a CPU twin of a gpu test builds without CUDA) */
#include <cuda_runtime_api.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rk/rk.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_RK(rc, what)                                                                         \
    CHECK((rc) == 0, "%s: %s (%s): %s", what, rk_strerror(rc), rk_err_name(rc), rk_last_detail())

#ifndef RK_TEST_CPU_ONLY
/* Exits 77 (skip) when no GPU is usable: no driver (CI), or no device. */
static inline void gpu_require(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        exit(77);
    }
}
#endif

static inline double gpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Small sizes under compute-sanitizer (RK_GPU_QUICK=1): it slows device
 * code 10-100x. */
static inline int gpu_quick(void)
{
    const char *e = getenv("RK_GPU_QUICK");
    return e && *e && *e != '0';
}

/* Opens a runtime of config c; fails the test when it cannot. */
static inline rk_runtime *gpu_open_cfg(const rk_config *c)
{
    rk_runtime *rt = NULL;
    int rc = rk_runtime_open(&rt, c);
    CHECK_RK(rc, c->backend == RK_BACKEND_CUDA ? "open cuda runtime" : "open cpu runtime");
    return rt;
}

static inline rk_runtime *gpu_open(rk_backend_kind kind, size_t arena, size_t max_payload)
{
    rk_config c;
    rk_config_init(&c);
    c.backend = kind;
    if (arena) {
        c.arena_size = arena;
        c.max_payload = max_payload;
    }
    return gpu_open_cfg(&c);
}

#endif
