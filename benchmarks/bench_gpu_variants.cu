/* bench_gpu_variants.cu - `rk-bench gpu`'s experiments, not part of a
 * normal run: the ring kernel's experiment flags (RK_KF_*, kernel_desc.h)
 * on the raw rings and through the runtime API.
 *
 *   --variants       the busy path (serial / pipelined, poll size, prefetch,
 *                    reply store width) and the host threads feeding it
 *   --idle-variants  the idle path's wait after a reply, against the floor */
#include <stdio.h>
#include <stdlib.h>

#include "bench_gpu_internal.h"

/* Experiment (rk-bench gpu --variants): the busy path of the ring kernel
 * (serial / pipelined, poll size, prefetch, reply store width) and the
 * number of host threads feeding and draining the rings. */
int raw_variants(int sm_count)
{
    /* busy-path variants of the ring kernel (kernel_desc.h RK_KF_*), block
     * 1024, and the host threads feeding it */
    static const struct {
        uint32_t flags, P, C;
        const char *what;
    } V[] = {
        {RK_KF_SERIAL, 1, 1, "serial 64-slot polls (the previous default)"},
        {RK_KF_NOPF | RK_KF_KP64, 1, 1, "pipelined, 64 slots, no prefetch"},
        {RK_KF_NOPF, 1, 1, "pipelined, 128 slots, no prefetch"},
        {RK_KF_KP64, 1, 1, "pipelined, 64 slots, prefetch"},
        {0, 1, 1, "pipelined, 128 slots, prefetch (default)"},
        {0, 2, 2, "pipelined, 128 slots, prefetch (default)"},
        {RK_KF_WR_V2, 2, 2, "pipelined, 128 slots, prefetch, 16-byte reply stores"},
        {RK_KF_NARROW, 2, 2, "pipelined, 128 slots, prefetch, 24 of 32 lines read per slot"},
        {RK_KF_SERIAL, 2, 2, "serial 64-slot polls (the previous default)"},
    };
    for (size_t v = 0; v < sizeof V / sizeof V[0]; v++) {
        raw r;
        if (raw_open(&r, 4096, 1 << 20, sm_count, 1024, V[v].flags))
            return 1;
        uint64_t bad = 0;
        double rate = raw_throughput(&r, 8000000, V[v].P, V[v].C, &bad);
        raw_close(&r, "variant");
        printf("  variant flags %2u, %u producers, %u consumers: %6.2f M msg/s (%llu bad)  %s\n", V[v].flags, V[v].P,
               V[v].C, rate / 1e6, (unsigned long long)bad, V[v].what);
        fflush(stdout);
        if (bad)
            return 1;
    }
    return 0;
}

/* rk_actor_call round trips of a 64-byte echo through a CUDA runtime
 * whose kernel runs with the experiment flags kflags (RK_CUDA_KFLAGS) */
static int api_idle_lat(uint64_t *smp, long count, uint32_t kflags)
{
    char fl[32];
    snprintf(fl, sizeof fl, "%u", kflags);
    setenv("RK_CUDA_KFLAGS", fl, 1);
    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = RK_BACKEND_CUDA;
    rk_runtime *rt;
    rk_actor *a;
    CKRK(rk_runtime_open(&rt, &cfg));
    CKRK(rk_actor_open(rt, &a));
    unsetenv("RK_CUDA_KFLAGS");
    if (api_echo_lat(a, smp, count))
        return 1;
    rk_actor_close(a);
    rk_runtime_close(rt);
    return 0;
}

/* Experiment (rk-bench gpu --idle-variants): the idle path of the ring
 * kernel (one 64-B echo at a time, block 256) under the RK_KF_IDLE_* flags,
 * on the raw rings and through rk_actor_call, each against the floor
 * measured in the same process; three rounds, interleaved (the second
 * backwards), so that drift of the host shows. Rows: idle_<flags>_<round>,
 * idle_<flags>_turn<ns>_<round>, api_<flags>_<round>, floor_<round>
 * (floor_3: after the last round). */
