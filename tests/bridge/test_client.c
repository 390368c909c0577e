/* tests/bridge/test_client.c - librkc's generic API (any actor by name with
 * named fields, pipelined; reply fields by name; error codes as errno
 * values; the actor list from status; client-side refusals; a timeout)
 * and rk-client's call and actors commands (suite 'bridge'). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* Calls op with fields; expects an error reply with that code and errno. */
static void expect_refused(rkc *c, const char *op, const rkc_field *f, size_t n, const char *code,
                           int err, const char *msg_has)
{
    rkc_reply r;
    assert_int_equal(rkc_actor_call(c, op, f, n, &r, TMO), 0);
    fprintf(stderr, "  %s -> %s: %s\n", op, r.code, r.message);
    assert_false(r.ok);
    assert_string_equal(r.code, code);
    assert_int_equal(rkc_reply_errno(&r), err);
    assert_non_null(strstr(r.message, msg_has));
    rkc_reply_free(&r);
}

/* 64 pipelined vadds by name, waited for last first, then a batch read in
 * arrival order: every c is a + b. */
static void pipelined_vadd(rkc *c)
{
    enum { N = 64, E = 100 };
    static float a[N][E], b[N][E];
    uint64_t id[N];
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < E; k++)
            a[i][k] = (float)(i * 1000 + k), b[i][k] = 0.5f;
        rkc_field f[] = {RKC_FIELD("a", a[i], sizeof a[i]), RKC_FIELD("b", b[i], sizeof b[i])};
        assert_int_equal(rkc_actor_send(c, "vadd", f, 2, &id[i], TMO), 0);
    }
    for (int i = N - 1; i >= 0; i--) {
        rkc_reply r;
        assert_int_equal(rkc_wait(c, id[i], &r, TMO), 0);
        const void *p;
        size_t n;
        assert_true(r.ok);
        assert_int_equal(rkc_reply_bin(&r, "c", &p, &n), 0);
        assert_int_equal(n, sizeof a[i]);
        for (int k = 0; k < E; k++) {
            float got;
            memcpy(&got, (const char *)p + 4 * k, 4);
            assert_true(got == a[i][k] + 0.5f);
        }
        rkc_reply_free(&r);
    }
    rkc_field f[] = {RKC_FIELD("data", "x", 1)};
    for (int i = 0; i < N; i++)
        assert_int_equal(rkc_actor_send(c, "echo", f, 1, NULL, TMO), 0);
    for (int i = 0; i < N; i++) {
        rkc_reply r;
        assert_int_equal(rkc_recv(c, &r, TMO), 0);
        assert_true(r.ok && r.len == 1 && r.data[0] == 'x');
        rkc_reply_free(&r);
    }
}

static void actor_list(rkc *c)
{
    rkc_actor_list l;
    assert_int_equal(rkc_actors(c, &l, TMO), 0);
    const rkc_actor_info *e = rkc_actor_find(&l, "echo"), *v = rkc_actor_find(&l, "vadd");
    assert_non_null(e);
    assert_non_null(v);
    assert_null(rkc_actor_find(&l, "nope"));
    assert_int_equal(e->n_inputs, 1);
    assert_string_equal(e->inputs[0], "data");
    assert_string_equal(e->outputs[0], "data");
    assert_int_equal(v->n_inputs, 2);
    assert_string_equal(v->inputs[1], "b");
    assert_int_equal(v->n_outputs, 1);
    assert_string_equal(v->outputs[0], "c");
    assert_true(v->cpu);
    rkc_actor_list_free(&l);
    rkc_actor_list_free(&l); /* a released list is a no-op */
    /* a reply without `actors` (an older bridge's status): -ENOENT */
    rkc_reply r;
    assert_int_equal(rkc_actor_call(c, "ping", NULL, 0, &r, TMO), 0);
    assert_int_equal(rkc_status_actors(&r, &l), -ENOENT);
    rkc_reply_free(&r);
}

