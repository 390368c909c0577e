/* bench_gpu_baselines.cu - `rk-bench gpu`, what the ring kernel is compared
 * with, measured in the same run:
 *
 *   floor                 one GPU thread ping-pongs one word through host-mapped memory
 *   launch_sync           cudaLaunchKernel(empty) + cudaStreamSynchronize
 *   graph_sync            cudaGraphLaunch(one empty kernel) + sync
 *   memcpy_launch_memcpy  64 B cudaMemcpyAsync H2D + kernel + 64 B D2H + sync
 *   pinned_copy           cudaMemcpy of pinned memory: 2 x 64 MiB H2D + 64 MiB D2H
 *   vadd_staged_16777216  the same copies around a vadd kernel (what users do today) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../device/ring.cuh"
#include "bench_gpu_internal.h"

/* ---------------- kernels of the baselines ---------------- */
__global__ void floor_kernel(const uint32_t *ping, uint32_t *pong, uint32_t n)
{
    for (uint32_t i = 1; i <= n; i++) {
        while (rk::dev::rk__ld_relaxed_sys(ping) != i)
            ;
        rk::dev::rk__st_relaxed_sys(pong, i);
    }
}
__global__ void empty_kernel() {}
__global__ void copy64_kernel(const uint4 *in, uint4 *out)
{
    if (threadIdx.x < 4)
        out[threadIdx.x] = in[threadIdx.x];
}
__global__ void vadd_kernel(const float4 *a, const float4 *b, float4 *c, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 x = a[i], y = b[i];
        c[i] = make_float4(__fadd_rn(x.x, y.x), __fadd_rn(x.y, y.y), __fadd_rn(x.z, y.z), __fadd_rn(x.w, y.w));
    }
}

int floor_lat(uint64_t *smp, long count)
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    uint32_t *hw;
    CK(cudaHostAlloc((void **)&hw, 4096, cudaHostAllocMapped));
    memset(hw, 0, 4096);
    uint32_t *dw;
    CK(cudaHostGetDevicePointer((void **)&dw, hw, 0));
    uint32_t *ping = hw, *pong = hw + 32; /* separate 128-B lines */
    const long warm = 20000;
    floor_kernel<<<1, 1, 0, s>>>(dw, dw + 32, (uint32_t)(warm + count));
    CK(cudaGetLastError());
    for (long i = 1; i <= warm + count; i++) {
        uint64_t t0 = bench_now_ns();
        __atomic_store_n(ping, (uint32_t)i, __ATOMIC_RELEASE);
        while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != (uint32_t)i)
            ;
        uint64_t t1 = bench_now_ns();
        if (i > warm)
            smp[i - warm - 1] = t1 - t0;
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaFreeHost(hw));
    cudaStreamDestroy(s);
    return 0;
}

/* launch + sync: launch_sync (nb round trips after 2 000 untimed) */
static int launch_sync(bench_report *rep, cudaStream_t s, uint64_t *smp, long nb)
{
    for (int i = 0; i < 2000; i++)
        empty_kernel<<<1, 1, 0, s>>>();
    CK(cudaStreamSynchronize(s));
    for (long i = 0; i < nb; i++) {
        uint64_t t0 = bench_now_ns();
        empty_kernel<<<1, 1, 0, s>>>();
        cudaStreamSynchronize(s);
        smp[i] = bench_now_ns() - t0;
    }
    CK(cudaGetLastError());
    latency_row(rep, "launch_sync", "cuda", smp, (size_t)nb, NULL);
    return 0;
}

/* graph launch + sync: graph_sync */
static int graph_sync(bench_report *rep, cudaStream_t s, uint64_t *smp, long nb)
{
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    empty_kernel<<<1, 1, 0, s>>>();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 2000; i++)
        cudaGraphLaunch(ge, s);
    CK(cudaStreamSynchronize(s));
    for (long i = 0; i < nb; i++) {
        uint64_t t0 = bench_now_ns();
        cudaGraphLaunch(ge, s);
        cudaStreamSynchronize(s);
        smp[i] = bench_now_ns() - t0;
    }
    CK(cudaGetLastError());
    latency_row(rep, "graph_sync", "cuda", smp, (size_t)nb, NULL);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return 0;
}

/* 64 B memcpy H2D + kernel + 64 B D2H + sync: memcpy_launch_memcpy */
static int memcpy_path(bench_report *rep, cudaStream_t s, uint64_t *smp, long nb)
{
    uint8_t *hin, *hout;
    void *din, *dout;
    CK(cudaHostAlloc((void **)&hin, 64, 0));
    CK(cudaHostAlloc((void **)&hout, 64, 0));
    CK(cudaMalloc(&din, 64));
    CK(cudaMalloc(&dout, 64));
    for (int i = 0; i < 64; i++)
        hin[i] = (uint8_t)i;
    for (long i = -2000; i < nb; i++) {
        uint64_t t0 = bench_now_ns();
        cudaMemcpyAsync(din, hin, 64, cudaMemcpyHostToDevice, s);
        copy64_kernel<<<1, 32, 0, s>>>((const uint4 *)din, (uint4 *)dout);
        cudaMemcpyAsync(hout, dout, 64, cudaMemcpyDeviceToHost, s);
        cudaStreamSynchronize(s);
        if (i >= 0)
            smp[i] = bench_now_ns() - t0;
    }
    CK(cudaGetLastError());
    if (memcmp(hin, hout, 64)) {
        fprintf(stderr, "rk-bench gpu: memcpy path: wrong data\n");
        return 1;
    }
    latency_row(rep, "memcpy_launch_memcpy", "cuda", smp, (size_t)nb, NULL);
    cudaFreeHost(hin);
    cudaFreeHost(hout);
    cudaFree(din);
    cudaFree(dout);
    return 0;
}

