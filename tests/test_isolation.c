/* test_isolation.c - the supervisor, exercised with CPU workers (the CI
 * machines have no GPU; a CUDA worker goes through the same code):
 * kill -9 under load (every request answered exactly once, no zombie, no
 * leaked fd), a poison request and the crash-loop policy, an endless loop
 * past its deadline, a stopped worker's silent heartbeat, a worker that
 * breaks the control protocol, and the bad configurations. Suite: isolation. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <rk/rk.h>

#include "worker_proto.h" /* (a worker that misbehaves on purpose) */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char *name, int dflt)
{
    const char *e = getenv(name);
    return e && *e ? atoi(e) : dflt;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own fd */
}

/* No child process is left, not even a zombie. */
static void assert_no_children(void)
{
    int st;
    errno = 0;
    pid_t r = waitpid(-1, &st, WNOHANG);
    if (r != -1 || errno != ECHILD)
        fail_msg("a child process is left: waitpid says %d (%s)", (int)r, r == 0 ? "still running" : "a zombie");
}

/* Stops a worker and waits until the kernel says it is stopped. */
static void stop_process(int pid)
{
    assert_int_equal(kill(pid, SIGSTOP), 0);
    char path[64], st[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    for (int i = 0; i < 1000; i++) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(st, 1, sizeof st - 1, f) : 0;
        if (f)
            fclose(f);
        st[n] = 0;
        const char *p = strrchr(st, ')');
        if (p && p[1] == ' ' && p[2] == 'T')
            return;
        usleep(1000);
    }
    fail_msg("worker %d did not stop", pid);
}

static rk_config worker_config(void)
{
    rk_config c;
    rk_config_init(&c);
    c.backend = RK_BACKEND_CPU;
    c.isolation = RK_ISOLATION_PROCESS;
    c.arena_size = 16 << 20;
    c.max_payload = 4 << 20;
    return c;
}

static rk_runtime *open_rt(const rk_config *c)
{
    rk_runtime *rt = NULL;
    int rc = rk_runtime_open(&rt, c);
    if (rc)
        fail_msg("rk_runtime_open: %s: %s", rk_err_name(rc), rk_last_detail());
    return rt;
}

static rk_worker_info worker(rk_runtime *rt)
{
    rk_worker_info w;
    rk_runtime_worker(rt, &w);
    return w;
}

/* Waits until the worker serves again with a pid other than `old`. */
static rk_worker_info wait_replaced(rk_runtime *rt, int old, double timeout_s)
{
    double t0 = now_s();
    rk_worker_info w;
    for (;;) {
        w = worker(rt);
        if (w.state == RK_WORKER_RUNNING && w.pid > 0 && w.pid != old)
            return w;
        if (now_s() - t0 > timeout_s)
            fail_msg("worker %d not replaced within %.1f s (state %s)", old, timeout_s, w.state_name);
        usleep(1000);
    }
}

static void test_worker_basics(void **state)
{
    (void)state;
    int fds = count_fds();
    rk_config c = worker_config();
    c.grid = 3, c.block = 96;
    rk_runtime *rt = open_rt(&c);
    rk_info in;
    rk_runtime_info(rt, &in);
    assert_string_equal(in.backend_name, "cpu");
    assert_non_null(strstr(in.why, "worker process"));
    /* no kernel: the configured values, as in process (they were 0) */
    assert_int_equal(in.grid, 3);
    assert_int_equal(in.block, 96);
    rk_worker_info w = worker(rt);
    assert_int_equal(w.state, RK_WORKER_RUNNING);
    assert_string_equal(w.state_name, "running");
    assert_string_equal(w.backend, "cpu");
    assert_true(w.pid > 0);
    assert_int_equal(kill(w.pid, 0), 0);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    /* inline and arena payloads through the worker's mapping */
    static uint8_t buf[1 << 20];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 13 + 5);
    size_t sizes[] = {0, 7, 100, 4096, sizeof buf};
    for (size_t i = 0; i < 5; i++) {
        rk_reply r;
        assert_int_equal(rk_actor_call(a, RK_OP_ECHO, buf, sizes[i], 0, &r, 5000), 0);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.len, sizes[i]);
        if (sizes[i])
            assert_memory_equal(r.data, buf, sizes[i]);
        rk_reply_release(a, &r);
    }
    float v[8] = {1, 2, 3, 4, 10, 20, 30, 40};
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_VADD, v, sizeof v, 0, &r, 5000), 0);
    assert_int_equal(r.len, 16);
    assert_true(((const float *)r.data)[3] == 44.0f);
    rk_reply_release(a, &r);
    /* without test_faults the test-only ops are refused before they leave */
    assert_int_equal(rk_actor_send(a, RK_OP_FAULT, NULL, 0, 0, NULL, 0), -RK_EINVAL);
    assert_int_equal(rk_runtime_retry_gpu(rt), 0); /* not degraded: nothing to do */
    rk_runtime_close(rt);
    assert_int_equal(kill(w.pid, 0), -1); /* gone */
    assert_no_children();
    assert_int_equal(count_fds(), fds);
}

/* ---- kill -9 while 8 actors pipeline ---- */

enum { LOAD_THREADS = 8, LOAD_WINDOW = 32 };

typedef struct load {
    rk_runtime *rt;
    int index;
    atomic_int *stop;
    uint64_t sent, answered, bad, dup;
    uint8_t *seen; /* per sequence number */
    size_t cap;
    bool batch; /* through rk_actor_send_batch / recv_batch, batches of 1..LOAD_WINDOW */
} load;

/* Sends up to `room` echoes carrying (thread, seq): one by one, or as one
 * batch of at most the next batch size. */