/* What the library refuses before sending, each with a sentence. */
static void refused_locally(rkc *c)
{
    rkc_reply r;
    rkc_field id[] = {RKC_FIELD("id", "x", 1)}, twice[] = {RKC_FIELD("a", "x", 1), RKC_FIELD("a", "y", 1)};
    rkc_field nul[] = {RKC_FIELD("data", NULL, 4)}, noname[] = {RKC_FIELD(NULL, "x", 1)};
    rkc_field bad[] = {{.name = "data", .type = (rkc_field_type)9}};
    assert_int_equal(rkc_actor_call(c, "echo", id, 1, &r, TMO), -EINVAL);
    assert_non_null(strstr(rkc_errmsg(c), "`id`"));
    assert_int_equal(rkc_actor_call(c, "echo", twice, 2, &r, TMO), -EINVAL);
    assert_non_null(strstr(rkc_errmsg(c), "twice"));
    assert_int_equal(rkc_actor_call(c, "echo", nul, 1, &r, TMO), -EINVAL);
    assert_int_equal(rkc_actor_call(c, "echo", noname, 1, &r, TMO), -EINVAL);
    assert_int_equal(rkc_actor_call(c, "echo", bad, 1, &r, TMO), -EINVAL);
    assert_int_equal(rkc_actor_call(c, NULL, NULL, 0, &r, TMO), -EINVAL);
    assert_int_equal(rkc_actor_call(c, "", NULL, 0, &r, TMO), -EINVAL);
    rkc_request rq = {.op = RKC_ECHO, .data = "x", .len = 1, .fields = id, .n_fields = 1};
    assert_int_equal(rkc_call(c, &rq, &r, TMO), -EINVAL);
    rkc_field dup[] = {RKC_FIELD("data", "y", 1)};
    rq.fields = dup;
    assert_int_equal(rkc_call(c, &rq, &r, TMO), -EINVAL);
    assert_non_null(strstr(rkc_errmsg(c), "echo's own"));
    /* an operand msgpack cannot carry: n * 4 wrapped to 4 and a
     * one-element vadd went */
    static const float x[1] = {1};
    rkc_request big = {.op = RKC_VADD, .a = x, .b = x, .n = ((size_t)1 << 62) + 1};
    assert_int_equal(rkc_call(c, &big, &r, TMO), -E2BIG);
    assert_non_null(strstr(rkc_errmsg(c), "4294967295"));
    big = (rkc_request){.op = RKC_ECHO, .data = x, .len = (size_t)UINT32_MAX + 1};
    assert_int_equal(rkc_call(c, &big, &r, TMO), -E2BIG);
}

/* The bridge decodes at most 4096 msgpack objects (PROTOCOL.md, "Decoder
 * limits"): the map, v, id, op and 2044 fields. One more was sent, and
 * the bridge's MALFORMED, with id nil, left the call to time out. */
static void too_many_fields(rkc *c)
{
    enum { MAX = 2044 };
    static rkc_field f[MAX + 1];
    static char names[MAX + 1][8];
    for (int i = 0; i <= MAX; i++) {
        snprintf(names[i], sizeof names[i], "f%d", i);
        f[i] = (rkc_field)RKC_FIELD_UINT(names[i], 1);
    }
    rkc_reply r;
    assert_int_equal(rkc_actor_call(c, "nope", f, MAX, &r, TMO), 0); /* the bridge read its id */
    assert_true(r.has_id);
    assert_string_equal(r.code, "UNKNOWN_OP");
    rkc_reply_free(&r);
    assert_int_equal(rkc_actor_call(c, "nope", f, MAX + 1, &r, 2000), -EINVAL);
    assert_non_null(strstr(rkc_errmsg(c), "2044"));
    rkc_request rq = {.op = RKC_ECHO, .data = "x", .len = 1, .fields = f, .n_fields = MAX};
    assert_int_equal(rkc_call(c, &rq, &r, 2000), -EINVAL); /* data is one of them */
    rq.n_fields = MAX - 1;
    assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
    assert_true(r.ok);
    rkc_reply_free(&r);
}

/* CURVE keys are 40 Z85 characters: ZeroMQ read 40 bytes of a shorter
 * server key, and zmq_curve_public decoded a longer secret key past its
 * 32-byte buffer (stack smashing, an abort). */
