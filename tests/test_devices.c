/* test_devices.c - several devices behind one runtime (rk_config.n_devices),
 * with CPU workers standing in for GPUs (each device is its own worker
 * process, region and supervisor, as a GPU's would be): placement spreads
 * actors and follows outstanding work, pinning, per-actor order, a worker
 * killed, or faulting on a poison request, under load on one device while
 * the others serve with no error, a device failed for good taken out of
 * placement, a vadd split across the devices, and the bad configurations.
 * Suite: isolation. RK_TEST_BACKEND=cuda runs the same on real GPUs (the
 * gpu suite's gpu_devices: up to three, skipped below two), where a GPU
 * down must also cost the other's stream no wait over 5 ms (issue 12). */
#include <pthread.h>
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
#include <time.h>
#include <unistd.h>

#include <dirent.h>

#include <cmocka.h>
#include <rk/rk.h>

/* RK_TEST_BACKEND=cuda: the same on real GPUs */
static bool on_gpus(void)
{
    const char *be = getenv("RK_TEST_BACKEND");
    return be && !strcmp(be, "cuda");
}

/* The devices the spread, split and relaunch cases use: three CPU workers,
 * or up to three of the GPUs the driver lists (as RK_DEVICES_ALL counts). */
static int n_dev(void)
{
    if (!on_gpus())
        return 3;
    int n = 0;
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n < 3 ? n : 3;
}

static rk_config devices_config(int n)
{
    rk_config c;
    rk_config_init(&c);
    c.backend = on_gpus() ? RK_BACKEND_CUDA : RK_BACKEND_CPU;
    c.isolation = RK_ISOLATION_PROCESS;
    c.arena_size = 16 << 20;
    c.max_payload = 1 << 20;
    c.n_devices = n;
    for (int i = 0; i < n; i++)
        c.devices[i] = i;
    return c;
}

static rk_runtime *open_devices(int n)
{
    rk_config c = devices_config(n);
    rk_runtime *rt = NULL;
    int rc = rk_runtime_open(&rt, &c);
    if (rc)
        fail_msg("rk_runtime_open: %s: %s", rk_err_name(rc), rk_last_detail());
    return rt;
}

static void echo_ok(rk_actor *a, uint64_t tag)
{
    rk_reply r;
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, &tag, sizeof tag, 0, &r, 10000), 0);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.len, sizeof tag);
    assert_memory_equal(r.data, &tag, sizeof tag);
    rk_reply_release(a, &r);
}

/* Each device its own worker; actors spread over them in turn while none
 * has work; the group's stats are the sum. */
static void test_spread(void **state)
{
    (void)state;
    const int nd = n_dev();
    rk_runtime *rt = open_devices(nd);
    assert_int_equal(rk_runtime_device_count(rt), nd);
    assert_null(rk_runtime_device(rt, nd));
    int pids[3];
    for (int i = 0; i < nd; i++) {
        rk_worker_info w;
        rk_runtime_worker(rk_runtime_device(rt, i), &w);
        assert_int_equal(w.state, RK_WORKER_RUNNING);
        pids[i] = w.pid;
        for (int j = 0; j < i; j++)
            assert_int_not_equal(pids[i], pids[j]);
    }
    rk_actor *a[2 * 3];
    int per[3] = {0};
    for (int i = 0; i < 2 * nd; i++) {
        assert_int_equal(rk_actor_open(rt, &a[i]), 0);
        int d = rk_actor_device(a[i]);
        assert_true(d >= 0 && d < nd);
        per[d]++;
        echo_ok(a[i], (uint64_t)i);
    }
    for (int d = 0; d < nd; d++)
        assert_int_equal(per[d], 2);
    rk_stats s, one;
    rk_runtime_stats(rt, &s);
    uint64_t sum = 0;
    for (int d = 0; d < nd; d++) {
        rk_runtime_stats(rk_runtime_device(rt, d), &one);
        assert_true(one.requests >= 2);
        sum += one.requests;
    }
    assert_int_equal(s.requests, sum);
    assert_int_equal(rk_runtime_health(rt), 0);
    for (int i = 0; i < 2 * nd; i++)
        rk_actor_close(a[i]);
    rk_runtime_close(rt);
}

