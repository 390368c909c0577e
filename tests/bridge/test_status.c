/* tests/bridge/test_status.c - the status endpoint, --status-bind (suite
 * 'bridge'): `status` answered while the bridge holds its whole --queue
 * and the runtime is stalled, when the main endpoint's is not read; every
 * other op refused by name; start-up errors; CURVE. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* A status reply's counters map. */
static const msgpack_object *counters(const rkc_reply *r)
{
    const msgpack_object *n = rkc_reply_get(r, "counters");
    assert_non_null(n);
    return n;
}

/* `status` on endpoint ep (one connection of its own): its reply. */
static void status_at(const char *ep, rkc_reply *r, int tmo)
{
    rkc *c = client_ep(ep);
    rkc_request sq = {.op = RKC_STATUS};
    int rc = rkc_call(c, &sq, r, tmo);
    if (rc)
        fail_msg("status on %s: no reply within %d ms: %s", ep, tmo, rkc_errmsg(c));
    assert_true(r->ok);
    rkc_close(c);
}

static void *dealer(void *ctx, const char *ep, int sndhwm, int sndtmo)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int sndbuf = 8192, rcvtmo = 60000, linger = 0;
    if (sndhwm > 0) {
        zmq_setsockopt(s, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm);
        zmq_setsockopt(s, ZMQ_SNDBUF, &sndbuf, sizeof sndbuf);
    }
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &sndtmo, sizeof sndtmo);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &rcvtmo, sizeof rcvtmo);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_connect(s, ep), 0);
    return s;
}

/* One reply frame: its id, ok, and error code ("" when ok). */
typedef struct seen_reply {
    uint64_t id;
    bool ok, has_id;
    char code[32], message[300];
} seen_reply;

static bool recv_reply(void *s, seen_reply *out)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s, 0) < 0) {
        zmq_msg_close(&m);
        return false;
    }
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    memset(out, 0, sizeof *out);
    assert_int_equal(msgpack_unpack_next(&up, zmq_msg_data(&m), zmq_msg_size(&m), NULL),
                     MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *id = rkc_map_get(&up.data, "id"), *ok = rkc_map_get(&up.data, "ok");
    const msgpack_object *er = rkc_map_get(&up.data, "error");
    out->has_id = id && id->type == MSGPACK_OBJECT_POSITIVE_INTEGER;
    out->id = out->has_id ? id->via.u64 : 0;
    out->ok = ok && ok->type == MSGPACK_OBJECT_BOOLEAN && ok->via.boolean;
    if (er) {
        const msgpack_object *c = rkc_map_get(er, "code"), *t = rkc_map_get(er, "message");
        snprintf(out->code, sizeof out->code, "%.*s", (int)c->via.str.size, c->via.str.ptr);
        snprintf(out->message, sizeof out->message, "%.*s", (int)t->via.str.size, t->via.str.ptr);
    }
    msgpack_unpacked_destroy(&up);
    zmq_msg_close(&m);
    return true;
}

/* Nothing more comes on s within ms. */
static void assert_quiet(void *s, int ms)
{
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&it, 1, ms), 0);
}

/* requests = replies + dropped + unroutable + in_flight + queued + 1 */
static void assert_invariant(const msgpack_object *n)
{
    uint64_t req = map_uint(n, "requests"), rep = map_uint(n, "replies");
    uint64_t rest = map_uint(n, "dropped_replies") + map_uint(n, "unroutable") +
                    map_uint(n, "in_flight") + map_uint(n, "queued");
    fprintf(stderr, "  requests %" PRIu64 " = replies %" PRIu64 " + %" PRIu64 " + 1\n", req, rep, rest);
    assert_int_equal(req, rep + rest + 1);
}

/* ---- a stalled runtime, a full queue --------------------------------------- */

enum { ST_QUEUE = 8, ST_DEADLINE_MS = 5000, ST_MAX = 200, ST_ID0 = 100 };

/* The runtime is stalled (a `hang` until its deadline; --window 1) while a
 * client offers 100 kB echoes one at a time until the bridge stops taking
 * them: it then holds --queue 8 waiting requests and reads neither socket
 * of the main endpoint. `status` on the status endpoint is answered then,
 * and says so (queued 8); `status` on the main endpoint is not read (the
 * problem the status endpoint exists for). Once the stall ends every
 * request gets exactly one reply, that status included. */