static void curve_key_lengths(void)
{
    char pub[41], sec[41], longsec[81];
    assert_int_equal(zmq_curve_keypair(pub, sec), 0);
    snprintf(longsec, sizeof longsec, "%s%s", sec, sec);
    rkc *c = (rkc *)1;
    rkc_options o = {.server_public_key = pub, .secret_key = longsec};
    assert_int_equal(rkc_connect(&c, "tcp://127.0.0.1:5601", &o), -EINVAL);
    assert_null(c);
    assert_non_null(strstr(rkc_last_error(), "80 characters"));
    o = (rkc_options){.server_public_key = "short", .secret_key = sec};
    assert_int_equal(rkc_connect(&c, "tcp://127.0.0.1:5601", &o), -EINVAL);
    assert_non_null(strstr(rkc_last_error(), "5 characters"));
    o.server_public_key = pub;
    assert_int_equal(rkc_connect(&c, "tcp://127.0.0.1:5601", &o), 0);
    rkc_close(c);
    /* neither RKC_DEALER nor RKC_REQ: was a DEALER, silently */
    o = (rkc_options){.socket_type = 7};
    assert_int_equal(rkc_connect(&c, "tcp://127.0.0.1:5601", &o), -EINVAL);
    assert_non_null(strstr(rkc_last_error(), "socket type 7"));
}

/* One whole message off s into m[0..return): its envelope, then its body. */
static int recv_message(void *s, zmq_msg_t *m, int cap)
{
    int n = 0;
    do {
        assert_true(n < cap);
        zmq_msg_init(&m[n]);
        assert_true(zmq_msg_recv(&m[n], s, 0) >= 0);
    } while (zmq_msg_more(&m[n++]));
    return n;
}

/* Answers the message m[0..n) (its envelope back) with an ok ping reply
 * of that id; closes m. */
static void answer_ping(void *srv, zmq_msg_t *m, int n, uint64_t id)
{
    for (int i = 0; i < n - 1; i++)
        assert_true(zmq_msg_send(&m[i], srv, ZMQ_SNDMORE) >= 0);
    zmq_msg_close(&m[n - 1]);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 4);
    msgpack_pack_str_with_body(&pk, "v", 1), msgpack_pack_uint8(&pk, 1);
    msgpack_pack_str_with_body(&pk, "id", 2), msgpack_pack_uint64(&pk, id);
    msgpack_pack_str_with_body(&pk, "ok", 2), msgpack_pack_true(&pk);
    msgpack_pack_str_with_body(&pk, "backend", 7), msgpack_pack_str_with_body(&pk, "cpu", 3);
    assert_true(zmq_send(srv, sb.data, sb.size, 0) >= 0);
    msgpack_sbuffer_destroy(&sb);
}

/* A REQ handle whose request got no reply (a bridge gone mid-call) sends
 * again: plain REQ refused every later send (EFSM, -EIO) for good. Here a
 * ROUTER that reads the first request and answers only the second. */
static void req_after_timeout(const bridge *b)
{
    char ep[128];
    snprintf(ep, sizeof ep, "ipc://%s/req.sock", b->dir);
    void *ctx = zmq_ctx_new(), *srv = zmq_socket(ctx, ZMQ_ROUTER);
    assert_int_equal(zmq_bind(srv, ep), 0);
    rkc *c;
    rkc_options o = {.socket_type = RKC_REQ};
    assert_int_equal(rkc_connect(&c, ep, &o), 0);
    rkc_request rq = {.op = RKC_PING};
    rkc_reply r;
    assert_int_equal(rkc_call(c, &rq, &r, 300), -ETIMEDOUT);
    uint64_t id;
    assert_int_equal(rkc_send(c, &rq, &id, TMO), 0);
    zmq_msg_t m[8];
    int n = recv_message(srv, m, 8); /* the first request, unanswered */
    for (int i = 0; i < n; i++)
        zmq_msg_close(&m[i]);
    n = recv_message(srv, m, 8);
    answer_ping(srv, m, n, id);
    assert_int_equal(rkc_wait(c, id, &r, TMO), 0);
    assert_true(r.ok);
    assert_string_equal(r.backend, "cpu");
    rkc_reply_free(&r);
    rkc_close(c);
    zmq_close(srv);
    zmq_ctx_term(ctx);
}

/* A peer that comes up late and never answers: a ROUTER bound at ep
 * after_ms from its start that reads (and drops) every request until
 * stop. */
typedef struct late_router {
    char ep[128];
    int after_ms;
    atomic_int stop;
} late_router;

