/* tests/bridge/test_cli.c - admin operations, the command lines of
 * rk-bridge and rk-client, and systemd's readiness protocol (suite
 * 'bridge'). */
#include <errno.h>
#include <stddef.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cpus.h"
#include "harness.h"

/* ---- admin operations --------------------------------------------------------- */

static void launch_as(const char *ep, const rkc_options *o, const char *want_code)
{
    rkc *c;
    assert_int_equal(rkc_connect(&c, ep, o), 0);
    rkc_reply r;
    rkc_request rq = {.op = RKC_LAUNCH, .grid = 2, .block = 64};
    assert_int_equal(rkc_call(c, &rq, &r, TMO), 0);
    fprintf(stderr, "  launch -> %s %s\n", r.ok ? "ok" : r.code, r.message);
    if (want_code) {
        assert_false(r.ok);
        assert_string_equal(r.code, want_code);
        assert_non_null(strstr(r.message, "admin"));
    } else {
        assert_true(r.ok);
    }
    rkc_reply_free(&r);
    /* status is for everyone */
    rkc_request sq = {.op = RKC_STATUS};
    assert_int_equal(rkc_call(c, &sq, &r, TMO), 0);
    assert_true(r.ok);
    rkc_reply_free(&r);
    rkc_close(c);
}

void test_admin(void **state)
{
    (void)state;
    bridge b;
    /* without CURVE: nobody, unless the operator says everybody */
    bridge_start(&b, NULL);
    launch_as(b.ep, NULL, "PERMISSION_DENIED");
    assert_int_equal(bridge_stop(&b), 0);
    bridge_start(&b, "--allow-admin-ops", NULL);
    launch_as(b.ep, NULL, NULL);
    assert_int_equal(bridge_stop(&b), 0);
    /* with CURVE: the keys in --curve-admin-dir (they may connect without
     * being in --curve-allow-dir too) */
    curve_keys k;
    curve_keys_make(&k);
    bridge_start(&b, "--curve-secret-key-file", k.server_key, "--curve-allow-dir", k.allow_dir,
                 "--curve-admin-dir", k.admin_dir, NULL);
    rkc_options oa = {.server_public_key = k.server_pub, .secret_key = k.alice};
    rkc_options orr = {.server_public_key = k.server_pub, .secret_key = k.root};
    launch_as(b.ep, &oa, "PERMISSION_DENIED");
    launch_as(b.ep, &orr, NULL);
    assert_int_equal(bridge_stop(&b), 0);
    curve_keys_remove(&k);
}

/* ---- command lines ---------------------------------------------------------------- */

/* Runs a program; expects its exit status and, when `one_line` names
 * something, exactly one line that names it and points to --help. */
void cli(const char *const *argv, int want, const char *one_line, char *out, size_t cap)
{
    int st = run_prog(argv, -1, NULL, out, cap);
    fprintf(stderr, "  %s %s -> %d: %s", argv[0], argv[1] ? argv[1] : "", st, out);
    assert_int_equal(st, want);
    if (one_line) {
        assert_int_equal(count_lines(out), 1);
        assert_non_null(strstr(out, one_line));
        assert_non_null(strstr(out, "--help"));
    }
}

/* Bad values of rk-bridge's numeric options exit 2 with one line naming
 * the option, the value and the range, before anything starts: the
 * runtime's rules (--ring-slots 1000 exited 1, from the runtime) and the
 * kernel shapes no CUDA device runs (--block 4096 started on the CPU). */
