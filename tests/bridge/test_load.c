/* tests/bridge/test_load.c - under load (suite 'bridge'): SIGTERM with
 * 8 x 4000 requests in flight, log floods, and the counter invariant
 * (bridge/PROTOCOL.md, "Counters"). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* The exit line's numbers: "stopped: R requests: P replies (E errors), D
 * dropped ..., U unroutable ..., X unanswered". */
static void assert_exit_line(const char *err)
{
    const char *l = strstr(err, "stopped: ");
    if (!l)
        fail_msg("no exit line in the bridge's stderr");
    unsigned long long r, p, e, d, u, x;
    int n = sscanf(l, "stopped: %llu requests: %llu replies (%llu errors), %llu dropped "
                   "(client queue full), %llu unroutable (client gone), %llu unanswered",
                   &r, &p, &e, &d, &u, &x);
    assert_int_equal(n, 6);
    fprintf(stderr, "  exit line: %llu requests = %llu replies + %llu dropped + %llu unroutable, "
            "%llu unanswered\n", r, p, d, u, x);
    assert_int_equal(x, 0);
    assert_int_equal(r, p + d + u);
}

/* ---- SIGTERM under load ------------------------------------------------------- */

enum { SC_CLIENTS = 8, SC_WINDOW = 4000, SC_CAP = 400000 };

typedef struct sc_client {
    void *ctx;
    const char *ep;
    uint8_t *seen;     /* replies per id */
    uint64_t sent, presig, answered;
    int dup, bad;
    bool presig_set;
} sc_client;

static int g_signalled, g_exited;

/* One reply: counted by id; true when it was SHUTTING_DOWN. */
static bool sc_take(sc_client *c, zmq_msg_t *m)
{
    uint64_t id = 0;
    echo_kind k = echo_reply(zmq_msg_data(m), zmq_msg_size(m), c->sent, &id);
    if (k == ECHO_BAD)
        c->bad++;
    else if (c->seen[id]++)
        c->dup++;
    c->answered++;
    return k == ECHO_SHUT;
}

static void *sc_main(void *p)
{
    sc_client *c = p;
    void *s = zmq_socket(c->ctx, ZMQ_DEALER);
    /* a receive high-water mark below the window: at the signal a client
     * may hold a full receive queue and replies unread in its socket,
     * which the bridge must wait for (libzmq drops them if the connection
     * closes first; seen on a loaded sanitizer build) */
    int hwm = 1000, shwm = 100000, linger = 0;
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_SNDHWM, &shwm, sizeof shwm);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(s, c->ep);
    buf fb = {0};
    bool stop_sending = false;
    int64_t last_msg = now_ms();
    for (;;) {
        if (!c->presig_set && __atomic_load_n(&g_signalled, __ATOMIC_ACQUIRE)) {
            c->presig = c->sent; /* every request sent so far was sent before the signal */
            c->presig_set = true;
        }
        while (!stop_sending && c->sent - c->answered < SC_WINDOW && c->sent < SC_CAP) {
            put_echo(&fb, c->sent + 1, 64);
            if (zmq_send(s, fb.p, fb.n, ZMQ_DONTWAIT) < 0)
                break;
            c->sent++;
        }
        zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            while (zmq_msg_recv(&m, s, ZMQ_DONTWAIT) >= 0)
                stop_sending |= sc_take(c, &m); /* a client that hears SHUTTING_DOWN stops */
            zmq_msg_close(&m);
            last_msg = now_ms();
        } else if (__atomic_load_n(&g_exited, __ATOMIC_ACQUIRE) && now_ms() - last_msg > 1000) {
            break; /* the bridge is gone and nothing more comes */
        }
    }
    free(fb.p);
    zmq_close(s);
    return NULL;
}

/* 8 DEALER clients keep 4000 64-B echoes in flight each (receive high-water
 * mark 1000); SIGTERM after 1.5 s: every request sent before the signal gets
 * exactly one reply, a result or SHUTTING_DOWN, and the exit line says so. */