/* Placement follows outstanding work; pinning overrides it. */
static void test_placement(void **state)
{
    (void)state;
    rk_runtime *rt = open_devices(2);
    rk_actor *busy, *pinned, *next;
    assert_int_equal(rk_actor_open_on(rt, 1, &busy), 0);
    assert_int_equal(rk_actor_device(busy), 1);
    /* 200 requests outstanding on device 1 (sent, not yet received) */
    for (uint64_t i = 0; i < 200; i++)
        assert_int_equal(rk_actor_send(busy, RK_OP_ECHO, &i, sizeof i, 0, NULL, 10000), 0);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(rk_actor_open(rt, &next), 0);
        assert_int_equal(rk_actor_device(next), 0); /* whatever the turn */
        rk_actor_close(next);
    }
    /* pinned to the busy one all the same */
    assert_int_equal(rk_actor_open_on(rt, 1, &pinned), 0);
    assert_int_equal(rk_actor_device(pinned), 1);
    echo_ok(pinned, 7);
    rk_actor_close(pinned);
    /* every one of busy's replies, in order */
    for (uint64_t i = 0; i < 200; i++) {
        rk_reply r;
        assert_int_equal(rk_actor_recv(busy, &r, 10000), 0);
        uint64_t v;
        memcpy(&v, r.data, sizeof v);
        assert_int_equal(v, i);
        rk_reply_release(busy, &r);
    }
    rk_actor_close(busy);
    /* out of range: names the value and the count; *out is NULL, as on
     * every failure */
    next = (rk_actor *)&next;
    assert_int_equal(rk_actor_open_on(rt, 2, &next), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "device 2; this runtime has 2"));
    assert_null(next);
    next = (rk_actor *)&next;
    assert_int_equal(rk_actor_open_on(rt, -1, &next), -RK_EINVAL);
    assert_null(next);
    next = (rk_actor *)&next;
    assert_int_equal(rk_actor_open_on(NULL, 0, &next), -RK_EINVAL);
    assert_null(next);
    rk_runtime_close(rt);
}

/* max_actors counts per device: a device whose slots are all taken gets
 * no new actor while another has room, however idle it is (rk_actor_open
 * placed it there and failed -RK_EBUSY); with every device full it is
 * -RK_EBUSY. */
static void test_placement_full_device(void **state)
{
    (void)state;
    rk_config c = devices_config(2);
    c.max_actors = 2;
    rk_runtime *rt = NULL;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    rk_actor *idle[2], *busy, *next, *last;
    for (int i = 0; i < 2; i++)
        assert_int_equal(rk_actor_open_on(rt, 0, &idle[i]), 0);
    assert_int_equal(rk_actor_open_on(rt, 1, &busy), 0);
    for (uint64_t i = 0; i < 8; i++) /* device 1 has work outstanding, device 0 none */
        assert_int_equal(rk_actor_send(busy, RK_OP_ECHO, &i, sizeof i, 0, NULL, 10000), 0);
    for (int k = 0; k < 2; k++) { /* whatever the turn */
        int rc = rk_actor_open(rt, &next);
        if (rc)
            fail_msg("rk_actor_open with a slot free on device 1: %s: %s", rk_err_name(rc), rk_last_detail());
        assert_int_equal(rk_actor_device(next), 1);
        rk_actor_close(next);
    }
    assert_int_equal(rk_actor_open_on(rt, 1, &last), 0);
    assert_int_equal(rk_actor_open(rt, &next), -RK_EBUSY);
    assert_non_null(strstr(rk_last_detail(), "max_actors"));
    for (uint64_t i = 0; i < 8; i++) {
        rk_reply r;
        assert_int_equal(rk_actor_recv(busy, &r, 10000), 0);
        rk_reply_release(busy, &r);
    }
    rk_actor_close(last);
    rk_actor_close(busy);
    for (int i = 0; i < 2; i++)
        rk_actor_close(idle[i]);
    rk_runtime_close(rt);
}

/* A stream of echoes on one actor, counting errors and the longest wait
 * in each phase (the main thread moves phase 0 -> 1 and reads done while
 * it runs; errors and worst_s are read after the join). */