static void bad_values(void)
{
    static const struct { const char *opt, *val, *says; } bad[] = {
        {"--ring-slots", "1000", "expected a power of two from 2 to 16777216"},
        {"--ring-slots", "1", "expected a power of two from 2 to 16777216"},
        {"--slot-size", "64", "expected a power of two from 128 to 4096"},
        {"--slot-size", "8K", "expected a power of two from 128 to 4096"},
        {"--block", "4096", "expected a number from 0 to 1024"},
        {"--smem", "99999999", "expected a number from 0 to 232448"},
        {"--grid", "3000000000", "expected a number from 0 to 2147483647"},
        /* librk's bounds (RK_FAULT_LIMIT_MAX, RK_HEARTBEAT_MS_MAX): the
         * runtime refused these in its words, naming no option */
        {"--fault-limit", "100000", "expected a number from 1 to 65536"},
        {"--heartbeat-ms", "4000000", "expected a number from 50 to 3600000"},
    };
    char out[4096], opt[64];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(opt, sizeof opt, "%s %s", bad[i].opt, bad[i].val);
        cli((const char *[]){g_bridge_path, "--backend", "cpu", bad[i].opt, bad[i].val, NULL}, 2, opt, out,
            sizeof out);
        assert_non_null(strstr(out, bad[i].says));
    }
    /* a negative number behind a blank: strtoull skips the blank and
     * negates, so " -1" was 2^64 - 1, inside a SIZE_MAX range: an unbounded
     * --queue-bytes, an --arena-bytes that crashed the runtime's worker.
     * (The bad --bind after it makes a bridge that took it exit too.) */
    static const char *const sized[] = {"--queue-bytes", "--arena-bytes"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(opt, sizeof opt, "%s  -1", sized[i]);
        cli((const char *[]){g_bridge_path, "--backend", "cpu", sized[i], " -1", "--bind", "localhost:1",
                             NULL}, 2, opt, out, sizeof out);
        assert_non_null(strstr(out, "expected a number from"));
    }
    /* values a bridge took and should not have (the bad --bind after each
     * makes a bridge that takes it exit too, saying something else) */
    static const struct { const char *opt, *val, *says; } taken[] = {
        /* an arena below its unit is 0 B: "arena 0 B" at start, every
         * payload past a slot TOO_LARGE */
        {"--arena-bytes", "0", "expected a number from 256 to"},
        {"--arena-bytes", "255", "expected a number from 256 to"},
        /* numbers are decimal: base 0 read 0x10 as 16 (and 010 as 8) */
        {"--grid", "0x10", "expected a number from 0 to 2147483647"},
        {"--queue", "0x10", "expected a number from 1 to"},
        /* --ipc-mode is octal digits: strtoul took a blank, a sign */
        {"--ipc-mode", " 600", "expected octal permission bits from 0 to 0777"},
        {"--ipc-mode", "+600", "expected octal permission bits from 0 to 0777"},
        {"--ipc-mode", "-0", "expected octal permission bits from 0 to 0777"},
        /* --devices: ordinals, each once (0,0 was refused by the runtime
         * naming devices[1], not the option) */
        {"--devices", " 1", "expected all, or up to 16 device ordinals"},
        {"--devices", "0,+1", "expected all, or up to 16 device ordinals"},
        {"--devices", "0,0", "device 0 is listed twice"},
        {"--devices", "1,2,1", "device 1 is listed twice"},
    };
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
        snprintf(opt, sizeof opt, "%s %s:", taken[i].opt, taken[i].val);
        cli((const char *[]){g_bridge_path, "--backend", "cpu", taken[i].opt, taken[i].val, "--bind",
                             "localhost:1", NULL}, 2, opt, out, sizeof out);
        assert_non_null(strstr(out, taken[i].says));
    }
}

/* A malformed endpoint: exit 2, saying what is wrong (ZeroMQ said
 * "Invalid argument", exit 1; port 99999 was bound as 34463). */
static void bad_binds(void)
{
    char out[4096];
    cli((const char *[]){g_bridge_path, "--backend", "cpu", "--bind", "tcp://127.0.0.1", NULL}, 2, NULL, out,
        sizeof out);
    assert_non_null(strstr(out, "--bind tcp://127.0.0.1: no port: tcp:// needs HOST:PORT or HOST:*"));
    cli((const char *[]){g_bridge_path, "--backend", "cpu", "--bind", "tcp://127.0.0.1:99999", NULL}, 2, NULL,
        out, sizeof out);
    assert_non_null(strstr(out, "port \"99999\" is not a number from 0 to 65535 or *"));
    cli((const char *[]){g_bridge_path, "--backend", "cpu", "--bind", "localhost:5601", NULL}, 2, NULL, out,
        sizeof out);
    assert_non_null(strstr(out, "no transport"));
    assert_non_null(strstr(out, "(tcp://localhost:5601?)"));
    /* one endpoint twice: exit 2 saying so (exit 1, and for ipc "another
     * process answers" there, which was the bridge itself) */
    const char *twice[] = {"ipc:///tmp/rkbt-twice.sock", "tcp://127.0.0.1:5599"};
    for (size_t i = 0; i < 2; i++) {
        char line[96];
        snprintf(line, sizeof line, "--bind %s is given twice", twice[i]);
        cli((const char *[]){g_bridge_path, "--backend", "cpu", "--bind", twice[i], "--bind", twice[i], NULL},
            2, line, out, sizeof out);
    }
}

