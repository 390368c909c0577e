/* test_gpu_stop.c - stopping the ring kernel while a grid job runs, in both
 * isolation modes. A stop (a relaunch, a close) waits for the grid jobs
 * already posted: one that runs past the stop's first wait (3 s,
 * RK__STOP_WAIT_NS) still gets its reply, and the relaunch succeeds (until
 * 2026-11-27 the kernel "aborted" then and the job's reply never came). One
 * that never ends makes the relaunch fail, saying so, and in the default
 * mode the worker is replaced: the job is answered with an error, and
 * everything else is served again. (In process the runtime fails, as for
 * a fault; its close returns, but the process cannot exit normally: the
 * CUDA runtime's teardown waits for the kernel. Not run here: it would
 * hang the suite; device/README.md, "Faults".) The jobs are
 * RK_OP_HANG with a 64 KiB payload (the arena: a grid job) whose first
 * word is the milliseconds to run (rk/msg.h). And the stop's abort, with
 * the reply ring full and nobody draining it. */
#include <pthread.h>

#include "gpu_common.h"

enum { JOB_BYTES = 64 << 10, ECHOES = 8 };

static rk_runtime *open_rt(rk_isolation iso)
{
    rk_config c;
    rk_config_init(&c);
    c.backend = RK_BACKEND_CUDA;
    c.isolation = iso;
    c.test_faults = 1;
    c.arena_size = (size_t)16 << 20;
    c.max_payload = (size_t)1 << 20;
    return gpu_open_cfg(&c);
}

/* The reply's error detail (a static buffer). */
static const char *detail(const rk_actor *a, const rk_reply *r)
{
    static char buf[512];
    if (rk_reply_detail(a, r, buf, sizeof buf) < 0)
        snprintf(buf, sizeof buf, "-");
    return buf;
}

/* Sends a grid job that runs `ms` milliseconds (0xffffffff: for good). */
static void send_job(rk_actor *a, uint32_t ms)
{
    static uint8_t job[JOB_BYTES];
    memcpy(job, &ms, sizeof ms);
    CHECK_RK(rk_actor_send(a, RK_OP_HANG, job, sizeof job, 0, NULL, 1000), "send the grid job");
}

/* ECHOES pipelined echoes on b, each answered once and right. */
static void echoes(rk_actor *b, uint32_t base, int timeout_ms)
{
    for (uint32_t i = 0; i < ECHOES; i++) {
        uint32_t m[2] = {base + i, ~(base + i)};
        CHECK_RK(rk_actor_send(b, RK_OP_ECHO, m, sizeof m, 0, NULL, 1000), "echo send");
    }
    uint8_t seen[ECHOES] = {0};
    for (uint32_t i = 0; i < ECHOES; i++) {
        rk_reply r;
        CHECK_RK(rk_actor_recv(b, &r, timeout_ms), "echo recv");
        uint32_t m[2] = {0, 0};
        CHECK(r.status == 0 && r.len == sizeof m, "echo: status %s, %zu bytes", rk_err_name(r.status), r.len);
        memcpy(m, r.data, sizeof m);
        CHECK(m[0] - base < ECHOES && m[1] == ~m[0] && !seen[m[0] - base]++, "echo %u", m[0]);
        rk_reply_release(b, &r);
    }
}

/* Opens actors a (the job's) and b (echoes, served before), sends a job
 * of `ms` on a and relaunches while it runs (t0: the send; t_relaunch:
 * the relaunch's return after it). Returns the relaunch's result. */
static int relaunch_under_job(rk_runtime *rt, rk_actor **a, rk_actor **b, uint32_t ms, double *t0,
                              double *t_relaunch)
{
    CHECK_RK(rk_actor_open(rt, a), "actor");
    CHECK_RK(rk_actor_open(rt, b), "actor");
    echoes(*b, 100, 10000);
    *t0 = gpu_now_s();
    send_job(*a, ms);
    struct timespec nap = {0, 300 * 1000000};
    nanosleep(&nap, NULL); /* (the job is running) */
    const int rc = rk_runtime_relaunch(rt, 0, 0, 0);
    *t_relaunch = gpu_now_s() - *t0;
    return rc;
}

