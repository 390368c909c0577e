/* tests/bridge/test_operator.c - what an operator relies on (suite
 * 'bridge'): ipc socket files, remote binds, key files, running out of
 * file descriptors. (Admin operations, the command line and systemd:
 * test_cli.c.) */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(chmod(path, mode), 0);
}

static void assert_file(const char *path, const char *text)
{
    char got[256] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = 0;
    assert_string_equal(got, text);
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return (unsigned)(st.st_mode & 07777);
}

/* A bridge expected not to start: its status, and its stderr names what. */
static void refused(const char *dir, const char *ep, const char *const *args, int want, const char *says)
{
    bridge b;
    snprintf(b.dir, sizeof b.dir, "%s", dir);
    bridge_opts o = {.bind = ep, .umask = -1, .may_fail = true, .keep_dir = true, .no_extra = true};
    assert_int_equal(bridge_start_opts(&b, &o, args), -1);
    fprintf(stderr, "  %s: exit %d\n", ep, b.status);
    assert_int_equal(b.status, want);
    assert_non_null(strstr(g_last_err, says));
}

/* ---- ipc socket files ------------------------------------------------------- */

void test_ipc(void **state)
{
    (void)state;
    char dir[] = "/tmp/rkbi-XXXXXX", path[96], ep[160], target[128];
    assert_non_null(mkdtemp(dir));
    /* a regular file is never replaced */
    snprintf(path, sizeof path, "%s/precious", dir);
    write_file(path, "precious", 0644);
    snprintf(ep, sizeof ep, "ipc://%s", path);
    refused(dir, ep, NULL, 1, "not a socket");
    assert_file(path, "precious");
    /* nor a symlink (nor what it points to) */
    snprintf(target, sizeof target, "%s/target", dir);
    write_file(target, "target", 0644);
    snprintf(path, sizeof path, "%s/link", dir);
    assert_int_equal(symlink(target, path), 0);
    snprintf(ep, sizeof ep, "ipc://%s", path);
    refused(dir, ep, NULL, 1, "symbolic link");
    assert_file(target, "target");
    /* a directory that does not exist is named as such (ZeroMQ said only
     * "No such file or directory", as if the socket were what is missing) */
    char msg[160];
    snprintf(ep, sizeof ep, "ipc://%s/missing/b.sock", dir);
    snprintf(msg, sizeof msg, "the directory %s/missing does not exist (create it first", dir);
    refused(dir, ep, NULL, 1, msg);
    /* a stale socket (its process is gone) is reused; umask 000 still
     * gives 0600 */
    snprintf(path, sizeof path, "%s/s.sock", dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd);
    snprintf(ep, sizeof ep, "ipc://%s", path);
    bridge a;
    snprintf(a.dir, sizeof a.dir, "%s", dir);
    bridge_opts o = {.bind = ep, .umask = 0, .keep_dir = true};
    bridge_start_opts(&a, &o, NULL);
    assert_int_equal(mode_of(path), 0600);
    /* a second bridge on a path a live one answers on is refused */
    refused(dir, ep, NULL, 1, "answers on");
    assert_alive(&a);
    assert_int_equal(bridge_stop(&a), 0);
    /* removed at exit */
    assert_int_not_equal(access(path, F_OK), 0);
    /* --ipc-mode widens it */
    const char *wide[] = {"--ipc-mode", "0660", NULL};
    bridge_start_opts(&a, &o, wide);
    assert_int_equal(mode_of(path), 0660);
    assert_int_equal(bridge_stop(&a), 0);
    assert_int_not_equal(access(path, F_OK), 0);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- remote binds -------------------------------------------------------------- */

static size_t n_warnings(const bridge *b)
{
    rkc_reply r;
    status_get(b, &r);
    const msgpack_object *w = rkc_reply_get(&r, "warnings");
    assert_true(w && w->type == MSGPACK_OBJECT_ARRAY);
    size_t n = w->via.array.size;
    rkc_reply_free(&r);
    return n;
}

void test_remote(void **state)
{
    (void)state;
    char dir[] = "/tmp/rkbr-XXXXXX";
    assert_non_null(mkdtemp(dir));
    refused(dir, "tcp://0.0.0.0:*", NULL, 2, "--allow-insecure-remote");
    assert_int_equal(count_lines(g_last_err), 1);
    refused(dir, "tcp://*:*", NULL, 2, "--allow-insecure-remote");
    /* an unknown transport is named as such (it was judged remote) */
    refused(dir, "bogus://x", NULL, 2, "unknown transport");
    assert_non_null(strstr(g_last_err, "bogus://x"));
    assert_null(strstr(g_last_err, "reachable"));
    /* allowed by name: it warns at start-up and in status */
    bridge b;
    bridge_opts o = {.bind = "tcp://0.0.0.0:*", .umask = -1};
    const char *allow[] = {"--allow-insecure-remote", NULL};
    bridge_start_opts(&b, &o, allow);
    char local[128];
    snprintf(local, sizeof local, "tcp://127.0.0.1:%s", strrchr(b.ep, ':') + 1);
    snprintf(b.ep, sizeof b.ep, "%s", local);
    assert_int_equal(n_warnings(&b), 1);
    assert_int_equal(bridge_stop(&b), 0);
    assert_non_null(strstr(g_last_err, "reachable from other hosts"));
    /* loopback: no warning */
    o.bind = "tcp://127.0.0.1:*";
    bridge_start_opts(&b, &o, NULL);
    assert_int_equal(n_warnings(&b), 0);
    assert_int_equal(bridge_stop(&b), 0);
    rmdir(dir);
}

/* ---- key files --------------------------------------------------------------- */

static int gen_keys(const char *prefix, bool force, char *out, size_t cap)
{
    const char *argv[] = {g_bridge_path, "--gen-keys", prefix, force ? "--force" : NULL, NULL};
    return run_prog(argv, 0, NULL, out, cap);
}

static void read_key(const char *path, char out[64])
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(out, 64, f));
    fclose(f);
}

