/* fence_probe.cu - rk-fence-probe: what each PTX fence costs a lone warp,
 * and whether it keeps a faulting store's "RK_OK" from reaching host
 * memory. It backs the figures of device/NOTES.md ("User actors on the
 * GPU"): the fence between a user actor's handler and its reply
 * (dispatcher.cuh, actor_fence) is the cheapest one that stops the crash
 * sample's reply, and alone it costs more than 5 % of an echo round trip.
 *
 *   rk-fence-probe            the table (each crash check in a child
 *                             process: a fault ends the CUDA context)
 *   rk-fence-probe --crash N  one crash check of fence N (the child)
 *
 * Exit status 77 without a GPU (as the GPU tests). Not installed. */
#include <cuda_runtime.h>

#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* the fences, by index: PTX text and what it compiles to on sm_90
 * (cuobjdump -sass, nvcc 13.0) */
static const char *const fence_name[] = {
    "none",                  /* - */
    "fence.acq_rel.cta",     /* MEMBAR.ALL.CTA */
    "fence.acq_rel.cluster", /* MEMBAR.ALL.GPU, ERRBAR, CGAERRBAR, CCTL.IVALL */
    "fence.acq_rel.gpu",     /* the same: actor_fence */
    "fence.sc.gpu",          /* MEMBAR.SC.GPU, ERRBAR, CGAERRBAR, CCTL.IVALL */
    "fence.proxy.async",     /* MEMBAR.ALL.GPU, FENCE.VIEW.ASYNC.S */
    "fence.acq_rel.sys",     /* MEMBAR.ALL.SYS, ERRBAR, CGAERRBAR, CCTL.IVALL */
};
enum { N_FENCES = sizeof fence_name / sizeof *fence_name };

template <int F> __device__ __forceinline__ void fence()
{
    if (F == 1) asm volatile("fence.acq_rel.cta;" ::: "memory");
    if (F == 2) asm volatile("fence.acq_rel.cluster;" ::: "memory");
    if (F == 3) asm volatile("fence.acq_rel.gpu;" ::: "memory");
    if (F == 4) asm volatile("fence.sc.gpu;" ::: "memory");
    if (F == 5) asm volatile("fence.proxy.async;" ::: "memory");
    if (F == 6) asm volatile("fence.acq_rel.sys;" ::: "memory");
}

/* Mean cycles of one fence over 1000 tries, each after a quiet gap; with
 * `store`, right after a store of the warp's to device memory. */
template <int F> __global__ void cost(unsigned long long *out, int *dev, int store)
{
    unsigned long long sum = 0;
    for (int i = 0; i < 1100; i++) {
        if (store)
            dev[threadIdx.x + 32 * (i & 7)] = i;
        __syncwarp();
        unsigned long long t0 = clock64();
        fence<F>();
        unsigned long long t1 = clock64();
        if (i >= 100)
            sum += t1 - t0;
        for (unsigned long long s = clock64(); clock64() - s < 3000;)
            ;
    }
    if (threadIdx.x == 0)
        out[store] = sum / 1000;
}

/* The crash sample's shape: a store to an address no allocation has, the
 * fence, then a flag in host memory (the reply's RK_OK). */
template <int F> __global__ void crash(volatile int *flag)
{
    if (threadIdx.x == 0)
        *(volatile int *)(uintptr_t)0x10 = 1;
    fence<F>();
    if (threadIdx.x == 0)
        *flag = 1;
}

template <int F> static void launch_cost(unsigned long long *out, int *dev)
{
    cost<F><<<1, 32>>>(out, dev, 0);
    cost<F><<<1, 32>>>(out, dev, 1);
}

template <int F> static void launch_crash(volatile int *flag) { crash<F><<<1, 32>>>(flag); }

typedef void (*cost_fn)(unsigned long long *, int *);
typedef void (*crash_fn)(volatile int *);
static const cost_fn costs[N_FENCES] = {launch_cost<0>, launch_cost<1>, launch_cost<2>, launch_cost<3>,
                                        launch_cost<4>, launch_cost<5>, launch_cost<6>};
static const crash_fn crashes[N_FENCES] = {launch_crash<0>, launch_crash<1>, launch_crash<2>, launch_crash<3>,
                                           launch_crash<4>, launch_crash<5>, launch_crash<6>};

/* The child: prints "leaked" when the flag reached host memory. */
static int crash_child(int f)
{
    int *flag;
    if (cudaHostAlloc(&flag, 4096, cudaHostAllocMapped) != cudaSuccess)
        return 2;
    *(volatile int *)flag = 0;
    crashes[f](flag);
    cudaError_t e = cudaDeviceSynchronize();
    printf("%s %s\n", *(volatile int *)flag ? "leaked" : "held", cudaGetErrorString(e));
    return e == cudaSuccess ? 3 : 0; /* no fault at all: the check did not run */
}

/* Runs the child for fence f; 1 when the flag leaked, 0 when held, -1 on
 * an error (printed). */
static int crash_check(int f)
{
    char arg[8];
    snprintf(arg, sizeof arg, "%d", f);
    char *argv[] = {(char *)"rk-fence-probe", (char *)"--crash", arg, NULL};
    int fd[2];
    if (pipe(fd))
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    char buf[256] = {0};
    ssize_t n = rc ? 0 : read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int st = 0;
    if (!rc)
        waitpid(pid, &st, 0);
    if (rc || n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "rk-fence-probe: crash check of %s: %s (exit %d)\n", fence_name[f],
                rc ? strerror(rc) : buf[0] ? buf : "no answer", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return -1;
    }
    return !strncmp(buf, "leaked", 6);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--crash")) {
        int f = atoi(argv[2]);
        return f >= 0 && f < N_FENCES ? crash_child(f) : 2;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: rk-fence-probe   (what each fence costs a warp, and whether a "
                        "faulting store's flag gets out past it)\n");
        return 2;
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "rk-fence-probe: no CUDA device: nothing to measure\n");
        return 77;
    }
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    printf("rk-fence-probe: %s, SM clock %.2f GHz; a lone warp, 1000 fences each; crash check 3 times "
           "(a store to 0x10, the fence, a flag in host memory)\n",
           p.name, khz / 1e6);
    unsigned long long *out;
    int *dev;
    if (cudaMallocManaged(&out, 2 * sizeof *out) != cudaSuccess || cudaMalloc(&dev, 1 << 16) != cudaSuccess) {
        fprintf(stderr, "rk-fence-probe: cannot allocate\n");
        return 1;
    }
    printf("%-24s %8s %12s %10s  %s\n", "fence", "cycles", "after store", "us", "faulting store's flag");
    int bad = 0;
    for (int f = 0; f < N_FENCES; f++) {
        costs[f](out, dev);
        if (cudaDeviceSynchronize() != cudaSuccess) {
            fprintf(stderr, "rk-fence-probe: %s: %s\n", fence_name[f], cudaGetErrorString(cudaGetLastError()));
            return 1;
        }
        int leaked = 0, held = 0;
        for (int k = 0; k < 3; k++) {
            int r = crash_check(f);
            bad += r < 0;
            leaked += r == 1;
            held += r == 0;
        }
        printf("%-24s %8llu %12llu %10.3f  %s (%d of 3)\n", fence_name[f], out[0], out[1],
               (double)out[0] / (khz / 1e3), leaked ? "LEAKED" : held ? "held" : "?", leaked ? leaked : held);
    }
    return bad ? 1 : 0;
}