/* A 4.5 s grid job across a relaunch: the relaunch waits for it (past the
 * stop's 3 s first wait), the job is answered RK_OK, echoes before and
 * after are served. */
static void long_job(rk_isolation iso)
{
    rk_runtime *rt = open_rt(iso);
    rk_actor *a, *b;
    double t0, t_relaunch;
    CHECK_RK(relaunch_under_job(rt, &a, &b, 4500, &t0, &t_relaunch), "relaunch while a 4.5 s grid job runs");
    rk_reply r;
    CHECK_RK(rk_actor_recv(a, &r, 10000), "the grid job's reply");
    CHECK(r.status == 0 && r.len == 0, "grid job: status %s (%s), %zu bytes", rk_err_name(r.status),
          detail(a, &r), r.len);
    rk_reply_release(a, &r);
    const double t_job = gpu_now_s() - t0;
    echoes(b, 200, 10000);
    rk_info in;
    rk_runtime_info(rt, &in);
    printf("%s: a 4.5 s grid job across a relaunch: relaunched after %.2f s, the job answered RK_OK after %.2f s "
           "(%s)\n",
           iso == RK_ISOLATION_NONE ? "in process" : "worker process", t_relaunch, t_job, in.backend_name);
    CHECK(t_relaunch > 4.0 && t_relaunch < 6.5, "the relaunch took %.2f s", t_relaunch);
    CHECK(rk_runtime_health(rt) == 0, "health %d", rk_runtime_health(rt));
    rk_actor_close(a);
    rk_actor_close(b);
    rk_runtime_close(rt);
}

/* A grid job that never ends, across a relaunch (default mode): the
 * relaunch fails naming why, the worker is replaced, the job is answered
 * with an error and the echoes are served again. */
static void endless_job(void)
{
    rk_runtime *rt = open_rt(RK_ISOLATION_AUTO);
    rk_actor *a, *b;
    double t0, t_relaunch;
    const int rc = relaunch_under_job(rt, &a, &b, 0xffffffffu, &t0, &t_relaunch);
    printf("worker process: relaunch while a grid job never ends: %s after %.2f s: %s\n", rk_err_name(rc),
           t_relaunch, rc ? rk_last_detail() : "");
    CHECK(rc == -RK_EDEVICE && strstr(rk_last_detail(), "did not stop"), "relaunch: %s: %s", rk_err_name(rc),
          rk_last_detail());
    echoes(b, 200, 30000); /* served by the fresh worker */
    rk_reply r;
    CHECK_RK(rk_actor_recv(a, &r, 60000), "the endless job's reply");
    const double t_job = gpu_now_s() - t0;
    printf("  the endless job answered %s after %.2f s (%s)\n", rk_err_name(r.status), t_job, detail(a, &r));
    CHECK(r.status == -RK_EDEVICE || r.status == -RK_ETIMEDOUT, "endless job: status %s", rk_err_name(r.status));
    rk_reply_release(a, &r);
    echoes(b, 300, 10000);
    rk_worker_info w;
    rk_runtime_worker(rt, &w);
    CHECK(w.state == RK_WORKER_RUNNING, "worker %s (%s)", w.state_name, w.why);
    rk_actor_close(a);
    rk_actor_close(b);
    rk_runtime_close(rt);
}

/* A burst of 40 grid jobs of 0.2 s each (8 s of work), then a relaunch:
 * the stop waits for the jobs already posted (the queue holds 16: 3.2 s),
 * not for the whole burst; the rest wait in the ring for the next kernel,
 * and all 40 are answered RK_OK. A stop that served the rest of what it
 * had read would take past 4.5 s (and past 6 s fail the relaunch).
 * (Measured on an H200, d972012: 3.32 s.) */
