/* bench.c - latency statistics, the table and the JSON record of rk-bench. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bench_bad_option(const char *mode, int ch, char **argv)
{
    const char *opt = argv[optind - 1];
    if (ch == ':')
        fprintf(stderr, "rk-bench %s: option %s needs a value (see rk-bench %s --help)\n", mode, opt, mode);
    else if (optopt && strncmp(opt, "--", 2) == 0) /* a known long option, given a value */
        fprintf(stderr, "rk-bench %s: option %.*s takes no value (see rk-bench %s --help)\n", mode,
                (int)strcspn(opt, "="), opt, mode);
    else if (optopt > 0 && optopt < 256)
        fprintf(stderr, "rk-bench %s: unknown option -%c (see rk-bench %s --help)\n", mode, optopt, mode);
    else
        fprintf(stderr, "rk-bench %s: unknown option %s (see rk-bench %s --help)\n", mode, opt, mode);
    return 2;
}

int bench_bad_argument(const char *mode, const char *arg)
{
    fprintf(stderr, "rk-bench %s: unexpected argument %s (see rk-bench %s --help)\n", mode, arg, mode);
    return 2;
}

int bench_num(const char *mode, const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10); /* decimal: "010" is ten, as rk-bridge reads it */
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "rk-bench %s: %s %s: give %ld to %ld\n", mode, opt, s, lo, hi);
        return 2;
    }
    *out = v;
    return 0;
}

int bench_real(const char *mode, const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* !(in range) refuses a NaN too; hex floats and "inf" are no decimals */
    if (errno || end == s || *end || !(v >= lo && v <= hi) || strpbrk(s, "xXnN")) {
        fprintf(stderr, "rk-bench %s: %s %s: give %g to %g\n", mode, opt, s, lo, hi);
        return 2;
    }
    *out = v;
    return 0;
}

uint64_t bench_cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted samples. */
static double pct(const uint64_t *s, size_t n, double p)
{
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    return (double)s[k ? k - 1 : 0];
}

/* Rows are added by the run's thread and read by the Ctrl-C reporter
 * (bench_finish.c): the lock covers growing the array and filling a latency
 * row's statistics (a latency row shows whole or not at all). Throughput and
 * bandwidth rows are filled field by field right after bench_add, outside
 * the lock: a Ctrl-C in those few stores may show such a row without its
 * rate, never a value it did not measure (unset fields read as not
 * measured). */
static pthread_mutex_t g_rows = PTHREAD_MUTEX_INITIALIZER;

void bench_rows_lock(void)
{
    pthread_mutex_lock(&g_rows);
}

void bench_rows_unlock(void)
{
    pthread_mutex_unlock(&g_rows);
}

/* late_by_block: the late share of each twentieth of s in measurement
 * order (s not sorted yet); a row of fewer round trips than blocks keeps
 * out as it is (not measured). */
static void late_blocks(double out[BENCH_LATE_BLOCKS], const uint64_t *s, size_t n, double late_over)
{
    if (n < BENCH_LATE_BLOCKS)
        return;
    for (int b = 0; b < BENCH_LATE_BLOCKS; b++) {
        const size_t lo = n * (size_t)b / BENCH_LATE_BLOCKS, hi = n * (size_t)(b + 1) / BENCH_LATE_BLOCKS;
        size_t late = 0;
        for (size_t i = lo; i < hi; i++)
            late += (double)s[i] > late_over;
        out[b] = 100.0 * (double)late / (double)(hi - lo);
    }
}