/* samples/client.c with no bridge: the endpoint and a hint, not just "no
 * reply" (its timeout is 5 s); a malformed endpoint says what is wrong. */
static void sample_client(void)
{
    const char *path = getenv("RK_CLIENT_SAMPLE");
    assert_non_null(path);
    char out[4096];
    cli((const char *[]){path, "ipc:///tmp/rkbt-nobody-here", NULL}, 1, NULL, out, sizeof out);
    assert_int_equal(count_lines(out), 1);
    assert_non_null(strstr(out, "client: echo ipc:///tmp/rkbt-nobody-here: no reply within 5000 ms "
                                "(is rk-bridge running there?"));
    cli((const char *[]){path, "localhost:5601", NULL}, 1, NULL, out, sizeof out);
    assert_non_null(strstr(out, "cannot connect to localhost:5601: no transport"));
    cli((const char *[]){path, "a", "b", NULL}, 2, NULL, out, sizeof out);
    assert_non_null(strstr(out, "usage: client [ENDPOINT]"));
}

/* A request above the bridge's transport cap (4 x --max-message-bytes) is
 * refused by rk-client before it is sent: ZeroMQ would close the
 * connection and the client waited out its timeout ("no reply ... is
 * rk-bridge running there?"). Below the cap the bridge answers TOO_LARGE. */
static void above_the_cap(void)
{
    char out[4096];
    bridge b;
    bridge_start(&b, "--max-message-bytes", "64K", NULL); /* cap 256 KiB */
    const char *C = g_client_path;
    int64_t t0 = now_ms();
    cli((const char *[]){C, "-e", b.ep, "vadd", "-n", "40000", NULL}, 1, NULL, out, sizeof out);
    assert_non_null(strstr(out, "vadd: the request is 320038 bytes, above the transport cap of the bridge"));
    assert_non_null(strstr(out, "262144 bytes"));
    assert_non_null(strstr(out, "not sent"));
    assert_true(now_ms() - t0 < 4000); /* not a 5 s timeout */
    cli((const char *[]){C, "-e", b.ep, "vadd", "-n", "20000", NULL}, 1, NULL, out, sizeof out);
    assert_non_null(strstr(out, "TOO_LARGE: the request is 160030 bytes; the limit is 65536 bytes"));
    cli((const char *[]){C, "-e", b.ep, "call", "echo", "data=hello", NULL}, 0, NULL, out, sizeof out);
    /* the refused request never reached it: only the statuses and the two answered */
    assert_int_equal(status_counter(&b, "too_large"), 1);
    assert_int_equal(bridge_stop(&b), 0);
}

