/* test_worker.c - the bridge through its backend's faults: its runtime's
 * backend runs in a supervised worker process (rk-bridge's default). 8
 * DEALER clients pipeline echoes while the worker is killed with SIGKILL
 * 100 times: every request is answered exactly once and correctly, the
 * bridge keeps serving, `status` reports each replacement in its `worker`
 * map, and no process is left behind. A second group: the test-only ops
 * (--test-faults) crash and hang a worker; each gets DEVICE_FAULT, the
 * crash loop degrades the bridge to built-ins on the CPU, and the admin op
 * retry_gpu restores the worker. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

enum { WK_CLIENTS = 8, WK_WINDOW = 64, WK_CAP = 1 << 22 };

typedef struct wk_client {
    const char *ep;
    void *ctx;
    int *stop;
    uint64_t sent, answered, bad, dup;
    uint8_t *seen;
} wk_client;

static void wk_take(wk_client *c, zmq_msg_t *m)
{
    uint64_t id = 0;
    if (echo_reply(zmq_msg_data(m), zmq_msg_size(m), c->sent, &id) != ECHO_OK)
        c->bad++;
    else if (c->seen[id]++)
        c->dup++;
    c->answered++;
}

static void *wk_main(void *p)
{
    wk_client *c = p;
    void *s = zmq_socket(c->ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(s, c->ep);
    buf fb = {0};
    int64_t idle_since = 0;
    for (;;) {
        bool stopping = __atomic_load_n(c->stop, __ATOMIC_ACQUIRE);
        while (!stopping && c->sent - c->answered < WK_WINDOW && c->sent + 1 < WK_CAP) {
            put_echo(&fb, c->sent + 1, 64);
            if (zmq_send(s, fb.p, fb.n, ZMQ_DONTWAIT) < 0)
                break;
            c->sent++;
        }
        if (stopping && c->answered == c->sent)
            break;
        zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            while (zmq_msg_recv(&m, s, ZMQ_DONTWAIT) >= 0)
                wk_take(c, &m);
            zmq_msg_close(&m);
            idle_since = 0;
        } else if (stopping) {
            if (!idle_since)
                idle_since = now_ms();
            else if (now_ms() - idle_since > TMO)
                break; /* replies that never come: counted as missing below */
        }
    }
    free(fb.p);
    zmq_close(s);
    return NULL;
}

/* WK_CLIENTS clients pipelining echoes until wk_load_stop, which sums
 * what they saw. */
typedef struct wk_load {
    void *ctx;
    int stop;
    wk_client c[WK_CLIENTS];
    pthread_t t[WK_CLIENTS];
    uint64_t sent, answered, bad, dup; /* after wk_load_stop */
} wk_load;

static void wk_load_start(wk_load *l, const char *ep)
{
    memset(l, 0, sizeof *l);
    l->ctx = zmq_ctx_new();
    for (int i = 0; i < WK_CLIENTS; i++) {
        l->c[i] = (wk_client){.ep = ep, .ctx = l->ctx, .stop = &l->stop, .seen = calloc(WK_CAP, 1)};
        pthread_create(&l->t[i], NULL, wk_main, &l->c[i]);
    }
}

static void wk_load_stop(wk_load *l)
{
    __atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < WK_CLIENTS; i++) {
        wk_client *c = &l->c[i];
        pthread_join(l->t[i], NULL);
        l->sent += c->sent, l->answered += c->answered, l->bad += c->bad, l->dup += c->dup;
        free(c->seen);
    }
    zmq_ctx_term(l->ctx);
}

/* Every request the clients sent was answered once and correctly. */
static void wk_load_check(const wk_load *l)
{
    assert_int_equal(l->bad, 0);
    assert_int_equal(l->dup, 0);
    assert_int_equal(l->answered, l->sent);
}

/* Stops the bridge; it must take its workers with it. */
static void bridge_stop_alone(bridge *b)
{
    pid_t bpid = b->pid;
    assert_int_equal(bridge_stop(b), 0);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "pgrep -P %d", (int)bpid);
    assert_int_not_equal(system(cmd), 0);
}