typedef struct streamer {
    rk_actor *a;
    atomic_bool stop;
    atomic_int phase;
    atomic_long done;
    long errors;
    double worst_s[2];
} streamer;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *stream_main(void *arg)
{
    streamer *s = arg;
    for (uint64_t i = 0; !atomic_load(&s->stop); i++) {
        double t0 = now_s();
        rk_reply r;
        int rc = rk_actor_call(s->a, RK_OP_ECHO, &i, sizeof i, 0, &r, 10000);
        double dt = now_s() - t0;
        const int ph = atomic_load_explicit(&s->phase, memory_order_relaxed);
        if (dt > s->worst_s[ph])
            s->worst_s[ph] = dt;
        if (rc || r.status || r.len != sizeof i || memcmp(r.data, &i, sizeof i))
            s->errors++;
        if (rc == 0)
            rk_reply_release(s->a, &r);
        atomic_fetch_add_explicit(&s->done, 1, memory_order_relaxed);
    }
    return NULL;
}

/* Device 0 goes down under load, its worker killed (kill) or faulting on a
 * poison request (the test op RK_OP_FAULT: SIGSEGV in a CPU worker, an
 * illegal address on a GPU): its actor's requests are recovered (each
 * answered once, by its supervisor), the poison is answered -RK_EDEVICE;
 * device 1's stream sees no error, keeps its worker, and its longest wait
 * is printed (on two GPUs: the stall a fault on the other GPU costs). */
static void one_down(bool kill_it)
{
    rk_config c = devices_config(2);
    c.test_faults = 1;
    c.fault_limit = 10;
    rk_runtime *rt = NULL;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    streamer s[2] = {{0}};
    pthread_t th[2];
    for (int d = 0; d < 2; d++) {
        assert_int_equal(rk_actor_open_on(rt, d, &s[d].a), 0);
        pthread_create(&th[d], NULL, stream_main, &s[d]);
    }
    usleep(300000);
    rk_worker_info w0, w1;
    rk_runtime_worker(rk_runtime_device(rt, 0), &w0);
    rk_runtime_worker(rk_runtime_device(rt, 1), &w1);
    long before1 = atomic_load(&s[1].done);
    atomic_store(&s[1].phase, 1); /* device 1's longest wait from here on: worst_s[1] */
    if (kill_it) {
        assert_int_equal(kill(w0.pid, SIGKILL), 0);
    } else {
        rk_actor *p;
        assert_int_equal(rk_actor_open_on(rt, 0, &p), 0);
        uint64_t x = 7;
        rk_reply r;
        assert_int_equal(rk_actor_call(p, RK_OP_FAULT, &x, sizeof x, 0, &r, 30000), 0);
        assert_int_equal(r.status, -RK_EDEVICE);
        rk_reply_release(p, &r);
        rk_actor_close(p);
    }
    /* until device 0 serves again with a new worker */
    double t0 = now_s();
    for (;;) {
        rk_worker_info w;
        rk_runtime_worker(rk_runtime_device(rt, 0), &w);
        if (w.state == RK_WORKER_RUNNING && w.pid > 0 && w.pid != w0.pid)
            break;
        if (now_s() - t0 > 10)
            fail_msg("device 0's worker was not replaced within 10 s");
        usleep(1000);
    }
    usleep(300000);
    for (int d = 0; d < 2; d++) {
        atomic_store(&s[d].stop, true);
        pthread_join(th[d], NULL);
    }
    fprintf(stderr, "  device 0 (worker %d %s): %ld calls, %ld errors, longest %.1f ms; device 1: %ld calls "
            "(%ld meanwhile), %ld errors, longest %.2f ms meanwhile (%.2f ms before)\n", w0.pid,
            kill_it ? "killed" : "faulted twice on a poison", (long)s[0].done, s[0].errors, s[0].worst_s[0] * 1e3,
            (long)s[1].done, (long)s[1].done - before1, s[1].errors, s[1].worst_s[1] * 1e3, s[1].worst_s[0] * 1e3);
    assert_int_equal(s[0].errors, 0); /* recovered: re-posted, answered once */
    assert_int_equal(s[1].errors, 0);
    /* GPUs: the bound of issue 12 (CPU workers share this host's cores with
     * the recovery, so on them the wait is only printed) */
    if (on_gpus() && s[1].worst_s[1] > 5e-3)
        fail_msg("device 1 waited %.2f ms while device 0 recovered; the bound is 5 ms", s[1].worst_s[1] * 1e3);
    assert_true(atomic_load(&s[1].done) - before1 > 100);
    rk_worker_info w;
    rk_runtime_worker(rk_runtime_device(rt, 1), &w);
    assert_int_equal(w.pid, w1.pid); /* untouched */
    assert_int_equal(w.restarts, w1.restarts);
    for (int d = 0; d < 2; d++)
        rk_actor_close(s[d].a);
    rk_runtime_close(rt);
}