void test_cli(void **state)
{
    (void)state;
    char out[65536], want[64];
    const char *B = g_bridge_path, *C = g_client_path;
    snprintf(want, sizeof want, "rk-bridge %s", RKBT_VERSION);
    cli((const char *[]){B, "--version", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, want));
    cli((const char *[]){B, "--bogus", NULL}, 2, "--bogus", out, sizeof out);
    cli((const char *[]){B, "-x", NULL}, 2, "-x", out, sizeof out);
    cli((const char *[]){B, "--window", "abc", NULL}, 2, "--window abc", out, sizeof out);
    cli((const char *[]){B, "--window", NULL}, 2, "--window", out, sizeof out);
    cli((const char *[]){B, "--ipc-mode", "999", NULL}, 2, "--ipc-mode", out, sizeof out);
    /* the limit too, not only examples */
    cli((const char *[]){B, "--ipc-mode", "1000", NULL}, 2, "--ipc-mode 1000", out, sizeof out);
    assert_non_null(strstr(out, "from 0 to 0777"));
    cli((const char *[]){B, "--devices", "2000", NULL}, 2, "--devices 2000", out, sizeof out);
    assert_non_null(strstr(out, "up to 16 device ordinals from 0 to 1024"));
    cli((const char *[]){B, "--zmq-io-threads", "0", NULL}, 2, "--zmq-io-threads 0", out, sizeof out);
    cli((const char *[]){B, "--zmq-io-threads", "65", NULL}, 2, "--zmq-io-threads 65", out, sizeof out);
    assert_non_null(strstr(out, "expected auto or a number from 1 to 64"));
    cli((const char *[]){B, "--io-threads", "x", NULL}, 2, "--io-threads x", out, sizeof out);
    assert_non_null(strstr(out, "expected auto or a number from 1 to 64"));
    cli((const char *[]){B, "stray", NULL}, 2, "stray", out, sizeof out);
    cli((const char *[]){B, "--help", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "--allow-admin-ops"));
    bad_values();
    bad_binds();
    /* rk-client */
    snprintf(want, sizeof want, "rk-client %s", RKBT_VERSION);
    cli((const char *[]){C, "--version", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, want));
    cli((const char *[]){C, "-c", "abc", "ping", NULL}, 2, "--count abc", out, sizeof out);
    cli((const char *[]){C, "--bogus", "ping", NULL}, 2, "--bogus", out, sizeof out);
    cli((const char *[]){C, "teleport", NULL}, 2, "teleport", out, sizeof out);
    cli((const char *[]){C, NULL}, 2, "no command", out, sizeof out);
    /* a malformed endpoint: what is wrong with it (not ZeroMQ's "Invalid argument") */
    cli((const char *[]){C, "-e", "localhost:5601", "ping", NULL}, 2, "--endpoint localhost:5601", out, sizeof out);
    assert_non_null(strstr(out, "no transport: an endpoint is tcp://HOST:PORT, ipc://PATH or inproc://NAME "
                                "(tcp://localhost:5601?)"));
    cli((const char *[]){C, "-e", "tcp://127.0.0.1", "ping", NULL}, 2, "--endpoint tcp://127.0.0.1", out, sizeof out);
    assert_non_null(strstr(out, "no port: tcp:// needs HOST:PORT"));
    cli((const char *[]){C, "-e", "tcp://127.0.0.1:99999", "ping", NULL}, 2, "port \"99999\"", out, sizeof out);
    /* a run-time failure says why, with status 1 */
    cli((const char *[]){C, "-e", "ipc:///tmp/rkbt-nobody-here", "-t", "300", "ping", NULL}, 1,
        NULL, out, sizeof out);
    assert_non_null(strstr(out, "no reply within 300 ms"));
    sample_client();
    above_the_cap();
    bridge b;
    bridge_start(&b, NULL);
    cli((const char *[]){C, "-e", b.ep, "status", "--json", NULL}, 0, NULL, out, sizeof out);
    assert_true(out[0] == '{');
    assert_non_null(strstr(out, "\"counters\":{\"requests\":"));
    assert_non_null(strstr(out, "\"device\":null"));
    cli((const char *[]){C, "-e", b.ep, "launch", NULL}, 1, NULL, out, sizeof out);
    assert_non_null(strstr(out, "PERMISSION_DENIED"));
    /* without --json the status is JSON after its round trip (it was
     * msgpack-c's "key"=>value notation) */
    cli((const char *[]){C, "-e", b.ep, "status", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "status ("));
    assert_non_null(strstr(out, "us): {\"v\":1,"));
    assert_int_equal(bridge_stop(&b), 0);
    /* a launch says what now runs, in one line */
    bridge_start(&b, "--allow-admin-ops", NULL);
    cli((const char *[]){C, "-e", b.ep, "launch", "--grid", "4", "--block", "128", NULL}, 0, NULL, out, sizeof out);
    assert_non_null(strstr(out, "launch: backend cpu, kernel grid 4 block 128 smem 0 B, in "));
    assert_int_equal(count_lines(out), 1);
    /* --zmq-io-threads auto (the default): 2 with a tcp --bind where the
     * bridge may use more than 5 CPUs, else 1 (this bridge binds ipc only) */
    assert_int_equal(status_counter(&b, "zmq_io_threads"), 1);
    assert_int_equal(bridge_stop(&b), 0);
    bridge_start(&b, "--zmq-io-threads", "3", "--window", "010", NULL);
    assert_int_equal(status_counter(&b, "zmq_io_threads"), 3);
    assert_int_equal(status_counter(&b, "window"), 10); /* decimal: base 0 made it 8 */
    assert_int_equal(bridge_stop(&b), 0);
    /* the thread counts follow the CPUs the bridge may use (status cpus:
     * its affinity mask, capped by its cgroup's quota), not the machine's */
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    const bridge_opts tcp = {.bind = "tcp://127.0.0.1:*", .umask = -1};
    bridge_start_opts(&b, &tcp, (const char *[]){"--zmq-io-threads", "auto", NULL});
    const uint64_t cpus = status_counter(&b, "cpus");
    assert_true(cpus >= 1 && cpus <= (uint64_t)CPU_COUNT(&all));
    /* what cpus.c's auto makes of that count (bridge_cpus: each boundary) */
    assert_int_equal(status_counter(&b, "io_threads"), rkb_auto_io_threads((long)cpus));
    assert_int_equal(status_counter(&b, "zmq_io_threads"), rkb_auto_zmq_io_threads(true, (long)cpus));
    assert_int_equal(bridge_stop(&b), 0);
    CPU_ZERO(&one);
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &all)) {
            CPU_SET(i, &one);
            break;
        }
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0); /* the bridge inherits it */
    bridge_start_opts(&b, &tcp, NULL);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(status_counter(&b, "cpus"), 1);
    assert_int_equal(status_counter(&b, "io_threads"), 1);
    assert_int_equal(status_counter(&b, "zmq_io_threads"), 1);
    assert_int_equal(bridge_stop(&b), 0);
}

