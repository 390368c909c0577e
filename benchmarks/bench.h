/* bench.h - shared pieces of rk-bench: latency statistics, the readable
 * table and the JSON record (../shared/design/benchmarks.md format). */
#ifndef RK_BENCH_H
#define RK_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One result row; fields that do not apply stay 0 / NULL. */
typedef struct bench_result {
    char name[64];
    char backend[16];
    /* latency (round trips, ns) */
    uint64_t count;
    double p50_ns, p90_ns, p99_ns, p999_ns, max_ns, min_ns, mean_ns;
    /* throughput / bandwidth */
    double msgs_per_s;
    double gb_per_s;
    /* free-form extra JSON members, e.g. "\"window\": 64" (may be empty) */
    char extra[256];
    /* raw samples (ns) for CDF plots; owned by the result, may be NULL */
    uint32_t *samples;
    size_t n_samples;
} bench_result;

typedef struct bench_report {
    bench_result *results;
    size_t n, cap;
    char device_json[512]; /* the "device" member's value: an object or "null" */
} bench_report;

/* Monotonic clock in ns. */
uint64_t bench_now_ns(void);

/* Sorts samples[0..n) in place and fills count/p50/p90/p99/p999/max/min/mean
 * of r. Keeps up to 200 000 evenly spaced samples in r->samples for plots. */
void bench_latency_stats(bench_result *r, uint64_t *samples, size_t n);

/* Appends a zeroed result named `name` for `backend` and returns it. */
bench_result *bench_add(bench_report *rep, const char *name, const char *backend);

/* Prints the human table to f. */
void bench_print_table(const bench_report *rep, FILE *f);

/* Writes the JSON record to path; returns 0 or -1 (errno set). `mode` is the
 * rk-bench subcommand. Samples are written under "samples_ns" per result
 * when with_samples is non-zero. */
int bench_write_json(const bench_report *rep, const char *path, const char *mode, int with_samples);

void bench_report_free(bench_report *rep);

/* CPU time (user + system) this process has used, in ns (getrusage). */
uint64_t bench_cpu_ns(void);

#ifdef __cplusplus
}
#endif
#endif
