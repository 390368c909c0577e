/* reply_probe.cu - rk-reply-probe: which shape of the GPU's reply makes it
 * reach the host late. It backs device/NOTES.md ("Where the late round
 * trips come from"): the ring kernel's replies are sometimes 0.5-5 us late
 * on the host's side while the floor's one-word replies are late less
 * often. Each row is a ping-pong between one host thread and one GPU warp
 * that differs from the floor in one or two ways:
 *
 *   q, r    request / reply positions the round trips walk over (256-byte
 *           slots, as the rings'; 1: one fixed word, as the floor)
 *   lines   8-byte reply lines, one a lane (the ring's 64-B echo: 24)
 *   gap     cycles from the reply's stores to the next poll read (the ring
 *           kernel's idle path: ~1 950)
 *   push    a read of another host word right after the reply
 *   dup     the reply goes to a second allocation too; the host takes
 *           whichever copy it sees first
 *   noise   1: a second block reads a host word back to back meanwhile;
 *           2: every other SM runs a block that polls device memory with
 *           __nanosleep (as the ring kernel's idle workers)
 *   wide    the poll reads the slot as the ring kernel's idle poll does
 *
 * It prints p50, p99 and the late share (round trips more than 600 ns over
 * the row's p50, as rk-bench's late_pct), rows interleaved over rounds.
 *
 *   rk-reply-probe [round trips per row, default 100000] [rounds, default 2]
 *
 * Exit status 77 without a GPU (as the GPU tests). Not installed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../device/ring.cuh" /* the kernel's strong loads and stores of host memory */
#include "probe.h"

#define CK(x) PROBE_CK("rk-reply-probe", x)

enum { SLOT_U64 = 32, MAX_SLOTS = 16384 };
/* each of ping, pong, pong2: the most slots a row walks, 256 B each */
static const size_t RING_BYTES = (size_t)MAX_SLOTS * SLOT_U64 * sizeof(uint64_t);

struct row {
    const char *name;
    int q, r, lines, gap, push, dup, noise;
    int wide; /* 1: every lane reads its 8 bytes of the request slot, as the
               * ring kernel's idle poll; 2: and lane 0 line 0 of the next
               * slot (its burst check, a weak .cv read) */
};

struct bufs {
    uint64_t *ping, *pong, *pong2, *misc; /* host views */
    uint64_t *dping, *dpong, *dpong2, *dmisc;
};

__device__ static inline void spin_cycles(long long n)
{
    const long long t0 = clock64();
    while (clock64() - t0 < n)
        ;
}

/* block 0, warp 0 serves n round trips; the other blocks (noise) read
 * misc[0] (noise 1) or nap (noise 2) until block 0 is done (done: device
 * memory) */
__global__ void reply_kernel(const uint64_t *ping, uint64_t *pong, uint64_t *pong2, const uint64_t *misc, uint32_t n,
                             row rw, unsigned *done)
{
    const uint32_t lane = threadIdx.x % 32;
    if (blockIdx.x > 0) {
        if (lane == 0 && rw.noise == 1)
            while (!*(volatile unsigned *)done)
                (void)rk::dev::rk__ld_relaxed_sys(misc);
        if (lane == 0 && rw.noise == 2)
            while (!*(volatile unsigned *)done)
                __nanosleep(1000);
        return;
    }
    for (uint32_t i = 1; i <= n; i++) {
        const uint64_t *q = ping + (size_t)((i - 1) % (uint32_t)rw.q) * SLOT_U64;
        if (rw.wide) {
            const uint64_t *nx = ping + (size_t)(i % (uint32_t)rw.q) * SLOT_U64;
            for (;;) {
                const uint64_t a = rk::dev::rk__ld_relaxed_sys(q + lane);
                if (rw.wide == 2 && lane == 0)
                    (void)rk::dev::rk__ld_cv(nx);
                if (__shfl_sync(0xffffffffu, a, 0) == i)
                    break;
            }
        } else if (lane == 0) {
            while (rk::dev::rk__ld_relaxed_sys(q) != i)
                ;
        }
        __syncwarp();
        const size_t ro = (size_t)((i - 1) % (uint32_t)rw.r) * SLOT_U64;
        const uint64_t v = (uint64_t)i << 32 | lane;
        if (lane < (uint32_t)rw.lines) {
            rk::dev::rk__st_relaxed_sys(pong + ro + lane, v);
            if (rw.dup)
                rk::dev::rk__st_relaxed_sys(pong2 + ro + lane, v);
        }
        if (rw.push && lane == 0)
            (void)rk::dev::rk__ld_relaxed_sys(misc + SLOT_U64);
        if (rw.gap)
            spin_cycles(rw.gap);
        __syncwarp();
    }
    if (lane == 0) {
        __threadfence();
        *(volatile unsigned *)done = 1;
    }
}

/* Waits for reply i at slot offset ro: line 0 of either copy (dup), then
 * every line of that copy. Returns the copy it took, or -1 after 1 s. */
static int wait_reply(const row &rw, const bufs &b, size_t ro, uint32_t i, uint64_t t0)
{
    const uint64_t want = (uint64_t)i << 32;
    const uint64_t *c[2] = {b.pong + ro, b.pong2 + ro};
    int k = 0;
    for (long spins = 0;; spins++) {
        if (__atomic_load_n(c[0], __ATOMIC_ACQUIRE) == want) {
            k = 0;
            break;
        }
        if (rw.dup && __atomic_load_n(c[1], __ATOMIC_ACQUIRE) == want) {
            k = 1;
            break;
        }
        if ((spins & 0xffff) == 0xffff && probe_now_ns() - t0 > 1000000000ull)
            return -1;
    }
    for (int l = 1; l < rw.lines; l++)
        while (__atomic_load_n(c[k] + l, __ATOMIC_ACQUIRE) != (want | (uint64_t)l))
            if (probe_now_ns() - t0 > 1000000000ull)
                return -1;
    return k;
}