/* pinned copies: the same bytes a vadd of 2^24 moves (2 x 64 MiB in,
 * 64 MiB out): pinned_copy; and those copies around a vadd kernel on
 * sm_count x 8 blocks: vadd_staged_16777216 */
static int pinned_copy(bench_report *rep, cudaStream_t s, int sm_count)
{
    float *hab, *hc, *dab, *dc;
    CK(cudaHostAlloc((void **)&hab, 2 * VN * 4, 0));
    CK(cudaHostAlloc((void **)&hc, VN * 4, 0));
    CK(cudaMalloc((void **)&dab, 2 * VN * 4));
    CK(cudaMalloc((void **)&dc, VN * 4));
    for (size_t i = 0; i < 2 * VN; i++)
        hab[i] = (float)(i % 1000) * 0.5f;
    const int R = 10;
    double t[10], th[10], td[10], tv[10];
    for (int k = -1; k < R; k++) {
        uint64_t t0 = bench_now_ns();
        CK(cudaMemcpy(dab, hab, 2 * VN * 4, cudaMemcpyHostToDevice));
        uint64_t t1 = bench_now_ns();
        CK(cudaMemcpy(hc, dc, VN * 4, cudaMemcpyDeviceToHost));
        uint64_t t2 = bench_now_ns();
        if (k >= 0) {
            t[k] = (double)(t2 - t0);
            th[k] = (double)(t1 - t0);
            td[k] = (double)(t2 - t1);
        }
    }
    for (int k = -1; k < R; k++) {
        uint64_t t0 = bench_now_ns();
        cudaMemcpyAsync(dab, hab, 2 * VN * 4, cudaMemcpyHostToDevice, s);
        vadd_kernel<<<sm_count * 8, 256, 0, s>>>((const float4 *)dab, (const float4 *)(dab + VN),
                                                  (float4 *)dc, VN / 4);
        cudaMemcpyAsync(hc, dc, VN * 4, cudaMemcpyDeviceToHost, s);
        CK(cudaStreamSynchronize(s));
        if (k >= 0)
            tv[k] = (double)(bench_now_ns() - t0);
    }
    for (size_t i = 0; i < VN; i += 1009)
        if (hc[i] != hab[i] + hab[VN + i]) {
            fprintf(stderr, "rk-bench gpu: staged vadd wrong at %zu\n", i);
            return 1;
        }
    double tm = median(t, R), thm = median(th, R), tdm = median(td, R), tvm = median(tv, R);
    bench_result *b = bench_add(rep, "pinned_copy", "cuda");
    b->gb_per_s = 3.0 * (double)VN * 4 / tm;
    b->count = R;
    snprintf(b->extra, sizeof b->extra,
             "\"path\": \"cudaMemcpy pinned: 128 MiB H2D then 64 MiB D2H\", \"h2d_gb_per_s\": %.2f, \"d2h_gb_per_s\": %.2f, \"median_ms\": %.3f",
             2.0 * VN * 4 / thm, (double)VN * 4 / tdm, tm / 1e6);
    printf("  %-24s %.1f GB/s (H2D %.1f, D2H %.1f GB/s; %.3f ms)\n", "pinned_copy", b->gb_per_s,
           2.0 * VN * 4 / thm, (double)VN * 4 / tdm, tm / 1e6);
    bench_result *v = bench_add(rep, "vadd_staged_16777216", "cuda");
    v->gb_per_s = 3.0 * (double)VN * 4 / tvm;
    v->count = R;
    snprintf(v->extra, sizeof v->extra,
             "\"path\": \"cudaMemcpyAsync H2D + vadd kernel + D2H + sync, pinned\", \"median_ms\": %.3f", tvm / 1e6);
    printf("  %-24s %.1f GB/s (%.3f ms)\n", "vadd_staged_16777216", v->gb_per_s, tvm / 1e6);
    cudaFreeHost(hab);
    cudaFreeHost(hc);
    cudaFree(dab);
    cudaFree(dc);
    return 0;
}

int baselines_section(bench_report *rep, int sm_count, long count)
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    uint64_t *smp = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);

    /* floor: one spinning GPU thread, one word each way through mapped memory */
    if (floor_lat(smp, count))
        return 1;
    latency_row(rep, "floor", "cuda", smp, (size_t)count,
                "\"path\": \"1 GPU thread, 1 word each way, host-mapped memory\"");
    const long nb = count < 50000 ? count : 50000;
    if (launch_sync(rep, s, smp, nb) || graph_sync(rep, s, smp, nb) || memcpy_path(rep, s, smp, nb) ||
        pinned_copy(rep, s, sm_count))
        return 1;
    free(smp);
    cudaStreamDestroy(s);
    return 0;
}