void test_status_stall(void **state)
{
    (void)state;
    char deadline[16];
    snprintf(deadline, sizeof deadline, "%d", ST_DEADLINE_MS);
    const char *args[] = {"--test-faults", "--window", "1", "--rcvhwm", "1", "--max-message-bytes", "2M",
                          "--heartbeat-ms", "5000", "--request-deadline-ms", deadline,
                          "--admission-ms", "60000", "--queue", "8", "--log-level", "info", NULL};
    bridge b;
    bridge_opts o = {.umask = -1, .status_bind = ""};
    bridge_start_opts(&b, &o, args);
    rkc_reply r;
    status_at(b.sep, &r, TMO);
    const uint64_t loops = map_uint(counters(&r), "io_threads");
    rkc_reply_free(&r);
    rkc *h = client(&b);
    buf fb = {0};
    put_head(&fb, 3, 1, 1, 1, "hang");
    assert_int_equal(rkc_send_raw(h, fb.p, fb.n, TMO), 0);
    const int64_t t_hang = now_ms();
    usleep(100 * 1000); /* it runs: nothing else is served */
    void *ctx = zmq_ctx_new();
    void *s = dealer(ctx, b.ep, 1, 300); /* a send gives up after 300 ms */
    int took = 0;
    for (; took < ST_MAX; took++) {
        put_echo(&fb, ST_ID0 + (uint64_t)took, 100000);
        if (zmq_send(s, fb.p, fb.n, 0) < 0)
            break;
    }
    assert_true(took >= ST_QUEUE && took < ST_MAX); /* full: it stopped taking them */
    /* the status endpoint answers, and the bridge is full */
    int64_t t0 = now_ms();
    status_at(b.sep, &r, TMO);
    int64_t dt = now_ms() - t0;
    const msgpack_object *n = counters(&r);
    fprintf(stderr, "  stalled, %" PRIu64 " loop(s), %d echoes taken: status endpoint answered in "
            "%" PRId64 " ms (%" PRId64 " ms into the stall): queued %" PRIu64 ", in_flight %" PRIu64 "\n",
            loops, took, dt, now_ms() - t_hang, map_uint(n, "queued"), map_uint(n, "in_flight"));
    assert_int_equal(map_uint(n, "queued"), ST_QUEUE);
    assert_true(map_uint(n, "in_flight") >= 1 && map_uint(n, "in_flight") <= loops);
    rkc_reply_free(&r);
    /* the main endpoint's status waits behind the data requests */
    rkc *m = client(&b);
    rkc_request sq = {.op = RKC_STATUS};
    uint64_t mid = 0;
    assert_int_equal(rkc_send(m, &sq, &mid, TMO), 0);
    assert_int_equal(rkc_recv(m, &r, 500), -ETIMEDOUT);
    /* ... because the stall went on all along, not because it was lost */
    status_at(b.sep, &r, TMO);
    assert_int_equal(map_uint(counters(&r), "queued"), ST_QUEUE);
    rkc_reply_free(&r);
    fprintf(stderr, "  main endpoint's status unanswered 500 ms; still stalled %" PRId64 " ms in\n",
            now_ms() - t_hang);
    /* the stall ends: one reply each, none lost, none twice */
    assert_int_equal(rkc_recv(h, &r, 60000), 0);
    fprintf(stderr, "  hang: %s %s\n", r.ok ? "ok" : r.code, r.message);
    rkc_reply_free(&r);
    static uint8_t seen[ST_MAX];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < took; i++) {
        seen_reply sr;
        if (!recv_reply(s, &sr))
            fail_msg("echo reply %d of %d did not come", i + 1, took);
        assert_true(sr.ok && sr.id >= ST_ID0 && sr.id < ST_ID0 + (uint64_t)took);
        assert_int_equal(seen[sr.id - ST_ID0]++, 0);
    }
    assert_int_equal(rkc_recv(m, &r, 60000), 0);
    assert_true(r.ok && r.has_id);
    assert_int_equal(r.id, mid);
    rkc_reply_free(&r);
    assert_quiet(s, 300);
    assert_int_equal(rkc_recv(m, &r, 100), -ETIMEDOUT);
    assert_int_equal(rkc_recv(h, &r, 100), -ETIMEDOUT);
    status_at(b.sep, &r, TMO);
    assert_invariant(counters(&r));
    rkc_reply_free(&r);
    zmq_close(s);
    zmq_ctx_term(ctx);
    free(fb.p);
    rkc_close(m);
    rkc_close(h);
    assert_int_equal(bridge_stop(&b), 0);
    assert_non_null(strstr(g_last_err, " 0 unanswered"));
}

