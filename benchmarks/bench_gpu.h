/* bench_gpu.h - `rk-bench gpu`: every GPU path side by side in one run:
 * floor, ring_echo_64, launch_sync, graph_sync, memcpy_launch_memcpy,
 * throughput_echo_64, vadd_16777216, pinned_copy (+ extra rows). */
#ifndef RK_BENCH_GPU_H
#define RK_BENCH_GPU_H

#include "bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is "gpu"; options: --count N (round trips per latency path),
 * --seconds S (throughput run), --device D, --idle S (idle CPU window),
 * --threads P,C, --variants, --idle-variants (bench_gpu_usage). Returns 0
 * or a non-zero exit status (with a message on stderr). */
int bench_gpu_run(int argc, char **argv, bench_report *rep);

/* Prints the gpu mode's options to f. */
void bench_gpu_usage(FILE *f);

#ifdef __cplusplus
}
#endif
#endif