void test_keys(void **state)
{
    (void)state;
    char dir[] = "/tmp/rkbk-XXXXXX", prefix[96], key[128], pub[128], out[2048];
    assert_non_null(mkdtemp(dir));
    snprintf(prefix, sizeof prefix, "%s/k", dir);
    snprintf(key, sizeof key, "%s.key", prefix);
    snprintf(pub, sizeof pub, "%s.pub", prefix);
    /* umask 000 (run_prog's umask) still gives 0600 */
    assert_int_equal(gen_keys(prefix, false, out, sizeof out), 0);
    assert_int_equal(mode_of(key), 0600);
    assert_int_equal(mode_of(pub), 0644);
    char k1[64], k2[64];
    read_key(key, k1);
    /* never replaced without --force */
    assert_int_equal(gen_keys(prefix, false, out, sizeof out), 1);
    assert_non_null(strstr(out, "--force"));
    read_key(key, k2);
    assert_string_equal(k1, k2);
    /* --force replaces a 0644 key with a 0600 one */
    assert_int_equal(chmod(key, 0644), 0);
    assert_int_equal(gen_keys(prefix, true, out, sizeof out), 0);
    assert_int_equal(mode_of(key), 0600);
    read_key(key, k2);
    assert_string_not_equal(k1, k2);
    /* a symlink is never followed, not even with --force */
    char victim[128], sprefix[96], skey[128];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    write_file(victim, "victim", 0644);
    snprintf(sprefix, sizeof sprefix, "%s/s", dir);
    snprintf(skey, sizeof skey, "%s.key", sprefix);
    assert_int_equal(symlink(victim, skey), 0);
    assert_int_equal(gen_keys(sprefix, false, out, sizeof out), 1);
    assert_file(victim, "victim");
    assert_int_equal(gen_keys(sprefix, true, out, sizeof out), 0);
    assert_file(victim, "victim");
    assert_int_equal(mode_of(skey), 0600);
    /* a secret key group or others may read is refused, unless allowed */
    assert_int_equal(chmod(key, 0640), 0);
    const char *args[] = {"--curve-secret-key-file", key, "--curve-allow-dir", dir, NULL};
    refused(dir, "tcp://127.0.0.1:*", args, 1, "mode 0640");
    bridge b;
    bridge_opts o = {.bind = "tcp://127.0.0.1:*", .umask = -1, .no_extra = true};
    const char *ok[] = {"--curve-secret-key-file", key, "--allow-insecure-key", "--curve-allow-dir", dir, NULL};
    bridge_start_opts(&b, &o, ok);
    assert_int_equal(bridge_stop(&b), 0);
    assert_non_null(strstr(g_last_err, "mode 0640"));
    /* CURVE that would admit nobody (the allow-list is read at start) does
     * not start: no list at all (a command line that must not run), or
     * lists without a key */
    assert_int_equal(chmod(key, 0600), 0);
    /* a FIFO named *.pub in a key directory is passed over, by name (its
     * open waited for a writer: the bridge never started); as the secret
     * key file it is refused */
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo.pub", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    bridge_start_opts(&b, &o, args);
    assert_int_equal(bridge_stop(&b), 0);
    assert_non_null(strstr(g_last_err, "fifo.pub is not a regular file (a FIFO)"));
    const char *fifo_key[] = {"--curve-secret-key-file", fifo, "--curve-allow-dir", dir, NULL};
    refused(dir, "tcp://127.0.0.1:*", fifo_key, 1, "fifo.pub is not a regular file (a FIFO)");
    const char *none[] = {"--curve-secret-key-file", key, NULL};
    refused(dir, "tcp://127.0.0.1:*", none, 2, "needs --curve-allow-dir or --curve-admin-dir");
    char empty[] = "/tmp/rkbe-XXXXXX";
    assert_non_null(mkdtemp(empty));
    const char *nokey[] = {"--curve-secret-key-file", key, "--curve-allow-dir", empty, "--curve-admin-dir", empty,
                           NULL};
    refused(dir, "tcp://127.0.0.1:*", nokey, 1, "no client key");
    assert_int_equal(rmdir(empty), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- running out of file descriptors ------------------------------------------- */

/* 600 clients against a bridge whose file descriptor limit is 256 (its
 * soft limit 64 at start: it raises that to the hard one), on tcp and on
 * ipc (bind NULL). The bridge serves the clients it has: a client connected
 * before keeps getting replies all along and no connection is closed (an
 * unbind would close them all, losing their requests); it does not spin a
 * core on the accept failures (it pauses new connections and sheds the
 * waiting ones); it counts that; and it takes new clients again once
 * descriptors are free. */
static void fdlimit(const char *bind)
{
    enum { N = 600 };
    bridge b;
    bridge_opts o = {.bind = bind, .umask = -1, .nofile = 256, .nofile_soft = 64};
    bridge_start_opts(&b, &o, NULL);
    rkc *c0 = client(&b);
    rkc_request pq = {.op = RKC_PING};
    rkc_reply r;
    assert_int_equal(rkc_call(c0, &pq, &r, TMO), 0);
    rkc_reply_free(&r);
    void *ctx = zmq_ctx_new();
    zmq_ctx_set(ctx, ZMQ_MAX_SOCKETS, 4096);
    static void *s[N];
    buf fb = {0};
    put_head(&fb, 3, 1, 1, 1, "ping");
    for (int i = 0; i < N; i++) {
        s[i] = zmq_socket(ctx, ZMQ_DEALER);
        int linger = 0;
        zmq_setsockopt(s[i], ZMQ_LINGER, &linger, sizeof linger);
        assert_int_equal(zmq_connect(s[i], b.ep), 0);
        zmq_send(s[i], fb.p, fb.n, ZMQ_DONTWAIT);
    }
    usleep(1000000);
    /* 3 s out of descriptors: the connected client is answered every
     * 100 ms (one reply lost would time the call out) */
    uint64_t cpu0 = proc_cpu_us(b.pid);
    int64_t t0 = now_ms();
    int pings = 0;
    while (now_ms() - t0 < 3000) {
        assert_int_equal(rkc_call(c0, &pq, &r, TMO), 0);
        assert_true(r.ok);
        rkc_reply_free(&r);
        pings++;
        usleep(100000);
    }
    double cpu = (double)(proc_cpu_us(b.pid) - cpu0) / 1e3 / (double)(now_ms() - t0);
    fprintf(stderr, "  %s: %d clients, limit 256: the bridge used %.0f %% of a core; %d pings "
            "answered meanwhile\n", b.ep, N, cpu * 100, pings);
    rkc_reply st;
    rkc_request sq = {.op = RKC_STATUS};
    assert_int_equal(rkc_call(c0, &sq, &st, TMO), 0);
    const msgpack_object *n = rkc_reply_get(&st, "counters");
    fprintf(stderr, "  accepted %llu, accept_failures %llu, listen_pauses %llu, connections_shed %llu\n",
            (unsigned long long)map_uint(n, "accepted"), (unsigned long long)map_uint(n, "accept_failures"),
            (unsigned long long)map_uint(n, "listen_pauses"),
            (unsigned long long)map_uint(n, "connections_shed"));
    assert_true(cpu < 0.3);
    /* ipc pauses before an accept can fail (watch.c says why) */
    if (bind)
        assert_true(map_uint(n, "accept_failures") > 0);
    assert_true(map_uint(n, "listen_pauses") > 0);
    assert_int_equal(map_uint(n, "disconnects"), 0);
    assert_int_equal(map_uint(n, "fd_limit"), 256);
    rkc_reply_free(&st);
    for (int i = 0; i < N; i++)
        zmq_close(s[i]);
    zmq_ctx_term(ctx);
    /* descriptors are free again: a new client is served (the pause is at
     * most 2 s; a TCP client whose SYN was dropped retries within 3 s) */
    rkc *c = client(&b);
    assert_int_equal(rkc_call(c, &pq, &r, TMO), 0);
    assert_true(r.ok);
    rkc_reply_free(&r);
    rkc_close(c);
    rkc_close(c0);
    free(fb.p);
    assert_int_equal(bridge_stop(&b), 0);
}

void test_fdlimit(void **state)
{
    (void)state;
    fdlimit("tcp://127.0.0.1:*");
    fdlimit(NULL);
}
