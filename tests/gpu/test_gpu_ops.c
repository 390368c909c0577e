/* test_gpu_ops.c - echo and vadd on the ring kernel against the CPU backend
 * and a reference: sizes 1, 2, 31, 32, 33, 1000, 2^20, 2^26 and random
 * sizes; NaN (several payloads), +-inf, denormals, -0. Bit for bit. Then 64
 * large vadds in flight at once (grid jobs), each reply checked by id. */
#include "gpu_common.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static float special(void)
{
    static const uint32_t bits[] = {
        0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa5a5a5u, 0xffbfffffu, /* NaNs, quiet and signalling */
        0x7f800000u, 0xff800000u,                                        /* +-inf */
        0x00000001u, 0x807fffffu, 0x00400000u, 0x80000001u,              /* denormals */
        0x00000000u, 0x80000000u, 0x7f7fffffu, 0xff7fffffu, 0x00800000u, /* 0, -0, max, min normal */
    };
    uint32_t b = bits[rnd() % (sizeof bits / sizeof bits[0])];
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static void fill(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (rnd() % 8 == 0) {
            v[i] = special();
        } else {
            uint32_t b = rnd();
            memcpy(&v[i], &b, 4);
        }
    }
}

static int isnanb(uint32_t b) { return (b & 0x7fffffffu) > 0x7f800000u; }

static void call(rk_actor *a, uint16_t type, const void *p, size_t len, rk_reply *r, const char *what)
{
    int rc = rk_actor_call(a, type, p, len, 0, r, 120000);
    CHECK_RK(rc, what);
    CHECK(r->status == 0, "%s: reply status %s: %s", what, rk_err_name(r->status), rk_last_detail());
}

/* 64 vadds of 32 768 + k floats (256 KB and more: grid jobs, 16 of them
 * at a time in the kernel's queue), written in place first and then sent
 * back to back (rk_actor_buf_send: no copy on the way, so the kernel finds
 * them together), received in any order: each reply by its id, bit for
 * bit. Until 2026-11-26 the 17th job in flight could take the queue entry
 * of a finished job whose reply was not posted yet: one reply went out
 * under another request's id, and a request got none. */
static void pipelined_grid_vadds(rk_actor *a)
{
    enum { N = 64, BASE = 32768 };
    uint64_t ids[N];
    rk_buf bufs[N];
    for (int k = 0; k < N; k++) {
        const size_t n = BASE + (size_t)k;
        CHECK_RK(rk_actor_buf_alloc(a, RK_OP_VADD, 2 * n * sizeof(float), 0, &bufs[k], 10000), "vadd buffer");
        float *x = bufs[k].data;
        for (size_t i = 0; i < 2 * n; i++)
            x[i] = (float)(k * 100000 + (int)i); /* exact in float32, distinct per request */
    }
    for (int k = 0; k < N; k++)
        CHECK_RK(rk_actor_buf_send(a, &bufs[k], &ids[k], 10000), "pipelined vadd send");
    for (int got = 0; got < N; got++) {
        rk_reply r;
        CHECK_RK(rk_actor_recv(a, &r, 10000), "pipelined vadd recv");
        int k = 0;
        while (k < N && ids[k] != r.id)
            k++;
        CHECK(k < N, "a reply with id %llu, never sent (or twice)", (unsigned long long)r.id);
        ids[k] = 0;
        const size_t n = BASE + (size_t)k;
        CHECK(r.status == 0 && r.len == 4 * n, "pipelined vadd %d: status %d, %zu B, want %zu", k, r.status, r.len,
              4 * n);
        const float *c = r.data;
        for (size_t i = 0; i < n; i++) {
            const float want = (float)(k * 100000 + (int)i) + (float)(k * 100000 + (int)(n + i));
            CHECK(c[i] == want, "pipelined vadd %d: element %zu is %g, want %g", k, i, (double)c[i], (double)want);
        }
        rk_reply_release(a, &r);
    }
    printf("ok   %d pipelined vadds of %d+ floats (grid jobs), each reply its own\n", N, BASE);
}