static void test_kill_one(void **state)
{
    (void)state;
    one_down(true);
}

static void test_fault_one(void **state)
{
    (void)state;
    one_down(false);
}

/* A device in a crash loop (its worker degraded: its GPU is not restarted)
 * takes no new actors while another serves; its own actors keep getting
 * answers (built-ins on the CPU), the others' never an error. */
static void test_degraded_out(void **state)
{
    (void)state;
    rk_config c = devices_config(2);
    c.fault_limit = 2;
    c.test_faults = 1;
    rk_runtime *rt = NULL;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    rk_actor *a;
    assert_int_equal(rk_actor_open_on(rt, 0, &a), 0);
    uint64_t x = 1;
    for (int k = 0; k < 2; k++) { /* two faults within the window: the crash loop */
        rk_reply r;
        assert_int_equal(rk_actor_call(a, RK_OP_FAULT, &x, sizeof x, 0, &r, 10000), 0);
        assert_int_equal(r.status, -RK_EDEVICE);
        rk_reply_release(a, &r);
    }
    rk_worker_info w;
    rk_runtime_worker(rk_runtime_device(rt, 0), &w);
    assert_int_equal(w.state, RK_WORKER_DEGRADED);
    for (int k = 0; k < 6; k++) {
        rk_actor *b;
        assert_int_equal(rk_actor_open(rt, &b), 0);
        assert_int_equal(rk_actor_device(b), 1);
        echo_ok(b, (uint64_t)k);
        rk_actor_close(b);
    }
    echo_ok(a, 9); /* device 0 still answers its actor */
    assert_int_equal(rk_runtime_health(rt), 0);
    rk_actor_close(a);
    rk_runtime_close(rt);
}

/* Each device's requests so far. */
static void device_requests(rk_runtime *rt, int nd, uint64_t *req)
{
    for (int d = 0; d < nd; d++) {
        rk_stats st;
        rk_runtime_stats(rk_runtime_device(rt, d), &st);
        req[d] = st.requests;
    }
}

/* A split vadd of in (n elements a side) into out: in[i] + in[n + i], bit
 * for bit. */
static void split_exact(rk_split *sp, const float *in, float *out, size_t n)
{
    size_t got = 0;
    if (rk_split_call(sp, RK_OP_VADD, in, n * 8, out, n * 4, &got, 10000))
        fail_msg("n=%zu: %s", n, rk_last_detail());
    assert_int_equal(got, n * 4);
    for (size_t i = 0; i < n; i++) {
        float want = in[i] + in[n + i];
        if (memcmp(&out[i], &want, 4))
            fail_msg("n=%zu: element %zu is %a, not %a", n, i, out[i], want);
    }
}

/* One vadd split across 3 devices (GPUs: 2 or 3): each adds a share, the result is the
 * elementwise sum in order, for sizes that do not divide evenly and for
 * fewer elements than devices; after a call that timed out, the next ones
 * get their own results; the bad calls are refused with what is wrong. */