static void *late_router_main(void *arg)
{
    late_router *s = arg;
    struct timespec ts = {s->after_ms / 1000, (long)(s->after_ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    void *ctx = zmq_ctx_new(), *srv = zmq_socket(ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(srv, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(srv, s->ep) == 0) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        while (!atomic_load(&s->stop)) {
            zmq_pollitem_t it = {srv, 0, ZMQ_POLLIN, 0};
            if (zmq_poll(&it, 1, 20) > 0)
                while (zmq_msg_recv(&m, srv, ZMQ_DONTWAIT) >= 0)
                    ;
        }
        zmq_msg_close(&m);
    }
    zmq_close(srv);
    zmq_ctx_term(ctx);
    return NULL;
}

/* rkc_call's timeout covers the whole call: its send and its wait each
 * had the whole timeout, so a send that waited for room most of T was
 * followed by a wait of T more. Here the queue to a peer not up yet is
 * full, and a peer that reads and never answers comes up at 0.8 T: the
 * call must be over at T (the bound is generous: a loaded machine). */
static void call_deadline(const bridge *b)
{
    enum { T = 1000 };
    late_router s = {.after_ms = T * 8 / 10};
    snprintf(s.ep, sizeof s.ep, "ipc://%s/late.sock", b->dir);
    rkc *c = client_ep(s.ep);
    rkc_request rq = {.op = RKC_PING};
    int rc = 0;
    for (long i = 0; i < 10000000 && rc == 0; i++) /* until the queue is full */
        rc = rkc_send(c, &rq, NULL, 0);
    assert_int_equal(rc, -ETIMEDOUT);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, late_router_main, &s), 0);
    rkc_reply r;
    const int64_t t0 = now_ms();
    rc = rkc_call(c, &rq, &r, T);
    const int64_t took = now_ms() - t0;
    atomic_store(&s.stop, 1);
    pthread_join(th, NULL);
    rkc_close(c);
    fprintf(stderr, "  rkc_call with a timeout of %d ms: %d after %lld ms\n", T, rc, (long long)took);
    assert_int_equal(rc, -ETIMEDOUT);
    assert_true(took < T * 3 / 2 + 100);
}

/* rkc_call with no reply to fill is -EINVAL before anything goes: the
 * request went (a launch ran) and then the call said -EINVAL. The first
 * request a ROUTER gets here is the one sent after it. */
static void call_no_out(const bridge *b)
{
    char ep[128];
    snprintf(ep, sizeof ep, "ipc://%s/noout.sock", b->dir);
    void *ctx = zmq_ctx_new(), *srv = zmq_socket(ctx, ZMQ_ROUTER);
    assert_int_equal(zmq_bind(srv, ep), 0);
    rkc *c = client_ep(ep);
    rkc_request rq = {.op = RKC_PING};
    assert_int_equal(rkc_call(c, &rq, NULL, TMO), -EINVAL);
    uint64_t id;
    assert_int_equal(rkc_send(c, &rq, &id, TMO), 0);
    zmq_msg_t m[8];
    int n = recv_message(srv, m, 8);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    assert_int_equal(msgpack_unpack_next(&up, zmq_msg_data(&m[n - 1]), zmq_msg_size(&m[n - 1]), NULL),
                     MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *got = rkc_map_get(&up.data, "id");
    assert_non_null(got);
    assert_int_equal(got->via.u64, id);
    msgpack_unpacked_destroy(&up);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&m[i]);
    rkc_close(c);
    zmq_close(srv);
    zmq_ctx_term(ctx);
}

/* The late reply to an rkc_call that timed out (DEALER) is dropped: it was
 * set aside for good by the next rkc_wait (nobody knows its id), a leak of
 * one reply per timeout, and handed to a later rkc_recv as if it were
 * its caller's. */