static void load_send(load *l, rk_actor *a, uint64_t *seq, uint32_t room, int *bsize)
{
    uint64_t msg[LOAD_WINDOW][2];
    rk_send_req q[LOAD_WINDOW];
    uint32_t n = 0;
    for (; n < room && *seq + n < l->cap && (l->batch ? n < (uint32_t)*bsize : n < 1); n++) {
        msg[n][0] = (uint64_t)l->index, msg[n][1] = *seq + n;
        q[n] = (rk_send_req){.type = RK_OP_ECHO, .data = msg[n], .len = sizeof msg[n]};
    }
    if (!n)
        return;
    *bsize = *bsize % LOAD_WINDOW + 1;
    int k = l->batch ? rk_actor_send_batch(a, q, (int)n, NULL, 5000)
                     : rk_actor_send(a, RK_OP_ECHO, msg[0], sizeof msg[0], 0, NULL, 5000) ? -1 : 1;
    if (k < 0) {
        l->bad++;
        return;
    }
    *seq += (uint64_t)k;
    l->sent += (uint64_t)k;
}

static void load_check(load *l, const rk_reply *r)
{
    uint64_t got[2] = {~0ull, ~0ull};
    if (r->status == 0 && r->len == sizeof got)
        memcpy(got, r->data, sizeof got);
    if (got[0] != (uint64_t)l->index || got[1] >= l->cap)
        l->bad++;
    else if (l->seen[got[1]]++)
        l->dup++;
    else
        l->answered++;
}

/* Pipelines 16-byte echoes that carry (thread, seq); checks each reply's
 * bytes and that each seq comes back exactly once. */
static void *load_main(void *arg)
{
    load *l = arg;
    rk_actor *a;
    if (rk_actor_open(l->rt, &a) != 0)
        return NULL;
    uint64_t seq = 0;
    int bsize = 1;
    for (;;) {
        bool stopping = atomic_load(l->stop);
        uint64_t bad = l->bad;
        while (!stopping && rk_actor_inflight(a) < LOAD_WINDOW && seq < l->cap && l->bad == bad)
            load_send(l, a, &seq, LOAD_WINDOW - rk_actor_inflight(a), &bsize);
        if (stopping && rk_actor_inflight(a) == 0)
            break;
        rk_reply r[LOAD_WINDOW];
        int k = l->batch ? rk_actor_recv_batch(a, r, LOAD_WINDOW, 20000)
                         : rk_actor_recv(a, r, 20000) ? -1 : 1;
        if (k < 0) {
            l->bad++;
            break;
        }
        for (int i = 0; i < k; i++)
            load_check(l, &r[i]);
        rk_reply_release_batch(a, r, k);
    }
    rk_actor_close(a);
    return NULL;
}

static void kill9_under_load(bool batch)
{
    /* the batch run: a quarter of the kills, the same checks */
    const int kills = batch ? (env_int("RK_TEST_KILLS", 100) + 3) / 4 : env_int("RK_TEST_KILLS", 100);
    int fds = count_fds();
    rk_config c = worker_config();
    c.standby = 1; /* a warm CPU worker takes over; the next is spawned meanwhile */
    c.fault_limit = (uint32_t)kills + 1; /* these kills are not a crash loop */
    rk_runtime *rt = open_rt(&c);
    atomic_int stop = 0;
    load l[LOAD_THREADS];
    pthread_t t[LOAD_THREADS];
    for (int i = 0; i < LOAD_THREADS; i++) {
        l[i] = (load){.rt = rt, .index = i, .stop = &stop, .cap = 1u << 22, .batch = batch};
        l[i].seen = calloc(l[i].cap, 1);
        pthread_create(&t[i], NULL, load_main, &l[i]);
    }
    double t0 = now_s(), worst = 0;
    for (int k = 0; k < kills; k++) {
        /* some replies between kills: each worker serves before it dies */
        rk_stats s0;
        rk_runtime_stats(rt, &s0);
        for (rk_stats s1 = s0; s1.replies < s0.replies + 200; rk_runtime_stats(rt, &s1))
            usleep(200);
        rk_worker_info w = worker(rt);
        /* every 10th kill meets a ready standby (the others may come
         * before the next one is up: both take-overs are exercised) */
        for (double t1 = now_s(); k % 10 == 0 && !w.standby_ready; w = worker(rt)) {
            if (now_s() - t1 > 10)
                fail_msg("no standby ready within 10 s (kill %d)", k);
            usleep(1000);
        }
        assert_int_equal(w.state, RK_WORKER_RUNNING);
        double k0 = now_s();
        assert_int_equal(kill(w.pid, SIGKILL), 0);
        w = wait_replaced(rt, w.pid, 10);
        if (now_s() - k0 > worst)
            worst = now_s() - k0;
    }
    atomic_store(&stop, 1);
    uint64_t sent = 0, answered = 0, bad = 0, dup = 0;
    for (int i = 0; i < LOAD_THREADS; i++) {
        pthread_join(t[i], NULL);
        sent += l[i].sent, answered += l[i].answered, bad += l[i].bad, dup += l[i].dup;
        free(l[i].seen);
    }
    rk_worker_info w = worker(rt);
    print_message("%s%d kills in %.2f s (slowest replacement %.1f ms): %llu requests, %llu answered, %llu bad, "
                  "%llu duplicated; %llu restarts, last recovery %.2f ms\n",
                  batch ? "batches: " : "", kills, now_s() - t0, worst * 1e3, (unsigned long long)sent, (unsigned long long)answered,
                  (unsigned long long)bad, (unsigned long long)dup, (unsigned long long)w.restarts,
                  (double)w.last_recovery_ns / 1e6);
    assert_int_equal(bad, 0);
    assert_int_equal(dup, 0);
    assert_int_equal(answered, sent);
    assert_true(w.restarts >= (uint64_t)kills);
    assert_int_equal(w.poisoned, 0); /* echo is trusted: no suspects */
    /* where each recovery's time went: the last 64 are kept */
    rk_recovery h[80];
    int nh = rk_runtime_recoveries(rt, h, 80);
    assert_int_equal(nh, kills < 64 ? kills : 64);
    int warm = 0, replied = 0;
    for (int i = 0; i < nh; i++) {
        assert_true(h[i].detected_at > 0 && h[i].teardown_ns > 0 && h[i].start_ns > 0);
        assert_true(i == 0 || h[i].detected_at > h[i - 1].detected_at);
        assert_int_equal(h[i].blamed, 0);
        warm += h[i].warm;
        replied += h[i].first_reply_ns > h[i].teardown_ns;
        if (getenv("RK_TEST_VERBOSE"))
            print_message("recovery %d: teardown %.2f start %.2f first %.2f ms\n", i, h[i].teardown_ns / 1e6,
                          h[i].start_ns / 1e6, h[i].first_reply_ns / 1e6);
    }
    print_message("%d of the last %d recoveries were warm take-overs, %d saw a reply\n", warm, nh, replied);
    assert_true(replied >= nh - 1); /* each had replies before the next kill but the last */
    assert_true(warm >= nh / 10 - 1);
    rk_runtime_close(rt);
    assert_no_children();
    assert_int_equal(count_fds(), fds);
}

