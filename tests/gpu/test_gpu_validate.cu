/* test_gpu_validate.cu - every launch-validation case: distinct codes and
 * sentences that name the value and the limit; grid 0; shared memory above
 * 48 KiB; the kernel's own block limit (a bounded user kernel); simulated
 * machines without driver, cooperative launch, mapping or a working
 * self-test (RK_CUDA_FAKE); auto falling back to the CPU with the reason;
 * relaunch keeping queued requests. */
#include <stdlib.h>

#include "actor.cuh"
#include "gpu_common.h"

/* a user actor in a kernel bounded to 256 threads per block */
struct plus_one {
    static constexpr uint16_t type = RK_OP_USER + 7;
    __device__ static int run(const rk::gpu_ctx &c, const void *in, uint32_t in_len, void *out, uint32_t out_cap,
                              uint32_t *out_len)
    {
        if (in_len > out_cap)
            return -RK_EMSGSIZE;
        const uint8_t *i = (const uint8_t *)in;
        uint8_t *o = (uint8_t *)out;
        for (uint32_t k = c.rank; k < in_len; k += c.size)
            o[k] = (uint8_t)(i[k] + 1);
        *out_len = in_len;
        return 0;
    }
};
/* a buggy actor: says it wrote one byte more than it was given room for
 * (its reply must not overrun the reply slot: RK_EINTERNAL, as a CPU twin
 * that overruns gets) */
struct overrun {
    static constexpr uint16_t type = RK_OP_USER + 8;
    __device__ static int run(const rk::gpu_ctx &, const void *, uint32_t, void *, uint32_t out_cap,
                              uint32_t *out_len)
    {
        *out_len = out_cap + 1;
        return 0;
    }
};
RK_GPU_ACTOR_HANDLE_BOUNDED(test_bounded, 256, plus_one, overrun);

static int plus_one_cpu(const void *in, size_t in_len, void *out, size_t out_cap, size_t *out_len, void *)
{
    if (in_len > out_cap)
        return -RK_EMSGSIZE;
    for (size_t k = 0; k < in_len; k++)
        ((uint8_t *)out)[k] = (uint8_t)(((const uint8_t *)in)[k] + 1);
    *out_len = in_len;
    return 0;
}

static rk_config base(void)
{
    rk_config c;
    rk_config_init(&c);
    c.backend = RK_BACKEND_CUDA;
    c.arena_size = 16u << 20;
    c.max_payload = 4u << 20;
    return c;
}

static int cases = 0;

static void expect_fail(rk_config c, int code, const char *needle, const char *what)
{
    rk_runtime *rt = NULL;
    double t0 = gpu_now_s();
    int rc = rk_runtime_open(&rt, &c);
    CHECK(rc == -code, "%s: expected %s, got %s (%s)", what, rk_err_name(code), rk_err_name(rc), rk_last_detail());
    CHECK(rt == NULL, "%s: runtime returned on failure", what);
    CHECK(!needle || strstr(rk_last_detail(), needle), "%s: detail \"%s\" lacks \"%s\"", what, rk_last_detail(),
          needle);
    printf("ok %-34s %-13s %6.1f ms  %s\n", what, rk_err_name(rc), (gpu_now_s() - t0) * 1e3, rk_last_detail());
    cases++;
}

static void echo_ok(rk_runtime *rt, const char *what)
{
    rk_actor *a;
    CHECK_RK(rk_actor_open(rt, &a), what);
    char msg[100];
    for (int i = 0; i < 100; i++)
        msg[i] = (char)i;
    rk_reply r;
    CHECK_RK(rk_actor_call(a, RK_OP_ECHO, msg, sizeof msg, 0, &r, 10000), what);
    CHECK(r.status == 0 && r.len == sizeof msg && !memcmp(r.data, msg, sizeof msg), "%s: echo", what);
    rk_reply_release(a, &r);
    /* an arena payload too (warp path below 16 KiB, grid above) */
    static float v[2 * 20000];
    for (int i = 0; i < 40000; i++)
        v[i] = (float)i * 0.5f;
    CHECK_RK(rk_actor_call(a, RK_OP_VADD, v, sizeof v, 0, &r, 10000), what);
    CHECK(r.status == 0 && r.len == 20000 * 4, "%s: vadd status %d len %zu", what, r.status, r.len);
    for (int i = 0; i < 20000; i++)
        CHECK(((const float *)r.data)[i] == v[i] + v[20000 + i], "%s: vadd[%d]", what, i);
    rk_reply_release(a, &r);
    rk_actor_close(a);
}