/* The `worker` map of a status reply: pid, state, restarts, ... */
static uint64_t worker_uint(const bridge *b, const char *key, char *state, size_t cap)
{
    rkc_reply r;
    status_get(b, &r);
    const msgpack_object *w = rkc_reply_get(&r, "worker");
    assert_non_null(w);
    assert_int_equal(w->type, MSGPACK_OBJECT_MAP);
    if (state) {
        const msgpack_object *s = rkc_map_get(w, "state");
        snprintf(state, cap, "%.*s", (int)s->via.str.size, s->via.str.ptr);
    }
    uint64_t v = key ? map_uint(w, key) : 0;
    rkc_reply_free(&r);
    return v;
}

void test_worker_kill(void **state)
{
    (void)state;
    const int kills = getenv("RK_TEST_KILLS") ? atoi(getenv("RK_TEST_KILLS")) : 100;
    char limit[32];
    snprintf(limit, sizeof limit, "%d", kills + 10);
    bridge b;
    bridge_start(&b, "--fault-limit", limit, NULL);
    wk_load l;
    wk_load_start(&l, b.ep);
    int64_t t0 = now_ms();
    for (int k = 0; k < kills; k++) {
        /* replies between kills: each worker serves before it dies */
        uint64_t r0 = status_counter(&b, "ring_replies");
        while (status_counter(&b, "ring_replies") < r0 + 100)
            usleep(1000);
        char st[32];
        uint64_t pid = worker_uint(&b, "pid", st, sizeof st);
        assert_string_equal(st, "running");
        assert_int_equal(kill((pid_t)pid, SIGKILL), 0);
        for (int64_t w0 = now_ms(); worker_uint(&b, "pid", st, sizeof st) == pid || strcmp(st, "running");) {
            if (now_ms() - w0 > TMO)
                fail_msg("worker %llu not replaced within %d ms (state %s)", (unsigned long long)pid, TMO, st);
            usleep(1000);
        }
    }
    wk_load_stop(&l);
    uint64_t restarts = worker_uint(&b, "restarts", NULL, 0);
    print_message("%d kills of the bridge's worker in %.1f s: %llu requests, %llu answered, %llu bad, "
                  "%llu duplicated; %llu restarts\n",
                  kills, (double)(now_ms() - t0) / 1e3, (unsigned long long)l.sent, (unsigned long long)l.answered,
                  (unsigned long long)l.bad, (unsigned long long)l.dup, (unsigned long long)restarts);
    wk_load_check(&l);
    assert_true(restarts >= (uint64_t)kills);
    assert_alive(&b);
    bridge_stop_alone(&b);
}

/* One 64-byte echo through the bridge, checked byte for byte. */
static void echo_ok(rkc *cl, uint64_t id)
{
    buf fb = {0};
    put_echo(&fb, id, 64);
    assert_int_equal(rkc_send_raw(cl, fb.p, fb.n, TMO), 0);
    free(fb.p);
    rkc_reply r;
    assert_int_equal(rkc_recv(cl, &r, TMO), 0);
    assert_int_equal(r.id, id);
    assert_true(r.ok);
    assert_int_equal(r.len, 64);
    assert_int_equal(r.data[63], 63);
    rkc_reply_free(&r);
}

/* Sends {v, id, op} (and a 10-byte bin `field` unless NULL) and returns
 * its reply (free it). */
static void op_call_with(rkc *cl, uint64_t id, const char *op, const char *field, rkc_reply *r)
{
    buf fb = {0};
    put_head(&fb, field ? 4 : 3, 1, 1, id, op);
    if (field)
        put_bin(&fb, field, 10);
    assert_int_equal(rkc_send_raw(cl, fb.p, fb.n, TMO), 0);
    free(fb.p);
    assert_int_equal(rkc_recv(cl, r, TMO), 0);
    assert_int_equal(r->id, id);
}

static void op_call(rkc *cl, uint64_t id, const char *op, rkc_reply *r) { op_call_with(cl, id, op, NULL, r); }

/* A poison's one answer: DEVICE_FAULT, saying it faulted twice. Frees r. */
static void assert_poisoned(rkc_reply *r)
{
    assert_false(r->ok);
    assert_string_equal(r->code, "DEVICE_FAULT");
    assert_non_null(strstr(r->message, "faulted its worker twice"));
    rkc_reply_free(r);
}

/* A crash and an endless loop in the worker cost their own requests; a
 * crash loop degrades to the CPU; retry_gpu (an admin op) restores. */