static void test_kill9_under_load(void **state)
{
    (void)state;
    kill9_under_load(false);
}

static void test_kill9_under_batch_load(void **state)
{
    (void)state;
    kill9_under_load(true);
}

/* ---- a poison request, then a crash loop ---- */

static void test_poison_and_crash_loop(void **state)
{
    (void)state;
    rk_config c = worker_config();
    c.test_faults = 1;
    c.fault_limit = 4;
    c.fault_window_ms = 60000;
    rk_runtime *rt = open_rt(&c);
    rk_actor *a, *b;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    assert_int_equal(rk_actor_open(rt, &b), 0);
    /* a poison among innocents of two actors */
    uint64_t poison;
    int x = 7;
    for (int i = 0; i < 5; i++)
        assert_int_equal(rk_actor_send(b, RK_OP_ECHO, &i, sizeof i, 0, NULL, 1000), 0);
    assert_int_equal(rk_actor_send(a, RK_OP_FAULT, &x, sizeof x, 0, &poison, 1000), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(rk_actor_send(a, RK_OP_ECHO, &i, sizeof i, 0, NULL, 1000), 0);
    int n_dev = 0, n_ok = 0;
    for (int i = 0; i < 6; i++) {
        rk_reply r;
        assert_int_equal(rk_actor_recv(a, &r, 10000), 0);
        if (r.status == -RK_EDEVICE) {
            n_dev++;
            assert_true(r.id == poison);
            assert_non_null(strstr(rk_last_detail(), "faulted its worker twice"));
            assert_non_null(strstr(rk_last_detail(), "(fault (test-only), type 3)"));
        } else {
            assert_int_equal(r.status, 0);
            n_ok++;
        }
        rk_reply_release(a, &r);
    }
    for (int i = 0; i < 5; i++) {
        rk_reply r;
        assert_int_equal(rk_actor_recv(b, &r, 10000), 0);
        assert_int_equal(r.status, 0);
        assert_int_equal(*(const int *)r.data, i);
        rk_reply_release(b, &r);
    }
    assert_int_equal(n_dev, 1);
    assert_int_equal(n_ok, 5);
    rk_worker_info w = worker(rt);
    assert_int_equal(w.state, RK_WORKER_RUNNING);
    assert_int_equal(w.faults, 2); /* the first run and the lone retry */
    assert_int_equal(w.poisoned, 1);
    assert_int_equal(w.last_fault.actor, 0);
    assert_int_equal(w.last_fault.type, RK_OP_FAULT);
    assert_true(w.last_fault.request_id == poison);
    assert_non_null(strstr(w.last_fault.detail, "signal 11"));

    /* two more faults make 4 within the window: the crash loop */
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_FAULT, &x, sizeof x, 0, &r, 10000), 0);
    assert_int_equal(r.status, -RK_EDEVICE);
    rk_reply_release(a, &r);
    w = worker(rt);
    assert_int_equal(w.state, RK_WORKER_DEGRADED);
    assert_string_equal(w.state_name, "degraded");
    assert_int_equal(w.pid, 0);
    assert_non_null(strstr(w.why, "fault_limit"));
    /* built-ins are served on the CPU; the rest fails at once */
    float v[4] = {1, 2, 3, 4};
    assert_int_equal(rk_actor_call(b, RK_OP_VADD, v, sizeof v, 0, &r, 5000), 0);
    assert_int_equal(r.status, 0);
    assert_true(((const float *)r.data)[1] == 6.0f);
    rk_reply_release(b, &r);
    double t0 = now_s();
    assert_int_equal(rk_actor_call(a, RK_OP_FAULT, &x, sizeof x, 0, &r, 5000), 0);
    assert_int_equal(r.status, -RK_EDEVICE);
    assert_true(now_s() - t0 < 1.0);
    /* ... saying why, not "device fault" */
    assert_non_null(strstr(rk_last_detail(), "only the built-ins run"));
    rk_reply_release(a, &r);
    assert_int_equal(worker(rt).faults, 4);
    /* the operator's action */
    assert_int_equal(rk_runtime_retry_gpu(rt), 0);
    w = worker(rt);
    assert_int_equal(w.state, RK_WORKER_RUNNING);
    assert_true(w.pid > 0);
    assert_string_equal(w.why, "");
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, &x, sizeof x, 0, &r, 5000), 0);
    assert_int_equal(r.status, 0);
    rk_reply_release(a, &r);
    rk_runtime_close(rt);
    assert_no_children();
}

/* ---- a poison's retry waits for the warm standby: both recoveries warm ---- */

