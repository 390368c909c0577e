/* bench.c - latency statistics, the table and the JSON record of rk-bench. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

void bench_latency_stats(bench_result *r, uint64_t *s, size_t n)
{
    if (!n)
        return;
    qsort(s, n, sizeof *s, cmp_u64);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)s[i];
    r->count = n;
    r->p50_ns = pct(s, n, 50);
    r->p90_ns = pct(s, n, 90);
    r->p99_ns = pct(s, n, 99);
    r->p999_ns = pct(s, n, 99.9);
    r->max_ns = (double)s[n - 1];
    r->min_ns = (double)s[0];
    r->mean_ns = sum / (double)n;
    size_t keep = n < 200000 ? n : 200000;
    free(r->samples);
    r->samples = malloc(keep * sizeof *r->samples);
    if (r->samples) {
        for (size_t i = 0; i < keep; i++) {
            uint64_t v = s[(size_t)((double)i * (double)n / (double)keep)];
            r->samples[i] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
        }
        r->n_samples = keep;
    }
}

bench_result *bench_add(bench_report *rep, const char *name, const char *backend)
{
    if (rep->n == rep->cap) {
        size_t cap = rep->cap ? rep->cap * 2 : 16;
        bench_result *n = realloc(rep->results, cap * sizeof *n);
        if (!n) {
            fprintf(stderr, "rk-bench: out of memory\n");
            exit(1);
        }
        rep->results = n;
        rep->cap = cap;
    }
    bench_result *r = &rep->results[rep->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->backend, sizeof r->backend, "%s", backend);
    return r;
}

void bench_print_table(const bench_report *rep, FILE *f)
{
    fprintf(f, "%-28s %-7s %10s %9s %9s %9s %9s %10s  %s\n", "name", "backend", "count", "p50 us",
            "p90 us", "p99 us", "p99.9 us", "max us", "rate");
    for (size_t i = 0; i < rep->n; i++) {
        const bench_result *r = &rep->results[i];
        fprintf(f, "%-28s %-7s ", r->name, r->backend);
        if (r->count)
            fprintf(f, "%10llu %9.2f %9.2f %9.2f %9.2f %10.2f", (unsigned long long)r->count,
                    r->p50_ns / 1e3, r->p90_ns / 1e3, r->p99_ns / 1e3, r->p999_ns / 1e3,
                    r->max_ns / 1e3);
        else
            fprintf(f, "%10s %9s %9s %9s %9s %10s", "", "", "", "", "", "");
        if (r->msgs_per_s > 0)
            fprintf(f, "  %.3f M msg/s", r->msgs_per_s / 1e6);
        if (r->gb_per_s > 0)
            fprintf(f, "  %.2f GB/s", r->gb_per_s);
        if (r->extra[0])
            fprintf(f, "  {%s}", r->extra);
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
    fprintf(f, ",\n  \"host\": {\"cpu\": ");
    json_str(f, cpu);
    fprintf(f, ", \"cores\": %ld},\n", sysconf(_SC_NPROCESSORS_ONLN));
    fprintf(f, "  \"device\": %s,\n  \"results\": [\n",
            rep->device_json[0] ? rep->device_json : "null");
    for (size_t i = 0; i < rep->n; i++) {
        const bench_result *r = &rep->results[i];
        fprintf(f, "    {\"name\": ");
        json_str(f, r->name);
        fprintf(f, ", \"backend\": ");
        json_str(f, r->backend);
        if (r->count)
            fprintf(f,
                    ", \"count\": %llu, \"p50_ns\": %.0f, \"p90_ns\": %.0f, \"p99_ns\": %.0f, "
                    "\"p999_ns\": %.0f, \"max_ns\": %.0f, \"min_ns\": %.0f, \"mean_ns\": %.1f",
                    (unsigned long long)r->count, r->p50_ns, r->p90_ns, r->p99_ns, r->p999_ns,
                    r->max_ns, r->min_ns, r->mean_ns);
        if (r->msgs_per_s > 0)
            fprintf(f, ", \"msgs_per_s\": %.0f", r->msgs_per_s);
        if (r->gb_per_s > 0)
            fprintf(f, ", \"gb_per_s\": %.3f", r->gb_per_s);
        if (r->extra[0])
            fprintf(f, ", %s", r->extra);
        if (with_samples && r->samples) {
            fprintf(f, ",\n     \"samples_ns\": [");
            for (size_t k = 0; k < r->n_samples; k++)
                fprintf(f, k ? ",%u" : "%u", r->samples[k]);
            fprintf(f, "]");
        }
        fprintf(f, "}%s\n", i + 1 < rep->n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return fclose(f) == 0 ? 0 : -1;
}

void bench_report_free(bench_report *rep)
{
    for (size_t i = 0; i < rep->n; i++)
        free(rep->results[i].samples);
    free(rep->results);
    memset(rep, 0, sizeof *rep);
}