static void late_reply_dropped(const bridge *b)
{
    char ep[128];
    snprintf(ep, sizeof ep, "ipc://%s/late-reply.sock", b->dir);
    void *ctx = zmq_ctx_new(), *srv = zmq_socket(ctx, ZMQ_ROUTER);
    assert_int_equal(zmq_bind(srv, ep), 0);
    rkc *c = client_ep(ep);
    rkc_request rq = {.op = RKC_PING};
    rkc_reply r;
    assert_int_equal(rkc_call(c, &rq, &r, 300), -ETIMEDOUT);
    zmq_msg_t m[8];
    int n = recv_message(srv, m, 8);
    answer_ping(srv, m, n, 1); /* late */
    uint64_t id;
    assert_int_equal(rkc_send(c, &rq, &id, TMO), 0);
    assert_int_equal(id, 2);
    n = recv_message(srv, m, 8);
    answer_ping(srv, m, n, 2);
    assert_int_equal(rkc_wait(c, 2, &r, TMO), 0); /* reply 1 came first */
    rkc_reply_free(&r);
    int rc = rkc_recv(c, &r, 200);
    if (rc == 0)
        fail_msg("rkc_recv returned the late reply of the timed-out call (id %" PRIu64 ")", r.id);
    assert_int_equal(rc, -ETIMEDOUT);
    rkc_close(c);
    zmq_close(srv);
    zmq_ctx_term(ctx);
}

static void on_usr1(int sig) { (void)sig; }

typedef struct pester {
    pthread_t target;
    atomic_int stop;
} pester;

/* SIGUSR1 to the target every 20 ms until stop (one may come before its
 * wait starts; a later one comes during it). */
static void *pester_main(void *arg)
{
    pester *p = arg;
    struct timespec ts = {0, 20 * 1000000};
    while (!atomic_load(&p->stop)) {
        nanosleep(&ts, NULL);
        pthread_kill(p->target, SIGUSR1);
    }
    return NULL;
}

/* A signal handled while a call waits: -EINTR (rk/client.h), the caller
 * decides; it was -EIO, "ZeroMQ failed", from zmq_poll's EINTR. */
static void call_interrupted(void)
{
    struct sigaction sa = {.sa_handler = on_usr1}, old;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    rkc *c = client_ep("ipc:///tmp/rkbt-nobody-here");
    pester p = {.target = pthread_self()};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, pester_main, &p), 0);
    rkc_request rq = {.op = RKC_PING};
    rkc_reply r;
    int rc = rkc_call(c, &rq, &r, TMO);
    atomic_store(&p.stop, 1);
    pthread_join(th, NULL);
    sigaction(SIGUSR1, &old, NULL);
    fprintf(stderr, "  rkc_call under signals: %d (%s)\n", rc, rkc_errmsg(c));
    assert_int_equal(rc, -EINTR);
    assert_non_null(strstr(rkc_errmsg(c), "signal"));
    rkc_close(c);
}