static void test_poison_meets_warm_standby(void **state)
{
    (void)state;
    rk_config c = worker_config();
    c.test_faults = 1;
    c.standby = 1;
    c.fault_limit = 100;
    rk_runtime *rt = open_rt(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    const int n = 3;
    for (int k = 0; k < n; k++) {
        for (double t0 = now_s(); !worker(rt).standby_ready; usleep(1000))
            if (now_s() - t0 > 10)
                fail_msg("no standby ready within 10 s");
        rk_reply r;
        assert_int_equal(rk_actor_call(a, RK_OP_FAULT, NULL, 0, 0, &r, 10000), 0);
        assert_int_equal(r.status, -RK_EDEVICE);
        rk_reply_release(a, &r);
        int x = k;
        assert_int_equal(rk_actor_call(a, RK_OP_ECHO, &x, sizeof x, 0, &r, 10000), 0);
        assert_int_equal(r.status, 0);
        rk_reply_release(a, &r);
    }
    rk_recovery h[8];
    assert_int_equal(rk_runtime_recoveries(rt, h, 8), 2 * n);
    for (int i = 0; i < 2 * n; i++) {
        assert_int_equal(h[i].warm, 1); /* the retry waited for the next standby */
        assert_int_equal(h[i].blamed, 1);
        if (i % 2 == 0) /* the suspect was let go once that standby was ready */
            assert_true(h[i].suspects_ns >= h[i].teardown_ns + h[i].start_ns);
    }
    assert_int_equal(worker(rt).poisoned, (uint64_t)n);
    rk_runtime_close(rt);
    assert_no_children();
}

/* ---- an endless loop past its deadline ---- */

static void test_endless_loop_deadline(void **state)
{
    (void)state;
    rk_config c = worker_config();
    c.test_faults = 1;
    c.request_deadline_ms = 300;
    rk_runtime *rt = open_rt(&c);
    rk_actor *a, *b;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    assert_int_equal(rk_actor_open(rt, &b), 0);
    /* a nap (RK_OP_HANG with a length) under the deadline: answered RK_OK,
     * no fault (faults stay 2 below) */
    const uint32_t nap_ms = 100;
    rk_reply r;
    double t0 = now_s();
    assert_int_equal(rk_actor_call(a, RK_OP_HANG, &nap_ms, sizeof nap_ms, 0, &r, 10000), 0);
    assert_int_equal(r.status, 0);
    assert_true(now_s() - t0 >= 0.09);
    rk_reply_release(a, &r);
    t0 = now_s();
    uint64_t hang;
    assert_int_equal(rk_actor_send(a, RK_OP_HANG, NULL, 0, 0, &hang, 1000), 0);
    int x = 42;
    assert_int_equal(rk_actor_send(b, RK_OP_ECHO, &x, sizeof x, 0, NULL, 1000), 0);
    assert_int_equal(rk_actor_recv(a, &r, 10000), 0);
    double dt = now_s() - t0;
    assert_true(r.id == hang);
    assert_int_equal(r.status, -RK_EDEVICE);
    rk_reply_release(a, &r);
    assert_int_equal(rk_actor_recv(b, &r, 10000), 0);
    assert_int_equal(r.status, 0);
    assert_int_equal(*(const int *)r.data, x);
    rk_reply_release(b, &r);
    rk_worker_info w = worker(rt);
    print_message("endless loop answered RK_EDEVICE after %.0f ms: %s\n", dt * 1e3, w.last_fault.detail);
    assert_true(dt >= 0.6 && dt < 5.0); /* two deadlines: the first run and the lone retry */
    assert_int_equal(w.faults, 2);
    assert_int_equal(w.last_fault.error, -RK_ETIMEDOUT);
    assert_non_null(strstr(w.last_fault.detail, "deadline"));
    assert_int_equal(w.state, RK_WORKER_RUNNING);
    rk_runtime_close(rt);
    assert_no_children();
}

/* ---- rk_runtime_info while the runtime relaunches ---- */

typedef struct info_reader {
    rk_runtime *rt;
    atomic_int stop;
    atomic_long reads;
    long torn;
} info_reader;

static void *read_info(void *arg)
{
    info_reader *ir = arg;
    while (!atomic_load(&ir->stop)) {
        rk_info in;
        rk_runtime_info(ir->rt, &in);
        /* only whole configurations: 2 x 128 or 3 x 256 */
        if (!((in.grid == 2 && in.block == 128) || (in.grid == 3 && in.block == 256)))
            ir->torn++;
        atomic_fetch_add(&ir->reads, 1);
    }
    return NULL;
}

/* rk_runtime_info is thread-safe: a copy taken while relaunches rewrite
 * the configuration is one of them, never a mix (and TSan sees no race;
 * until 2026-11-27 it was a plain copy of what a relaunch wrote). */
static void test_info_during_relaunch(void **state)
{
    (void)state;
    rk_config c = worker_config();
    c.grid = 2, c.block = 128;
    rk_runtime *rt = open_rt(&c);
    info_reader ir = {.rt = rt};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_info, &ir), 0);
    while (atomic_load(&ir.reads) == 0) /* (on a loaded machine it may start late) */
        sched_yield();
    for (int i = 0; i < 2000; i++)
        assert_int_equal(rk_runtime_relaunch(rt, i % 2 ? 2 : 3, i % 2 ? 128 : 256, 0), 0);
    atomic_store(&ir.stop, 1);
    pthread_join(t, NULL);
    print_message("%ld reads during 2000 relaunches, %ld torn\n", atomic_load(&ir.reads), ir.torn);
    assert_int_equal(ir.torn, 0);
    rk_runtime_close(rt);
    assert_no_children();
}

/* ---- a CPU actor slower than the heartbeat period ---- */

