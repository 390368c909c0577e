/* probe.h - what the GPU probes (rk-poll-probe, rk-reply-probe) share: a
 * CUDA call that must succeed, the clock, and a row's sorted statistics
 * with rk-bench's late share (bench.h BENCH_LATE_NS). Header-only: each
 * probe is one translation unit. */
#ifndef RK_BENCH_PROBE_H
#define RK_BENCH_PROBE_H

#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"

/* A CUDA call that must succeed: else the probe (prog) names it and exits 1. */
#define PROBE_CK(prog, x)                                                                                  \
    do {                                                                                                   \
        cudaError_t e_ = (x);                                                                              \
        if (e_ != cudaSuccess) {                                                                           \
            fprintf(stderr, "%s: %s: %s\n", prog, #x, cudaGetErrorString(e_));                             \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)

static inline uint64_t probe_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The device a probe (prog) runs on: 0 with its properties and a stream,
 * or 77 (the GPU tests' "skipped") without a CUDA device. */
static inline int probe_open(const char *prog, cudaDeviceProp *prop, cudaStream_t *s)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "%s: no CUDA device: skipped\n", prog);
        return 77;
    }
    PROBE_CK(prog, cudaGetDeviceProperties(prop, 0));
    PROBE_CK(prog, cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
    return 0;
}

static int probe_cmp_u64(const void *x, const void *y)
{
    const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

struct probe_stats {
    double p50_us, p90_us, p99_us, p999_us;
    double late_pct; /* % of round trips more than BENCH_LATE_NS over p50 */
};

/* Sorts the n (>= 1) round trips in smp and returns their statistics. */
static inline probe_stats probe_row_stats(uint64_t *smp, long n)
{
    qsort(smp, (size_t)n, sizeof *smp, probe_cmp_u64);
    probe_stats st;
    st.p50_us = (double)smp[n / 2] / 1e3;
    st.p90_us = (double)smp[n * 9 / 10] / 1e3;
    st.p99_us = (double)smp[n * 99 / 100] / 1e3;
    st.p999_us = (double)smp[n * 999 / 1000] / 1e3;
    long late = 0;
    for (long i = 0; i < n; i++)
        late += (double)smp[i] > (double)smp[n / 2] + BENCH_LATE_NS;
    st.late_pct = 100.0 * (double)late / (double)n;
    return st;
}

#endif
