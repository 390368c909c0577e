/* bench_gpu.cu - `rk-bench gpu`: every GPU path of the product side by side,
 * in one run, on one machine, so each claim is a ratio against the floor
 * measured in the same run. This file is the driver: options, the device's
 * record, the sections in order, the rows and the claims. The paths are
 * measured in bench_gpu_baselines.cu (floor, launch, graph, memcpy, pinned
 * copy), bench_gpu_raw.cu (the ring kernel on the raw rings),
 * bench_gpu_api.cu (through the runtime API) and bench_gpu_variants.cu (the
 * experiments); bench_gpu_internal.h lists every row. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gpu_internal.h"

/* what the options set */
typedef struct gpu_opts {
    long count;
    double seconds, idle_s;
    int device;
    int variants; /* 1: --variants, 2: --idle-variants */
    /* raw throughput threads (--threads P,C): two of each, so that the host
     * loop (one consumer reads ~20 M replies/s of DMA-written lines) is not
     * what is measured; --variants shows 1 + 1 too */
    uint32_t prod, cons;
    int faults; /* poison requests of the fault-recovery rows (0: none) */
    int api_threads[4], n_api_threads; /* throughput_echo_64_api_Nt */
    const char *module;                /* --module: user_actor_64 */
    unsigned only;                     /* --only: the sections to run (SEC_*) */
    int devices;                       /* --devices: 1 against 0..N-1 (issue 12) */
} gpu_opts;

/* the sections, in the order they run (--only) */
enum {
    SEC_BASELINES = 1,
    SEC_RAW = 2,
    SEC_RUNTIME = 4,
    SEC_MODULES = 8,
    SEC_DEVICES = 16,
    SEC_FAULTS = 32,
    SEC_ALL = 63,
    N_SEC = 6
};
static const char *const sec_names[N_SEC] = {"baselines", "raw", "runtime", "modules", "devices", "faults"};

/* ---------------- the rows ---------------- */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

void add_vadd(bench_report *rep, const char *name, const char *path, double *t, int R)
{
    double tm = median(t, R);
    bench_result *v = bench_add(rep, name, "cuda");
    v->gb_per_s = 3.0 * (double)VN * 4 / tm;
    v->count = R;
    snprintf(v->extra, sizeof v->extra, "\"path\": \"%s\", \"median_ms\": %.3f, \"bytes\": %zu", path,
             tm / 1e6, 3 * VN * 4);
    printf("  %-24s %.1f GB/s (%.3f ms median of %d)\n", name, v->gb_per_s, tm / 1e6, R);
}

void latency_row(bench_report *rep, const char *name, const char *backend, uint64_t *s, size_t n,
                 const char *extra)
{
    bench_result *r = bench_add(rep, name, backend);
    bench_latency_stats(r, s, n);
    if (extra)
        snprintf(r->extra, sizeof r->extra, "%s", extra);
    printf("  %-24s p50 %8.2f us  p99 %8.2f us  (%zu)\n", name, r->p50_ns / 1e3, r->p99_ns / 1e3, n);
    fflush(stdout);
}

/* ---------------- the driver ---------------- */
static void driver_version(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f)
        return;
    char line[512];
    if (fgets(line, sizeof line, f)) {
        /* "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release ..." */
        for (char *t = strtok(line, " \t\n"); t; t = strtok(NULL, " \t\n"))
            if (t[0] >= '0' && t[0] <= '9' && strchr(t, '.')) {
                snprintf(out, cap, "%s", t);
                break;
            }
    }
    fclose(f);
}

