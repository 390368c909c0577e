/* tests/bridge/test_broker.c - several bridges behind one endpoint through
 * a standard ZeroMQ broker (samples/broker.c, issue 12): clients see one
 * bridge; requests spread over the bridges; every reply comes back to its
 * client exactly once; a bridge killed under load costs only the requests
 * it held, and the broker serves on with the others. */
#include "harness.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Starts samples/broker.c (RK_BROKER) at front, in front of the bridges. */
static pid_t broker_start(const char *front, const bridge *b, int n)
{
    const char *path = getenv("RK_BROKER");
    assert_non_null(path);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *argv[8] = {path, front};
        for (int i = 0; i < n; i++)
            argv[2 + i] = b[i].ep;
        execv(path, (char *const *)argv);
        _exit(127);
    }
    struct stat st;
    for (int i = 0; i < 500 && stat(front + 6, &st) != 0; i++)
        usleep(10000);
    assert_int_equal(stat(front + 6, &st), 0);
    return pid;
}

static uint64_t served(const bridge *b)
{
    rkc *c = client(b);
    rkc_request sq = {.op = RKC_STATUS};
    rkc_reply st;
    assert_int_equal(rkc_call(c, &sq, &st, TMO), 0);
    uint64_t n = map_uint(rkc_reply_get(&st, "counters"), "requests");
    rkc_reply_free(&st);
    rkc_close(c);
    return n;
}

/* n echoes of 64 bytes pipelined through c; each reply's id seen once.
 * Returns how many were answered within the timeout. */
static int pipelined(rkc *c, int n, int tmo_ms)
{
    uint8_t data[64] = {0};
    rkc_request rq = {.op = RKC_ECHO, .data = data, .len = sizeof data};
    uint8_t *seen = calloc((size_t)n, 1);
    uint64_t first = 0;
    for (int i = 0; i < n; i++) {
        uint64_t id;
        assert_int_equal(rkc_send(c, &rq, &id, TMO), 0);
        if (i == 0)
            first = id;
    }
    int got = 0;
    rkc_reply r;
    while (got < n && rkc_recv(c, &r, tmo_ms) == 0) {
        assert_true(r.ok);
        assert_true(r.has_id && r.id >= first && r.id < first + (uint64_t)n);
        assert_int_equal(seen[r.id - first]++, 0);
        assert_int_equal(r.len, sizeof data);
        rkc_reply_free(&r);
        got++;
    }
    free(seen);
    return got;
}

void test_broker(void **state)
{
    (void)state;
    enum { N = 2000 };
    bridge b[2];
    bridge_start(&b[0], NULL);
    bridge_start(&b[1], NULL);
    char front[128];
    snprintf(front, sizeof front, "ipc://%s/front.sock", b[0].dir);
    pid_t broker = broker_start(front, b, 2);
    rkc *c = client_ep(front);
    rkc_request pq = {.op = RKC_PING};
    rkc_reply r;
    assert_int_equal(rkc_call(c, &pq, &r, TMO), 0);
    assert_true(r.ok);
    rkc_reply_free(&r);
    assert_int_equal(pipelined(c, N, TMO), N);
    uint64_t n0 = served(&b[0]), n1 = served(&b[1]);
    fprintf(stderr, "  %d echoes through the broker: %llu and %llu requests at the two bridges\n", N,
            (unsigned long long)n0, (unsigned long long)n1);
    assert_true(n0 > N / 4 && n1 > N / 4); /* round robin, less the status calls */
    /* one bridge killed: once its connection is gone the broker sends it
     * nothing more, and every new request is answered by the other */
    kill(b[0].pid, SIGKILL);
    bridge_reap(&b[0], 60000);
    usleep(300000);
    assert_int_equal(pipelined(c, N, TMO), N);
    rkc_close(c);
    kill(broker, SIGTERM);
    waitpid(broker, NULL, 0);
    assert_int_equal(bridge_stop(&b[1]), 0);
}