static void test_split(void **state)
{
    (void)state;
    const int nd = n_dev();
    rk_runtime *rt = open_devices(nd);
    rk_split *sp;
    assert_int_equal(rk_split_open(rt, &sp), 0);
    static const size_t sizes[] = {1, 2, 3, 1000, 100003, 300000};
    float *in = malloc(2 * 300000 * sizeof *in), *out = malloc(300000 * sizeof *out);
    assert_true(in && out);
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        size_t n = sizes[t];
        for (size_t i = 0; i < n; i++) {
            in[i] = (float)i * 0.25f - 7.0f;
            in[n + i] = 1.0f / (float)(i + 3);
        }
        uint64_t before[3], after[3];
        device_requests(rt, nd, before);
        split_exact(sp, in, out, n);
        device_requests(rt, nd, after);
        int used = 0;
        for (int d = 0; d < nd; d++)
            used += after[d] > before[d];
        assert_int_equal(used, n < (size_t)nd ? (int)n : nd); /* every device, no empty chunk */
    }
    /* a call that times out (timeout 0: nothing is waited for) leaves its
     * chunks in flight; the next calls return their own sums, not its
     * (until 2026-11-26 each returned the call's before it) */
    const size_t n = 300000;
    int timed_out = 0;
    for (int t = 0; t < 100 && !timed_out; t++) {
        for (size_t i = 0; i < 2 * n; i++)
            in[i] = 1.0f;
        size_t g = 0;
        const int rc = rk_split_call(sp, RK_OP_VADD, in, n * 8, out, n * 4, &g, 0);
        assert_true(rc == 0 || rc == -RK_ETIMEDOUT);
        timed_out = rc == -RK_ETIMEDOUT;
    }
    assert_true(timed_out);
    for (float v = 5.0f; v <= 7.0f; v += 2.0f) {
        for (size_t i = 0; i < 2 * n; i++)
            in[i] = v;
        size_t g = 0;
        assert_int_equal(rk_split_call(sp, RK_OP_VADD, in, n * 8, out, n * 4, &g, 10000), 0);
        for (size_t i = 0; i < n; i += 997)
            if (out[i] != 2 * v)
                fail_msg("after a timed-out call: element %zu is %g, not %g", i, (double)out[i], (double)(2 * v));
    }
    size_t got;
    assert_int_equal(rk_split_call(sp, RK_OP_ECHO, in, 8, out, 8, &got, 1000), -RK_ENOTSUP);
    assert_non_null(strstr(rk_last_detail(), "only vadd"));
    assert_int_equal(rk_split_call(sp, RK_OP_VADD, in, 12, out, 8, &got, 1000), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "12 B is not a multiple of 8"));
    assert_int_equal(rk_split_call(sp, RK_OP_VADD, in, 80, out, 39, &got, 1000), -RK_EMSGSIZE);
    assert_non_null(strstr(rk_last_detail(), "needs 40 B; out has 39"));
    /* a NULL argument is named */
    assert_int_equal(rk_split_call(NULL, RK_OP_VADD, in, 80, out, 40, &got, 1000), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "split is NULL"));
    assert_int_equal(rk_split_call(sp, RK_OP_VADD, NULL, 80, out, 40, &got, 1000), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "data is NULL with len 80"));
    assert_int_equal(rk_split_call(sp, RK_OP_VADD, in, 80, NULL, 40, &got, 1000), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "out is NULL"));
    assert_int_equal(rk_split_call(sp, RK_OP_VADD, in, 80, out, 40, NULL, 1000), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "out_len is NULL"));
    free(in);
    free(out);
    rk_split_close(sp);
    rk_runtime_close(rt);
}

/* A split larger than max_payload goes in parts (at most max_payload / 8
 * elements each, a few in flight per actor), the chunks in turn, in a
 * thread per device (2^16 elements a device or more) or in up to four per
 * device (each of 2^16 or more): the sum is exact and each device served as
 * many requests as its chunks have parts. On a GPU the parts' replies come
 * in completion order, not in order. */