int main(void)
{
    gpu_require();
    rk_config c;

    /* the configuration that works, for the limits */
    c = base();
    rk_runtime *rt = NULL;
    CHECK_RK(rk_runtime_open(&rt, &c), "default open");
    rk_info in;
    rk_runtime_info(rt, &in);
    printf("device %s: grid 0 -> %u blocks (max %u), block %u (max %u), smem max %u B\n", in.device_name, in.grid,
           in.max_grid, in.block, in.max_block, in.max_smem);
    CHECK(in.grid == in.max_grid && in.grid > 0, "grid 0 gave %u of %u", in.grid, in.max_grid);
    echo_ok(rt, "default");
    rk_runtime_close(rt);
    cases++;

    c = base(); c.block = 2048;
    expect_fail(c, RK_EBLOCK, "per-block limit 1024", "block above the device limit");
    c = base(); c.block = 32;
    expect_fail(c, RK_EBLOCK, "minimum", "block below the kernel minimum");
    c = base(); c.block = 100;
    expect_fail(c, RK_EBLOCK, "warp size", "block not a warp multiple");
    rk_actor_def defs[2], &def = defs[0];
    memset(defs, 0, sizeof defs);
    def.type = plus_one::type;
    def.name = "plus_one";
    def.cpu = plus_one_cpu;
    def.gpu = &test_bounded;
    defs[1].type = overrun::type;
    defs[1].name = "overrun";
    defs[1].gpu = &test_bounded;
    c = base(); c.actors = &def; c.n_actors = 1; c.block = 512;
    expect_fail(c, RK_EBLOCK, "own limit 256", "block above the kernel's own limit");
    /* block 0 (the default): the largest the kernel allows, at most 1024 */
    for (int bounded = 0; bounded < 2; bounded++) {
        c = base();
        c.block = 0;
        if (bounded)
            c.actors = &def, c.n_actors = 1;
        CHECK_RK(rk_runtime_open(&rt, &c), "block 0");
        rk_info b0;
        rk_runtime_info(rt, &b0);
        CHECK(b0.block == (bounded ? 256u : 1024u), "block 0%s gave block %u", bounded ? " (kernel bounded to 256)" : "",
              b0.block);
        echo_ok(rt, "block 0");
        rk_runtime_close(rt);
        printf("ok %-34s block %u\n", bounded ? "block 0, kernel bounded to 256" : "block 0", b0.block);
        cases++;
    }
    c = base(); c.smem = 1049600;
    expect_fail(c, RK_ESMEM, "shared memory 1049600 B exceeds the per-block limit", "shared memory too large");
    c = base(); c.grid = in.max_grid + 1;
    expect_fail(c, RK_EGRID, "co-residency limit", "grid above co-residency");
    c = base(); c.device = 99;
    expect_fail(c, RK_ENODEV, "does not exist", "no such device");
    setenv("RK_CUDA_FAKE", "nodriver", 1);
    c = base();
    expect_fail(c, RK_ENODRIVER, "driver", "no driver (simulated)");
    setenv("RK_CUDA_FAKE", "nocoop", 1);
    expect_fail(c, RK_ENOCOOP, "cooperative", "no cooperative launch (simulated)");
    setenv("RK_CUDA_FAKE", "notmapped", 1);
    expect_fail(c, RK_ENOTMAPPED, "not visible to device", "memory not mapped (simulated)");
    setenv("RK_CUDA_FAKE", "mute", 1);
    setenv("RK_CUDA_SELFTEST_MS", "300", 1);
    expect_fail(c, RK_ESELFTEST, "within 300 ms", "self-test timeout (kernel mute)");
    /* auto falls back to the CPU and says why; the rings still work */
    c.backend = RK_BACKEND_AUTO;
    CHECK_RK(rk_runtime_open(&rt, &c), "auto after a failed self-test");
    rk_runtime_info(rt, &in);
    CHECK(in.backend == RK_BACKEND_CPU && strstr(in.why, "RK_ESELFTEST"), "auto: %s: %s", in.backend_name, in.why);
    printf("ok %-34s backend %s: %s\n", "auto falls back to the CPU", in.backend_name, in.why);
    echo_ok(rt, "auto fallback");
    rk_runtime_close(rt);
    cases++;
    unsetenv("RK_CUDA_FAKE");
    unsetenv("RK_CUDA_SELFTEST_MS");

    /* shared memory above the default 48 KiB: opt-in attribute */
    c = base(); c.smem = 100000;
    CHECK_RK(rk_runtime_open(&rt, &c), "smem 100000");
    rk_runtime_info(rt, &in);
    CHECK(in.smem == 100000, "smem %u", in.smem);
    echo_ok(rt, "smem 100000");
    rk_runtime_close(rt);
    printf("ok %-34s grid %u\n", "shared memory 100000 B (opt-in)", in.grid);
    cases++;

    /* one block: large operations run on the dispatcher warp */
    c = base(); c.grid = 1;
    CHECK_RK(rk_runtime_open(&rt, &c), "grid 1");
    echo_ok(rt, "grid 1");
    rk_runtime_close(rt);
    printf("ok %-34s\n", "grid 1 (no worker blocks)");
    cases++;

    /* the bounded user kernel at its limit, with its user actor */
    c = base(); c.actors = defs; c.n_actors = 2; c.block = 256;
    CHECK_RK(rk_runtime_open(&rt, &c), "bounded kernel");
    {
        rk_actor *a;
        CHECK_RK(rk_actor_open(rt, &a), "actor");
        uint8_t m[50], big[40000];
        for (int i = 0; i < 50; i++)
            m[i] = (uint8_t)i;
        for (int i = 0; i < 40000; i++)
            big[i] = (uint8_t)(i * 7);
        rk_reply r;
        CHECK_RK(rk_actor_call(a, plus_one::type, m, sizeof m, 0, &r, 10000), "plus_one");
        CHECK(r.status == 0 && r.len == 50 && ((const uint8_t *)r.data)[49] == 50, "plus_one inline");
        rk_reply_release(a, &r);
        CHECK_RK(rk_actor_call(a, plus_one::type, big, sizeof big, 0, &r, 10000), "plus_one big");
        CHECK(r.status == 0 && r.len == sizeof big, "plus_one grid status %d", r.status);
        for (int i = 0; i < 40000; i++)
            CHECK(((const uint8_t *)r.data)[i] == (uint8_t)(i * 7 + 1), "plus_one grid [%d]", i);
        rk_reply_release(a, &r);
        /* the overrun, alone (idle poll) and behind a burst (staged path):
         * answered RK_EINTERNAL with no data, and the echo after it intact */
        CHECK_RK(rk_actor_call(a, overrun::type, m, sizeof m, 0, &r, 10000), "overrun");
        CHECK(r.status == -RK_EINTERNAL && r.len == 0, "overrun alone: status %d len %zu", r.status, r.len);
        rk_reply_release(a, &r);
        for (int round = 0; round < 2; round++) {
            uint64_t ids[9];
            for (int k = 0; k < 9; k++)
                CHECK_RK(rk_actor_send(a, k == 8 || round == 0 ? overrun::type : (uint16_t)RK_OP_ECHO, m, sizeof m,
                                       0, &ids[k], 10000),
                         "send");
            for (int n = 0; n < 9; n++) {
                CHECK_RK(rk_actor_recv(a, &r, 10000), "recv");
                int k = 0;
                while (k < 9 && ids[k] != r.id)
                    k++;
                const bool over = k == 8 || round == 0;
                CHECK(k < 9, "overrun round %d: a reply with an id never sent", round);
                CHECK(over ? (r.status == -RK_EINTERNAL && r.len == 0) : (r.status == 0 && r.len == 50),
                      "overrun round %d message %d: status %d len %zu", round, k, r.status, r.len);
                rk_reply_release(a, &r);
            }
        }
        echo_ok(rt, "after the overruns");
        rk_actor_close(a);
    }
    rk_runtime_close(rt);
    printf("ok %-34s\n", "bounded user kernel, block 256");
    cases++;

    /* relaunch: queued requests survive; an invalid config changes nothing */
    c = base(); c.actor_window = 4096; c.ring_slots = 4096;
    CHECK_RK(rk_runtime_open(&rt, &c), "relaunch open");
    {
        rk_actor *a;
        CHECK_RK(rk_actor_open(rt, &a), "actor");
        const int N = 3000;
        for (int i = 0; i < N; i++) {
            int rc;
            while ((rc = rk_actor_send(a, RK_OP_ECHO, &i, sizeof i, 0, NULL, 10000)) == -RK_EBUSY)
                ;
            CHECK_RK(rc, "send");
            if (i == N / 2) {
                int r2 = rk_runtime_relaunch(rt, 0, 100, 0); /* not a warp multiple */
                CHECK(r2 == -RK_EBLOCK, "invalid relaunch: %s", rk_err_name(r2));
                CHECK_RK(rk_runtime_relaunch(rt, 8, 128, 0), "relaunch");
            }
        }
        char *seen = (char *)calloc(N, 1);
        for (int i = 0; i < N; i++) {
            rk_reply r;
            CHECK_RK(rk_actor_recv(a, &r, 10000), "recv after relaunch");
            CHECK(r.status == 0 && r.len == sizeof(int), "status %d", r.status);
            int v;
            memcpy(&v, r.data, sizeof v);
            CHECK(v >= 0 && v < N && !seen[v], "reply %d duplicated or bogus", v);
            seen[v] = 1;
            rk_reply_release(a, &r);
        }
        free(seen);
        rk_runtime_info(rt, &in);
        CHECK(in.grid == 8 && in.block == 128, "after relaunch grid %u block %u", in.grid, in.block);
        rk_actor_close(a);
        echo_ok(rt, "after relaunch");
    }
    rk_runtime_close(rt);
    printf("ok %-34s\n", "relaunch keeps queued requests");
    cases++;
    printf("PASS: %d validation cases\n", cases);
    return 0;
}