/* n replies on a, each RK_OK (a failure names the worker's last fault). */
static void recv_ok(rk_runtime *rt, rk_actor *a, int n)
{
    for (int i = 0; i < n; i++) {
        rk_reply r;
        assert_int_equal(rk_actor_recv(a, &r, 20000), 0);
        if (r.status)
            print_message("reply %d: %s (%s)\n", i, rk_err_name(r.status), worker(rt).last_fault.detail);
        assert_int_equal(r.status, 0);
        rk_reply_release(a, &r);
    }
}

/* A request that runs longer than heartbeat_ms (a slow CPU actor, here a
 * 1.5 s nap), and two of 0.7 s back to back, are under their deadline
 * (request_deadline_ms): answered RK_OK, no fault. Until 2026-11-27 the CPU
 * consumer stamped no heartbeat while a handler ran, so the worker was
 * killed for a silent heartbeat and the request poisoned: a CPU worker's
 * actors had 1 s (heartbeat_ms), not their deadline. */
static void test_slow_cpu_actor(void **state)
{
    (void)state;
    rk_config c = worker_config();
    c.test_faults = 1;
    c.heartbeat_ms = 1000;
    c.request_deadline_ms = 5000;
    rk_runtime *rt = open_rt(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    const uint32_t naps[3] = {1500, 700, 700};
    for (int i = 0; i < 3; i++)
        assert_int_equal(rk_actor_send(a, RK_OP_HANG, &naps[i], sizeof naps[i], 0, NULL, 1000), 0);
    recv_ok(rt, a, 3);
    rk_worker_info w = worker(rt);
    assert_int_equal(w.faults, 0);
    rk_runtime_close(rt);
    /* heartbeat_ms near its floor (50): the control thread looks often
     * enough (INIT's hb_period_us) */
    c.heartbeat_ms = 80;
    rt = open_rt(&c);
    assert_int_equal(rk_actor_open(rt, &a), 0);
    const uint32_t nap = 400;
    assert_int_equal(rk_actor_send(a, RK_OP_HANG, &nap, sizeof nap, 0, NULL, 1000), 0);
    recv_ok(rt, a, 1);
    assert_int_equal(worker(rt).faults, 0);
    rk_runtime_close(rt);
    assert_no_children();
}

/* ---- a suspect's retry queued behind slow requests ---- */

/* The suspect's reply: request id, RK_OK (what: the case, printed). */
static void expect_suspect_ok(rk_actor *a, uint64_t id, const char *what)
{
    const double t0 = now_s();
    rk_reply r;
    assert_int_equal(rk_actor_recv(a, &r, 20000), 0); /* (re-posts it first, if owed) */
    char why[300] = "";
    rk_reply_detail(a, &r, why, sizeof why);
    print_message("%s: answered %s after %.2f s %s\n", what, rk_err_name(r.status), now_s() - t0, why);
    assert_true(r.id == id);
    assert_int_equal(r.status, 0);
    rk_reply_release(a, &r);
}

/* The suspect tests' start: a runtime of c (test faults, a 1 s deadline),
 * actors a and d, and a's 0.6 s nap running when its worker is killed: a
 * suspect (strike 1), its id in *id. Returns the fresh worker. */
static rk_worker_info suspect_after_kill(rk_config *c, rk_runtime **rt, rk_actor **a, rk_actor **d, uint64_t *id)
{
    c->test_faults = 1;
    c->request_deadline_ms = 1000;
    *rt = open_rt(c);
    assert_int_equal(rk_actor_open(*rt, a), 0);
    assert_int_equal(rk_actor_open(*rt, d), 0);
    const uint32_t nap = 600; /* under the deadline */
    assert_int_equal(rk_actor_send(*a, RK_OP_HANG, &nap, sizeof nap, 0, id, 1000), 0);
    usleep(200 * 1000); /* it runs */
    rk_worker_info w = worker(*rt);
    assert_int_equal(kill(w.pid, SIGKILL), 0);
    return wait_replaced(*rt, w.pid, 10.0);
}

/* Actor a's nap is running when its worker is killed: a suspect, retried
 * alone. Its retry then waits in H2D behind d's naps (five of 0.7 s: 3.5
 * s, each under the deadline, the consumer taking one every 0.7 s) longer
 * than the suspect watch's limit (request_deadline_ms, 1 s). Its time
 * starts when the consumer takes it: until 2026-11-27 the watch timed it
 * from its send, gave the waiting retry its second strike (answered with
 * an error) and replaced the healthy worker. The kill is the only fault. */
static void test_suspect_behind_slow_requests(void **state)
{
    (void)state;
    rk_config c = worker_config();
    rk_runtime *rt;
    rk_actor *a, *d;
    uint64_t id;
    rk_worker_info w = suspect_after_kill(&c, &rt, &a, &d, &id);
    const uint32_t nap_d = 700; /* under the deadline */
    for (int i = 0; i < 5; i++) /* sent before a's retry: it waits behind them */
        assert_int_equal(rk_actor_send(d, RK_OP_HANG, &nap_d, sizeof nap_d, 0, NULL, 1000), 0);
    expect_suspect_ok(a, id, "a suspect's retry behind 3.5 s of requests");
    recv_ok(rt, d, 5);
    w = worker(rt);
    assert_int_equal(w.faults, 1);
    assert_int_equal(w.state, RK_WORKER_RUNNING);
    rk_runtime_close(rt);
    assert_no_children();
}

/* A suspect's retry that an unrelated fault drops (it waited in H2D behind
 * d's naps when the worker was killed again) is re-posted by its owner,
 * and its time starts over then: its owner, busy elsewhere for longer than
 * the deadline, finds it answered RK_OK. Until 2026-11-27 the token and
 * its clock outlived the recovery, and the dropped retry got its second
 * strike (found by a review). */
static void test_suspect_retry_dropped(void **state)
{
    (void)state;
    rk_config c = worker_config();
    rk_runtime *rt;
    rk_actor *a, *d;
    uint64_t id;
    rk_worker_info w = suspect_after_kill(&c, &rt, &a, &d, &id);
    const uint32_t nap_d = 700;
    for (int i = 0; i < 3; i++)
        assert_int_equal(rk_actor_send(d, RK_OP_HANG, &nap_d, sizeof nap_d, 0, NULL, 1000), 0);
    rk_reply r;
    assert_int_equal(rk_actor_recv(a, &r, 20), -RK_ETIMEDOUT); /* re-posts a's retry, behind d's */
    usleep(300 * 1000);
    assert_int_equal(kill(w.pid, SIGKILL), 0); /* during d's nap: a's retry never ran */
    w = wait_replaced(rt, w.pid, 10.0);
    usleep(1500 * 1000); /* a's owner is elsewhere */
    expect_suspect_ok(a, id, "a retry dropped by another fault");
    recv_ok(rt, d, 3); /* (the killed nap's retry among them) */
    w = worker(rt);
    assert_int_equal(w.poisoned, 0);
    rk_runtime_close(rt);
    assert_no_children();
}

/* A suspect's retry behind a consumer that waits for reply-ring room
 * (nobody reads d's replies for 1.5 s) is not late: the consumer stopped
 * short of it for want of room, which the watch's drain makes. Until
 * 2026-11-27 it got its second strike there (found by a review). */
static void test_suspect_behind_full_reply_ring(void **state)
{
    (void)state;
    rk_config c = worker_config();
    c.ring_slots = 64;
    c.reply_rings = 2; /* a's replies and d's on rings of their own */
    rk_runtime *rt;
    rk_actor *a, *d;
    uint64_t id;
    rk_worker_info w = suspect_after_kill(&c, &rt, &a, &d, &id);
    int x = 5;
    for (int i = 0; i < 100; i++) /* more than d's reply ring holds */
        assert_int_equal(rk_actor_send(d, RK_OP_ECHO, &x, sizeof x, 0, NULL, 1000), 0);
    rk_reply r;
    assert_int_equal(rk_actor_recv(a, &r, 0), -RK_ETIMEDOUT); /* re-posts a's retry */
    usleep(1500 * 1000);
    expect_suspect_ok(a, id, "a retry behind a full reply ring");
    recv_ok(rt, d, 100);
    w = worker(rt);
    assert_int_equal(w.faults, 1);
    assert_int_equal(w.poisoned, 0);
    rk_runtime_close(rt);
    assert_no_children();
}

/* ---- an actor closed with a request in flight, then a worker change ---- */

/* rk_actor_open, tried for up to 2 s while the actor slots are taken */
static int open_when_free(rk_runtime *rt, rk_actor **out)
{
    int rc = -1;
    for (int i = 0; i < 100 && rc; i++) {
        rc = rk_actor_open(rt, out);
        if (rc)
            usleep(20000);
    }
    return rc;
}

/* Actor a is closed while its 64 KiB echo (arena space) waits behind an
 * endless loop; the deadline replaces the worker, which drops the old
 * generation's requests, and nobody re-posts for a closed actor: its
 * record, its arena space and its actor slot come back (until 2026-11-26
 * they stayed taken for good: with max_actors 2 no actor could open). */
static void test_closed_actor_across_restart(void **state)
{
    (void)state;
    rk_config c = worker_config();
    c.test_faults = 1;
    c.request_deadline_ms = 300;
    c.max_actors = 2;
    rk_runtime *rt = open_rt(&c);
    rk_actor *a, *b;
    assert_int_equal(rk_actor_open(rt, &b), 0);
    assert_int_equal(rk_actor_open(rt, &a), 0);
    uint64_t hang;
    assert_int_equal(rk_actor_send(b, RK_OP_HANG, NULL, 0, 0, &hang, 1000), 0);
    usleep(50000); /* the worker runs it */
    static uint8_t big[65536];
    memset(big, 7, sizeof big);
    assert_int_equal(rk_actor_send(a, RK_OP_ECHO, big, sizeof big, 0, NULL, 1000), 0);
    rk_actor_close(a);
    rk_reply r;
    assert_int_equal(rk_actor_recv(b, &r, 10000), 0); /* after the deadlines: RK_EDEVICE */
    assert_true(r.id == hang);
    rk_reply_release(b, &r);
    rk_actor *a2 = NULL;
    int rc = open_when_free(rt, &a2); /* the slot comes back with the worker change */
    if (rc)
        fail_msg("the closed actor's slot never came back: %s: %s", rk_err_name(rc), rk_last_detail());
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.arena_used, 0);
    int x = 5;
    assert_int_equal(rk_actor_call(a2, RK_OP_ECHO, &x, sizeof x, 0, &r, 5000), 0);
    assert_int_equal(*(const int *)r.data, x);
    rk_reply_release(a2, &r);
    rk_actor_close(a2);
    rk_actor_close(b);
    rk_runtime_close(rt);
    assert_no_children();
}