void bench_latency_stats(bench_result *r, uint64_t *s, size_t n)
{
    if (!n)
        return;
    /* the p50 first, from a sorted copy: the blocks need s in its order */
    uint64_t *sorted = malloc(n * sizeof *sorted);
    double blocks[BENCH_LATE_BLOCKS];
    for (int b = 0; b < BENCH_LATE_BLOCKS; b++)
        blocks[b] = BENCH_NONE;
    if (sorted) {
        memcpy(sorted, s, n * sizeof *s);
        qsort(sorted, n, sizeof *sorted, cmp_u64);
        late_blocks(blocks, s, n, pct(sorted, n, 50) + BENCH_LATE_NS);
        memcpy(s, sorted, n * sizeof *s);
        free(sorted);
    } else {
        qsort(s, n, sizeof *s, cmp_u64);
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)s[i];
    /* 20 000 draw the CDF as well as all of them (the percentiles are the
     * run's own); a record of every path then stays ~1 MB, and the
     * repository small enough to carry to the GPU machine */
    size_t keep = n < BENCH_SAMPLES_KEPT ? n : BENCH_SAMPLES_KEPT;
    uint32_t *kept = malloc(keep * sizeof *kept);
    if (kept)
        for (size_t i = 0; i < keep; i++) {
            uint64_t v = s[(size_t)((double)i * (double)n / (double)keep)];
            kept[i] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
        }
    bench_rows_lock();
    r->count = n;
    r->p50_ns = pct(s, n, 50);
    r->p90_ns = pct(s, n, 90);
    r->p99_ns = pct(s, n, 99);
    r->p999_ns = pct(s, n, 99.9);
    r->max_ns = (double)s[n - 1];
    r->min_ns = (double)s[0];
    r->mean_ns = sum / (double)n;
    size_t late = n; /* s is sorted: the first over p50 + BENCH_LATE_NS */
    while (late > 0 && (double)s[late - 1] > r->p50_ns + BENCH_LATE_NS)
        late--;
    r->late_pct = 100.0 * (double)(n - late) / (double)n;
    size_t in_read = 0;
    for (size_t i = late; i < n && (double)s[i] < r->p50_ns + BENCH_READ_LATE_HI_NS; i++)
        in_read += (double)s[i] >= r->p50_ns + BENCH_READ_LATE_LO_NS;
    r->read_late_pct = 100.0 * (double)in_read / (double)n;
    memcpy(r->late_by_block, blocks, sizeof blocks);
    free(r->samples);
    r->samples = kept;
    r->n_samples = kept ? keep : 0;
    bench_rows_unlock();
}

double bench_pct_in(const bench_result *r, double lo_ns, double hi_ns)
{
    if (!r->samples || !r->n_samples)
        return BENCH_NONE;
    size_t in = 0;
    for (size_t i = 0; i < r->n_samples; i++)
        in += (double)r->samples[i] >= lo_ns && (double)r->samples[i] < hi_ns;
    return 100.0 * (double)in / (double)r->n_samples;
}

bench_result *bench_add(bench_report *rep, const char *name, const char *backend)
{
    bench_rows_lock();
    if (rep->n == rep->cap) {
        size_t cap = rep->cap ? rep->cap * 2 : 16;
        bench_result *n = realloc(rep->results, cap * sizeof *n);
        if (!n) {
            fprintf(stderr, "rk-bench: out of memory growing the results to %zu rows\n", cap);
            exit(1);
        }
        rep->results = n;
        rep->cap = cap;
    }
    bench_result *r = &rep->results[rep->n];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->backend, sizeof r->backend, "%s", backend);
    r->p50_ns = r->p90_ns = r->p99_ns = r->p999_ns = BENCH_NONE;
    r->max_ns = r->min_ns = r->mean_ns = r->late_pct = r->read_late_pct = BENCH_NONE;
    for (int b = 0; b < BENCH_LATE_BLOCKS; b++)
        r->late_by_block[b] = BENCH_NONE;
    r->msgs_per_s = r->gb_per_s = r->cpu_percent = BENCH_NONE;
    rep->n++;
    bench_rows_unlock();
    return r;
}

int bench_row_measured(const bench_result *r)
{
    return r->count || bench_has(r->p50_ns) || bench_has(r->msgs_per_s) || bench_has(r->gb_per_s) ||
           bench_has(r->cpu_percent);
}