static void burst_of_jobs(rk_isolation iso)
{
    rk_runtime *rt = open_rt(iso);
    rk_actor *a;
    CHECK_RK(rk_actor_open(rt, &a), "actor");
    for (int i = 0; i < 40; i++)
        send_job(a, 200);
    struct timespec nap = {0, 300 * 1000000};
    nanosleep(&nap, NULL);
    const double t0 = gpu_now_s();
    const int rc = rk_runtime_relaunch(rt, 0, 0, 0);
    const double t_relaunch = gpu_now_s() - t0;
    printf("%s: relaunch under a burst of 40 grid jobs of 0.2 s: %s after %.2f s\n",
           iso == RK_ISOLATION_NONE ? "in process" : "worker process", rk_err_name(rc), t_relaunch);
    CHECK_RK(rc, "relaunch under a burst of grid jobs");
    CHECK(t_relaunch < 4.5, "the relaunch took %.2f s", t_relaunch);
    for (int i = 0; i < 40; i++) {
        rk_reply r;
        CHECK_RK(rk_actor_recv(a, &r, 20000), "a grid job's reply");
        CHECK(r.status == 0, "grid job: status %s (%s)", rk_err_name(r.status), detail(a, &r));
        rk_reply_release(a, &r);
    }
    rk_actor_close(a);
    rk_runtime_close(rt);
}

/* The abort: a relaunch while the reply ring is full and the host does
 * not drain it (RK_TEST_NO_DRAIN: the drainer that runs while a kernel
 * stops is off). The dispatcher waits for room; after 3 s the stop tells
 * it to abort (stop 2), its wait ends the kernel with a trap, and the
 * relaunch fails saying so. The worker (its context dead) is replaced, and
 * every request is answered once and right: the posted replies are
 * delivered, the rest re-posted. */
static void abort_on_full_ring(void)
{
    rk_config c;
    rk_config_init(&c);
    c.backend = RK_BACKEND_CUDA;
    c.ring_slots = 64;
    rk_runtime *rt = gpu_open_cfg(&c);
    rk_actor *a;
    CHECK_RK(rk_actor_open(rt, &a), "actor");
    enum { N = 120 }; /* 64 replies fill the reply ring, 56 wait in H2D (64 slots too) */
    for (uint32_t i = 0; i < N; i++) {
        uint32_t m[2] = {i, ~i};
        CHECK_RK(rk_actor_send(a, RK_OP_ECHO, m, sizeof m, 0, NULL, 1000), "echo send");
    }
    struct timespec nap = {0, 200 * 1000000};
    nanosleep(&nap, NULL);
    setenv("RK_TEST_NO_DRAIN", "1", 1);
    const double t0 = gpu_now_s();
    const int rc = rk_runtime_relaunch(rt, 0, 0, 0);
    const double dt = gpu_now_s() - t0;
    unsetenv("RK_TEST_NO_DRAIN");
    printf("relaunch with the reply ring full, not drained: %s after %.2f s: %s\n", rk_err_name(rc), dt,
           rc ? rk_last_detail() : "");
    CHECK(rc == -RK_EDEVICE && strstr(rk_last_detail(), "aborted"), "relaunch: %s (%s)", rk_err_name(rc),
          rk_last_detail());
    CHECK(dt > 2.9 && dt < 6.0, "the abort took %.2f s", dt);
    uint8_t seen[N] = {0};
    for (uint32_t i = 0; i < N; i++) {
        rk_reply r;
        CHECK_RK(rk_actor_recv(a, &r, 30000), "echo recv after the abort");
        uint32_t m[2] = {0, 0};
        if (r.status == 0 && r.len == sizeof m)
            memcpy(m, r.data, sizeof m);
        CHECK(r.status == 0 && m[0] < N && m[1] == ~m[0] && !seen[m[0]], "echo %u: status %s, len %zu", m[0],
              rk_err_name(r.status), (size_t)r.len);
        seen[m[0]] = 1;
        rk_reply_release(a, &r);
    }
    rk_worker_info w;
    rk_runtime_worker(rt, &w);
    printf("  all %d echoes answered once; worker %s, %llu fault(s): %s\n", N, w.state_name,
           (unsigned long long)w.faults, w.last_fault.detail);
    CHECK(w.state == RK_WORKER_RUNNING && w.faults >= 1, "worker %s, %llu faults", w.state_name,
          (unsigned long long)w.faults);
    echoes(a, 1000, 10000);
    rk_actor_close(a);
    rk_runtime_close(rt);
}

int main(void)
{
    gpu_require();
    long_job(RK_ISOLATION_AUTO);
    long_job(RK_ISOLATION_NONE);
    endless_job();
    burst_of_jobs(RK_ISOLATION_AUTO);
    abort_on_full_ring();
    printf("OK\n");
    return 0;
}