/* ---- other ops, floods ----------------------------------------------------- */

/* Sends frame (fb) on the status endpoint; expects the error code, the id
 * back, and a message holding has1 and has2. */
static void expect_refusal(void *s, const buf *fb, uint64_t id, const char *code, const char *has1,
                           const char *has2)
{
    assert_true(zmq_send(s, fb->p, fb->n, 0) >= 0);
    seen_reply sr;
    assert_true(recv_reply(s, &sr));
    fprintf(stderr, "  id %" PRIu64 " -> %s: %s\n", id, sr.code, sr.message);
    assert_false(sr.ok);
    assert_string_equal(sr.code, code);
    assert_true(sr.has_id);
    assert_int_equal(sr.id, id);
    assert_non_null(strstr(sr.message, has1));
    if (has2)
        assert_non_null(strstr(sr.message, has2));
}

/* Lines the bridge wrote that hold line_has, plus those its summaries say
 * it left out (`N more "WHAT" lines ...`). */
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

typedef struct flood {
    void *ctx;
    const char *ep;
    int n, got, bad;
    bool done;
} flood;

/* n `status` requests on the status endpoint, 64 in flight: one reply each. */
static void *flood_main(void *arg)
{
    flood *f = arg;
    void *s = dealer(f->ctx, f->ep, 0, -1);
    buf fb = {0};
    int sent = 0;
    while (__atomic_load_n(&f->got, __ATOMIC_RELAXED) < f->n) {
        while (sent < f->n && sent - f->got < 64) {
            fb.n = 0;
            put_head(&fb, 3, 1, 1, 1 + (uint64_t)sent, "status");
            zmq_send(s, fb.p, fb.n, 0);
            sent++;
        }
        seen_reply sr;
        if (!recv_reply(s, &sr))
            break;
        f->bad += !sr.ok;
        __atomic_store_n(&f->got, f->got + 1, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&f->done, true, __ATOMIC_RELEASE);
    free(fb.p);
    zmq_close(s);
    return NULL;
}

/* Every op but `status` on the status endpoint gets UNKNOWN_OP naming it
 * (with the id back), malformed frames the main endpoint's errors, and the
 * bridge serves on; a flood of `status` there does not starve the main
 * endpoint; refusals are logged at most 10 lines a second, every one
 * accounted for. */
void test_status_ops(void **state)
{
    (void)state;
    bridge b;
    bridge_opts o = {.umask = -1, .status_bind = ""};
    bridge_start_opts(&b, &o, (const char *const[]){"--test-faults", "--shutdown-grace-ms", "2000", NULL});
    int64_t t_start = now_ms();
    rkc_reply r;
    status_at(b.sep, &r, TMO);
    const msgpack_object *f = rkc_reply_get(&r, "status_endpoint");
    assert_true(f && f->type == MSGPACK_OBJECT_STR);
    assert_int_equal(f->via.str.size, strlen(b.sep));
    assert_memory_equal(f->via.str.ptr, b.sep, strlen(b.sep));
    f = rkc_reply_get(&r, "endpoints"); /* the main endpoints only */
    assert_int_equal(f->via.str.size, strlen(b.ep));
    /* the malloc this rk-bridge was linked with, as the build chose it */
    const char *alloc = getenv("RKBT_ALLOCATOR");
    f = rkc_reply_get(&r, "allocator");
    assert_true(alloc && f && f->type == MSGPACK_OBJECT_STR);
    assert_int_equal(f->via.str.size, strlen(alloc));
    assert_memory_equal(f->via.str.ptr, alloc, strlen(alloc));
    rkc_reply_free(&r);
    void *ctx = zmq_ctx_new();
    void *s = dealer(ctx, b.sep, 0, -1);
    buf fb = {0};
    uint64_t refused = 0;
    static const char *const ops[] = {"ping", "echo", "vadd", "launch", "retry_gpu", "hang",
                                      "frobnicate"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++, refused++) {
        char q[48];
        snprintf(q, sizeof q, "\"%s\"", ops[i]);
        if (!strcmp(ops[i], "echo"))
            put_echo(&fb, 10 + i, 16); /* a valid echo is refused all the same */
        else
            fb.n = 0, put_head(&fb, 3, 1, 1, 10 + i, ops[i]);
        expect_refusal(s, &fb, 10 + i, "UNKNOWN_OP", q, "serves only `status`");
    }
    fb.n = 0; /* no op */
    put_head(&fb, 2, 1, 1, 30, NULL);
    expect_refusal(s, &fb, 30, "UNKNOWN_OP", "missing", "only `status`");
    refused++;
    fb.n = 0; /* the order of checks of the main endpoint: `v` first */
    put_head(&fb, 2, 0, 1, 31, "echo");
    expect_refusal(s, &fb, 31, "UNSUPPORTED_VERSION", "`v`", NULL);
    fb.n = 0; /* trailing bytes: the id still comes back */
    put_head(&fb, 3, 1, 1, 32, "status");
    put_byte(&fb, 0xc0);
    expect_refusal(s, &fb, 32, "MALFORMED", "", NULL);
    /* several body frames */
    fb.n = 0;
    put_head(&fb, 3, 1, 1, 33, "status");
    zmq_send(s, fb.p, fb.n, ZMQ_SNDMORE);
    zmq_send(s, fb.p, fb.n, 0);
    seen_reply sr;
    assert_true(recv_reply(s, &sr));
    assert_string_equal(sr.code, "MALFORMED");
    assert_int_equal(sr.id, 33);
    /* a REQ client (the envelope with its delimiter comes back) */
    void *req = zmq_socket(ctx, ZMQ_REQ);
    int tmo = TMO, linger = 0;
    zmq_setsockopt(req, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(req, ZMQ_LINGER, &linger, sizeof linger);
    assert_int_equal(zmq_connect(req, b.sep), 0);
    fb.n = 0;
    put_head(&fb, 3, 1, 1, 34, "status");
    assert_true(zmq_send(req, fb.p, fb.n, 0) >= 0);
    assert_true(recv_reply(req, &sr));
    assert_true(sr.ok);
    assert_int_equal(sr.id, 34);
    zmq_close(req);
    /* above its transport cap (64 KiB): the connection is closed, no reply;
     * ZeroMQ reconnects and the next request is answered */
    status_at(b.sep, &r, TMO);
    uint64_t disc = map_uint(counters(&r), "disconnects");
    rkc_reply_free(&r);
    put_echo(&fb, 35, 70000);
    assert_true(zmq_send(s, fb.p, fb.n, 0) >= 0);
    assert_quiet(s, 1000);
    status_at(b.sep, &r, TMO);
    assert_true(map_uint(counters(&r), "disconnects") > disc);
    rkc_reply_free(&r);
    fb.n = 0;
    put_head(&fb, 3, 1, 1, 36, "status");
    assert_true(zmq_send(s, fb.p, fb.n, 0) >= 0);
    assert_true(recv_reply(s, &sr));
    assert_true(sr.ok);
    assert_int_equal(sr.id, 36);
    /* the bridge serves on, on both */
    assert_alive(&b);
    status_at(b.sep, &r, TMO);
    assert_true(map_uint(counters(&r), "errors") >= refused + 3);
    rkc_reply_free(&r);
    /* rk-client speaks to it as to the main endpoint */
    char out[65536];
    cli((const char *[]){g_client_path, "-e", b.sep, "status", "--json", NULL}, 0, NULL, out, sizeof out);
    assert_true(out[0] == '{');
    assert_non_null(strstr(out, "\"status_endpoint\":"));
    cli((const char *[]){g_client_path, "-e", b.sep, "ping", NULL}, 1, NULL, out, sizeof out);
    assert_non_null(strstr(out, "UNKNOWN_OP"));
    refused++;
    /* 2000 refusals as fast as they go: logged at most 10 lines a second */
    enum { REFUSE = 2000, FLOOD = 20000 };
    for (int i = 0; i < REFUSE; i++) {
        put_echo(&fb, 1000 + (uint64_t)i, 16);
        assert_true(zmq_send(s, fb.p, fb.n, 0) >= 0);
    }
    for (int i = 0; i < REFUSE; i++) {
        assert_true(recv_reply(s, &sr));
        assert_string_equal(sr.code, "UNKNOWN_OP");
    }
    refused += REFUSE;
    /* a flood of status there: the main endpoint is served meanwhile */
    flood fl = {.ctx = ctx, .ep = b.sep, .n = FLOOD};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, flood_main, &fl), 0);
    while (__atomic_load_n(&fl.got, __ATOMIC_RELAXED) < 200 && !__atomic_load_n(&fl.done, __ATOMIC_ACQUIRE))
        usleep(1000);
    rkc *c = client(&b);
    rkc_request pq = {.op = RKC_PING};
    for (int i = 0; i < 20; i++) {
        assert_int_equal(rkc_call(c, &pq, &r, TMO), 0);
        assert_true(r.ok);
        rkc_reply_free(&r);
    }
    int got = __atomic_load_n(&fl.got, __ATOMIC_RELAXED);
    bool during = !__atomic_load_n(&fl.done, __ATOMIC_ACQUIRE);
    pthread_join(th, NULL);
    fprintf(stderr, "  20 pings answered with %d of %d flooding statuses answered (%s)\n", got, FLOOD,
            during ? "during the flood" : "the flood was over");
    assert_int_equal(fl.got, FLOOD);
    assert_int_equal(fl.bad, 0);
    assert_true(during);
    /* stopping (2 s of grace): SHUTTING_DOWN on the main endpoint, status
     * here still */
    kill(b.pid, SIGTERM);
    usleep(300 * 1000);
    assert_int_equal(rkc_call(c, &pq, &r, TMO), 0);
    assert_string_equal(r.code, "SHUTTING_DOWN");
    rkc_reply_free(&r);
    status_at(b.sep, &r, TMO);
    rkc_reply_free(&r);
    rkc_close(c);
    zmq_close(s);
    zmq_ctx_term(ctx);
    free(fb.p);
    assert_int_equal(bridge_reap(&b, 60000), 0);
    double secs = (double)(now_ms() - t_start) / 1000.0;
    int printed;
    uint64_t all = logged(g_last_err, "refused a request", "request refused on the status endpoint", &printed);
    fprintf(stderr, "  %.1f s: %" PRIu64 " requests refused on the status endpoint, %d lines logged, "
            "%" PRIu64 " accounted for\n", secs, refused, printed, all);
    assert_true(printed >= 1 && printed <= 10 * ((int)secs + 2));
    assert_int_equal(all, refused);
}

