/* poll_probe.cu - rk-poll-probe: what polling host memory from several
 * warps does to a ping-pong's round trip. It backs device/NOTES.md ("The
 * idle path", 2026-11-26): reads of ONE address from several warps queue
 * behind each other, reads of different addresses overlap.
 *
 * A host thread writes i into c copies of a request (each on its own
 * 256-byte slot) and waits for the GPU to answer i; k warps of one block
 * poll, warp w reading copy w % c with one strong read in flight, its
 * first read s x w cycles after the last answer (+ d). The first warp to
 * see i answers (a shared-memory claim). "wide": each lane reads its 8
 * bytes of the slot, as the ring kernel's idle poll does. "pair": one
 * warp keeps two reads in flight, of copies 0 and 1, s cycles apart, or
 * of copy 0 and copy 0 again ("one address"), or of copy 0 and the same
 * bytes through a second mapping of the same memory ("alias": the host
 * memory is a memfd mapped twice, each mapping registered with CUDA, as
 * the worker registers the runtime's region). "spy": one more warp, of
 * this block or of another (SM), touches a host word nobody else uses s'
 * cycles after each answer or back to back: a read, a relaxed store (as
 * the housekeeper's heartbeat) or a release store (as its publication of
 * cons_head, a system fence on the dispatcher's SM).
 *
 *   rk-poll-probe [round trips per row, default 40000] [host turn ns, default 0]
 *                 [rounds, default 2] [rows whose name holds this]
 *
 * The second argument makes the host wait that long after each answer
 * before its next request, as an API's longer turn does.
 *
 * Exit status 77 without a GPU (as the GPU tests). Not installed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../device/ring.cuh" /* the kernel's strong loads and stores of host memory */
#include "probe.h"

#define CK(x) PROBE_CK("rk-poll-probe", x)

enum { SLOT_WORDS = 64, PONG_WORD = 1024, TIMED_OUT = 1 };
/* "far" copies lie as far apart as the ring kernel's H2D ring and a copy
 * after its reply ring would (2 MiB + 8 KiB) */
enum { FAR_BYTES = (2 << 20) + 8192, FAR_WORDS = FAR_BYTES / 4 };

struct row {
    const char *name;
    int warps, copies, d, s, wide;
    int stride; /* words between copies (0: SLOT_WORDS, 256 B) */
    int lines;  /* wide: the winner also stores this many 8-byte reply lines, as the kernel's echo */
    int pair;   /* 1 warp, 2 copies: a read of each in flight, s cycles apart */
    int spy;    /* a reader of an unrelated host word, once per round trip, spy_s cycles
                 * after the answer (spy_s < 0: back to back, all the time): 1 a warp of
                 * this block, 2 a warp of another block */
    int spy_s;
    int pair_to; /* pair: its second read is of 0 copy 1, 1 copy 0 through the alias, 2 copy 0 */
    int spy_op;  /* what the spy does to its host word: SPY_READ, SPY_STORE (relaxed, as the
                  * housekeeper's heartbeat), SPY_RELEASE (st.release.sys, as its cons_head) */
};
enum { SPY_READ = 0, SPY_STORE = 1, SPY_RELEASE = 2 };

/* the spy's one access to its host word */
__device__ static inline void spy_touch(uint32_t *word, int op, uint32_t v)
{
    if (op == SPY_STORE)
        rk::dev::rk__st_relaxed_sys(word, v);
    else if (op == SPY_RELEASE)
        rk::dev::rk__st_release_sys(word, v);
    else
        (void)rk::dev::rk__ld_relaxed_sys(word);
}
enum { PAIR_COPY = 0, PAIR_ALIAS = 1, PAIR_SAME = 2 };

/* words between the copies of row r (the kernel reads them, the host writes them) */
__host__ __device__ static inline int copy_stride(const row &r) { return r.stride ? r.stride : SLOT_WORDS; }

/* Row r.pair: waits for request i with a read of copy a0 and one of a1 in
 * flight, r.s cycles apart, each issued again as soon as it came back
 * without i (reads of different addresses overlap; of one address they
 * queue). Returns false when the wait ran away. */