void bench_gpu_usage(FILE *f)
{
    fprintf(f,
"usage: rk-bench gpu [options]   (every GPU path side by side, one run)\n"
"  -n, --count N        round trips per latency path (default 200000, at least 100)\n"
"  -t, --seconds S      length of each throughput run (default 2)\n"
"  -d, --device D       the CUDA device (default 0)\n"
"  -i, --idle S         seconds of the idle-CPU window (default 5)\n"
"  -T, --threads P,C    producer and consumer threads of the raw throughput run\n"
"                       (1..8 each; default 2,2)\n"
"  -v, --variants       experiment: the ring kernel's busy-path variants (no rows)\n"
"  -I, --idle-variants  experiment: the idle path's variants against the floor\n"
"  -f, --faults N       poison requests for fault_recovery(_cold) (default 20, 0: none)\n"
"  -a, --api-threads L  host threads of the throughput_echo_64_api_Nt rows, an actor\n"
"                       each (comma list of 1..16, at most 4; default 2,4; 0: none)\n"
"  -m, --module M       a module with an actor \"copy\" (benchmarks/bench_actors.so):\n"
"                       the modules section, user_actor_64 and vadd_64_api\n"
"                       against module_echo_64 (without it the section is skipped)\n"
"  -R, --reply-rings N  the runtime rows' rk_config.reply_rings (1, 2, 4 or 8;\n"
"                       default the library's, 8): an A/B of the reply path\n"
"  -B, --block N        the runtime rows' rk_config.block (default the library's)\n"
"  -S, --ring-slots N   the runtime rows' rk_config.ring_slots (default the library's)\n"
"  -D, --devices N      also one device against devices 0..N-1 behind one runtime\n"
"                       (ring_echo_64_<d>gpu, throughput_echo_64_api_<t>t_<d>gpu,\n"
"                       throughput_vadd_1m_api_<t>t_<d>gpu,\n"
"                       vadd_16777216_split_<d>gpu; N >= 2)\n"
"  -o, --only LIST      run only these sections (comma list of baselines, raw,\n"
"                       runtime, modules, devices, faults; default all): ratios\n"
"                       need both rows\n"
"Rows: floor, launch_sync, graph_sync, memcpy_launch_memcpy, pinned_copy,\n"
"vadd_staged_16777216, ring_echo_64_raw, ring_vadd_64_raw, throughput_echo_64,\n"
"vadd_16777216, ring_echo_64, ring_echo_64_inprocess, throughput_echo_64_api(_inprocess),\n"
"throughput_echo_64_api_Nt, module_echo_64, user_actor_64, vadd_64_api,\n"
"vadd_16777216_api, vadd_16777216_buf_api, idle_cpu, fault_recovery(_cold).\n"
"Raw latency samples go into the JSON by default (for plot_cdf.py).\n");
}

/* --only LIST: the sections' bits in *only; 0, or 2 (said on stderr) */
static int gpu_parse_only(const char *arg, unsigned *only)
{
    *only = 0;
    char *save = NULL, *list = strdup(arg);
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        unsigned k = 0;
        while (k < N_SEC && strcmp(t, sec_names[k]))
            k++;
        if (k == N_SEC) {
            fprintf(stderr, "rk-bench gpu: --only: \"%s\" is no section (baselines, raw, runtime, modules, devices, "
                            "faults)\n", t);
            free(list);
            return 2;
        }
        *only |= 1u << k;
    }
    free(list);
    if (!*only) {
        fprintf(stderr, "rk-bench gpu: --only: an empty list (got \"%s\")\n", arg);
        return 2;
    }
    return 0;
}

/* --reply-rings (R), --block (B), --ring-slots (S): the rk_config of the
 * runtimes the benchmark opens (rk_runtime_open checks block and slots
 * and names the limit); 0, or 2 (said on stderr) */
static int gpu_parse_config(int c, const char *arg)
{
    char *end;
    const unsigned long v = strtoul(arg, &end, 10);
    if (c == 'R' && (*end || (v != 1 && v != 2 && v != 4 && v != 8))) {
        fprintf(stderr, "rk-bench gpu: --reply-rings: 1, 2, 4 or 8 (got \"%s\")\n", arg);
        return 2;
    }
    if (*end || !v || v > 65536) {
        fprintf(stderr, "rk-bench gpu: --%s: a count of 1..65536 (got \"%s\")\n", c == 'B' ? "block" : "ring-slots",
                arg);
        return 2;
    }
    *(c == 'R' ? &bench_reply_rings : c == 'B' ? &bench_block : &bench_ring_slots) = (uint32_t)v;
    return 0;
}