/* ---- an actor closed with requests queued, then the operator's retry ---- */

/* Degraded (a crash loop), the CPU thread that stands in is stuck posting
 * a reply on a full reply ring (nobody waits), with three of actor b's
 * 64 KiB echoes queued behind it; b is closed and the GPU is retried: the
 * fresh worker drops those (the generation moved on) and nobody re-posts
 * for a closed actor, so their records, arena space and b's slot must come
 * back (the retry left them taken for good: with max_actors 2 no actor
 * could open again). */
static void test_closed_actor_across_retry(void **state)
{
    (void)state;
    rk_config c = worker_config();
    c.test_faults = 1;
    c.fault_limit = 2;
    c.max_actors = 2;
    c.ring_slots = 4;
    c.reply_rings = 1;
    rk_runtime *rt = open_rt(&c);
    rk_actor *a, *b;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    assert_int_equal(rk_actor_open(rt, &b), 0);
    rk_reply r;
    int x = 7;
    assert_int_equal(rk_actor_call(a, RK_OP_FAULT, &x, sizeof x, 0, &r, 10000), 0);
    assert_int_equal(r.status, -RK_EDEVICE); /* two faults: degraded */
    rk_reply_release(a, &r);
    assert_int_equal(worker(rt).state, RK_WORKER_DEGRADED);
    for (int i = 0; i < 4; i++) /* answered; their replies fill the reply ring */
        assert_int_equal(rk_actor_send(b, RK_OP_ECHO, &i, sizeof i, 0, NULL, 1000), 0);
    usleep(50000);
    static uint8_t big[65536];
    for (int i = 0; i < 4; i++) /* the first is taken and its reply waits for room */
        assert_int_equal(rk_actor_send(b, RK_OP_ECHO, big, sizeof big, 0, NULL, 1000), 0);
    usleep(50000);
    rk_actor_close(b);
    assert_int_equal(rk_runtime_retry_gpu(rt), 0);
    rk_actor *b2 = NULL;
    int rc = open_when_free(rt, &b2);
    rk_stats st;
    rk_runtime_stats(rt, &st);
    int call = rc ? rc : rk_actor_call(b2, RK_OP_ECHO, &x, sizeof x, 0, &r, 5000);
    if (call == 0) {
        assert_int_equal(*(const int *)r.data, x);
        rk_reply_release(b2, &r);
    }
    rk_runtime_close(rt); /* first: a failure leaves no worker to the next test */
    if (rc)
        fail_msg("the closed actor's slot never came back: %s", rk_err_name(rc));
    assert_int_equal(st.arena_used, 0);
    assert_int_equal(call, 0);
    assert_no_children();
}