static void library(const bridge *b)
{
    rkc *c = client(b);
    rkc_field f[] = {RKC_FIELD("data", "\0hi", 3)};
    rkc_reply r;
    assert_int_equal(rkc_actor_call(c, "echo", f, 1, &r, TMO), 0);
    const void *p;
    size_t n;
    assert_true(r.ok);
    assert_string_equal(r.code, "");
    assert_int_equal(rkc_reply_errno(&r), 0);
    assert_int_equal(rkc_reply_bin(&r, "data", &p, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(p, "\0hi", 3);
    assert_int_equal(rkc_reply_bin(&r, "nope", &p, &n), -ENOENT);
    assert_int_equal(rkc_reply_bin(&r, "ok", &p, &n), -EPROTO);
    rkc_reply_free(&r);
    rkc_reply_free(&r); /* a released reply is a no-op */
    pipelined_vadd(c);
    rkc_field a_only[] = {RKC_FIELD("a", "abcd", 4)}, str[] = {RKC_FIELD_STR("data", "hi", 2)};
    expect_refused(c, "nope", NULL, 0, "UNKNOWN_OP", -ENOSYS, "echo");
    expect_refused(c, "vadd", a_only, 1, "INVALID_ARGUMENT", -EINVAL, "`b`");
    expect_refused(c, "echo", str, 1, "INVALID_ARGUMENT", -EINVAL, "`data`");
    rkc_field launch[] = {RKC_FIELD_UINT("grid", 1), RKC_FIELD_UINT("block", 64), RKC_FIELD_UINT("smem", 0)};
    expect_refused(c, "launch", launch, 3, "PERMISSION_DENIED", -EPERM, "admin");
    actor_list(c);
    refused_locally(c);
    too_many_fields(c);
    rkc_close(c);
    curve_key_lengths();
    req_after_timeout(b);
    call_deadline(b);
    call_interrupted();
    call_no_out(b);
    late_reply_dropped(b);
    /* a malformed endpoint: -EINVAL and what is wrong (ZeroMQ says only
     * "Invalid argument") */
    rkc *bad = (rkc *)1;
    assert_int_equal(rkc_connect(&bad, "localhost:5601", NULL), -EINVAL);
    assert_null(bad);
    assert_non_null(strstr(rkc_last_error(), "cannot connect to localhost:5601: no transport"));
    assert_int_equal(rkc_connect(&bad, "tcp://127.0.0.1", NULL), -EINVAL);
    assert_non_null(strstr(rkc_last_error(), "no port"));
    /* nobody there: a timeout, said */
    c = client_ep("ipc:///tmp/rkbt-nobody-here");
    assert_int_equal(rkc_actor_call(c, "echo", f, 1, &r, 300), -ETIMEDOUT);
    assert_non_null(strstr(rkc_errmsg(c), "300 ms"));
    rkc_close(c);
}

static void command_line(const bridge *b)
{
    char out[65536], file[300];
    const char *C = g_client_path, *E = b->ep;
    cli((const char *[]){C, "-e", E, "call", "echo", "data=hello", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "data: \"hello\" (5 B)"));
    cli((const char *[]){C, "-e", E, "call", "echo", "data=hex:00ff", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "data: hex:00ff  (2 B)"));
    cli((const char *[]){C, "-e", E, "call", "vadd", "a=f32:1,2,3", "b=f32:0.5,0.5,inf", "-f", "f32", NULL},
        0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "c: f32:1.5,2.5,inf  (12 B)"));
    snprintf(file, sizeof file, "%s/c.bin", b->dir);
    char spec[320];
    snprintf(spec, sizeof spec, "c=%s", file);
    cli((const char *[]){C, "-e", E, "call", "vadd", "a=f32:1,2", "b=f32:3,4", "-o", spec, NULL}, 0, NULL,
        out, sizeof out);
    FILE *f = fopen(file, "rb");
    assert_non_null(f);
    float c[3];
    assert_int_equal(fread(c, 1, sizeof c, f), 8);
    fclose(f);
    assert_true(c[0] == 4.0f && c[1] == 6.0f);
    snprintf(spec, sizeof spec, "data=@%s", file); /* a file's bytes as a field */
    cli((const char *[]){C, "-e", E, "call", "echo", spec, "-f", "f32", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "data: f32:4,6  (8 B)"));
    cli((const char *[]){C, "-e", E, "call", "nope", NULL}, 1, NULL, out, sizeof out);
    assert_non_null(strstr(out, "UNKNOWN_OP"));
    cli((const char *[]){C, "-e", E, "call", "echo", "data=hex:abc", NULL}, 2, "hex:abc", out, sizeof out);
    cli((const char *[]){C, "-e", E, "call", "vadd", "a=f32:1,x", NULL}, 2, "f32:1,x", out, sizeof out);
    cli((const char *[]){C, "-e", E, "call", "echo", "nodata", NULL}, 2, "FIELD=VALUE", out, sizeof out);
    /* strtoull skips the blank and negates: " -1" went as 2^64 - 1 */
    cli((const char *[]){C, "-e", E, "call", "echo", "n=uint: -1", NULL}, 2, "uint: -1", out, sizeof out);
    /* fields librkc refuses before sending are a bad command line too */
    cli((const char *[]){C, "-e", E, "call", "echo", "data=a", "data=b", NULL}, 2, "`data` is given twice", out,
        sizeof out);
    cli((const char *[]){C, "-e", E, "call", "echo", "id=7", NULL}, 2, "`id`", out, sizeof out);
    /* payloads msgpack cannot carry (a bin is at most 2^32 - 1 bytes) */
    cli((const char *[]){C, "-e", E, "--size", "4294967296", "echo", NULL}, 2, "--size 4294967296", out, sizeof out);
    cli((const char *[]){C, "-e", E, "--n", "1073741824", "vadd", NULL}, 2, "--n 1073741824", out, sizeof out);
    /* numbers are decimal, as rk-bridge's: base 0 made 010 8 and took 0x10 */
    cli((const char *[]){C, "-e", E, "--size", "010", "echo", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "echo: 10 random bytes"));
    cli((const char *[]){C, "-e", E, "-t", "0x10", "ping", NULL}, 2, "--timeout 0x10", out, sizeof out);
    cli((const char *[]){C, "-e", E, "call", NULL}, 2, "actor name", out, sizeof out);
    cli((const char *[]){C, "-e", E, "call", "echo", "-f", "wide", NULL}, 2, "--format wide", out, sizeof out);
    cli((const char *[]){C, "-e", E, "call", "echo", "data=x", "-o", "data=/nonexistent/dir/f", NULL}, 1,
        NULL, out, sizeof out);
    assert_non_null(strstr(out, "cannot write"));
    cli((const char *[]){C, "-e", E, "actors", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "a, b -> c"));
    assert_non_null(strstr(out, "data -> data"));
}

/* A peer that answers one request with two bin fields, LONG (200
 * characters) and its first 127: `-o LONG=FILE` looked up the name cut to
 * 127 and wrote the other field. */
static void *long_name_peer(void *srv)
{
    zmq_pollitem_t it = {srv, 0, ZMQ_POLLIN, 0};
    zmq_msg_t m[8];
    int n = 0;
    if (zmq_poll(&it, 1, TMO) != 1)
        return NULL;
    do
        zmq_msg_init(&m[n]);
    while (zmq_msg_recv(&m[n], srv, 0) >= 0 && zmq_msg_more(&m[n++]) && n < 8);
    for (int i = 0; i < n - 1; i++)
        zmq_msg_send(&m[i], srv, ZMQ_SNDMORE);
    zmq_msg_close(&m[n - 1]);
    char name[201];
    memset(name, 'k', 200);
    name[200] = 0;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 5);
    msgpack_pack_str_with_body(&pk, "v", 1), msgpack_pack_uint8(&pk, 1);
    msgpack_pack_str_with_body(&pk, "id", 2), msgpack_pack_uint64(&pk, 1);
    msgpack_pack_str_with_body(&pk, "ok", 2), msgpack_pack_true(&pk);
    msgpack_pack_str_with_body(&pk, name, 127), msgpack_pack_bin_with_body(&pk, "wrong", 5);
    msgpack_pack_str_with_body(&pk, name, 200), msgpack_pack_bin_with_body(&pk, "right", 5);
    zmq_send(srv, sb.data, sb.size, 0);
    msgpack_sbuffer_destroy(&sb);
    return NULL;
}