__device__ static bool pair_wait(const uint32_t *a0, const uint32_t *a1, uint32_t i, const row &r)
{
    uint32_t va = rk::dev::rk__ld_relaxed_sys(a0);
    const long long t = clock64() + r.s;
    while (clock64() < t)
        ;
    uint32_t vb = rk::dev::rk__ld_relaxed_sys(a1);
    for (long it = 0; it < 20000000; it++) {
        if ((r.wide ? __shfl_sync(0xffffffffu, va, 0) : va) >= i)
            return true;
        va = rk::dev::rk__ld_relaxed_sys(a0);
        if ((r.wide ? __shfl_sync(0xffffffffu, vb, 0) : vb) >= i)
            return true;
        vb = rk::dev::rk__ld_relaxed_sys(a1);
    }
    return false;
}

/* The spy (row.spy): after each answer i (done: shared or global memory),
 * r.spy_s cycles, then one strong access (r.spy_op) of a host word the
 * host neither reads nor writes. */
__device__ static bool spy_loop(uint32_t *word, const volatile uint32_t *done, uint32_t n, const row &r)
{
    if (r.spy_s < 0) { /* back to back until the last answer */
        for (long k = 0; *done < n; k++) {
            spy_touch(word, r.spy_op, (uint32_t)k);
            if (k > 200000000)
                return false;
        }
        return true;
    }
    for (uint32_t i = 1; i <= n; i++) {
        for (long k = 0; *done < i; k++)
            if (k > 200000000)
                return false;
        const long long t = clock64() + r.spy_s;
        while (clock64() < t)
            ;
        spy_touch(word, r.spy_op, i);
    }
    return true;
}

/* n round trips; err[0] = TIMED_OUT when a wait ran away; err[1]: the
 * answers, for a spy in another block */
__global__ void poll_kernel(const uint32_t *ping, const uint32_t *alias, uint32_t *pong, uint32_t n, row r,
                            unsigned *err)
{
    __shared__ uint32_t claim, done;
    __shared__ long long t_answer;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        claim = done = 0;
        t_answer = clock64();
    }
    __syncthreads();
    uint32_t *spy_word = const_cast<uint32_t *>(ping) + FAR_WORDS + 1536;
    if (blockIdx.x == 1 || w == r.warps) { /* the spy */
        if (lane == 0 && !spy_loop(spy_word, blockIdx.x == 1 ? err + 1 : &done, n, r))
            *err = TIMED_OUT;
        return;
    }
    if (!r.wide && lane)
        return;
    const uint32_t *a = ping + (w % r.copies) * copy_stride(r) + (r.wide ? 2 * lane : 0);
    for (uint32_t i = 1; i <= n; i++) {
        const long long start = *(volatile long long *)&t_answer + r.d + (long long)w * r.s;
        while (clock64() < start)
            ;
        if (r.pair) { /* one warp: no claim */
            const uint32_t *a1 = r.pair_to == PAIR_ALIAS ? alias + (a - ping)
                                 : r.pair_to == PAIR_SAME ? a
                                                          : a + copy_stride(r);
            if (!pair_wait(a, a1, i, r)) {
                *err = TIMED_OUT;
                return;
            }
            if (r.wide && lane < (uint32_t)r.lines)
                rk::dev::rk__st_relaxed_sys((uint64_t *)(pong + SLOT_WORDS) + lane, (uint64_t)i << 32 | i);
            if (lane == 0) {
                rk::dev::rk__st_relaxed_sys(pong, i);
                *(volatile long long *)&t_answer = clock64();
            }
            __syncwarp();
            continue;
        }
        for (long it = 0;; it++) {
            uint32_t seen = *(volatile uint32_t *)&done >= i;
            if (r.wide)
                seen = __shfl_sync(0xffffffffu, seen, 0);
            if (seen)
                break;
            if (it > 20000000) {
                *err = TIMED_OUT;
                return;
            }
            uint32_t v = rk::dev::rk__ld_relaxed_sys(a);
            if (r.wide)
                v = __shfl_sync(0xffffffffu, v, 0);
            if (v >= i) {
                uint32_t won = lane == 0 && atomicCAS(&claim, i - 1, i) == i - 1;
                if (r.wide)
                    won = __shfl_sync(0xffffffffu, won, 0);
                if (won && r.wide && lane < (uint32_t)r.lines) /* the reply's lines, beside pong */
                    rk::dev::rk__st_relaxed_sys((uint64_t *)(pong + SLOT_WORDS) + lane, (uint64_t)i << 32 | i);
                if (won && lane == 0) {
                    rk::dev::rk__st_relaxed_sys(pong, i);
                    *(volatile long long *)&t_answer = clock64();
                    __threadfence_block(); /* release: t_answer before done; pairs with the acquire below */
                    atomicExch(&done, i);
                    if (r.spy == 2)
                        atomicExch(err + 1, i);
                }
                break;
            }
        }
        for (long k = 0; *(volatile uint32_t *)&done < i; k++)
            if (k > 200000000) {
                *err = TIMED_OUT;
                return;
            }
        __threadfence_block(); /* acquire: pairs with the winner's release */
    }
}

