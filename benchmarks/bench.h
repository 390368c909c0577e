/* bench.h - shared pieces of rk-bench: latency statistics, the readable
 * table, the JSON record (format: benchmarks/results/README.md) and the
 * end of a run (normal, failed or interrupted by Ctrl-C). */
#ifndef RK_BENCH_H
#define RK_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One result row. The measured values start as BENCH_NONE (a NaN: "not
 * measured"); only what a row measured is printed and written (see
 * bench_has). count 0 means "no count". */
#define BENCH_LATE_NS 600.0
/* ... and of those, the ones one PCIe poll read late (p50 + 1.0 to + 1.8
 * us: the request missed the kernel's first read; the rest are replies
 * that reached the host late, by any amount) */
#define BENCH_READ_LATE_LO_NS 1000.0
#define BENCH_READ_LATE_HI_NS 1800.0
/* latency rows: late_pct is also given per block of count / 20 round trips */
#define BENCH_LATE_BLOCKS 20

typedef struct bench_result {
    char name[64];
    char backend[16];
    /* round trips (latency rows) or messages / repetitions (the others) */
    uint64_t count;
    /* latency (round trips, ns) */
    double p50_ns, p90_ns, p99_ns, p999_ns, max_ns, min_ns, mean_ns;
    /* latency rows: % of round trips more than BENCH_LATE_NS over the row's
     * p50 (on the GPU: those whose request or reply was a PCIe read time
     * late; device/NOTES.md, "Where the late round trips come from") */
    double late_pct;
    double read_late_pct; /* % in [p50 + BENCH_READ_LATE_LO_NS, p50 + _HI_NS) */
    /* late_pct of each twentieth of the round trips, in the order they
     * were measured (JSON "late_pct_by_block"): a bad minute shows as a
     * few blocks, a steady share as all of them; NaN when not measured */
    double late_by_block[BENCH_LATE_BLOCKS];
    /* throughput / bandwidth / CPU use */
    double msgs_per_s;
    double gb_per_s;
    double cpu_percent; /* of one core; JSON "cpu_percent_of_a_core" */
    /* free-form extra JSON members, e.g. "\"window\": 64" (may be empty);
     * JSON only, never printed in the table */
    char extra[256];
    /* raw samples (ns) for CDF plots; owned by the result, may be NULL */
    uint32_t *samples;
    size_t n_samples;
} bench_result;

typedef struct bench_report {
    bench_result *results;
    size_t n, cap;
    char device_json[512]; /* the "device" member's value: an object or "null" */
    int interrupted;       /* set when Ctrl-C ended the run: JSON "interrupted": true */
} bench_report;

/* "Not measured" for the double fields of bench_result. */
#define BENCH_NONE (__builtin_nan(""))

/* Non-zero when v was measured (is not BENCH_NONE). */
static inline int bench_has(double v)
{
    return v == v;
}

/* Monotonic clock in ns. */
uint64_t bench_now_ns(void);

/* Sorts samples[0..n) in place and fills count/p50/p90/p99/p999/max/min/mean
 * of r. Keeps up to BENCH_SAMPLES_KEPT evenly spaced samples in r->samples
 * for plots. */
#define BENCH_SAMPLES_KEPT 20000
void bench_latency_stats(bench_result *r, uint64_t *samples, size_t n);

/* % of a latency row's round trips in [lo_ns, hi_ns), from its kept
 * samples (evenly spaced in sorted order: all of them up to
 * BENCH_SAMPLES_KEPT, a 1 / BENCH_SAMPLES_KEPT resolution past it);
 * BENCH_NONE for a row without samples. What issue 13's p99 bound is lost
 * to: the share past 1.3 x the floor's p99, and where it lies. */
double bench_pct_in(const bench_result *r, double lo_ns, double hi_ns);

/* Appends a result named `name` for `backend`, nothing measured yet, and
 * returns it (valid until the next bench_add). One thread adds rows; the
 * Ctrl-C reporter (bench_finish_init) reads them under the same lock. */