int raw_idle_variants(bench_report *rep, int sm_count, long count)
{
    static const struct {
        uint32_t flags;
        int api; /* 0: the raw rings; 1: rk_actor_call */
        const char *what;
        long turn_ns; /* raw rows: host time added between a reply and the next request */
    } V[] = {
        /* RK_KF_READ1_HIST's atomic add after each answer costs the raw loop
         * ~0.1 us (H200): compare its rows with each other, and the
         * RK_KF_STAMP rows with each other */
        {RK_KF_READ1_HIST, 0, "default: one strong poll read, an adaptive wait (least 0) after a reply", 0},
        {RK_KF_READ1_HIST | RK_KF_IDLE_CHAIN, 0, "the echo answered through idle_check (before)", 0},
        {RK_KF_READ1_HIST | RK_KF_IDLE_ONE, 0, "back to the dispatcher loop after each answer (before)", 0},
        {RK_KF_READ1_HIST | RK_KF_IDLE_NOLAT, 0, "adaptive, a slow first read's miss counted too (before)", 0},
        {RK_KF_READ1_HIST | RK_KF_IDLE_DELAY(4), 0, "a fixed wait of 400 cycles (before 2026-11-27)", 0},
        {RK_KF_READ1_HIST | RK_KF_EARLY_FENCE, 0, "the loop's block fences before the next read (before)", 0},
        {RK_KF_READ1_HIST | RK_KF_WAIT_MIN150, 0, "the wait's least 150 cycles (before)", 0},
        {RK_KF_READ1_HIST | RK_KF_EARLY_FENCE | RK_KF_WAIT_MIN150, 0, "early fences, least 150 (before 2026-11-27)", 0},
        {RK_KF_READ1_HIST, 0, "default, the host 300 ns slower to send the next request", 300},
        {RK_KF_READ1_HIST | RK_KF_EARLY_FENCE | RK_KF_WAIT_MIN150, 0, "early fences, least 150, the host 300 ns slower", 300},
        {RK_KF_STAMP, 0, "default, the find -> reply cycles counted", 0},
        {RK_KF_STAMP | RK_KF_IDLE_CHAIN, 0, "through idle_check, the find -> reply cycles counted", 0},
        {RK_KF_GAP, 0, "default, the reply -> next read cycles counted", 0},
        {RK_KF_GAP | RK_KF_IDLE_ONE, 0, "back to the loop after each answer, reply -> next read", 0},
        {RK_KF_GAP | RK_KF_EARLY_FENCE | RK_KF_WAIT_MIN150, 0, "before (early fences, least 150), reply -> next read", 0},
        {0, 1, "rk_actor_call, default (adaptive wait, least 0)", 0},
        {RK_KF_IDLE_ONE, 1, "rk_actor_call, back to the dispatcher loop after each answer (before)", 0},
        {RK_KF_IDLE_DELAY(4), 1, "rk_actor_call, fixed 400 cycles", 0},
        {RK_KF_EARLY_FENCE, 1, "rk_actor_call, the loop's block fences before the next read (before)", 0},
        {RK_KF_WAIT_MIN150, 1, "rk_actor_call, the wait's least 150 cycles (before)", 0},
        {RK_KF_EARLY_FENCE | RK_KF_WAIT_MIN150, 1, "rk_actor_call, early fences, least 150 (before 2026-11-27)", 0},
    };
    const int nv = (int)(sizeof V / sizeof V[0]);
    uint64_t *smp = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)count);
    char name[64];
    for (int round = 0; round < 3; round++) {
        if (floor_lat(smp, count))
            return 1;
        snprintf(name, sizeof name, "floor_%d", round);
        latency_row(rep, name, "cuda", smp, (size_t)count, NULL);
        for (int k = 0; k < nv; k++) {
            const int v = round % 2 ? nv - 1 - k : k; /* odd rounds backwards: no row always first */
            if (V[v].api) {
                if (api_idle_lat(smp, count, V[v].flags))
                    return 1;
                snprintf(name, sizeof name, "api_%u_%d", V[v].flags, round);
            } else {
                raw r;
                if (raw_open(&r, 4096, (size_t)1 << 20, sm_count, 256, V[v].flags))
                    return 1;
                uint64_t hpos = 0, dpos = 0;
                if (raw_echo_lat(&r, &hpos, &dpos, smp, count, false, V[v].turn_ns))
                    return 1;
                if (V[v].turn_ns)
                    snprintf(name, sizeof name, "idle_%u_turn%ld_%d", V[v].flags, V[v].turn_ns, round);
                else
                    snprintf(name, sizeof name, "idle_%u_%d", V[v].flags, round);
                raw_close(&r, name);
            }
            bench_result *b = bench_add(rep, name, "cuda");
            bench_latency_stats(b, smp, (size_t)count);
            printf("  idle variant %-22s p50 %6.3f us  p90 %6.3f  p99 %6.3f  p99.9 %6.3f  late %5.2f %% (a read "
                   "late %4.2f %%)  %s\n", name, b->p50_ns / 1e3, b->p90_ns / 1e3, b->p99_ns / 1e3,
                   b->p999_ns / 1e3, b->late_pct, b->read_late_pct, V[v].what);
        }
    }
    if (floor_lat(smp, count))
        return 1;
    latency_row(rep, "floor_3", "cuda", smp, (size_t)count, NULL); /* after the last round */
    free(smp);
    return 0;
}
