/* bench_clock.c - the clock rk-bench's timed rows read (bench_now_ns).
 *
 * Where the TSC is invariant (x86-64, /proc/cpuinfo's constant_tsc and
 * nonstop_tsc) it reads rdtscp, scaled by a rate measured against
 * CLOCK_MONOTONIC as the run starts and checked again as it ends; else (or
 * with --timer clock) it reads CLOCK_MONOTONIC. Why: on the GPU machine's
 * VMs a clock_gettime took 30-50 ns, and a timed round trip's loop reads
 * the clock twice between seeing one reply and sending the next request,
 * which is the host's turn the kernel's first read waits for
 * (device/README.md, "The host's turn"): the benchmark's own clock made
 * every GPU round trip it timed later than a user's untimed one. */
#include "bench.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static struct {
    int tsc;            /* 1: rdtscp, scaled */
    double ns_per_tick; /* measured against CLOCK_MONOTONIC */
    uint64_t tick0, ns0;
    double read_ns, clock_read_ns; /* what one read costs, each clock */
} g_clock;

uint64_t bench_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
/* rdtscp waits for the instructions before it (the load that saw the
 * reply) to execute, so a stamp is not taken early */
static inline uint64_t tsc_read(void)
{
    uint32_t lo, hi, aux;
    __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
    (void)aux;
    return ((uint64_t)hi << 32) | lo;
}

static int tsc_invariant(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[4096];
    int ok = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "flags", 5)) {
            ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc") && strstr(line, " rdtscp");
            break;
        }
    }
    fclose(f);
    return ok;
}
#else
static inline uint64_t tsc_read(void) { return 0; }
static int tsc_invariant(void) { return 0; }
#endif

uint64_t bench_now_ns(void)
{
    if (g_clock.tsc)
        return g_clock.ns0 + (uint64_t)((double)(tsc_read() - g_clock.tick0) * g_clock.ns_per_tick);
    return bench_clock_ns();
}

/* ns a read of the current clock costs (the mean of 100 000) */
static double read_cost(void)
{
    volatile uint64_t sink = 0; /* (keeps the reads) */
    const uint64_t t0 = bench_clock_ns();
    for (int i = 0; i < 100000; i++)
        sink = bench_now_ns();
    (void)sink;
    return (double)(bench_clock_ns() - t0) / 100000.0;
}

int bench_clock_init(const char *want)
{
    memset(&g_clock, 0, sizeof g_clock);
    g_clock.clock_read_ns = read_cost();
    g_clock.read_ns = g_clock.clock_read_ns;
    if (want && !strcmp(want, "clock"))
        return 0;
    if (want && strcmp(want, "tsc")) {
        fprintf(stderr, "rk-bench: --timer %s: not a timer (tsc or clock)\n", want);
        return -1;
    }
    if (!tsc_invariant()) {
        if (want) {
            fprintf(stderr, "rk-bench: --timer tsc: this CPU's TSC is not invariant (constant_tsc, nonstop_tsc, "
                    "rdtscp in /proc/cpuinfo)\n");
            return -1;
        }
        return 0;
    }
    /* the rate over 20 ms: a clock read's jitter (~0.1 us) is 5e-6 of it */
    const uint64_t n0 = bench_clock_ns(), k0 = tsc_read();
    struct timespec d = {0, 20 * 1000000};
    nanosleep(&d, NULL);
    const uint64_t k1 = tsc_read(), n1 = bench_clock_ns();
    if (k1 <= k0)
        return 0;
    g_clock.ns_per_tick = (double)(n1 - n0) / (double)(k1 - k0);
    g_clock.tick0 = k0;
    g_clock.ns0 = n0;
    g_clock.tsc = 1;
    g_clock.read_ns = read_cost();
    return 0;
}

const char *bench_clock_name(void) { return g_clock.tsc ? "tsc" : "clock_monotonic"; }

double bench_clock_drift(void)
{
    if (!g_clock.tsc)
        return 0.0;
    const uint64_t a = bench_now_ns(), b = bench_clock_ns();
    const double span = (double)(b - g_clock.ns0);
    return span > 0 ? ((double)a - (double)b) / span : 0.0;
}

void bench_clock_json(FILE *f)
{
    fprintf(f, "{\"kind\": \"%s\", \"read_ns\": %.1f, \"clock_gettime_ns\": %.1f", bench_clock_name(),
            g_clock.read_ns, g_clock.clock_read_ns);
    if (g_clock.tsc)
        fprintf(f, ", \"tsc_ghz\": %.4f, \"drift\": %.2e", 1.0 / g_clock.ns_per_tick, bench_clock_drift());
    fprintf(f, "}");
}

void bench_clock_describe(char *buf, size_t cap)
{
    if (g_clock.tsc)
        snprintf(buf, cap, "timer: TSC (%.3f GHz, invariant), a read %.0f ns (clock_gettime %.0f ns)",
                 1.0 / g_clock.ns_per_tick, g_clock.read_ns, g_clock.clock_read_ns);
    else
        snprintf(buf, cap, "timer: clock_gettime(CLOCK_MONOTONIC), a read %.0f ns", g_clock.read_ns);
}