/* ---- systemd --------------------------------------------------------------------- */

static void expect_datagram(int fd, const char *want)
{
    struct pollfd p = {fd, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 30000), 1);
    char got[256];
    ssize_t n = recv(fd, got, sizeof got - 1, 0);
    assert_true(n > 0);
    got[n] = 0;
    fprintf(stderr, "  NOTIFY_SOCKET got \"%s\"\n", got);
    assert_non_null(strstr(got, want));
}

/* READY=1 once it listens, STOPPING=1 on SIGTERM; a path and an abstract
 * name. */
void test_notify(void **state)
{
    (void)state;
    for (int abstract = 0; abstract < 2; abstract++) {
        char dir[] = "/tmp/rkbn-XXXXXX", env[160];
        assert_non_null(mkdtemp(dir));
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        socklen_t len = sizeof sa;
        if (abstract) {
            int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "rkbt-notify-%d", (int)getpid());
            len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
            snprintf(env, sizeof env, "NOTIFY_SOCKET=@%s", sa.sun_path + 1);
        } else {
            snprintf(sa.sun_path, sizeof sa.sun_path, "%s/notify", dir);
            snprintf(env, sizeof env, "NOTIFY_SOCKET=%s", sa.sun_path);
        }
        int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
        bridge b;
        snprintf(b.dir, sizeof b.dir, "%s", dir);
        const char *envs[] = {env, NULL};
        bridge_opts o = {.umask = -1, .env = envs, .keep_dir = true};
        bridge_start_opts(&b, &o, NULL);
        expect_datagram(fd, "READY=1");
        assert_alive(&b);
        kill(b.pid, SIGTERM);
        expect_datagram(fd, "STOPPING=1");
        assert_int_equal(bridge_reap(&b, 60000), 0);
        close(fd);
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        assert_int_equal(system(cmd), 0);
    }
}