static int run(const row &r, long count, long turn_ns, uint32_t *hw, uint32_t *dw, const uint32_t *dalias,
               unsigned *err, cudaStream_t s, uint64_t *smp)
{
    const long warm = 10000;
    memset(hw, 0, FAR_BYTES + 8192);
    *err = 0;
    uint32_t *pong = hw + PONG_WORD;
    err[1] = 0;
    const int blocks = r.spy == 2 ? 2 : 1, threads = 32 * (r.warps + (r.spy == 1));
    poll_kernel<<<blocks, threads, 0, s>>>(dw, dalias, dw + PONG_WORD, (uint32_t)(warm + count), r, err);
    CK(cudaGetLastError());
    for (long i = 1; i <= warm + count; i++) {
        if (turn_ns) { /* the host's turn made longer, as an API's */
            const uint64_t te = probe_now_ns() + (uint64_t)turn_ns;
            while (probe_now_ns() < te)
                ;
        }
        const uint64_t t0 = probe_now_ns();
        for (int c = 0; c < r.copies; c++)
            __atomic_store_n(hw + c * copy_stride(r), (uint32_t)i, __ATOMIC_RELEASE);
        for (long spins = 0; __atomic_load_n(pong, __ATOMIC_ACQUIRE) != (uint32_t)i;)
            if ((++spins & 0xffff) == 0 && probe_now_ns() - t0 > 1000000000ull) {
                fprintf(stderr, "rk-poll-probe: %s: no answer to %ld within 1 s\n", r.name, i);
                return 1;
            }
        if (i > warm)
            smp[i - warm - 1] = probe_now_ns() - t0;
    }
    CK(cudaStreamSynchronize(s));
    if (*err) {
        fprintf(stderr, "rk-poll-probe: %s: a wait in the kernel ran away\n", r.name);
        return 1;
    }
    const probe_stats st = probe_row_stats(smp, count);
    printf("  %-34s p50 %5.2f us  p90 %5.2f  p99 %5.2f  late %5.2f %%\n", r.name, st.p50_us, st.p90_us, st.p99_us,
           st.late_pct);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    const long count = argc > 1 ? atol(argv[1]) : 40000;
    const long turn_ns = argc > 2 ? atol(argv[2]) : 0;
    const int rounds = argc > 3 ? atoi(argv[3]) : 2;
    const char *only = argc > 4 ? argv[4] : "";
    if (count < 100 || rounds < 1) {
        fprintf(stderr, "usage: rk-poll-probe [round trips per row, at least 100] [host turn ns, default 0] "
                        "[rounds, default 2] [rows whose name holds this]\n");
        return 2;
    }
    cudaDeviceProp prop;
    cudaStream_t s;
    if (probe_open("rk-poll-probe", &prop, &s))
        return 77;
    /* one memfd mapped twice, both mappings registered: hw and its alias */
    const size_t bytes = FAR_BYTES + 8192;
    const int fd = memfd_create("rk-poll-probe", 0);
    if (fd < 0 || ftruncate(fd, (off_t)bytes)) {
        perror("rk-poll-probe: memfd");
        return 1;
    }
    uint32_t *hw = (uint32_t *)mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void *ha = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (hw == MAP_FAILED || ha == MAP_FAILED) {
        perror("rk-poll-probe: mmap");
        return 1;
    }
    uint32_t *dw, *dalias;
    unsigned *err;
    CK(cudaHostRegister(hw, bytes, cudaHostRegisterMapped));
    CK(cudaHostRegister(ha, bytes, cudaHostRegisterMapped));
    CK(cudaHostGetDevicePointer((void **)&dw, hw, 0));
    CK(cudaHostGetDevicePointer((void **)&dalias, ha, 0));
    CK(cudaMallocManaged(&err, 2 * sizeof *err));
    uint64_t *smp = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);
    static const row rows[] = {
        {"1 warp, at once (the floor's shape)", 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {"1 warp, first read 1000 cycles late", 1, 1, 1000, 0, 0, 0, 0, 0, 0, 0, 0},
        {"2 warps, one word, 900 apart", 2, 1, 0, 900, 0, 0, 0, 0, 0, 0, 0},
        {"4 warps, one word, 600 apart", 4, 1, 0, 600, 0, 0, 0, 0, 0, 0, 0},
        {"4 warps, two copies, 600 apart", 4, 2, 0, 600, 0, 0, 0, 0, 0, 0, 0},
        {"4 warps, four copies, 600 apart", 4, 4, 0, 600, 0, 0, 0, 0, 0, 0, 0},
        {"wide: 1 warp, 1000 cycles late", 1, 1, 1000, 0, 1, 0, 0, 0, 0, 0, 0},
        {"wide: 4 warps, one slot, 600 apart", 4, 1, 0, 600, 1, 0, 0, 0, 0, 0, 0},
        {"wide: 2 warps, two copies, 1200 apart", 2, 2, 0, 1200, 1, 0, 0, 0, 0, 0, 0},
        {"wide: 4 warps, four copies, 600 apart", 4, 4, 0, 600, 1, 0, 0, 0, 0, 0, 0},
        {"wide: 1 warp, 1000 late, 23-line reply", 1, 1, 1000, 0, 1, 0, 23, 0, 0, 0, 0},
        {"wide: 2 warps, two copies, 1200 apart, 23-line reply", 2, 2, 0, 1200, 1, 0, 23, 0, 0, 0, 0},
        {"wide: 2 warps, two far copies, 1200 apart", 2, 2, 0, 1200, 1, FAR_WORDS, 0, 0, 0, 0, 0},
        {"wide: 2 warps, two far copies, 1200 apart, 23-line reply", 2, 2, 0, 1200, 1, FAR_WORDS, 23, 0, 0, 0, 0},
        {"pair: 1 warp, two copies, 600 apart", 1, 2, 0, 600, 0, 0, 0, 1, 0, 0, 0},
        {"wide: 1 warp, 400 late, 23-line reply (the kernel's)", 1, 1, 400, 0, 1, 0, 23, 0, 0, 0, 0},
        {"wide pair: 1 warp, two copies, 900 apart, 23-line reply", 1, 2, 0, 900, 1, 0, 23, 1, 0, 0, 0},
        {"wide pair: 400 late, 900 apart, 23-line reply", 1, 2, 400, 900, 1, 0, 23, 1, 0, 0, 0},
        {"wide pair: 400 late, 600 apart, 23-line reply", 1, 2, 400, 600, 1, 0, 23, 1, 0, 0, 0},
        {"wide: 2 warps, one slot, 900 apart, 23-line reply", 2, 1, 0, 900, 1, 0, 23, 0, 0, 0, 0},
        {"wide: 2 warps, one slot, 1200 apart, 23-line reply", 2, 1, 0, 1200, 1, 0, 23, 0, 0, 0, 0},
        {"wide: 2 warps, one slot, 400 late, 1200 apart, 23-line reply", 2, 1, 400, 1200, 1, 0, 23, 0, 0, 0, 0},
        {"wide: 1 warp, 1000 late, 23-line reply, spy 600", 1, 1, 1000, 0, 1, 0, 23, 0, 1, 600, 0},
        {"wide: 1 warp, 1000 late, 23-line reply, spy 1200", 1, 1, 1000, 0, 1, 0, 23, 0, 1, 1200, 0},
        {"wide: 1 warp, 1000 late, 23-line reply, spy on another SM 600", 1, 1, 1000, 0, 1, 0, 23, 0, 2, 600, 0},
        {"wide: 1 warp, 1000 late, 23-line reply, spy on another SM 1200", 1, 1, 1000, 0, 1, 0, 23, 0, 2, 1200, 0},
        {"wide: 1 warp, 1000 late, 23-line reply, spy back to back", 1, 1, 1000, 0, 1, 0, 23, 0, 1, -1, 0},
        {"wide: 1 warp, 1000 late, 23-line reply, spy back to back, another SM", 1, 1, 1000, 0, 1, 0, 23, 0, 2, -1, 0},
        {"wide: 1 warp, 400 late, 23-line reply, spy back to back", 1, 1, 400, 0, 1, 0, 23, 0, 1, -1, 0},
        {"wide: 1 warp, 400 late, 23-line reply, spy back to back, another SM", 1, 1, 400, 0, 1, 0, 23, 0, 2, -1, 0},
        {"wide pair: 400 late, 600 apart, 23-line reply, one address", 1, 1, 400, 600, 1, 0, 23, 1, 0, 0, PAIR_SAME},
        {"wide pair: 400 late, 600 apart, 23-line reply, alias", 1, 1, 400, 600, 1, 0, 23, 1, 0, 0, PAIR_ALIAS},
        {"wide pair: 400 late, 300 apart, 23-line reply, alias", 1, 1, 400, 300, 1, 0, 23, 1, 0, 0, PAIR_ALIAS},
        {"wide pair: 400 late, 300 apart, 23-line reply", 1, 2, 400, 300, 1, 0, 23, 1, 0, 0, 0},
        {"wide pair: 0 late, 600 apart, 23-line reply, alias", 1, 1, 0, 600, 1, 0, 23, 1, 0, 0, PAIR_ALIAS},
        {"wide: 1 warp, 1000 late, 23-line reply, spy store 100", 1, 1, 1000, 0, 1, 0, 23, 0, 1, 100, 0, SPY_STORE},
        {"wide: 1 warp, 1000 late, 23-line reply, spy release 100", 1, 1, 1000, 0, 1, 0, 23, 0, 1, 100, 0, SPY_RELEASE},
        {"wide: 1 warp, 1000 late, 23-line reply, spy release 900", 1, 1, 1000, 0, 1, 0, 23, 0, 1, 900, 0, SPY_RELEASE},
        {"wide: 1 warp, 1000 late, 23-line reply, spy release 1600", 1, 1, 1000, 0, 1, 0, 23, 0, 1, 1600, 0, SPY_RELEASE},
        {"wide: 1 warp, 1000 late, 23-line reply, spy release 100, another SM", 1, 1, 1000, 0, 1, 0, 23, 0, 2, 100, 0, SPY_RELEASE},
        {"wide: 1 warp, 1000 late, 23-line reply, spy release back to back", 1, 1, 1000, 0, 1, 0, 23, 0, 1, -1, 0, SPY_RELEASE},
        {"wide: 1 warp, 1000 late, 23-line reply, spy store back to back", 1, 1, 1000, 0, 1, 0, 23, 0, 1, -1, 0, SPY_STORE},
    };
    printf("rk-poll-probe: %s, %ld round trips a row, the host's turn +%ld ns\n", prop.name, count, turn_ns);
    for (int round = 0; round < rounds; round++)
        for (const row &r : rows)
            if (strstr(r.name, only) && run(r, count, turn_ns, hw, dw, dalias, err, s, smp))
                return 1;
    free(smp);
    return 0;
}