static int run(const row &rw, int sms, long count, const bufs &b, unsigned *done /* device */, cudaStream_t s,
               uint64_t *smp)
{
    const long warm = 10000;
    memset(b.ping, 0, RING_BYTES);
    memset(b.pong, 0, RING_BYTES);
    memset(b.pong2, 0, RING_BYTES);
    const int blocks = rw.noise == 2 ? sms : rw.noise ? 2 : 1;
    reply_kernel<<<blocks, 32, 0, s>>>(b.dping, b.dpong, b.dpong2, b.dmisc, (uint32_t)(warm + count), rw, done);
    CK(cudaGetLastError());
    long second = 0;
    for (long i = 1; i <= warm + count; i++) {
        const uint64_t t0 = probe_now_ns();
        __atomic_store_n(b.ping + (size_t)((i - 1) % rw.q) * SLOT_U64, (uint64_t)i, __ATOMIC_RELEASE);
        const int k = wait_reply(rw, b, (size_t)((i - 1) % rw.r) * SLOT_U64, (uint32_t)i, t0);
        if (k < 0) {
            fprintf(stderr, "rk-reply-probe: %s: no reply to %ld within 1 s\n", rw.name, i);
            return 1;
        }
        if (i > warm) {
            smp[i - warm - 1] = probe_now_ns() - t0;
            second += k;
        }
    }
    CK(cudaStreamSynchronize(s));
    const probe_stats st = probe_row_stats(smp, count);
    printf("  %-44s p50 %5.2f us  p99 %5.2f  p99.9 %6.2f  late %5.2f %%", rw.name, st.p50_us, st.p99_us, st.p999_us,
           st.late_pct);
    if (rw.dup)
        printf("  (second copy first: %.2f %%)", 100.0 * second / count);
    printf("\n");
    fflush(stdout);
    return 0;
}

static uint64_t *host_alloc(uint64_t **dev, size_t bytes)
{
    uint64_t *h;
    CK(cudaHostAlloc((void **)&h, bytes, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)dev, h, 0));
    memset(h, 0, bytes);
    return h;
}

int main(int argc, char **argv)
{
    const long count = argc > 1 ? atol(argv[1]) : 100000;
    const int rounds = argc > 2 ? atoi(argv[2]) : 2;
    if (count < 1000 || rounds < 1) {
        fprintf(stderr, "usage: rk-reply-probe [round trips per row, at least 1000] [rounds, at least 1]\n");
        return 2;
    }
    cudaDeviceProp prop;
    cudaStream_t s;
    if (probe_open("rk-reply-probe", &prop, &s))
        return 77;
    bufs b;
    b.ping = host_alloc(&b.dping, RING_BYTES);
    b.pong = host_alloc(&b.dpong, RING_BYTES);
    b.pong2 = host_alloc(&b.dpong2, RING_BYTES);
    b.misc = host_alloc(&b.dmisc, 4096);
    unsigned *done;
    CK(cudaMalloc((void **)&done, sizeof *done));
    uint64_t *smp = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);
    /* name, q, r, lines, gap, push, dup, noise, wide */
    static const row rows[] = {
        {"floor: one word each way", 1, 1, 1, 0, 0, 0, 0, 0},
        {"floor, gap 1950", 1, 1, 1, 1950, 0, 0, 0, 0},
        {"24 lines, one slot", 1, 1, 24, 0, 0, 0, 0, 0},
        {"24 lines, one slot, gap 1950", 1, 1, 24, 1950, 0, 0, 0, 0},
        {"1 line, reply walks 4096 slots", 1, 4096, 1, 0, 0, 0, 0, 0},
        {"ring-like: 4096 slots, 24 lines, gap 1950", 4096, 4096, 24, 1950, 0, 0, 0, 0},
        {"ring-like, 1 line", 4096, 4096, 1, 1950, 0, 0, 0, 0},
        {"ring-like, gap 0", 4096, 4096, 24, 0, 0, 0, 0, 0},
        {"ring-like, 64 slots", 64, 64, 24, 1950, 0, 0, 0, 0},
        {"ring-like, 16384 slots", 16384, 16384, 24, 1950, 0, 0, 0, 0},
        {"ring-like, push read", 4096, 4096, 24, 1950, 1, 0, 0, 0},
        {"ring-like, dup", 4096, 4096, 24, 1950, 0, 1, 0, 0},
        {"floor, noise block", 1, 1, 1, 0, 0, 0, 1, 0},
        {"ring-like, noise block", 4096, 4096, 24, 1950, 0, 0, 1, 0},
        {"ring-like, wide poll", 4096, 4096, 24, 1950, 0, 0, 0, 1},
        {"ring-like, wide poll + next line", 4096, 4096, 24, 1950, 0, 0, 0, 2},
        {"ring-like, wide + next, a block per SM", 4096, 4096, 24, 1950, 0, 0, 2, 2},
        {"ring-like, wide + next, gap 400", 4096, 4096, 24, 400, 0, 0, 0, 2},
    };
    printf("rk-reply-probe: %s, %ld round trips a row, %d rounds\n", prop.name, count, rounds);
    for (int round = 0; round < rounds; round++)
        for (const row &rw : rows) {
            CK(cudaMemsetAsync(done, 0, sizeof *done, s));
            if (run(rw, prop.multiProcessorCount, count, b, done, s, smp))
                return 1;
        }
    free(smp);
    return 0;
}