/* ---- a suspect's retry that gets no answer: its second strike ---- */

static void test_lost_retry(void **state)
{
    (void)state;
    rk_config c = worker_config();
    c.test_faults = 1;
    c.request_deadline_ms = 300;
    setenv("RK_TEST_LOSE_RETRIES", "1", 1); /* the workers drop retried test faults */
    rk_runtime *rt = open_rt(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    double t0 = now_s();
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_FAULT, NULL, 0, 0, &r, 10000), 0);
    double dt = now_s() - t0;
    unsetenv("RK_TEST_LOSE_RETRIES");
    assert_int_equal(r.status, -RK_EDEVICE);
    rk_reply_release(a, &r);
    rk_worker_info w = worker(rt);
    print_message("a lost retry answered RK_EDEVICE after %.0f ms: %s\n", dt * 1e3, w.last_fault.detail);
    assert_non_null(strstr(w.last_fault.detail, "not answered"));
    assert_int_equal(w.faults, 2);
    assert_int_equal(w.poisoned, 1);
    assert_true(dt >= 0.3 && dt < 5);
    int x = 1;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, &x, sizeof x, 0, &r, 5000), 0);
    assert_int_equal(r.status, 0);
    rk_reply_release(a, &r);
    rk_runtime_close(rt);
    assert_no_children();
}

/* ---- a stopped worker: its heartbeat goes silent ---- */

static void test_silent_heartbeat(void **state)
{
    (void)state;
    rk_config c = worker_config();
    c.heartbeat_ms = 200;
    rk_runtime *rt = open_rt(&c);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    int old = worker(rt).pid;
    stop_process(old);
    double t0 = now_s();
    int x = 3;
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, &x, sizeof x, 0, &r, 10000), 0);
    assert_int_equal(r.status, 0);
    rk_reply_release(a, &r);
    double dt = now_s() - t0;
    rk_worker_info w = worker(rt);
    assert_true(w.pid != old);
    assert_non_null(strstr(w.last_fault.detail, "heartbeat silent"));
    assert_true(dt >= 0.2 && dt < 5.0);
    assert_int_equal(kill(old, 0), -1); /* killed and reaped, though stopped */
    rk_runtime_close(rt);
    assert_no_children();
}

/* ---- configurations a worker cannot serve ---- */

static int cpu_twice(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    if (in_len > cap)
        return -RK_EMSGSIZE;
    memcpy(out, in, in_len);
    *out_len = in_len;
    return 0;
}

static void test_bad_configurations(void **state)
{
    (void)state;
    rk_config c = worker_config();
    rk_actor_def d = {.type = RK_OP_USER, .name = "twice", .cpu = cpu_twice};
    c.actors = &d;
    c.n_actors = 1;
    rk_runtime *rt = (rk_runtime *)1;
    assert_int_equal(rk_runtime_open(&rt, &c), -RK_EINVAL);
    assert_null(rt);
    assert_non_null(strstr(rk_last_detail(), "cannot run in a worker process"));
    /* the same actors with isolation auto run in this process */
    c.isolation = RK_ISOLATION_AUTO;
    rt = open_rt(&c);
    assert_int_equal(worker(rt).state, RK_WORKER_NONE);
    assert_int_equal(rk_runtime_retry_gpu(rt), -RK_ENOTSUP);
    rk_runtime_close(rt);
    /* a worker program that is not there: a clear error, nothing left */
    c = worker_config();
    setenv("RK_WORKER", "/nonexistent/rk-worker", 1);
    assert_int_equal(rk_runtime_open(&rt, &c), -RK_ENOTSUP);
    assert_non_null(strstr(rk_last_detail(), "/nonexistent/rk-worker"));
    unsetenv("RK_WORKER");
    c.heartbeat_ms = 10;
    assert_int_equal(rk_runtime_open(&rt, &c), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "heartbeat_ms 10"));
    assert_no_children();
}

/* The in-process mode loads the CUDA engine module on demand: on a machine
 * without a driver (CI) it fails with a clear code, and auto falls back to
 * the CPU saying why; librk itself never needed the CUDA libraries. */
