/* saxpy.cu - a user-defined GPU actor in the user's own file, registered
 * under a message type without touching the library.
 *
 * Request: float a, then x[n], then y[n] (float32). Reply: a * x[i] + y[i].
 * The same actor has a CPU implementation (the CPU backend runs it; the
 * results are bit-identical: one rounded multiply, one rounded add, no FMA).
 *
 * Build: see meson.build beside this file (nvcc, -arch=sm_90, include
 * ringkernel's device/ and runtime/include/, link librk and cudart).
 * Run:   ./custom_actor [--require-gpu] [n]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "actor.cuh" /* ringkernel device/: rk::gpu_ctx, RK_GPU_ACTOR_HANDLE */
#include "rk/rk.h"

#define SAXPY_TYPE (RK_OP_USER + 1)

/* ---- the GPU actor: every thread of the serving group runs this ---- */
struct saxpy {
    static constexpr uint16_t type = SAXPY_TYPE;
    __device__ static int run(const rk::gpu_ctx &c, const void *in, uint32_t in_len, void *out,
                              uint32_t out_cap, uint32_t *out_len)
    {
        if (in_len < 4 || (in_len - 4) % 8)
            return -RK_EINVAL;
        const uint32_t n = (in_len - 4) / 8;
        if (out_cap < n * 4)
            return -RK_EMSGSIZE;
        const float *p = (const float *)in;
        const float a = p[0], *x = p + 1, *y = p + 1 + n;
        float *o = (float *)out;
        for (uint32_t i = c.rank; i < n; i += c.size)
            o[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);
        *out_len = n * 4;
        return 0;
    }
};
/* the ring kernel, instantiated here with this actor compiled in */
RK_GPU_ACTOR_HANDLE(saxpy_actors, saxpy);

/* ---- the same actor on the CPU ---- */
static int saxpy_cpu(const void *in, size_t in_len, void *out, size_t out_cap, size_t *out_len, void *user)
{
    (void)user;
    if (in_len < 4 || (in_len - 4) % 8)
        return -RK_EINVAL;
    size_t n = (in_len - 4) / 8;
    if (out_cap < n * 4)
        return -RK_EMSGSIZE;
    const float *p = (const float *)in;
    volatile float a = p[0]; /* volatile: keep multiply and add separately rounded */
    for (size_t i = 0; i < n; i++) {
        volatile float m = a * p[1 + i];
        ((float *)out)[i] = m + p[1 + n + i];
    }
    *out_len = n * 4;
    return 0;
}

static size_t saxpy_reply_size(size_t in_len) { return in_len >= 4 ? (in_len - 4) / 2 : 0; }

static int run_one(rk_actor *act, size_t n)
{
    float *req = (float *)malloc((1 + 2 * n) * sizeof(float));
    float *want = (float *)malloc(n * sizeof(float));
    req[0] = 2.5f;
    for (size_t i = 0; i < n; i++) {
        req[1 + i] = (float)i * 0.001f - 3.0f;
        req[1 + n + i] = 1.0f / (float)(i + 1);
    }
    size_t wl = 0;
    saxpy_cpu(req, (1 + 2 * n) * 4, want, n * 4, &wl, NULL);
    rk_reply r;
    int rc = rk_actor_call(act, SAXPY_TYPE, req, (1 + 2 * n) * sizeof(float), 0, &r, 30000);
    int bad = rc != 0;
    if (rc)
        fprintf(stderr, "saxpy n=%zu: %s: %s\n", n, rk_err_name(rc), rk_last_detail());
    else if (r.status || r.len != n * 4 || memcmp(r.data, want, n * 4)) {
        fprintf(stderr, "saxpy n=%zu: status %d len %zu: wrong result\n", n, r.status, r.len);
        bad = 1;
    }
    if (rc == 0)
        rk_reply_release(act, &r);
    printf("saxpy n=%-8zu %s\n", n, bad ? "FAILED" : "ok (bit-identical to the CPU)");
    free(req);
    free(want);
    return bad;
}

int main(int argc, char **argv)
{
    int require_gpu = argc > 1 && !strcmp(argv[1], "--require-gpu");
    if (require_gpu) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
            printf("SKIP: no CUDA device\n");
            return 77;
        }
    }
    rk_actor_def def;
    memset(&def, 0, sizeof def);
    def.type = SAXPY_TYPE;
    def.name = "saxpy";
    def.cpu = saxpy_cpu;
    def.gpu = &saxpy_actors;
    def.reply_size = saxpy_reply_size;

    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = require_gpu ? RK_BACKEND_CUDA : RK_BACKEND_AUTO;
    cfg.actors = &def;
    cfg.n_actors = 1;
    rk_runtime *rt;
    int rc = rk_runtime_open(&rt, &cfg);
    if (rc) {
        fprintf(stderr, "rk_runtime_open: %s: %s\n", rk_err_name(rc), rk_last_detail());
        return 1;
    }
    rk_info info;
    rk_runtime_info(rt, &info);
    printf("backend %s: %s\n", info.backend_name, info.why);
    rk_actor *act;
    rk_actor_open(rt, &act);
    int bad = 0;
    size_t sizes[] = {1, 10, 1000, 100000, (size_t)1 << 22};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        bad |= run_one(act, sizes[i]);
    if (argc > 2)
        bad |= run_one(act, (size_t)atol(argv[2]));
    rk_actor_close(act);
    rk_runtime_close(rt);
    return bad;
}