bench_result *bench_add(bench_report *rep, const char *name, const char *backend);

/* The lock over the rows (bench_add, bench_latency_stats take it; the
 * Ctrl-C reporter holds it while it prints). */
void bench_rows_lock(void);
void bench_rows_unlock(void);

/* Non-zero when r holds at least one measured value. */
int bench_row_measured(const bench_result *r);

/* How many rows of rep hold a measured value. */
size_t bench_rows_measured(const bench_report *rep);

/* Prints the human table to f: the rows that measured something, and in
 * each only the values it measured; nothing when no row measured anything. */
void bench_print_table(const bench_report *rep, FILE *f);

/* Writes the JSON record to path; returns 0 or -1 (errno set). `mode` is the
 * rk-bench subcommand. Samples are written under "samples_ns" per result
 * when with_samples is non-zero. */
int bench_write_json(const bench_report *rep, const char *path, const char *mode, int with_samples);

/* 0 when bench_write_json could write path, or -1 (errno set: ENOENT,
 * EACCES, EISDIR...): checked before a run, so that a bad --json is refused
 * at once, not after minutes of measuring. Leaves an existing file as it
 * was and no new one behind. */
int bench_json_check(const char *path);

void bench_report_free(bench_report *rep);

/* Names the GPU a run measured in rep's "device" (what plot_cdf.py's title
 * names): its name, compute capability cc ("9.0"; NULL or "": not known),
 * sm_count (< 0: not known) and, when not NULL, where rk-bench read them. */
void bench_set_device(bench_report *rep, const char *name, const char *cc, long sm_count, const char *source);

/* Where a run's results go at its end. */
typedef struct bench_output {
    const char *mode; /* the rk-bench subcommand */
    const char *json; /* --json FILE, or NULL */
    int samples;      /* --samples */
} bench_output;

/* Installs the Ctrl-C (SIGINT) reporter for rep: on the first SIGINT the
 * rows measured so far are printed, the JSON (when out->json) is written
 * with "interrupted": true, and the process exits 130 without waiting for
 * the running measurement. rep and out must live until the process exits.
 * Call once, before the run. 0, or -1 (errno set). */
int bench_finish_init(bench_report *rep, const bench_output *out);

/* Non-zero once SIGINT arrived (for loops that see EINTR). */
int bench_interrupted(void);

/* Ends a run that returned rc: prints the table; writes the JSON when
 * rc == 0; after a failure prints the rows measured before it (no JSON).
 * Returns the process exit status (rc, 1 when the JSON cannot be written,
 * 130 when interrupted). */
int bench_finish(bench_report *rep, const bench_output *out, int rc);

/* CPU time (user + system) this process has used, in ns (getrusage). */
uint64_t bench_cpu_ns(void);

/* One line on stderr for what getopt_long refused (it returned '?', or ':'
 * for a missing value, with opterr 0 and ':' leading the short options):
 * "rk-bench MODE: unknown option --bogus (see rk-bench MODE --help)", like
 * rk-bridge and rk-client, not getopt's line and the whole help. Reads
 * optind and optopt: call it at once. Returns 2, the exit status. */
int bench_bad_option(const char *mode, int ch, char **argv);

/* The same line for an argument no option takes (argv[optind]). Returns 2. */
int bench_bad_argument(const char *mode, const char *arg);

/* An option's value as a whole decimal number from lo to hi (bench_num) or
 * a decimal number from lo to hi (bench_real), into *out. A value that is
 * not one whole ("abc", "10x", "0x10", "nan") or out of range is refused as
 * given: "rk-bench MODE: --count abc: give 1 to 100000000". 0, or 2 (the
 * exit status) with that line on stderr; *out is left as it was. */
int bench_num(const char *mode, const char *opt, const char *s, long lo, long hi, long *out);
int bench_real(const char *mode, const char *opt, const char *s, double lo, double hi, double *out);

#ifdef __cplusplus
}
#endif
#endif