void test_worker_faults(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, "--test-faults", "--fault-limit", "4", "--request-deadline-ms", "300",
                 "--allow-admin-ops", NULL);
    rkc *cl = client(&b);
    rkc_reply r;
    op_call(cl, 1, "fault", &r);
    assert_poisoned(&r);
    assert_alive(&b);
    char st[32];
    assert_int_equal(worker_uint(&b, "faults", st, sizeof st), 2);
    assert_string_equal(st, "running");
    op_call(cl, 2, "hang", &r);
    assert_false(r.ok);
    assert_string_equal(r.code, "DEVICE_FAULT");
    rkc_reply_free(&r);
    /* that made 4 faults: the crash loop; built-ins still work */
    assert_int_equal(worker_uint(&b, "faults", st, sizeof st), 4);
    assert_string_equal(st, "degraded");
    assert_alive(&b);
    echo_ok(cl, 10);
    op_call(cl, 3, "fault", &r);
    assert_string_equal(r.code, "DEVICE_FAULT");
    rkc_reply_free(&r);
    /* the operator's action */
    op_call(cl, 4, "retry_gpu", &r);
    assert_true(r.ok);
    rkc_reply_free(&r);
    assert_int_equal(worker_uint(&b, "faults", st, sizeof st), 4);
    assert_string_equal(st, "running");
    echo_ok(cl, 11);
    assert_alive(&b);
    rkc_close(cl);
    assert_int_equal(bridge_stop(&b), 0);
    /* without --test-faults the test ops are not operations at all */
    bridge_start(&b, NULL);
    cl = client(&b);
    op_call(cl, 5, "fault", &r);
    assert_string_equal(r.code, "UNKNOWN_OP");
    rkc_reply_free(&r);
    rkc_close(cl);
    assert_int_equal(bridge_stop(&b), 0);
}

/* GPU machine (skips without one, main.c): n poison requests in a row
 * through the bridge on the CUDA backend while WK_CLIENTS clients pipeline
 * echoes. Each poison is `op` (the test op `fault`, an illegal address in
 * the ring kernel, or a user actor that faults: the sample's `crash`, with
 * a `why` field) and costs its own request: DEVICE_FAULT naming it, two
 * worker faults (its run and its lone retry); every echo is answered once
 * and correctly, and the bridge never stops serving. */
static void gpu_poisons(const char *op, const char *field, int n, const char *const *args)
{
    bridge b;
    bridge_opts o = {.umask = -1};
    bridge_start_opts(&b, &o, args);
    rkc *cl = client(&b);
    wk_load l;
    wk_load_start(&l, b.ep);
    int64_t t0 = now_ms(), worst = 0;
    for (int k = 0; k < n; k++) {
        /* echoes flowing before each poison: it faults under load */
        uint64_t r0 = status_counter(&b, "ring_replies");
        while (status_counter(&b, "ring_replies") < r0 + 1000)
            usleep(1000);
        int64_t p0 = now_ms();
        rkc_reply r;
        op_call_with(cl, 100 + (uint64_t)k, op, field, &r);
        worst = now_ms() - p0 > worst ? now_ms() - p0 : worst;
        assert_poisoned(&r);
    }
    wk_load_stop(&l);
    char st[32];
    uint64_t faults = worker_uint(&b, "faults", st, sizeof st);
    print_message("%d %s poisons through the bridge on the GPU in %.1f s (slowest answer %lld ms): %llu echoes "
                  "alongside, %llu answered, %llu bad, %llu duplicated; %llu worker faults, state %s\n",
                  n, op, (double)(now_ms() - t0) / 1e3, (long long)worst, (unsigned long long)l.sent,
                  (unsigned long long)l.answered, (unsigned long long)l.bad, (unsigned long long)l.dup,
                  (unsigned long long)faults, st);
    wk_load_check(&l);
    assert_true(l.sent > 0);
    assert_int_equal(faults, 2 * (uint64_t)n);
    assert_string_equal(st, "running");
    echo_ok(cl, 1);
    rkc_close(cl);
    bridge_stop_alone(&b); /* no worker left behind */
}

void test_worker_gpu_faults(void **state)
{
    (void)state;
    const char *const args[] = {"--backend", "cuda", "--test-faults", "--fault-limit", "100", NULL};
    gpu_poisons("fault", NULL, 20, args);
}

/* The same with a user actor that faults: the sample module's `crash`
 * (samples/gpu_module; its --actors comes with the extra options). */
void test_worker_gpu_crash_actor(void **state)
{
    (void)state;
    const char *const args[] = {"--backend", "cuda", "--fault-limit", "100", NULL};
    gpu_poisons("crash", "why", 5, args);
}