void test_sigterm(void **state)
{
    (void)state;
    bridge b;
    /* a generous admission time: a loaded sanitizer build must not turn a
     * slow moment into BUSY (test_busy covers BUSY) */
    bridge_start(&b, "--drain-ms", "60000", "--admission-ms", "30000", "--log-level", "info", NULL);
    void *ctx = zmq_ctx_new();
    static sc_client cl[SC_CLIENTS];
    pthread_t th[SC_CLIENTS];
    __atomic_store_n(&g_signalled, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&g_exited, 0, __ATOMIC_RELEASE);
    for (int i = 0; i < SC_CLIENTS; i++) {
        cl[i] = (sc_client){.ctx = ctx, .ep = b.ep, .seen = calloc(SC_CAP + 1, 1)};
        assert_non_null(cl[i].seen);
        assert_int_equal(pthread_create(&th[i], NULL, sc_main, &cl[i]), 0);
    }
    usleep(1500000);
    __atomic_store_n(&g_signalled, 1, __ATOMIC_RELEASE);
    kill(b.pid, SIGTERM);
    int st = bridge_reap(&b, 120000);
    __atomic_store_n(&g_exited, 1, __ATOMIC_RELEASE);
    uint64_t presig = 0, lost = 0, answered = 0;
    int dup = 0, bad = 0;
    for (int i = 0; i < SC_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        sc_client *c = &cl[i];
        for (uint64_t id = 1; id <= c->presig; id++)
            lost += c->seen[id] != 1;
        presig += c->presig;
        answered += c->answered;
        dup += c->dup;
        bad += c->bad;
        free(c->seen);
    }
    zmq_ctx_term(ctx);
    fprintf(stderr, "  SIGTERM: %" PRIu64 " requests sent before it, %" PRIu64 " of them without "
            "exactly one reply; %" PRIu64 " replies in all, %d duplicates, %d wrong\n",
            presig, lost, answered, dup, bad);
    assert_int_equal(st, 0);
    assert_true(presig > 0);
    assert_int_equal(lost, 0);
    assert_int_equal(dup, 0);
    assert_int_equal(bad, 0);
    assert_exit_line(g_last_err);
    assert_non_null(strstr(g_last_err, "clients read every reply ZeroMQ held"));
}

/* A request still running when the drain time runs out gets SHUTTING_DOWN
 * then (PROTOCOL.md: every request sent before the signal gets a reply,
 * and the bridge exits after its drain time); until 2026-11-26 it got
 * nothing. */
void test_drain_deadline(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, "--test-faults", "--drain-ms", "500", "--log-level", "info", NULL);
    rkc *c = client(&b);
    buf fb = {0};
    put_head(&fb, 3, 1, 1, 7, "hang");
    assert_int_equal(rkc_send_raw(c, fb.p, fb.n, TMO), 0);
    free(fb.p);
    usleep(300 * 1000); /* it runs */
    kill(b.pid, SIGTERM);
    rkc_reply r;
    assert_int_equal(rkc_recv(c, &r, 10000), 0);
    assert_int_equal(r.id, 7);
    assert_false(r.ok);
    assert_string_equal(r.code, "SHUTTING_DOWN");
    assert_non_null(strstr(r.message, "--drain-ms 500"));
    rkc_reply_free(&r);
    rkc_close(c);
    assert_int_equal(bridge_reap(&b, 120000), 0);
    assert_exit_line(g_last_err);
    assert_non_null(strstr(g_last_err, " 0 unanswered"));

    /* --drain-ms 0: the drain runs out in the pass that sees the signal.
     * The requests waiting for admission behind the hang (--window 1) get
     * SHUTTING_DOWN too; they were left unanswered (5 of 7 in the exit
     * line) */
    enum { WAITING = 5 };
    bridge_start(&b, "--test-faults", "--drain-ms", "0", "--window", "1", "--admission-ms", "600000",
                 "--log-level", "info", NULL);
    c = client(&b);
    fb = (buf){0};
    put_head(&fb, 3, 1, 1, 100, "hang");
    assert_int_equal(rkc_send_raw(c, fb.p, fb.n, TMO), 0);
    free(fb.p);
    for (uint64_t id = 1; id <= WAITING; id++) {
        buf e = {0};
        put_echo(&e, id, 64);
        assert_int_equal(rkc_send_raw(c, e.p, e.n, TMO), 0);
        free(e.p);
    }
    int64_t until = now_ms() + TMO;
    while (status_counter(&b, "queued") < WAITING && now_ms() < until)
        usleep(20000);
    assert_int_equal(status_counter(&b, "queued"), WAITING);
    kill(b.pid, SIGTERM);
    for (int i = 0; i <= WAITING; i++) {
        assert_int_equal(rkc_recv(c, &r, 10000), 0);
        assert_false(r.ok);
        assert_string_equal(r.code, "SHUTTING_DOWN");
        rkc_reply_free(&r);
    }
    rkc_close(c);
    assert_int_equal(bridge_reap(&b, 120000), 0);
    assert_exit_line(g_last_err);
}

