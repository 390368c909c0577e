/* test_gpu_stress.c - 10 million small echoes from 4 producer threads (one
 * actor each, a window of requests in flight) through the ring kernel: none
 * lost, none duplicated, every payload intact. RK_GPU_STRESS_N overrides
 * the total (smaller under compute-sanitizer). */
#include <pthread.h>

#include "gpu_common.h"

#define THREADS 4
#define WINDOW 192

typedef struct {
    rk_runtime *rt;
    int t;
    uint64_t n;
    uint64_t dups, bad;
} job;

static void *producer(void *arg)
{
    job *j = arg;
    rk_actor *a;
    CHECK_RK(rk_actor_open(j->rt, &a), "actor");
    uint8_t *seen = calloc(j->n, 1);
    CHECK(seen, "oom");
    uint64_t sent = 0, got = 0;
    while (got < j->n) {
        while (sent < j->n && sent - got < WINDOW) {
            uint64_t msg[2] = {((uint64_t)j->t << 56) | sent, ~sent};
            /* sizes 8..16 B: exercise partial lines */
            size_t len = 8 + (size_t)(sent % 9);
            int rc = rk_actor_send(a, RK_OP_ECHO, msg, len, 0, NULL, 10000);
            if (rc == -RK_EBUSY)
                break;
            CHECK_RK(rc, "send");
            sent++;
        }
        rk_reply r;
        int rc = rk_actor_recv(a, &r, 10000);
        CHECK_RK(rc, "recv");
        CHECK(r.status == 0, "status %d", r.status);
        uint64_t m[2] = {0, 0};
        CHECK(r.len >= 8 && r.len <= 16, "reply len %zu", r.len);
        memcpy(m, r.data, r.len);
        uint64_t seq = m[0] & ((1ull << 56) - 1);
        if ((m[0] >> 56) != (uint64_t)j->t || seq >= j->n || r.len != 8 + seq % 9)
            j->bad++;
        else if (r.len == 16 && m[1] != ~seq)
            j->bad++;
        else if (seen[seq]++)
            j->dups++;
        rk_reply_release(a, &r);
        got++;
    }
    for (uint64_t i = 0; i < j->n; i++)
        CHECK(seen[i] == 1, "thread %d: message %llu seen %u times", j->t, (unsigned long long)i, seen[i]);
    free(seen);
    rk_actor_close(a);
    return NULL;
}

int main(void)
{
    gpu_require();
    const char *e = getenv("RK_GPU_STRESS_N");
    uint64_t total = e && *e ? strtoull(e, NULL, 10) : (gpu_quick() ? 40000 : 10000000);
    rk_runtime *rt = gpu_open(RK_BACKEND_CUDA, 0, 0);
    job jobs[THREADS];
    pthread_t th[THREADS];
    double t0 = gpu_now_s();
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (job){.rt = rt, .t = i, .n = total / THREADS};
        pthread_create(&th[i], NULL, producer, &jobs[i]);
    }
    uint64_t dups = 0, bad = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        dups += jobs[i].dups;
        bad += jobs[i].bad;
    }
    double dt = gpu_now_s() - t0;
    CHECK(dups == 0 && bad == 0, "%llu duplicated, %llu corrupt", (unsigned long long)dups, (unsigned long long)bad);
    CHECK(rk_runtime_health(rt) == 0, "health");
    rk_stats st;
    rk_runtime_stats(rt, &st);
    rk_runtime_close(rt);
    printf("PASS: %llu messages from %d threads in %.2f s (%.2f M msg/s), none lost or duplicated; "
           "runtime counted %llu requests %llu replies\n",
           (unsigned long long)(total / THREADS * THREADS), THREADS, dt, total / dt / 1e6,
           (unsigned long long)st.requests, (unsigned long long)st.replies);
    return 0;
}