static void output_long_name(const bridge *b)
{
    char ep[128], spec[512], file[300], out[4096], got[8] = "";
    snprintf(ep, sizeof ep, "ipc://%s/long.sock", b->dir);
    snprintf(file, sizeof file, "%s/long.bin", b->dir);
    void *ctx = zmq_ctx_new(), *srv = zmq_socket(ctx, ZMQ_ROUTER);
    assert_int_equal(zmq_bind(srv, ep), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, long_name_peer, srv), 0);
    memset(spec, 'k', 200);
    snprintf(spec + 200, sizeof spec - 200, "=%s", file);
    cli((const char *[]){g_client_path, "-e", ep, "call", "x", "-o", spec, NULL}, 0, NULL, out, sizeof out);
    pthread_join(th, NULL);
    FILE *f = fopen(file, "rb");
    assert_non_null(f);
    assert_int_equal(fread(got, 1, sizeof got - 1, f), 5);
    fclose(f);
    assert_string_equal(got, "right");
    zmq_close(srv);
    zmq_ctx_term(ctx);
}

/* The `launch` options: a launch without --block asks for block 0, the
 * bridge's own choice (PROTOCOL.md; rk-bridge's --block default); it sent
 * 256. --json: the reply alone on stdout, also with --count (the
 * percentiles were printed after it) and --quiet. A field over 4 GiB is a
 * bad command line, as --size is (sparse: nothing is written or read). */
