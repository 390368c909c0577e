/* test_gpu_stress.c - 10 million small echoes from 4 producer threads (one
 * actor each, a window of requests in flight) through the ring kernel: none
 * lost, none duplicated, every payload intact, each actor's replies in the
 * order of its requests. Half of them with a reply ring per actor (the
 * default), half with two actors on each of two rings (the kernel's
 * pipelined polls place each slot's reply on its ring by counting the
 * poll's earlier slots there). Then 1 M more (20 000 quick) on blocks of
 * 64 and 96 threads (the serial busy path, one crew warp). RK_GPU_STRESS_N
 * overrides the total (smaller under compute-sanitizer). */
#include <pthread.h>

#include "gpu_common.h"

#define THREADS 4
#define WINDOW 192

typedef struct {
    rk_runtime *rt;
    int t;
    uint64_t n;
    uint64_t dups, bad, late; /* late: a reply before one of an earlier request */
} job;

static void *producer(void *arg)
{
    job *j = arg;
    rk_actor *a;
    CHECK_RK(rk_actor_open(j->rt, &a), "actor");
    uint8_t *seen = calloc(j->n, 1);
    CHECK(seen, "oom");
    uint64_t sent = 0, got = 0, next = 0;
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
        else if (seq != next++)
            j->late++, next = seq + 1;
        rk_reply_release(a, &r);
        got++;
    }
    for (uint64_t i = 0; i < j->n; i++)
        CHECK(seen[i] == 1, "thread %d: message %llu seen %u times", j->t, (unsigned long long)i, seen[i]);
    free(seen);
    rk_actor_close(a);
    return NULL;
}

/* total echoes from THREADS threads on a CUDA runtime with reply_rings
 * rings (0: the default) and blocks of block threads (0: the default);
 * fails the test on any loss, duplicate, corrupt or out-of-order reply */
static void run(uint64_t total, uint32_t reply_rings, uint32_t block)
{
    rk_config c;
    rk_config_init(&c);
    c.backend = RK_BACKEND_CUDA;
    if (reply_rings)
        c.reply_rings = reply_rings;
    c.block = block;
    rk_runtime *rt = gpu_open_cfg(&c);
    rk_info in;
    rk_runtime_info(rt, &in);
    job jobs[THREADS];
    pthread_t th[THREADS];
    double t0 = gpu_now_s();
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (job){.rt = rt, .t = i, .n = total / THREADS};
        pthread_create(&th[i], NULL, producer, &jobs[i]);
    }
    uint64_t dups = 0, bad = 0, late = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        dups += jobs[i].dups;
        bad += jobs[i].bad;
        late += jobs[i].late;
    }
    double dt = gpu_now_s() - t0;
    CHECK(dups == 0 && bad == 0 && late == 0, "%u reply rings: %llu duplicated, %llu corrupt, %llu out of order",
          in.reply_rings, (unsigned long long)dups, (unsigned long long)bad, (unsigned long long)late);
    CHECK(rk_runtime_health(rt) == 0, "health");
    rk_stats st;
    rk_runtime_stats(rt, &st);
    rk_runtime_close(rt);
    printf("PASS: %llu messages from %d threads, %u reply rings, block %u, in %.2f s (%.2f M msg/s), none lost, duplicated "
           "or out of order; runtime counted %llu requests %llu replies\n",
           (unsigned long long)(total / THREADS * THREADS), THREADS, in.reply_rings, in.block, dt, total / dt / 1e6,
           (unsigned long long)st.requests, (unsigned long long)st.replies);
}

int main(void)
{
    gpu_require();
    const char *e = getenv("RK_GPU_STRESS_N");
    uint64_t total = e && *e ? strtoull(e, NULL, 10) : (gpu_quick() ? 40000 : 10000000);
    run(total / 2, 0, 0); /* a ring per actor */
    run(total - total / 2, 2, 0); /* actors 0 and 2 on ring 0, 1 and 3 on ring 1 */
    /* blocks too small for the crew (64..95 threads): the dispatcher alone
     * on the serial busy path, with one reply ring (its batch answered at
     * once; it stopped after about a lap of the ring before the fix of
     * 2026-11-26) and with a ring per actor (each slot served in turn);
     * 96: one crew warp. Many laps of the rings each. */
    const uint64_t small = gpu_quick() ? 20000 : 1000000;
    run(small, 1, 64);
    run(small, 0, 64);
    run(small, 0, 96);
    return 0;
}
