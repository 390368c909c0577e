/* test_gpu_reader.c - the H2D mirror and the kernel's reader warp
 * (device/reader.cuh): requests the dispatcher takes from the reader's
 * copy are answered as from its own read, byte for byte, in the default
 * (worker process) and the in-process modes.
 *
 * A real miss of the dispatcher's read is rare (~0.5 % of round trips) and
 * cannot be placed by a test, so the kernel runs with RK_KF_READER_TEST
 * (RK_CUDA_KFLAGS, which the worker inherits): after each reply it takes
 * the reader's copy of the next request even when its own read found it.
 * The copy only exists for a request sent alone that fits the mirror's 32
 * lines (rk_abi.h); larger ones and pipelined ones are found in the slot,
 * the reader's stale lines refused by their flags. Each call's reply is
 * checked against its own random payload and id, so a reply built from
 * another request's copy (an older lap, the wrong slot) fails. */
#include "gpu_common.h"

#include "rk_abi.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd();
}

/* Echo calls of every size 0..max, twice, in a shuffled order; then small vadds. */
static size_t calls(rk_actor *a, size_t max, const char *mode)
{
    uint8_t buf[512];
    size_t n = 0;
    for (int round = 0; round < 2; round++) {
        for (size_t k = 0; k <= max; k++) {
            const size_t len = (k * 37 + (size_t)round * 11) % (max + 1);
            fill(buf, len);
            rk_reply r;
            CHECK_RK(rk_actor_call(a, RK_OP_ECHO, buf, len, 0, &r, 10000), "echo call");
            CHECK(r.status == 0 && r.len == len && !memcmp(r.data, buf, len),
                  "%s: echo of %zu B: status %d, %zu B back%s", mode, len, r.status, r.len,
                  r.len == len ? ", bytes differ" : "");
            rk_reply_release(a, &r);
            n++;
        }
    }
    /* vadds of 1..12 floats a side (up to 120 B with the header: copied) */
    for (int k = 0; k < 240; k++) {
        const size_t nf = 1 + (size_t)k % 12;
        float v[24], want[12];
        for (size_t i = 0; i < 2 * nf; i++)
            v[i] = (float)(int)(rnd() % 2000) - 1000.0f; /* exact sums */
        for (size_t i = 0; i < nf; i++)
            want[i] = v[i] + v[nf + i];
        rk_reply r;
        CHECK_RK(rk_actor_call(a, RK_OP_VADD, v, 2 * nf * sizeof(float), 0, &r, 10000), "vadd call");
        CHECK(r.status == 0 && r.len == nf * sizeof(float) && !memcmp(r.data, want, r.len),
              "%s: vadd of %zu floats: status %d, %zu B back", mode, nf, r.status, r.len);
        rk_reply_release(a, &r);
        n++;
    }
    return n;
}

/* A window of echoes in flight (no copies: the actor has requests out),
 * then a call (a copy), again: the replies by id, each with its bytes. */
static size_t mixed(rk_actor *a, const char *mode)
{
    enum { W = 16, LEN = 64 };
    uint8_t sent[W][LEN];
    uint64_t ids[W];
    size_t n = 0;
    for (int round = 0; round < 50; round++) {
        for (int k = 0; k < W; k++) {
            fill(sent[k], LEN);
            CHECK_RK(rk_actor_send(a, RK_OP_ECHO, sent[k], LEN, 0, &ids[k], 10000), "echo send");
        }
        for (int got = 0; got < W; got++) {
            rk_reply r;
            CHECK_RK(rk_actor_recv(a, &r, 10000), "echo recv");
            int k = 0;
            while (k < W && ids[k] != r.id)
                k++;
            CHECK(k < W, "%s: a reply with id %llu, never sent (or twice)", mode, (unsigned long long)r.id);
            CHECK(r.status == 0 && r.len == LEN && !memcmp(r.data, sent[k], LEN), "%s: pipelined echo %d differs",
                  mode, k);
            ids[k] = 0;
            rk_reply_release(a, &r);
            n++;
        }
        n += calls(a, (size_t)(round % 3 == 0 ? 120 : 8), mode);
    }
    return n;
}

static void run(rk_isolation iso, const char *mode)
{
    rk_config c;
    rk_config_init(&c);
    c.backend = RK_BACKEND_CUDA;
    c.isolation = iso;
    rk_runtime *rt = gpu_open_cfg(&c);
    rk_actor *a;
    CHECK_RK(rk_actor_open(rt, &a), "actor");
    /* 0..100 B fit the mirror (1 + (24 + len + 3) / 4 <= 32 lines), up to
     * 200 B do not */
    size_t n = calls(a, gpu_quick() ? 110 : 200, mode);
    n += mixed(a, mode);
    CHECK(rk_runtime_health(rt) == 0, "%s: health %d", mode, rk_runtime_health(rt));
    rk_actor_close(a);
    rk_runtime_close(rt);
    printf("%s: %zu round trips, every reply its own request's\n", mode, n);
}

int main(void)
{
    gpu_require();
    char flags[32];
    snprintf(flags, sizeof flags, "%u", (unsigned)RK_KF_READER_TEST);
    setenv("RK_CUDA_KFLAGS", flags, 1);
    run(RK_ISOLATION_AUTO, "worker process");
    run(RK_ISOLATION_NONE, "in process");
    printf("PASS\n");
    return 0;
}