/* ---- start-up --------------------------------------------------------------- */

/* A bridge that must not start: exit status want, and its stderr names
 * `says` (and `says2`). */
static void refused_start(const char *status_bind, const char *const *args, int want, const char *says,
                          const char *says2)
{
    bridge b;
    snprintf(b.dir, sizeof b.dir, "/tmp/rkbt-XXXXXX");
    assert_non_null(mkdtemp(b.dir));
    char sb[160]; /* DIR: the bridge's directory */
    const char *d = strstr(status_bind, "DIR");
    if (d)
        snprintf(sb, sizeof sb, "%.*s%s%s", (int)(d - status_bind), status_bind, b.dir, d + 3);
    else
        snprintf(sb, sizeof sb, "%s", status_bind);
    bridge_opts o = {.umask = -1, .may_fail = true, .no_extra = true, .keep_dir = true, .status_bind = sb};
    assert_int_equal(bridge_start_opts(&b, &o, args), -1);
    fprintf(stderr, "  --status-bind %s: exit %d\n", sb, b.status);
    assert_int_equal(b.status, want);
    assert_non_null(strstr(g_last_err, says));
    if (says2)
        assert_non_null(strstr(g_last_err, says2));
    /* the main endpoint, bound first, left nothing behind */
    char path[128];
    snprintf(path, sizeof path, "%s/b.sock", b.dir);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(rmdir(b.dir), 0);
}