/* One table cell: v in us with 2 decimals, or blanks when not measured. */
static void cell_us(FILE *f, int width, double v)
{
    if (bench_has(v))
        fprintf(f, " %*.2f", width, v / 1e3);
    else
        fprintf(f, " %*s", width, "");
}

size_t bench_rows_measured(const bench_report *rep)
{
    size_t n = 0;
    for (size_t i = 0; i < rep->n; i++)
        n += bench_row_measured(&rep->results[i]) != 0;
    return n;
}

void bench_print_table(const bench_report *rep, FILE *f)
{
    if (!bench_rows_measured(rep))
        return;
    int w = 4; /* the name column: as wide as the run's longest name */
    for (size_t i = 0; i < rep->n; i++)
        if (bench_row_measured(&rep->results[i]) && (int)strlen(rep->results[i].name) > w)
            w = (int)strlen(rep->results[i].name);
    fprintf(f, "%-*s %-7s %10s %9s %9s %9s %9s %10s  %s\n", w, "name", "backend", "count", "p50 us",
            "p90 us", "p99 us", "p99.9 us", "max us", "rate");
    for (size_t i = 0; i < rep->n; i++) {
        const bench_result *r = &rep->results[i];
        if (!bench_row_measured(r))
            continue;
        fprintf(f, "%-*s %-7s ", w, r->name, r->backend);
        if (r->count)
            fprintf(f, "%10llu", (unsigned long long)r->count);
        else
            fprintf(f, "%10s", "");
        cell_us(f, 9, r->p50_ns);
        cell_us(f, 9, r->p90_ns);
        cell_us(f, 9, r->p99_ns);
        cell_us(f, 9, r->p999_ns);
        cell_us(f, 10, r->max_ns);
        if (bench_has(r->msgs_per_s))
            fprintf(f, "  %.3f M msg/s", r->msgs_per_s / 1e6);
        if (bench_has(r->gb_per_s))
            fprintf(f, "  %.2f GB/s", r->gb_per_s);
        if (bench_has(r->cpu_percent))
            fprintf(f, "  %.3f %% of a core", r->cpu_percent);
        fputc('\n', f);
    }
}

/* Escapes s as a JSON string body into f. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void bench_set_device(bench_report *rep, const char *name, const char *cc, long sm_count, const char *source)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return;
    fprintf(f, "{\"name\": ");
    json_str(f, name);
    if (cc && *cc) {
        fprintf(f, ", \"cc\": ");
        json_str(f, cc);
    }
    if (sm_count >= 0)
        fprintf(f, ", \"sm_count\": %ld", sm_count);
    if (source) {
        fprintf(f, ", \"source\": ");
        json_str(f, source);
    }
    fputc('}', f);
    if (fclose(f) == 0 && n < sizeof rep->device_json) /* whole or not at all: a cut one breaks the JSON */
        memcpy(rep->device_json, buf, n + 1);
    free(buf);
}