/* An idle bridge signalled while a request is still on its way (a 32 MiB
 * frame ZeroMQ is still reading): the quiet time counts from the signal,
 * not from the last request read before it, so that request is read and
 * answered SHUTTING_DOWN. The bridge had been idle longer than
 * --shutdown-quiet-ms, and left at once: the request got no reply. */
void test_sigterm_idle(void **state)
{
    (void)state;
    enum { LEN = 32 << 20 };
    bridge b;
    bridge_start(&b, "--shutdown-quiet-ms", "1000", "--log-level", "info", NULL);
    rkc *c = client(&b);
    assert_alive(&b);
    usleep(1200 * 1000); /* idle longer than the quiet time */
    uint8_t *pay = calloc(LEN, 1);
    assert_non_null(pay);
    rkc_request rq = {.op = RKC_ECHO, .data = pay, .len = LEN};
    uint64_t id;
    assert_int_equal(rkc_send(c, &rq, &id, TMO), 0);
    kill(b.pid, SIGTERM);
    rkc_reply r;
    int rc = rkc_recv(c, &r, 10000);
    fprintf(stderr, "  a request sent just before the signal: %s\n",
            rc ? "no reply" : r.ok ? "ok" : r.code);
    assert_int_equal(rc, 0);
    assert_int_equal(r.id, id);
    if (!r.ok)
        assert_string_equal(r.code, "SHUTTING_DOWN");
    rkc_reply_free(&r);
    rkc_close(c);
    free(pay);
    assert_int_equal(bridge_reap(&b, 60000), 0);
    assert_exit_line(g_last_err);
}

/* SIGHUP while the bridge stops deploys nothing: the stop cancelled any
 * deploy, and one begun after it held the request loops off the socket
 * during the drain; with --io-threads > 1 it was still under way when the
 * bridge exited, and ended by waking the workers' freed loops. A request
 * sent after the SIGHUP is still answered, SHUTTING_DOWN. */
void test_sighup_stopping(void **state)
{
    (void)state;
    const char *mod = getenv("RKBT_MOD_MATH");
    assert_non_null(mod);
    bridge b;
    bridge_start(&b, "--actors", mod, "--shutdown-quiet-ms", "1000", "--log-level", "info", NULL);
    rkc *c = client(&b);
    assert_alive(&b);
    kill(b.pid, SIGTERM);
    usleep(100 * 1000);
    kill(b.pid, SIGHUP);
    usleep(200 * 1000);
    rkc_request rq = {.op = RKC_PING};
    rkc_reply r;
    assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
    assert_false(r.ok);
    assert_string_equal(r.code, "SHUTTING_DOWN");
    rkc_reply_free(&r);
    rkc_close(c);
    assert_int_equal(bridge_reap(&b, 60000), 0);
    assert_exit_line(g_last_err);
    assert_null(strstr(g_last_err, "SIGHUP: preparing"));
    assert_null(strstr(g_last_err, "deployed "));
    assert_non_null(strstr(g_last_err, "SIGHUP: the bridge is stopping"));
}