static void test_split_parts(void **state)
{
    (void)state;
    const int nd = n_dev();
    rk_config c = devices_config(nd);
    c.max_payload = 64 << 10; /* parts of 8192 elements */
    rk_runtime *rt = NULL;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    rk_split *sp;
    assert_int_equal(rk_split_open(rt, &sp), 0);
    /* in turn; a thread per device; four per device (its lanes) */
    const size_t sizes[] = {100003, 3 * 70001, (size_t)nd * 300001};
    const size_t most = (size_t)nd * 300001;
    float *in = malloc(2 * most * sizeof *in), *out = malloc(most * sizeof *out);
    assert_true(in && out);
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        const size_t n = sizes[t];
        for (size_t i = 0; i < n; i++) {
            in[i] = (float)i * 0.5f + 0.125f;
            in[n + i] = -1.0f / (float)(i + 1);
        }
        uint64_t before[3], after[3];
        device_requests(rt, nd, before);
        split_exact(sp, in, out, n);
        device_requests(rt, nd, after);
        for (int d = 0; d < nd; d++) {
            const size_t m = n * (size_t)(d + 1) / (size_t)nd - n * (size_t)d / (size_t)nd;
            if (t < 2) /* one lane */
                assert_int_equal(after[d] - before[d], (m + 8191) / 8192);
            else /* four: each its share in parts */
                assert_in_range(after[d] - before[d], (m + 8191) / 8192, (m + 8191) / 8192 + 3);
        }
    }
    rk_split_close(sp);
    rk_runtime_close(rt);
    /* room for one actor a device: a split of one lane each, as exact */
    c.max_actors = 1;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    assert_int_equal(rk_split_open(rt, &sp), 0);
    split_exact(sp, in, out, most);
    rk_actor *extra;
    assert_int_equal(rk_actor_open(rt, &extra), -RK_EBUSY); /* the split holds every slot */
    free(in);
    free(out);
    rk_split_close(sp);
    rk_runtime_close(rt);
}

/* A split that finds room for fewer lanes on one device than on another
 * (max_actors, an actor of the caller's already open there) keeps one lane
 * on every device: the actors it opened for the lane it gave up are closed
 * once, and rk_split_close leaves the caller's actors alone (it closed
 * them again: a double free, or an actor opened meanwhile in the freed
 * memory closed under its owner) */
static void test_split_fewer_lanes(void **state)
{
    (void)state;
    rk_config c = devices_config(2);
    c.max_actors = 2;
    rk_runtime *rt = NULL;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    rk_actor *other, *mine;
    assert_int_equal(rk_actor_open_on(rt, 1, &other), 0);
    rk_split *sp;
    assert_int_equal(rk_split_open(rt, &sp), 0); /* device 0: 2 lanes' room, device 1: 1 */
    assert_int_equal(rk_actor_open_on(rt, 0, &mine), 0); /* the lane given up left room */
    float in[8] = {1, 2, 3, 4, 10, 20, 30, 40}, out[4];
    split_exact(sp, in, out, 4);
    rk_split_close(sp);
    echo_ok(mine, 1);
    echo_ok(other, 2);
    rk_actor_close(mine);
    rk_actor_close(other);
    rk_runtime_close(rt);
}

/* An actor_window below the parts a chunk keeps in flight: fewer in
 * flight, not -RK_EBUSY (a valid window of 1 failed every split of more
 * than one part: "actor has 1 requests in flight, its window") */
static void test_split_small_window(void **state)
{
    (void)state;
    rk_config c = devices_config(2);
    c.max_payload = 64 << 10; /* parts of 8192 elements */
    c.actor_window = 1;
    rk_runtime *rt = NULL;
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    rk_split *sp;
    assert_int_equal(rk_split_open(rt, &sp), 0);
    const size_t n = 3 * 70001; /* a thread per device, each chunk in parts */
    float *big = malloc(3 * n * sizeof *big);
    assert_non_null(big);
    for (size_t i = 0; i < 2 * n; i++)
        big[i] = (float)(i % 1000) * 0.5f;
    split_exact(sp, big, big + 2 * n, n);
    split_exact(sp, big, big + 2 * n, 20000); /* one thread, in parts */
    /* a call that timed out left a part in every actor's window: the next
     * call takes (drops) those replies to make room, not -RK_EBUSY */
    int timed_out = 0;
    for (int t = 0; t < 100 && !timed_out; t++) {
        size_t g = 0;
        const int rc = rk_split_call(sp, RK_OP_VADD, big, n * 8, big + 2 * n, n * 4, &g, 0);
        assert_true(rc == 0 || rc == -RK_ETIMEDOUT);
        timed_out = rc == -RK_ETIMEDOUT;
    }
    assert_true(timed_out);
    split_exact(sp, big, big + 2 * n, 5); /* one part a device */
    split_exact(sp, big, big + 2 * n, n);
    free(big);
    rk_split_close(sp);
    rk_runtime_close(rt);
}