/* 0 or 2 (bad options, said on stderr) */
static int gpu_parse(int argc, char **argv, gpu_opts *o)
{
    *o = (gpu_opts){200000, 2.0, 5.0, 0, 0, 2, 2, 20, {2, 4}, 2, NULL, SEC_ALL, 1};
    static const struct option opts[] = {{"count", required_argument, 0, 'n'},
                                         {"seconds", required_argument, 0, 't'},
                                         {"device", required_argument, 0, 'd'},
                                         {"idle", required_argument, 0, 'i'},
                                         {"variants", no_argument, 0, 'v'},
                                         {"idle-variants", no_argument, 0, 'I'},
                                         {"threads", required_argument, 0, 'T'},
                                         {"faults", required_argument, 0, 'f'},
                                         {"api-threads", required_argument, 0, 'a'},
                                         {"module", required_argument, 0, 'm'},
                                         {"only", required_argument, 0, 'o'},
                                         {"devices", required_argument, 0, 'D'},
                                         {"reply-rings", required_argument, 0, 'R'},
                                         {"block", required_argument, 0, 'B'},
                                         {"ring-slots", required_argument, 0, 'S'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0; /* bench_bad_option says it in one line */
    while ((c = getopt_long(argc, argv, ":n:t:d:i:vIT:f:a:m:o:D:R:B:S:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': o->count = atol(optarg); break;
        case 't': o->seconds = atof(optarg); break;
        case 'd': o->device = atoi(optarg); break;
        case 'i': o->idle_s = atof(optarg); break;
        case 'v': o->variants = 1; break;
        case 'I': o->variants = 2; break;
        case 'f': o->faults = atoi(optarg); break;
        case 'm': o->module = optarg; break;
        case 'R':
        case 'B':
        case 'S':
            if (gpu_parse_config(c, optarg))
                return 2;
            break;
        case 'D':
            o->devices = atoi(optarg);
            if (o->devices < 2 || o->devices > RK_MAX_DEVICES) {
                fprintf(stderr, "rk-bench gpu: --devices %s: 2..%d devices\n", optarg, RK_MAX_DEVICES);
                return 2;
            }
            break;
        case 'o':
            if (gpu_parse_only(optarg, &o->only))
                return 2;
            break;
        case 'a': {
            o->n_api_threads = 0;
            if (!strcmp(optarg, "0")) /* no threads rows */
                break;
            char *end = optarg;
            do {
                long v = strtol(end, &end, 10);
                if (v < 1 || v > 16 || o->n_api_threads == 4 || (*end && *end != ',')) {
                    fprintf(stderr, "rk-bench gpu: --api-threads: a comma list of at most 4 counts of 1..16, or 0 "
                                    "(got \"%s\")\n", optarg);
                    return 2;
                }
                o->api_threads[o->n_api_threads++] = (int)v;
            } while (*end++ == ','); /* (the check above: ',' or the end) */
            break;
        }
        case 'T':
            if (sscanf(optarg, "%u,%u", &o->prod, &o->cons) != 2 || o->prod < 1 || o->prod > 8 || o->cons < 1 ||
                o->cons > 8) {
                fprintf(stderr, "rk-bench gpu: --threads P,C with 1..8 each (got \"%s\")\n", optarg);
                return 2;
            }
            break;
        case 'h': bench_gpu_usage(stdout); exit(0);
        default: return bench_bad_option("gpu", c, argv);
        }
    }
    if (optind < argc)
        return bench_bad_argument("gpu", argv[optind]);
    if (o->count < 100)
        o->count = 100;
    return 0;
}

/* Selects the device and writes its record (rep->device_json); its SM
 * count in *sm_count. */
static int gpu_device(const gpu_opts *o, bench_report *rep, int *sm_count)
{
    int device = o->device;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev <= device) {
        fprintf(stderr, "rk-bench gpu: no CUDA device %d (%d found)\n", device, ndev);
        return 1;
    }
    CK(cudaSetDevice(device));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, device));
    int rtv = 0, drv = 0;
    cudaRuntimeGetVersion(&rtv);
    cudaDriverGetVersion(&drv);
    char dv[64];
    driver_version(dv, sizeof dv);
    snprintf(rep->device_json, sizeof rep->device_json,
             "{\"name\": \"%s\", \"driver\": \"%s\", \"cuda\": \"%d.%d\", \"cuda_driver_api\": \"%d.%d\", \"cc\": \"%d.%d\", "
             "\"sm_count\": %d, \"pci_bus\": \"%04x:%02x:%02x\"}",
             p.name, dv, rtv / 1000, rtv % 1000 / 10, drv / 1000, drv % 1000 / 10, p.major, p.minor,
             p.multiProcessorCount, p.pciDomainID, p.pciBusID, p.pciDeviceID);
    printf("rk-bench gpu: %s (driver %s, CUDA %d.%d), %ld round trips per latency path\n", p.name, dv, rtv / 1000,
           rtv % 1000 / 10, o->count);
    *sm_count = p.multiProcessorCount;
    return 0;
}

/* the claims, as ratios against this run's floor */
const bench_result *find_row(const bench_report *rep, const char *name)
{
    for (size_t i = 0; i < rep->n; i++)
        if (!strcmp(rep->results[i].name, name))
            return &rep->results[i];
    return NULL;
}