/* ---- log floods ------------------------------------------------------------ */

/* Lines the bridge wrote for a kind, and the ones its summaries say it
 * left out: `N more "WHAT" lines ...`. */
static uint64_t logged(const char *err, const char *line_has, const char *what, int *printed)
{
    *printed = count_str(err, line_has);
    char key[96];
    snprintf(key, sizeof key, " more \"%s\" lines", what);
    uint64_t more = 0;
    for (const char *p = err; (p = strstr(p, key)); p += strlen(key)) {
        const char *q = p;
        while (q > err && q[-1] >= '0' && q[-1] <= '9')
            q--;
        more += strtoull(q, NULL, 10);
    }
    return (uint64_t)*printed + more;
}

/* Waits until the bridge has read at least at_least requests and answered
 * everything it read, and nothing new came for 200 ms. */
static void wait_quiet(const bridge *b, uint64_t at_least)
{
    int64_t until = now_ms() + 60000;
    uint64_t last = 0;
    for (;;) {
        rkc_reply r;
        status_get(b, &r);
        const msgpack_object *n = rkc_reply_get(&r, "counters");
        uint64_t req = map_uint(n, "requests"), done = map_uint(n, "replies") +
                       map_uint(n, "dropped_replies") + map_uint(n, "unroutable");
        rkc_reply_free(&r);
        /* the previous status request is answered, so `last` counts it */
        if ((req >= at_least && req == done + 1 && req == last + 1) || now_ms() > until)
            return;
        last = req;
        usleep(200000);
    }
}

/* 30 000 replies a client never reads (dropped) and 3 000 refused launches:
 * at most 10 lines a second of each kind, and summaries that account for
 * every line left out. */
void test_logflood(void **state)
{
    (void)state;
    enum { DROPS = 30000, DENIED = 3000 };
    bridge b;
    bridge_start(&b, "--sndhwm", "10", NULL);
    int64_t t0 = now_ms();
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int one = 1, big = 1000000, linger = 0;
    zmq_setsockopt(s, ZMQ_RCVHWM, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_SNDHWM, &big, sizeof big);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_connect(s, b.ep), 0);
    buf fb = {0};
    for (int i = 0; i < DROPS; i++) {
        put_echo(&fb, (uint64_t)i + 1, 1000);
        assert_true(zmq_send(s, fb.p, fb.n, 0) >= 0);
    }
    wait_quiet(&b, DROPS);
    rkc *c = client(&b);
    int denied = 0;
    for (int i = 0; i < DENIED; i++) { /* one at a time: --sndhwm 10 drops a burst */
        rkc_request rq = {.op = RKC_LAUNCH, .block = 64};
        rkc_reply r;
        assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
        denied += !strcmp(r.code, "PERMISSION_DENIED");
        rkc_reply_free(&r);
    }
    rkc_close(c);
    uint64_t dropped = status_counter(&b, "dropped_replies");
    rkc_reply sr;
    status_get(&b, &sr);
    const msgpack_object *so = rkc_map_get(rkc_reply_get(&sr, "counters"), "log_suppressed");
    uint64_t suppressed = so && so->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? so->via.u64 : 0;
    rkc_reply_free(&sr);
    zmq_close(s);
    zmq_ctx_term(ctx);
    assert_int_equal(bridge_stop(&b), 0);
    double secs = (double)(now_ms() - t0) / 1000.0;
    int pd, pl;
    uint64_t ld = logged(g_last_err, "reply dropped:", "reply dropped", &pd);
    uint64_t ll = logged(g_last_err, "refused `launch`", "admin operation refused", &pl);
    int lines = count_lines(g_last_err);
    fprintf(stderr, "  %.1f s: %" PRIu64 " replies dropped, %d logged; %d launches refused, %d "
            "logged; %d lines in all, %" PRIu64 " left out (status)\n",
            secs, dropped, pd, DENIED, pl, lines, suppressed);
    assert_true(dropped > DROPS / 2);
    assert_true(pd <= 10 * ((int)secs + 2));
    assert_int_equal(ld, dropped);
    assert_true(lines < 40 * ((int)secs + 2));
    assert_int_equal(denied, DENIED);
    assert_true(pl <= 10 * ((int)secs + 2));
    assert_int_equal(ll, DENIED);
    assert_true(suppressed >= dropped + DENIED - (uint64_t)(pd + pl));
    free(fb.p);
}