int main(void)
{
    gpu_require();
    const int quick = gpu_quick();
    const size_t big = quick ? ((size_t)1 << 20) : ((size_t)1 << 26);
    /* vadd of 2^26 floats is a 512 MiB request and a 256 MiB reply */
    const size_t arena = quick ? ((size_t)64 << 20) : ((size_t)1 << 30) + ((size_t)256 << 20);
    const size_t maxp = quick ? ((size_t)16 << 20) : ((size_t)512 << 20);
    rk_runtime *g = gpu_open(RK_BACKEND_CUDA, arena, maxp);
    rk_runtime *c = gpu_open(RK_BACKEND_CPU, arena, maxp);
    rk_info in;
    rk_runtime_info(g, &in);
    CHECK(in.backend == RK_BACKEND_CUDA && in.has_device, "backend %s", in.backend_name);
    printf("device %s, grid %u x %u, smem %u, max grid %u: %s\n", in.device_name, in.grid, in.block, in.smem,
           in.max_grid, in.why);
    rk_actor *ga, *ca;
    CHECK_RK(rk_actor_open(g, &ga), "actor");
    CHECK_RK(rk_actor_open(c, &ca), "actor");

    size_t sizes[64];
    size_t ns = 0;
    const size_t fixed[] = {1, 2, 31, 32, 33, 1000, (size_t)1 << 20, (size_t)1 << 26};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (fixed[i] <= big)
            sizes[ns++] = fixed[i];
    for (int i = 0; i < (quick ? 6 : 24); i++)
        sizes[ns++] = 1 + rnd() % (i % 3 == 0 ? 100 : i % 3 == 1 ? 70000 : (1u << 20));

    float *in_buf = malloc(big * 2 * sizeof(float));
    /* calloc: gcc cannot see that ref[0..n) is written before it is read */
    float *ref = calloc(big, sizeof(float));
    CHECK(in_buf && ref, "out of memory");
    size_t checked = 0, nan_pairs = 0;
    for (size_t s = 0; s < ns; s++) {
        const size_t n = sizes[s];
        /* echo of n bytes */
        fill(in_buf, (n + 3) / 4);
        rk_reply rg, rc;
        call(ga, RK_OP_ECHO, in_buf, n, &rg, "gpu echo");
        call(ca, RK_OP_ECHO, in_buf, n, &rc, "cpu echo");
        CHECK(rg.len == n && rc.len == n, "echo %zu: lengths gpu %zu cpu %zu", n, rg.len, rc.len);
        CHECK(!memcmp(rg.data, in_buf, n), "echo %zu: gpu reply differs from the request", n);
        CHECK(!memcmp(rg.data, rc.data, n), "echo %zu: gpu and cpu differ", n);
        rk_reply_release(ga, &rg);
        rk_reply_release(ca, &rc);

        /* vadd of n floats: payload a || b */
        fill(in_buf, 2 * n);
        const float *a = in_buf, *b = in_buf + n;
        for (size_t i = 0; i < n; i++)
            ref[i] = a[i] + b[i];
        call(ga, RK_OP_VADD, in_buf, 2 * n * sizeof(float), &rg, "gpu vadd");
        call(ca, RK_OP_VADD, in_buf, 2 * n * sizeof(float), &rc, "cpu vadd");
        CHECK(rg.len == n * 4 && rc.len == n * 4, "vadd %zu: lengths gpu %zu cpu %zu", n, rg.len, rc.len);
        const uint32_t *gb = rg.data, *cb = rc.data, *rb = (const uint32_t *)ref;
        const uint32_t *ab = (const uint32_t *)a, *bb = (const uint32_t *)b;
        for (size_t i = 0; i < n; i++) {
            if (gb[i] == cb[i] && gb[i] == rb[i])
                continue;
            /* both operands NaN with different payloads: which one IEEE
             * returns depends on the host compiler's operand order */
            int both = isnanb(ab[i]) && isnanb(bb[i]);
            CHECK(both && isnanb(gb[i]) && isnanb(cb[i]),
                  "vadd n=%zu i=%zu: a %08x + b %08x: gpu %08x cpu %08x ref %08x", n, i, ab[i], bb[i], gb[i],
                  cb[i], rb[i]);
            nan_pairs++;
        }
        checked += n;
        rk_reply_release(ga, &rg);
        rk_reply_release(ca, &rc);
    }
    /* malformed requests come back as errors, not hangs */
    rk_reply r;
    int rc0 = rk_actor_call(ga, RK_OP_VADD, in_buf, 12, 0, &r, 10000);
    if (rc0 == 0) {
        CHECK(r.status == -RK_EINVAL, "vadd of 12 B: status %d", r.status);
        rk_reply_release(ga, &r);
    } else {
        CHECK(rc0 == -RK_EINVAL, "vadd of 12 B: %s", rk_err_name(rc0));
    }
    int rc = rk_actor_call(ga, 4321, in_buf, 8, 0, &r, 10000);
    if (rc == 0) {
        CHECK(r.status == -RK_ENOTSUP, "unknown type: status %d", r.status);
        rk_reply_release(ga, &r);
    } else {
        CHECK(rc == -RK_EINVAL || rc == -RK_ENOTSUP, "unknown type: %s", rk_err_name(rc));
    }
    pipelined_grid_vadds(ga);
    CHECK(rk_runtime_health(g) == 0, "health %d", rk_runtime_health(g));
    rk_actor_close(ga);
    rk_actor_close(ca);
    double t0 = gpu_now_s();
    rk_runtime_close(g);
    printf("close: %.1f ms\n", (gpu_now_s() - t0) * 1e3);
    rk_runtime_close(c);
    printf("PASS: %zu sizes, %zu floats bit-identical (%zu NaN+NaN pairs)\n", ns, checked, nan_pairs);
    free(in_buf);
    free(ref);
    return 0;
}