/* What isolation costs: the hot path against in-process, and a fault. */
static void gpu_isolation_claims(const bench_report *rep)
{
    const bench_result *iso = find_row(rep, "ring_echo_64"), *inp = find_row(rep, "ring_echo_64_inprocess");
    const bench_result *ti = find_row(rep, "throughput_echo_64_api");
    const bench_result *tp = find_row(rep, "throughput_echo_64_api_inprocess");
    const bench_result *fw = find_row(rep, "fault_recovery"), *fc = find_row(rep, "fault_recovery_cold");
    if (iso && inp && ti && tp)
        printf("  isolated / in-process: ring p50 %.3f, p99 %.3f, pipelined API %.3f (each within 5 %%)\n",
               iso->p50_ns / inp->p50_ns, iso->p99_ns / inp->p99_ns, ti->msgs_per_s / tp->msgs_per_s);
    if (fw && fc)
        printf("  fault -> first reply of the fresh worker, median: warm %.1f ms (<= 200), cold %.1f ms (<= 500)\n",
               fw->p50_ns / 1e6, fc->p50_ns / 1e6);
}

/* The actor API against the floor and the raw rings, a user actor against
 * echo. */
static void gpu_api_claims(const bench_report *rep)
{
    const bench_result *fl = find_row(rep, "floor"), *ring = find_row(rep, "ring_echo_64");
    const bench_result *me = find_row(rep, "module_echo_64"), *ua = find_row(rep, "user_actor_64");
    const bench_result *v64 = find_row(rep, "vadd_64_api");
    const bench_result *raw = find_row(rep, "throughput_echo_64");
    const bench_result *rawl = find_row(rep, "ring_echo_64_raw");
    if (fl && ring) {
        printf("  rk_actor_call / floor: p50 %.3f (<= 1.05), p99 %.3f (<= 1.3)\n", ring->p50_ns / fl->p50_ns,
               ring->p99_ns / fl->p99_ns);
        /* p99 holds where fewer than 1 % are late; the one-read-late part
         * is what the host's turn decides (device/NOTES.md, "Where the
         * late round trips come from") */
        printf("  round trips over p50 + %.1f us (of them one read late, + %.1f-%.1f us): rk_actor_call %.2f "
               "(%.2f) %%, floor %.2f (%.2f) %%", BENCH_LATE_NS / 1e3, BENCH_READ_LATE_LO_NS / 1e3,
               BENCH_READ_LATE_HI_NS / 1e3, ring->late_pct, ring->read_late_pct, fl->late_pct, fl->read_late_pct);
        if (rawl)
            printf(", raw loop %.2f (%.2f) %%", rawl->late_pct, rawl->read_late_pct);
        printf("\n");
        /* the p99 bound holds while under 1 % are past it: the share past
         * it, and how much of that share is a read late (the idle wait
         * aims at ~0.5 %) or 5 us and more (the platform's, as the
         * floor's: device/NOTES.md, "Smaller steps") */
        const double bound = 1.3 * fl->p99_ns, p50 = ring->p50_ns;
        const double past = bench_pct_in(ring, bound, INFINITY);
        const double read_lo = p50 + BENCH_READ_LATE_LO_NS > bound ? p50 + BENCH_READ_LATE_LO_NS : bound;
        const double stall = p50 + 5000.0 > bound ? p50 + 5000.0 : bound;
        if (bench_has(past))
            printf("  rk_actor_call past the p99 bound (%.2f us): %.2f %% (holds under 1 %%): a read late %.2f %%, "
                   "5 us or more late %.2f %%; the floor's own 5 us or more: %.2f %%\n",
                   bound / 1e3, past, bench_pct_in(ring, read_lo, p50 + BENCH_READ_LATE_HI_NS),
                   bench_pct_in(ring, stall, INFINITY), bench_pct_in(fl, fl->p50_ns + 5000.0, INFINITY));
        /* steady, or a few bad stretches (the record's late_pct_by_block) */
        if (bench_has(ring->late_by_block[0])) {
            double lo = ring->late_by_block[0], hi = lo;
            for (int b = 1; b < BENCH_LATE_BLOCKS; b++) {
                lo = ring->late_by_block[b] < lo ? ring->late_by_block[b] : lo;
                hi = ring->late_by_block[b] > hi ? ring->late_by_block[b] : hi;
            }
            printf("  rk_actor_call late in each twentieth of its run: %.2f to %.2f %%\n", lo, hi);
        }
    }
    for (size_t i = 0; i < rep->n; i++) {
        const bench_result *t = &rep->results[i];
        if (strncmp(t->name, "throughput_echo_64_api_", 23) || t->name[23] < '0' || t->name[23] > '9')
            continue;
        printf("  %-28s = %.2f M msg/s (>= 20)", t->name, t->msgs_per_s / 1e6);
        if (raw) /* a ratio only against a raw row this run measured */
            printf(", %.3f x the raw rings", t->msgs_per_s / raw->msgs_per_s);
        printf("\n");
    }
    if (me && ua && v64)
        printf("  user actor / echo, same runtime: p50 %.3f, p99 %.3f (each <= 1.05); 64 B vadd / echo: %.3f, %.3f\n",
               ua->p50_ns / me->p50_ns, ua->p99_ns / me->p99_ns, v64->p50_ns / me->p50_ns, v64->p99_ns / me->p99_ns);
}