/* The bad configurations name the value and the limit. */
/* Each device's running configuration. */
static void expect_config(rk_runtime *rt, uint32_t grid, uint32_t block)
{
    for (int i = 0; i < rk_runtime_device_count(rt); i++) {
        rk_info in;
        rk_runtime_info(rk_runtime_device(rt, i), &in);
        if (in.grid != grid || in.block != block)
            fail_msg("device %d: grid %u block %u, want %u %u", i, in.grid, in.block, grid, block);
    }
}

/* A relaunch of several devices is all or none: device 1 refuses (as one
 * with other limits would; RK_TEST_REFUSE_RELAUNCH), and device 0, which
 * took the new configuration first, goes back to its own (until
 * 2026-11-27 it kept the new one). Each kernel start counts a restart. */
static void test_relaunch_all_or_none(void **state)
{
    (void)state;
    const int nd = n_dev();
    rk_runtime *rt = open_devices(nd);
    assert_int_equal(rk_runtime_relaunch(rt, 2, 128, 0), 0);
    expect_config(rt, 2, 128);
    setenv("RK_TEST_REFUSE_RELAUNCH", "1", 1);
    assert_int_equal(rk_runtime_relaunch(rt, 3, 256, 0), -RK_EINVAL);
    unsetenv("RK_TEST_REFUSE_RELAUNCH");
    print_message("refused: %s\n", rk_last_detail());
    char want[64];
    snprintf(want, sizeof want, "device 1 (2 of %d) refused grid 3, block 256", nd);
    assert_non_null(strstr(rk_last_detail(), want));
    assert_non_null(strstr(rk_last_detail(), "went back"));
    expect_config(rt, 2, 128);
    rk_actor *a;
    assert_int_equal(rk_actor_open_on(rt, 0, &a), 0);
    echo_ok(a, 7);
    assert_int_equal(rk_runtime_relaunch(rt, 3, 256, 0), 0);
    expect_config(rt, 3, 256);
    echo_ok(a, 8);
    rk_stats st;
    rk_runtime_stats(rt, &st);
    assert_int_equal(st.restarts, nd + 2 + nd); /* device 0 twice in the refused one */
    rk_actor_close(a);
    rk_runtime_close(rt);
}

static void test_bad_config(void **state)
{
    (void)state;
    rk_runtime *rt = NULL;
    rk_config c = devices_config(2);
    c.devices[1] = 0;
    assert_int_equal(rk_runtime_open(&rt, &c), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "devices[0] and devices[1] are both device 0"));
    c = devices_config(2);
    c.n_devices = RK_MAX_DEVICES + 1;
    assert_int_equal(rk_runtime_open(&rt, &c), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "n_devices is 17; it must be 0..16"));
    c = devices_config(2);
    c.devices[1] = -3;
    assert_int_equal(rk_runtime_open(&rt, &c), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "devices[1] is -3"));
    assert_null(rt);
    /* one device through the list is a plain runtime */
    c = devices_config(1);
    assert_int_equal(rk_runtime_open(&rt, &c), 0);
    assert_int_equal(rk_runtime_device_count(rt), 1);
    assert_ptr_equal(rk_runtime_device(rt, 0), rt);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    assert_int_equal(rk_actor_device(a), 0);
    rk_actor_close(a);
    rk_runtime_close(rt);
}

int main(void)
{
    if (on_gpus() && n_dev() < 2) {
        fprintf(stderr, "test_devices: RK_TEST_BACKEND=cuda needs two GPUs; the driver lists %d: skipped\n", n_dev());
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_placement),
        cmocka_unit_test(test_placement_full_device),
        cmocka_unit_test(test_kill_one),
        cmocka_unit_test(test_fault_one),
        cmocka_unit_test(test_degraded_out),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_split_parts),
        cmocka_unit_test(test_split_fewer_lanes),
        cmocka_unit_test(test_split_small_window),
        cmocka_unit_test(test_relaunch_all_or_none),
        cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