/* saxpy (samples/gpu_module, loaded with --actors) of n floats through
 * the bridge, bit for bit against a * x + y in float32 (no FMA). */
static void saxpy_ok(rkc *cl, size_t n)
{
    float a = 1.5f, *x = malloc(4 * n), *y = malloc(4 * n);
    assert_non_null(x);
    assert_non_null(y);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)i * 0.25f, y[i] = 1.0f - (float)i;
    const rkc_field f[] = {RKC_FIELD("a", &a, 4), RKC_FIELD("x", x, 4 * n), RKC_FIELD("y", y, 4 * n)};
    rkc_reply r;
    assert_int_equal(rkc_actor_call(cl, "saxpy", f, 3, &r, TMO), 0);
    if (!r.ok)
        fail_msg("saxpy of %zu: %s: %s", n, r.code, r.message);
    const msgpack_object *o = rkc_reply_get(&r, "y");
    assert_non_null(o);
    assert_int_equal(o->type, MSGPACK_OBJECT_BIN);
    assert_int_equal(o->via.bin.size, 4 * n);
    for (size_t i = 0; i < n; i++) {
        volatile float m = a * x[i]; /* volatile: no contraction into an FMA */
        const float want = m + y[i];
        float got;
        memcpy(&got, o->via.bin.ptr + 4 * i, 4);
        if (memcmp(&got, &want, 4))
            fail_msg("saxpy of %zu: element %zu is %a, want %a", n, i, (double)got, (double)want);
    }
    rkc_reply_free(&r);
    free(x);
    free(y);
}

/* GPU machine: `launch` under load. WK_CLIENTS clients pipeline echoes
 * while an admin relaunches the ring kernel through blocks of 64 (the
 * dispatcher alone on the serial busy path), 96 (one crew warp), one
 * block of 1024 and the defaults, with a launch over the device's limit
 * (LAUNCH_INVALID naming the limit; nothing changes) among them; after
 * each launch 20 000 more echoes are answered (many laps of a ring:
 * a block-64 kernel with one reply ring stopped after one until
 * 2026-11-26). Every echo is answered once and correctly. */
void test_worker_gpu_launch(void **state)
{
    (void)state;
    static const struct {
        uint32_t grid, block;
    } L[] = {{2, 64}, {0, 96}, {1, 1024}, {0, 2048}, {0, 64}, {0, 0}};
    bridge b;
    bridge_opts o = {.umask = -1};
    /* one reply ring of 1 024 slots: the serial path answers a batch at
     * once only with one ring, and 20 000 echoes are ~20 laps */
    const char *const args[] = {"--backend", "cuda", "--allow-admin-ops", "--ring-slots", "1024", NULL};
    setenv("RK_REPLY_RINGS", "1", 1); /* rk_config_init's, in the bridge */
    bridge_start_opts(&b, &o, args);
    unsetenv("RK_REPLY_RINGS");
    rkc *cl = client(&b);
    wk_load l;
    wk_load_start(&l, b.ep);
    for (size_t k = 0; k < sizeof L / sizeof L[0]; k++) {
        rkc_request rq = {.op = RKC_LAUNCH, .grid = L[k].grid, .block = L[k].block};
        rkc_reply r;
        assert_int_equal(rkc_call(cl, &rq, &r, TMO), 0);
        if (L[k].block > 1024) {
            assert_false(r.ok);
            assert_string_equal(r.code, "LAUNCH_INVALID");
            assert_non_null(strstr(r.message, "1024"));
            print_message("launch block %u: %s: %s\n", L[k].block, r.code, r.message);
        } else {
            assert_true(r.ok);
            const msgpack_object *kn = rkc_reply_get(&r, "kernel");
            if (L[k].block)
                assert_int_equal(map_uint(kn, "block"), L[k].block);
            if (L[k].grid)
                assert_int_equal(map_uint(kn, "grid"), L[k].grid);
            print_message("launched grid %llu block %llu under load\n", (unsigned long long)map_uint(kn, "grid"),
                          (unsigned long long)map_uint(kn, "block"));
        }
        rkc_reply_free(&r);
        saxpy_ok(cl, 4);      /* inline: the idle path answers it from its registers */
        saxpy_ok(cl, 100000); /* in the arena: staged */
        const uint64_t r0 = status_counter(&b, "ring_replies");
        const int64_t t0 = now_ms();
        while (status_counter(&b, "ring_replies") < r0 + 20000) {
            assert_true(now_ms() - t0 < TMO); /* the kernel stopped answering */
            usleep(2000);
        }
    }
    wk_load_stop(&l);
    print_message("%zu launches under load: %llu echoes, %llu answered, %llu bad, %llu duplicated\n",
                  sizeof L / sizeof L[0], (unsigned long long)l.sent, (unsigned long long)l.answered,
                  (unsigned long long)l.bad, (unsigned long long)l.dup);
    wk_load_check(&l);
    echo_ok(cl, 1);
    rkc_close(cl);
    bridge_stop_alone(&b);
}