static void gpu_claims(const bench_report *rep)
{
    const bench_result *fl = NULL, *ring = NULL, *mlm = NULL, *thr = NULL, *va = NULL, *pc = NULL, *idle = NULL,
                       *raw_ring = NULL;
    for (size_t i = 0; i < rep->n; i++) {
        const bench_result *r = &rep->results[i];
        if (!strcmp(r->name, "floor")) fl = r;
        if (!strcmp(r->name, "ring_echo_64")) ring = r;
        if (!strcmp(r->name, "ring_echo_64_raw")) raw_ring = r;
        if (!strcmp(r->name, "memcpy_launch_memcpy")) mlm = r;
        if (!strcmp(r->name, "throughput_echo_64")) thr = r;
        if (!strcmp(r->name, "vadd_16777216")) va = r;
        if (!strcmp(r->name, "pinned_copy")) pc = r;
        if (!strcmp(r->name, "idle_cpu")) idle = r;
    }
    if (fl && ring && raw_ring && mlm && thr && va && pc && idle) {
        printf("\nclaims (this run):\n");
        printf("  ring p50 / floor p50        = %.3f (<= 1.15)   raw loop: %.3f\n", ring->p50_ns / fl->p50_ns,
               raw_ring->p50_ns / fl->p50_ns);
        printf("  ring p99 / floor p99        = %.3f (<= 1.5)    raw loop: %.3f\n", ring->p99_ns / fl->p99_ns,
               raw_ring->p99_ns / fl->p99_ns);
        printf("  memcpy+launch p50 / ring p50 = %.2f (>= 3.5)\n", mlm->p50_ns / ring->p50_ns);
        printf("  pipelined 64 B echo         = %.2f M msg/s (>= 20)\n", thr->msgs_per_s / 1e6);
        printf("  vadd / pinned copy          = %.1f %% (>= 80 %%)\n", 100.0 * va->gb_per_s / pc->gb_per_s);
        printf("  idle CPU                    = %.3f %% of a core (< 5)\n", idle->cpu_percent);
    }
    gpu_isolation_claims(rep);
    gpu_api_claims(rep);
}

int bench_gpu_run(int argc, char **argv, bench_report *rep)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* a stalled section still shows how far it got */
    gpu_opts o;
    int sm_count, rc = gpu_parse(argc, argv, &o);
    if (rc)
        return rc;
    if (gpu_device(&o, rep, &sm_count))
        return 1;
    if (o.variants == 2)
        return raw_idle_variants(rep, sm_count, o.count);
    if (o.variants)
        return raw_variants(sm_count);
    if ((o.only & SEC_BASELINES) && baselines_section(rep, sm_count, o.count))
        return 1;
    /* the ring kernel, raw, then through the runtime (each holds the whole GPU) */
    if ((o.only & SEC_RAW) && raw_section(rep, sm_count, o.count, o.seconds, o.prod, o.cons))
        return 1;
    if ((o.only & SEC_RUNTIME) &&
        runtime_section(rep, o.device, o.count, o.seconds, o.idle_s, o.api_threads, o.n_api_threads))
        return 1;
    if ((o.only & SEC_MODULES) && o.module && module_section(rep, o.device, o.module, o.count))
        return 1;
    if ((o.only & SEC_DEVICES) &&
        devices_section(rep, o.devices, o.count / 4, o.seconds, o.api_threads, o.n_api_threads))
        return 1;
    if ((o.only & SEC_FAULTS) && fault_section(rep, o.device, o.faults))
        return 1;
    gpu_claims(rep);
    return 0;
}