static void test_inprocess_module(void **state)
{
    (void)state;
    rk_config c;
    rk_config_init(&c);
    c.backend = RK_BACKEND_CUDA;
    c.isolation = RK_ISOLATION_NONE;
    rk_runtime *rt = NULL;
    int rc = rk_runtime_open(&rt, &c);
    if (rc == 0) { /* a GPU machine: nothing to check here */
        rk_runtime_close(rt);
        return;
    }
    print_message("in-process CUDA: %s: %s\n", rk_err_name(rc), rk_last_detail());
    assert_true(rc == -RK_ENODRIVER || rc == -RK_ENOCUDA || rc == -RK_ENODEV);
    assert_true(strlen(rk_last_detail()) > 20);
    c.backend = RK_BACKEND_AUTO;
    rt = open_rt(&c);
    rk_info in;
    rk_runtime_info(rt, &in);
    assert_string_equal(in.backend_name, "cpu");
    assert_non_null(strstr(in.why, "CUDA backend unavailable"));
    rk_runtime_close(rt);
}

/* ---- a worker that breaks the control protocol ---- */

/* The worker's end of its control channel, taken from it (pidfd_getfd):
 * what is sent on it reaches the supervisor as the worker's. -1 where the
 * system does not allow it. */
static int worker_ctl(int pid)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int fd = pfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pfd, RK__WORKER_CTL_FD, 0);
    if (pfd >= 0)
        close(pfd);
    return fd;
}

/* A serving worker's message that is too short, and one of a kind no
 * worker sends: each is a failure of that worker, replaced, its detail
 * saying what came (until 2026-12 a short one was recorded as "the worker
 * exited", and an unknown kind was logged and the worker served on). */
static void test_bad_control_messages(void **state)
{
    (void)state;
    const struct {
        size_t len;
        uint32_t kind;
        const char *want;
    } rows[] = {{3, RK__WM_FAULT, "sent a 3 B control message"}, {sizeof(rk__wmsg), 999, "control message 999"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        rk_config c = worker_config();
        rk_runtime *rt = open_rt(&c);
        const int old = worker(rt).pid;
        const int fd = worker_ctl(old);
        if (fd < 0) {
            rk_runtime_close(rt);
            skip();
        }
        rk__wmsg m = {.kind = rows[i].kind};
        assert_int_equal(send(fd, &m, rows[i].len, MSG_NOSIGNAL), (ssize_t)rows[i].len);
        close(fd);
        rk_worker_info w = wait_replaced(rt, old, 5.0);
        if (!strstr(w.last_fault.detail, rows[i].want))
            fail_msg("row %zu: last fault \"%s\", want \"%s\"", i, w.last_fault.detail, rows[i].want);
        rk_actor *a;
        assert_int_equal(rk_actor_open(rt, &a), 0);
        int x = 5;
        rk_reply r;
        assert_int_equal(rk_actor_call(a, RK_OP_ECHO, &x, sizeof x, 0, &r, 5000), 0);
        rk_reply_release(a, &r);
        rk_runtime_close(rt);
        assert_no_children();
    }
}

/* This program as the worker (RK_WORKER=/proc/self/exe, TEST_FAKE_WORKER
 * set): it sends log lines and never says HELLO, until its supervisor
 * closes the channel. */
static int fake_worker(void)
{
    rk__wmsg m = {.kind = RK__WM_LOG, .level = RK_LOG_ERROR};
    snprintf(m.text, sizeof m.text, "a line of a worker that never says HELLO");
    while (send(RK__WORKER_CTL_FD, &m, sizeof m, MSG_NOSIGNAL) == (ssize_t)sizeof m) {
    }
    return 0;
}

static void slow_log(rk_log_level level, const char *msg, void *user)
{
    (void)level, (void)msg, (void)user;
    usleep(1000); /* the lines come faster than they are handled */
}

/* A worker that floods log lines at start: the start's time limit holds
 * (until 2026-12 each line restarted the wait, and rk_runtime_open hung for
 * as long as the lines came). Opened in a child, killed if it hangs. */
static void test_log_flood_at_start(void **state)
{
    (void)state;
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        setenv("RK_WORKER", "/proc/self/exe", 1);
        setenv("TEST_FAKE_WORKER", "1", 1);
        setenv("RK_WORKER_START_MS", "300", 1);
        rk_log_set_level(RK_LOG_ERROR);
        rk_log_set_handler(slow_log, NULL);
        rk_config c = worker_config();
        rk_runtime *rt = NULL;
        int rc = rk_runtime_open(&rt, &c);
        _exit(rc == -RK_ETIMEDOUT && strstr(rk_last_detail(), "did not answer within 300 ms") ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st))
        fail_msg("rk_runtime_open still waited after 10 s (signal %d)", WTERMSIG(st));
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
    if (getenv("TEST_FAKE_WORKER"))
        return fake_worker();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_basics),
        cmocka_unit_test(test_bad_configurations),
        cmocka_unit_test(test_inprocess_module),
        cmocka_unit_test(test_poison_and_crash_loop),
        cmocka_unit_test(test_poison_meets_warm_standby),
        cmocka_unit_test(test_endless_loop_deadline),
        cmocka_unit_test(test_info_during_relaunch),
        cmocka_unit_test(test_slow_cpu_actor),
        cmocka_unit_test(test_suspect_behind_slow_requests),
        cmocka_unit_test(test_suspect_retry_dropped),
        cmocka_unit_test(test_suspect_behind_full_reply_ring),
        cmocka_unit_test(test_closed_actor_across_restart),
        cmocka_unit_test(test_closed_actor_across_retry),
        cmocka_unit_test(test_lost_retry),
        cmocka_unit_test(test_silent_heartbeat),
        cmocka_unit_test(test_bad_control_messages),
        cmocka_unit_test(test_log_flood_at_start),
        cmocka_unit_test(test_kill9_under_load),
        cmocka_unit_test(test_kill9_under_batch_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