/* devices[i].key of a status reply. */
static uint64_t device_uint(const bridge *b, int i, const char *key)
{
    rkc_reply r;
    status_get(b, &r);
    const msgpack_object *d = rkc_reply_get(&r, "devices");
    assert_non_null(d);
    assert_int_equal(d->type, MSGPACK_OBJECT_ARRAY);
    assert_true((int)d->via.array.size > i);
    uint64_t v = map_uint(&d->via.array.ptr[i], key);
    rkc_reply_free(&r);
    return v;
}

/* --devices 0,1 on the CPU backend (a CPU worker stands in for each GPU):
 * a request loop pinned to each device, both serve under load; device 0's
 * worker killed under load: every request answered once and correctly,
 * device 1's worker untouched. The bad command lines name the problem. */
void test_devices(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, "--devices", "0,1", NULL);
    assert_int_equal(device_uint(&b, 1, "index"), 1);
    wk_load l;
    wk_load_start(&l, b.ep);
    /* 8 clients x 64 in flight spill past the first loop's ring (32) */
    for (int64_t t0 = now_ms(); device_uint(&b, 0, "requests") < 1000 || device_uint(&b, 1, "requests") < 1000;) {
        if (now_ms() - t0 > TMO)
            fail_msg("both devices did not serve 1000 requests within %d ms: %llu and %llu", TMO,
                     (unsigned long long)device_uint(&b, 0, "requests"),
                     (unsigned long long)device_uint(&b, 1, "requests"));
        usleep(10000);
    }
    uint64_t pid0 = device_uint(&b, 0, "pid"), pid1 = device_uint(&b, 1, "pid");
    assert_true(pid0 > 0 && pid1 > 0 && pid0 != pid1);
    assert_int_equal(kill((pid_t)pid0, SIGKILL), 0);
    for (int64_t t0 = now_ms(); device_uint(&b, 0, "restarts") < 1;) {
        if (now_ms() - t0 > TMO)
            fail_msg("device 0's worker was not replaced within %d ms", TMO);
        usleep(1000);
    }
    uint64_t r1 = device_uint(&b, 1, "requests");
    usleep(200000);
    wk_load_stop(&l);
    print_message("--devices 0,1: %llu requests, %llu answered, %llu bad, %llu duplicated; device 0 "
                  "served %llu (worker killed once), device 1 %llu\n", (unsigned long long)l.sent,
                  (unsigned long long)l.answered, (unsigned long long)l.bad, (unsigned long long)l.dup,
                  (unsigned long long)device_uint(&b, 0, "requests"), (unsigned long long)device_uint(&b, 1, "requests"));
    wk_load_check(&l);
    assert_true(device_uint(&b, 1, "requests") >= r1);
    assert_int_equal(device_uint(&b, 1, "pid"), pid1);
    assert_int_equal(device_uint(&b, 1, "restarts"), 0);
    assert_int_equal(bridge_stop(&b), 0);
    /* bad command lines: usage errors (exit 2) that say what is wrong */
    static const char *const bad_args[][5] = {
        {"--devices", "0,0", NULL},
        {"--devices", "0,x", NULL},
        {"--devices", "0,1,2", "--io-threads", "2"},
    };
    static const char *const says[] = {"--devices 0,0: device 0 is listed twice", "--devices 0,x",
                                       "3 devices but --io-threads 2"};
    for (int i = 0; i < 3; i++) {
        const char *args[6] = {0};
        for (int k = 0; k < 5 && bad_args[i][k]; k++)
            args[k] = bad_args[i][k];
        bridge_opts o = {.umask = -1, .may_fail = true};
        assert_int_equal(bridge_start_opts(&b, &o, args), -1);
        if (!strstr(g_last_err, says[i]))
            fail_msg("%s %s: stderr lacks \"%s\": %s", args[0], args[1], says[i], g_last_err);
    }
}