static void launch_json_big(void)
{
    bridge b;
    bridge_start(&b, "--allow-admin-ops", NULL);
    char out[65536], sh[4096 + 1024], file[300];
    const char *C = g_client_path, *E = b.ep;
    cli((const char *[]){C, "-e", E, "launch", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "kernel grid 0 block 0 smem 0 B"));
    cli((const char *[]){C, "-e", E, "call", "launch", "grid=uint:010", "block=uint:0", "smem=uint:0", NULL}, 0,
        NULL, out, sizeof out);
    assert_non_null(strstr(out, "kernel: {\"grid\":10,"));
    static const char *const json[][2] = {{"-c 3", "status"}, {"-q", "status"}, {"-c 2", "launch"}};
    for (size_t i = 0; i < sizeof json / sizeof *json; i++) {
        snprintf(sh, sizeof sh, "exec '%s' -e '%s' %s --json %s 2>/dev/null", C, E, json[i][0], json[i][1]);
        cli((const char *[]){"/bin/sh", "-c", sh, NULL}, 0, NULL, out, sizeof out);
        assert_true(out[0] == '{');
        assert_int_equal(count_lines(out), 1);
    }
    snprintf(file, sizeof file, "%s/big.bin", b.dir);
    int fd = open(file, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)UINT32_MAX + 1), 0);
    close(fd);
    snprintf(sh, sizeof sh, "data=@%s", file);
    cli((const char *[]){C, "-e", E, "call", "echo", sh, NULL}, 2, "4294967296 bytes", out, sizeof out);
    assert_non_null(strstr(out, "4294967295"));
    assert_int_equal(bridge_stop(&b), 0);
}

/* The oracle for rkc_request_bytes: the body packed here with msgpack-c
 * ({v, id: the largest, op, fields}), payloads and all. */
static size_t packed_size(const char *op, const rkc_field *f, size_t n)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, (uint32_t)(3 + n));
    const char *keys[] = {"v", "id", "op"};
    for (int k = 0; k < 3; k++) {
        msgpack_pack_str_with_body(&pk, keys[k], strlen(keys[k]));
        if (k == 0)
            msgpack_pack_uint8(&pk, 1);
        else if (k == 1)
            msgpack_pack_uint64(&pk, UINT64_MAX);
        else
            msgpack_pack_str_with_body(&pk, op, strlen(op));
    }
    for (size_t i = 0; i < n; i++) {
        msgpack_pack_str_with_body(&pk, f[i].name, strlen(f[i].name));
        if (f[i].type == RKC_UINT)
            msgpack_pack_uint64(&pk, f[i].u);
        else if (f[i].type == RKC_STR)
            msgpack_pack_str_with_body(&pk, f[i].data, f[i].len);
        else
            msgpack_pack_bin_with_body(&pk, f[i].data, f[i].len);
    }
    const size_t size = sb.size;
    msgpack_sbuffer_destroy(&sb);
    return size;
}

/* rkc_request_bytes is what rkc_send packs, for the enum's ops and named
 * ones, with the payloads not there yet (NULL): rk-client checks a request
 * against the bridge's transport cap before it builds it. */
static void request_bytes(void)
{
    static uint8_t big[70000];
    rkc_request echo = {.op = RKC_ECHO, .len = sizeof big};
    const rkc_field echo_f[] = {RKC_FIELD("data", big, sizeof big)};
    assert_int_equal(rkc_request_bytes(&echo), packed_size("echo", echo_f, 1));
    rkc_request vadd = {.op = RKC_VADD, .n = 3};
    const rkc_field vadd_f[] = {RKC_FIELD("a", big, 12), RKC_FIELD("b", big, 12)};
    assert_int_equal(rkc_request_bytes(&vadd), packed_size("vadd", vadd_f, 2));
    rkc_field named[] = {RKC_FIELD("a", NULL, 4), RKC_FIELD("x", NULL, 65536),
                         {.name = "tag", .data = NULL, .len = 40, .type = RKC_STR},
                         {.name = "k", .type = RKC_UINT, .u = 300}};
    rkc_request rq = {.name = "saxpy", .fields = named, .n_fields = 4};
    const size_t got = rkc_request_bytes(&rq);
    for (size_t i = 0; i < 3; i++)
        named[i].data = big;
    assert_int_equal(got, packed_size("saxpy", named, 4));
    assert_true(got > 65536 + 40 + 4);
    rkc_request none = {.op = (rkc_op)0};
    assert_int_equal(rkc_request_bytes(&none), 0);
    assert_int_equal(rkc_request_bytes(NULL), 0);
}

void test_client(void **state)
{
    (void)state;
    request_bytes();
    bridge b;
    bridge_start(&b, NULL);
    library(&b);
    command_line(&b);
    output_long_name(&b);
    assert_int_equal(bridge_stop(&b), 0);
    launch_json_big();
}