/* A TCP port on loopback that something else listens on. */
static int listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* Bad --status-bind values fail the start, naming the value and why; a
 * good one over tcp (a port of its own) and ipc (0600, removed at exit). */
void test_status_startup(void **state)
{
    (void)state;
    char out[4096], ep[128];
    const char *B = g_bridge_path;
    /* the command line: one line naming it (exit 2) */
    cli((const char *[]){B, "--bind", "tcp://127.0.0.1:5599", "--status-bind", "tcp://127.0.0.1:5599", NULL},
        2, "--status-bind tcp://127.0.0.1:5599", out, sizeof out);
    assert_non_null(strstr(out, "main endpoint"));
    cli((const char *[]){B, "--status-bind", "tcp://127.0.0.1:5555", NULL}, 2,
        "--status-bind tcp://127.0.0.1:5555", out, sizeof out);
    assert_non_null(strstr(out, "default --bind"));
    cli((const char *[]){B, "--status-bind", "ipc:///tmp/rkbt-a", "--status-bind", "ipc:///tmp/rkbt-b", NULL},
        2, "--status-bind ipc:///tmp/rkbt-b", out, sizeof out);
    cli((const char *[]){B, "--status-bind", NULL}, 2, "--status-bind", out, sizeof out);
    cli((const char *[]){B, "--help", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "--status-bind ENDPOINT"));
    /* other hosts could reach it, without CURVE: exit 2 */
    refused_start("tcp://0.0.0.0:*", NULL, 2, "--status-bind tcp://0.0.0.0:*", "--allow-insecure-remote");
    /* binding fails: exit 1, naming the value and why */
    int port, fd = listen_loopback(&port);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    refused_start(ep, NULL, 1, ep, "Address already in use");
    close(fd);
    /* a malformed endpoint: exit 2, saying what is wrong (not ZeroMQ's EINVAL) */
    refused_start("tcp://127.0.0.1:nope", NULL, 2, "--status-bind tcp://127.0.0.1:nope",
                  "port \"nope\" is not a number from 0 to 65535 or *");
    refused_start("ipc:///proc/version", NULL, 1, "--status-bind ipc:///proc/version", "not a socket");
    /* the main endpoint's socket file under another name */
    refused_start("ipc://DIR/./b.sock", NULL, 1, "./b.sock", "the main endpoint's socket file");
    /* over tcp: a port of its own, named in the start-up line */
    bridge b;
    bridge_opts o = {.umask = -1, .status_bind = "tcp://127.0.0.1:*"};
    bridge_start_opts(&b, &o, NULL);
    fprintf(stderr, "  status endpoint %s\n", b.sep);
    assert_true(!strncmp(b.sep, "tcp://127.0.0.1:", 16) && b.sep[16] != '*');
    rkc_reply r;
    status_at(b.sep, &r, TMO);
    rkc_reply_free(&r);
    assert_int_equal(bridge_stop(&b), 0);
    /* over ipc: 0600 whatever the umask, removed at exit */
    o = (bridge_opts){.umask = 0, .status_bind = ""};
    bridge_start_opts(&b, &o, NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/s.sock", b.dir);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    status_at(b.sep, &r, TMO);
    rkc_reply_free(&r);
    kill(b.pid, SIGTERM);
    int64_t until = now_ms() + 60000;
    while (access(path, F_OK) == 0 && now_ms() < until)
        usleep(10000);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(bridge_reap(&b, 60000), 0);
}

/* ---- CURVE -------------------------------------------------------------------- */

/* With CURVE the status endpoint admits the clients the main one does and
 * nobody else: no unauthenticated way to the bridge's status. */
void test_status_curve(void **state)
{
    (void)state;
    curve_keys k;
    curve_keys_make(&k);
    bridge b;
    bridge_opts o = {.umask = -1, .status_bind = ""};
    bridge_start_opts(&b, &o, (const char *const[]){"--curve-secret-key-file", k.server_key,
                                                    "--curve-allow-dir", k.allow_dir, NULL});
    rkc_request sq = {.op = RKC_STATUS};
    rkc_reply r;
    rkc *c;
    /* listed: status on the status endpoint */
    rkc_options oa = {.server_public_key = k.server_pub, .secret_key = k.alice};
    assert_int_equal(rkc_connect(&c, b.sep, &oa), 0);
    assert_int_equal(rkc_call(c, &sq, &r, TMO), 0);
    assert_true(r.ok);
    rkc_reply_free(&r);
    rkc_close(c);
    /* a key not on the list, and plain text: nothing comes back */
    rkc_options om = {.server_public_key = k.server_pub, .secret_key = k.mallory};
    assert_int_equal(rkc_connect(&c, b.sep, &om), 0);
    assert_int_equal(rkc_call(c, &sq, &r, 2000), -ETIMEDOUT);
    rkc_close(c);
    assert_int_equal(rkc_connect(&c, b.sep, NULL), 0);
    assert_int_equal(rkc_call(c, &sq, &r, 2000), -ETIMEDOUT);
    rkc_close(c);
    /* the main endpoint as before */
    assert_int_equal(rkc_connect(&c, b.ep, &oa), 0);
    assert_int_equal(rkc_call(c, &sq, &r, TMO), 0);
    assert_true(r.ok);
    uint64_t requests = map_uint(counters(&r), "requests");
    rkc_reply_free(&r);
    rkc_close(c);
    /* the refused clients' requests never reached the bridge */
    assert_int_equal(requests, 2);
    assert_int_equal(bridge_stop(&b), 0);
    assert_non_null(strstr(g_last_err, "refused a client key"));
    curve_keys_remove(&k);
}
