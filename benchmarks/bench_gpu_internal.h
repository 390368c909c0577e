/* bench_gpu_internal.h - the parts of `rk-bench gpu` shared by its files
 * (CUDA C++, not installed):
 *
 *   bench_gpu.cu            the driver: options, the device record, the
 *                           sections in order, the rows, the claims
 *   bench_gpu_baselines.cu  what the ring kernel is compared with: floor,
 *                           launch_sync, graph_sync, memcpy_launch_memcpy,
 *                           pinned_copy, vadd_staged_16777216
 *   bench_gpu_raw.cu        the ring kernel on the raw rings (no actor
 *                           layer): ring_echo_64_raw, throughput_echo_64,
 *                           vadd_16777216
 *   bench_gpu_api.cu        the runtime's public API: ring_echo_64 (and
 *                           in-process), throughput_echo_64_api (1 and N host
 *                           threads), user_actor_64 against module_echo_64,
 *                           vadd_16777216_api, vadd_16777216_buf_api, idle_cpu
 *   bench_gpu_fault.cu      what a faulting GPU actor costs: fault_recovery,
 *                           fault_recovery_cold
 *   bench_gpu_variants.cu   the experiments (--variants, --idle-variants):
 *                           the kernel's RK_KF_* flags */
#ifndef RK_BENCH_GPU_INTERNAL_H
#define RK_BENCH_GPU_INTERNAL_H

#include <cuda_runtime.h>
#include <stdio.h>

#include "../device/kernel_desc.h"
#include "bench_gpu.h"
#include "rk/rk.h"

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "rk-bench gpu: %s: %s\n", #x, cudaGetErrorString(e_));                 \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define CKRK(x)                                                                                    \
    do {                                                                                           \
        int r_ = (x);                                                                              \
        if (r_) {                                                                                  \
            fprintf(stderr, "rk-bench gpu: %s: %s: %s\n", #x, rk_err_name(r_), rk_last_detail()); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static const size_t VN = (size_t)1 << 24; /* vadd elements */

/* --reply-rings: rk_config.reply_rings of the runtimes the runtime,
 * modules and faults rows open (0: the library's default) */
extern uint32_t bench_reply_rings;
/* --block, --ring-slots: rk_config.block and ring_slots of those runtimes
 * (0: the library's defaults) */
extern uint32_t bench_block, bench_ring_slots;

/* ---- the rows (bench_gpu.cu) ---- */
double median(double *v, int n);
/* the row of that name this run measured, or NULL */
const bench_result *find_row(const bench_report *rep, const char *name);
/* Records a vadd of VN elements timed R times (ns in t): its bandwidth
 * counts the 3 x VN x 4 bytes it moves (a and b read, c written). */
void add_vadd(bench_report *rep, const char *name, const char *path, double *t, int R);
/* A latency row from n samples (sorted in place), with extra JSON members. */
void latency_row(bench_report *rep, const char *name, const char *backend, uint64_t *s, size_t n,
                 const char *extra);

/* ---- baselines (bench_gpu_baselines.cu) ---- */
/* The floor (one GPU thread ping-pongs one word through host-mapped
 * memory) on its own: count round trips into smp. */
int floor_lat(uint64_t *smp, long count);
/* floor, launch_sync, graph_sync, memcpy_launch_memcpy, pinned_copy,
 * vadd_staged_16777216, with count round trips per latency path. */
int baselines_section(bench_report *rep, int sm_count, long count);

/* ---- raw rings (bench_gpu_raw.cu) ---- */
/* The ring kernel on rings laid out with rk_ring_*, without the runtime. */
typedef struct raw {
    uint8_t *mem;
    size_t size;
    rk_ring *h2d, *d2h;
    uint8_t *arena;
    size_t arena_size;
    uint64_t *hb;
    uint32_t *stop;
    int32_t *state;
    void *scratch;
    cudaStream_t s;
    uint32_t slots;
    uint32_t kflags; /* the kernel's RK_KF_* flags (raw_close: what counter 3 holds) */
} raw;

int raw_open(raw *r, uint32_t slots, size_t arena_size, int sm_count, int block = 256, uint32_t kflags = 0);
/* Stops the kernel; with a label, prints the dispatcher's counters. */
void raw_close(raw *r, const char *label = NULL);
/* count timed 64-byte echo round trips on the raw rings, one at a time,
 * after 20 000 untimed ones, from positions *hpos / *dpos (advanced);
 * turn_ns: untimed host time added between a reply and the next request */
int raw_echo_lat(raw *r, uint64_t *hpos, uint64_t *dpos, uint64_t *smp, long count, bool vadd = false,
                 long turn_ns = 0);
/* Pipelined echo through the raw rings with P producer and C consumer
 * threads. Returns messages per second (bad replies in *bad). */
double raw_throughput(raw *r, uint64_t n, uint32_t P, uint32_t C, uint64_t *bad);
/* ring_echo_64_raw, throughput_echo_64 (prod + cons host threads, about
 * `seconds` long), vadd_16777216. */
int raw_section(bench_report *rep, int sm_count, long count, double seconds, uint32_t prod, uint32_t cons);

/* ---- through the runtime API (bench_gpu_api.cu) ---- */
/* count timed rk_actor_call round trips of a 64-byte echo (after 20 000
 * untimed ones) into smp */
int api_echo_lat(rk_actor *a, uint64_t *smp, long count);
/* pipelined 64 B echoes through the batch API for about `seconds`;
 * messages per second (0 on failure), *count the messages */
double api_pipelined(rk_actor *a, double seconds, uint64_t *count);
/* throughput_echo_64_api_<threads>t<suffix>: an actor per thread on rt */
int api_threads_on(bench_report *rep, rk_runtime *rt, int threads, double seconds, const char *suffix);
/* One pipelining loop on actor a for about `seconds`: returns messages per
 * second (0 on failure) and adds the messages to *count. */
typedef double (*api_pipe_fn)(rk_actor *a, double seconds, uint64_t *count);
/* `threads` host threads, an actor each (rk_actor_open: placed by the
 * runtime), running fn at once: a row `name` with their summed rate and
 * count (the caller adds its fields), or NULL (and a line naming `what`)
 * when a thread failed. */
bench_result *api_threads_row(bench_report *rep, const char *name, rk_runtime *rt, int threads, double seconds,
                             api_pipe_fn fn, const char *what);
/* ring_echo_64(_inprocess), throughput_echo_64_api(_inprocess),
 * throughput_echo_64_api_Nt for each of threads[0..n_threads),
 * vadd_16777216_api, vadd_16777216_buf_api, then idle_cpu over idle_s
 * seconds. */
int runtime_section(bench_report *rep, int device, long count, double seconds, double idle_s,
                    const int *threads, int n_threads);
/* module_echo_64, user_actor_64 and vadd_64_api: one runtime with the
 * module (its actor "copy") loaded, the three paths taken in turn. */
int module_section(bench_report *rep, int device, const char *module, long count);

/* ---- faults (bench_gpu_fault.cu) ---- */
/* fault_recovery and fault_recovery_cold over n_poison poisons each. */
int fault_section(bench_report *rep, int device, int n_poison);

/* bench_gpu_devices.cu: one device against `devices` (0..N-1) behind one
 * runtime (--devices N) */
int devices_section(bench_report *rep, int devices, long count, double seconds, const int *threads, int n_threads);

/* ---- experiments (bench_gpu_variants.cu) ---- */
int raw_variants(int sm_count);
int raw_idle_variants(bench_report *rep, int sm_count, long count);

#endif