static void host_cpu(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c += 2;
                c[strcspn(c, "\n")] = 0;
                snprintf(buf, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

#ifndef RK_BENCH_COMMIT
#define RK_BENCH_COMMIT "unknown"
#endif
#ifndef RK_BENCH_VERSION
#define RK_BENCH_VERSION "unknown"
#endif

/* `, "key": v` with printf format fmt, when v was measured */
static void json_num(FILE *f, const char *key, const char *fmt, double v)
{
    if (!bench_has(v))
        return;
    fprintf(f, ", \"%s\": ", key);
    fprintf(f, fmt, v);
}

/* One result object: only the members it measured (see results/README.md). */
static void json_result(FILE *f, const bench_result *r, int with_samples)
{
    fprintf(f, "    {\"name\": ");
    json_str(f, r->name);
    fprintf(f, ", \"backend\": ");
    json_str(f, r->backend);
    if (r->count)
        fprintf(f, ", \"count\": %llu", (unsigned long long)r->count);
    json_num(f, "p50_ns", "%.0f", r->p50_ns);
    json_num(f, "p90_ns", "%.0f", r->p90_ns);
    json_num(f, "p99_ns", "%.0f", r->p99_ns);
    json_num(f, "p999_ns", "%.0f", r->p999_ns);
    json_num(f, "max_ns", "%.0f", r->max_ns);
    json_num(f, "min_ns", "%.0f", r->min_ns);
    json_num(f, "mean_ns", "%.1f", r->mean_ns);
    json_num(f, "late_pct", "%.3f", r->late_pct);
    json_num(f, "read_late_pct", "%.3f", r->read_late_pct);
    if (bench_has(r->late_by_block[0])) {
        fprintf(f, ", \"late_pct_by_block\": [");
        for (int b = 0; b < BENCH_LATE_BLOCKS; b++)
            fprintf(f, b ? ", %.2f" : "%.2f", r->late_by_block[b]);
        fprintf(f, "]");
    }
    json_num(f, "msgs_per_s", "%.0f", r->msgs_per_s);
    json_num(f, "gb_per_s", "%.3f", r->gb_per_s);
    json_num(f, "cpu_percent_of_a_core", "%.3f", r->cpu_percent);
    if (r->extra[0])
        fprintf(f, ", %s", r->extra);
    if (with_samples && r->samples) {
        fprintf(f, ",\n     \"samples_ns\": [");
        for (size_t k = 0; k < r->n_samples; k++)
            fprintf(f, k ? ",%u" : "%u", r->samples[k]);
        fprintf(f, "]");
    }
    fprintf(f, "}");
}

int bench_write_json(const bench_report *rep, const char *path, const char *mode, int with_samples)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    char cpu[256];
    host_cpu(cpu, sizeof cpu);
    fprintf(f, "{\n  \"tool\": \"rk-bench\", \"mode\": ");
    json_str(f, mode);
    fprintf(f, ", \"version\": ");
    json_str(f, RK_BENCH_VERSION);
    /* a copy of the tree without git history (the GPU machine) names its
     * commit through the environment */
    const char *commit = getenv("RK_BENCH_COMMIT");
    fprintf(f, ", \"commit\": ");
    json_str(f, commit && *commit ? commit : RK_BENCH_COMMIT);
    if (rep->interrupted)
        fprintf(f, ", \"interrupted\": true");
    fprintf(f, ",\n  \"host\": {\"cpu\": ");
    json_str(f, cpu);
    fprintf(f, ", \"cores\": %ld},\n", sysconf(_SC_NPROCESSORS_ONLN));
    fprintf(f, "  \"device\": %s,\n  \"results\": [\n",
            rep->device_json[0] ? rep->device_json : "null");
    const char *sep = "";
    for (size_t i = 0; i < rep->n; i++) {
        if (!bench_row_measured(&rep->results[i]))
            continue;
        fputs(sep, f);
        json_result(f, &rep->results[i], with_samples);
        sep = ",\n";
    }
    fprintf(f, "\n  ]\n}\n");
    int bad = ferror(f);
    return fclose(f) == 0 && !bad ? 0 : -1;
}

int bench_json_check(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return 0; /* a FIFO or a device: opened once, at the end */
    /* a new file is made and removed again; an existing one is opened
     * without O_TRUNC: a run that fails keeps the record it would replace */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
        close(fd);
        return unlink(path);
    }
    if (errno != EEXIST)
        return -1;
    if ((fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666)) < 0)
        return -1;
    close(fd);
    return 0;
}

void bench_report_free(bench_report *rep)
{
    for (size_t i = 0; i < rep->n; i++)
        free(rep->results[i].samples);
    free(rep->results);
    memset(rep, 0, sizeof *rep);
}