/* ---- the counter invariant --------------------------------------------------- */

static void check_invariant(const msgpack_object *n)
{
    uint64_t req = map_uint(n, "requests"), rep = map_uint(n, "replies");
    uint64_t drop = map_uint(n, "dropped_replies"), unr = map_uint(n, "unroutable");
    uint64_t infl = map_uint(n, "in_flight"), q = map_uint(n, "queued");
    fprintf(stderr, "  requests %" PRIu64 " = replies %" PRIu64 " + dropped %" PRIu64
            " + unroutable %" PRIu64 " + in flight %" PRIu64 " + queued %" PRIu64 " + 1\n",
            req, rep, drop, unr, infl, q);
    assert_int_equal(req, rep + drop + unr + infl + q + 1);
}

/* Mixed traffic of every kind, then: the invariant, exact counts, and an
 * exit line that adds up. */
void test_counters(void **state)
{
    (void)state;
    bridge b;
    bridge_start(&b, "--max-message-bytes", "64K", "--log-level", "info", NULL);
    rkc *c = client(&b);
    buf fb = {0};
    for (int i = 0; i < 100; i++) {
        rkc_request rq = {.op = RKC_ECHO, .data = "counted", .len = 7};
        assert_int_equal(rkc_send(c, &rq, NULL, TMO), 0);
    }
    void *s = rkc_socket(c);
    for (int i = 0; i < 10; i++)
        assert_int_equal(rkc_send_raw(c, "\xc1", 1, TMO), 0);
    put_echo(&fb, 9, 10);
    for (int i = 0; i < 5; i++) {
        zmq_send(s, fb.p, fb.n, ZMQ_SNDMORE);
        zmq_send(s, fb.p, fb.n, 0);
    }
    put_echo(&fb, 10, 100000);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rkc_send_raw(c, fb.p, fb.n, TMO), 0);
    for (int i = 0; i < 2; i++) {
        rkc_request rq = {.op = RKC_LAUNCH, .block = 64};
        assert_int_equal(rkc_send(c, &rq, NULL, TMO), 0);
    }
    for (int i = 0; i < 120; i++) {
        rkc_reply r;
        assert_int_equal(rkc_recv(c, &r, TMO), 0);
        rkc_reply_free(&r);
    }
    rkc_reply r;
    status_get(&b, &r);
    const msgpack_object *n = rkc_reply_get(&r, "counters");
    check_invariant(n);
    assert_int_equal(map_uint(n, "requests"), 121);
    assert_int_equal(map_uint(n, "errors"), 20);
    assert_int_equal(map_uint(n, "malformed"), 15);
    assert_int_equal(map_uint(n, "too_large"), 3);
    assert_int_equal(map_uint(n, "permission_denied"), 2);
    assert_true(map_uint(n, "accepted") >= 2 && map_uint(n, "connections") >= 1);
    assert_int_equal(map_uint(n, "transport_cap_bytes"), 4 * 65536);
    rkc_reply_free(&r);
    /* a client that leaves with replies owed */
    rkc *gone = client(&b);
    for (int i = 0; i < 300; i++) {
        rkc_request rq = {.op = RKC_ECHO, .data = fb.p, .len = 30000};
        assert_int_equal(rkc_send(gone, &rq, NULL, TMO), 0);
    }
    rkc_close(gone);
    wait_quiet(&b, 0);
    status_get(&b, &r);
    check_invariant(rkc_reply_get(&r, "counters"));
    rkc_reply_free(&r);
    rkc_close(c);
    free(fb.p);
    assert_int_equal(bridge_stop(&b), 0);
    assert_exit_line(g_last_err);
}
