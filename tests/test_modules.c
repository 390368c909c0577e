/* test_modules.c - actor modules (rk/module.h) on the CPU backend, in this
 * process and in a worker process: served by name with their declared
 * fields, an actor's own error, state across messages, a GPU-only actor on
 * the CPU, a directory of modules, and every way a module is refused.
 * argv[1]: the build folder of tests/modules, argv[2]: tests/modules/dir. */
#include <setjmp.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rk/rk.h"

#if defined(__aarch64__)
#define NATIVE_MACHINE 183
#else
#define NATIVE_MACHINE 62
#endif

static const char *mod_dir, *case_dir;

static void path_of(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s.so", mod_dir, name); }

static rk_runtime *open_with(rk_isolation iso, const char *const *paths, size_t n, int *rc_out)
{
    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = RK_BACKEND_CPU;
    cfg.isolation = iso;
    cfg.modules = paths;
    cfg.n_modules = n;
    rk_runtime *rt = NULL;
    int rc = rk_runtime_open(&rt, &cfg);
    if (rc_out)
        *rc_out = rc;
    return rt;
}

/* saxpy's request: a, x, y in the table layout */
static size_t saxpy_request(unsigned char *buf, size_t cap, float a, const float *x, const float *y, size_t n)
{
    size_t lens[3] = {4, 4 * n, 4 * n};
    void *at[3];
    size_t total = rk_fields_layout(buf, cap, 3, lens, at);
    assert_true(total > 0);
    memcpy(at[0], &a, 4);
    memcpy(at[1], x, 4 * n);
    memcpy(at[2], y, 4 * n);
    return total;
}

static void serve_math(rk_isolation iso)
{
    char p[512];
    path_of(p, sizeof p, "mod_math");
    const char *paths[] = {p};
    int rc;
    rk_runtime *rt = open_with(iso, paths, 1, &rc);
    assert_int_equal(rc, 0);
    /* the registry: built-ins first, then the module's actors */
    assert_int_equal(rk_runtime_actor_count(rt), 2 + 5);
    uint16_t t_saxpy = 0, t_count = 0, t_minmax = 0, t_gpu = 0;
    const rk_actor_decl *saxpy = rk_runtime_actor_find(rt, "saxpy", &t_saxpy);
    assert_non_null(saxpy);
    assert_int_equal(saxpy->n_inputs, 3);
    assert_string_equal(saxpy->outputs[0], "z");
    const rk_actor_decl *echo = rk_runtime_actor_find(rt, "echo", NULL);
    assert_non_null(echo);
    assert_string_equal(echo->inputs[0], "data");
    assert_non_null(rk_runtime_actor_find(rt, "count", &t_count));
    assert_non_null(rk_runtime_actor_find(rt, "minmax", &t_minmax));
    const rk_actor_decl *gpu = rk_runtime_actor_find(rt, "gpu_only", &t_gpu);
    assert_non_null(gpu);
    assert_int_equal(rk_runtime_actor_runs(rt, gpu), 0);
    assert_int_equal(rk_runtime_actor_runs(rt, saxpy), 1);
    assert_null(rk_runtime_actor_find(rt, "nope", NULL));
    const char *origin = NULL;
    assert_non_null(rk_runtime_actor_at(rt, 2, NULL, &origin));
    assert_non_null(strstr(origin, "mod_math.so"));

    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    /* saxpy: inline and through the arena */
    for (size_t n = 3; n <= 50000; n *= 100) {
        static float x[100000], y[100000];
        static unsigned char req[1 << 20];
        for (size_t i = 0; i < n; i++) {
            x[i] = (float)i;
            y[i] = 0.5f * (float)i;
        }
        size_t len = saxpy_request(req, sizeof req, 2.0f, x, y, n);
        rk_reply r;
        assert_int_equal(rk_actor_call(a, t_saxpy, req, len, 0, &r, 5000), 0);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.len, 4 * n);
        /* a small request and its reply travel in the ring slots: room
         * for an error sentence must not push them into the arena (host
         * memory: every access of a GPU actor a PCIe read, 3.7 x echo's
         * round trip on an H100); a large one takes the arena */
        rk_stats st;
        rk_runtime_stats(rt, &st);
        if (n == 3)
            assert_int_equal(st.arena_used, 0);
        else
            assert_true(st.arena_used >= len + 4 * n);
        for (size_t i = 0; i < n; i++) {
            float z;
            memcpy(&z, (const char *)r.data + 4 * i, 4);
            assert_true(z == 2.0f * x[i] + y[i]);
        }
        rk_reply_release(a, &r);
    }
    /* the actor's own error: status -RK_EACTOR, its sentence as data */
    float x1 = 1, y2[2] = {1, 2};
    unsigned char req[256];
    size_t lens[3] = {4, 4, 8};
    void *at[3];
    size_t len = rk_fields_layout(req, sizeof req, 3, lens, at);
    memcpy(at[1], &x1, 4);
    memcpy(at[2], y2, 8);
    rk_reply r;
    assert_int_equal(rk_actor_call(a, t_saxpy, req, len, 0, &r, 5000), 0);
    assert_int_equal(r.status, -RK_EACTOR);
    assert_true(r.len > 0 && memmem(r.data, r.len, "one length", 10) != NULL);
    assert_non_null(strstr(rk_last_detail(), "one length"));
    assert_non_null(strstr(rk_last_detail(), "(saxpy, type")); /* the actor by name */
    rk_reply_release(a, &r);
    /* a payload that is not saxpy's three fields is refused before sending */
    assert_int_equal(rk_actor_call(a, t_saxpy, "xyz", 3, 0, &r, 1000), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "saxpy"));
    /* ... as is a table whose lengths run past the payload (it would size
     * a 3 GiB reply) */
    uint32_t lie = 0xc0000000u;
    memcpy(req + 4 + 4 * 2, &lie, 4);
    assert_int_equal(rk_actor_call(a, t_saxpy, req, len, 0, &r, 1000), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "not the 3 input fields"));
    /* two outputs in the table layout */
    assert_int_equal(rk_actor_call(a, t_minmax, "hello", 5, 0, &r, 5000), 0);
    assert_int_equal(r.status, 0);
    rk_field out[2] = {{0}};
    assert_int_equal(rk_fields_parse(r.data, r.len, 2, 0, out), 0);
    assert_int_equal(out[0].len, 1);
    assert_int_equal(*(const unsigned char *)out[0].data, 'e');
    assert_int_equal(*(const unsigned char *)out[1].data, 'o');
    rk_reply_release(a, &r);
    /* state across messages */
    for (unsigned long long want = 1; want <= 3; want++) {
        assert_int_equal(rk_actor_call(a, t_count, "k", 1, 0, &r, 5000), 0);
        unsigned long long got;
        memcpy(&got, r.data, 8);
        assert_int_equal(got, want);
        rk_reply_release(a, &r);
    }
    /* zero copy with reply_cap 0: the reply's room comes from the
     * declaration, not from the payload's length (count answers 8 B for a
     * 1-B key; saxpy's table, unknown at alloc, is bounded by the payload) */
    rk_buf b;
    assert_int_equal(rk_actor_buf_alloc(a, t_count, 1, 0, &b, 1000), 0);
    *(char *)b.data = 'k';
    assert_int_equal(rk_actor_buf_send(a, &b, NULL, 1000), 0);
    assert_int_equal(rk_actor_recv(a, &r, 5000), 0);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.len, 8);
    unsigned long long got4;
    memcpy(&got4, r.data, 8);
    assert_int_equal(got4, 4);
    rk_reply_release(a, &r);
    {
        static float x[1000], y[1000];
        static unsigned char sreq[16384];
        for (size_t i = 0; i < 1000; i++)
            x[i] = (float)i, y[i] = 1.0f;
        size_t slen = saxpy_request(sreq, sizeof sreq, 3.0f, x, y, 1000);
        assert_int_equal(rk_actor_buf_alloc(a, t_saxpy, slen, 0, &b, 1000), 0);
        memcpy(b.data, sreq, slen);
        assert_int_equal(rk_actor_buf_send(a, &b, NULL, 1000), 0);
        assert_int_equal(rk_actor_recv(a, &r, 5000), 0);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.len, 4000);
        float z;
        memcpy(&z, (const char *)r.data + 4 * 999, 4);
        assert_true(z == 3.0f * 999 + 1.0f);
        rk_reply_release(a, &r);
    }
    /* ... and twice's reply, twice its 64 KiB request, through the arena:
     * the room was the request's length, the actor's answer EMSGSIZE */
    uint16_t t_twice = 0;
    assert_non_null(rk_runtime_actor_find(rt, "twice", &t_twice));
    assert_int_equal(rk_actor_buf_alloc(a, t_twice, 65536, 0, &b, 1000), 0);
    for (size_t i = 0; i < 65536; i++)
        ((unsigned char *)b.data)[i] = (unsigned char)(i * 7);
    assert_int_equal(rk_actor_buf_send(a, &b, NULL, 1000), 0);
    assert_int_equal(rk_actor_recv(a, &r, 5000), 0);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.len, 131072);
    for (size_t i = 0; i < 65536; i++)
        assert_true(((const unsigned char *)r.data)[2 * i + 1] == (unsigned char)(i * 7));
    rk_reply_release(a, &r);
    /* GPU-only on the CPU backend: refused, naming the actor */
    assert_int_equal(rk_actor_call(a, t_gpu, "x", 1, 0, &r, 1000), -RK_ENODEV);
    assert_non_null(strstr(rk_last_detail(), "gpu_only"));
    /* the built-ins still serve */
    assert_int_equal(rk_actor_call(a, RK_OP_ECHO, "hi", 2, 0, &r, 5000), 0);
    assert_int_equal(r.len, 2);
    rk_reply_release(a, &r);
    rk_actor_close(a);
    rk_runtime_close(rt);
}

static void test_in_process(void **state)
{
    (void)state;
    serve_math(RK_ISOLATION_AUTO);
}

static void test_worker_process(void **state)
{
    (void)state;
    serve_math(RK_ISOLATION_PROCESS);
}

/* A string actor's call: in (a C string) answered with want, bytes. */
static void call_is(rk_actor *a, uint16_t type, const char *in, const char *want)
{
    rk_reply r;
    assert_int_equal(rk_actor_call(a, type, in, strlen(in), 0, &r, 5000), 0);
    assert_int_equal(r.len, strlen(want));
    assert_memory_equal(r.data, want, strlen(want));
    rk_reply_release(a, &r);
}

static void test_directory(void **state)
{
    (void)state;
    const char *paths[] = {case_dir};
    int rc;
    rk_runtime *rt = open_with(RK_ISOLATION_PROCESS, paths, 1, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(rk_runtime_actor_count(rt), 4);
    uint16_t tu, tl;
    assert_non_null(rk_runtime_actor_find(rt, "upper", &tu));
    assert_non_null(rk_runtime_actor_find(rt, "lower", &tl));
    assert_true(tu < tl); /* mod_a.so loads before mod_b.so */
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    call_is(a, tu, "MiXed", "MIXED");
    call_is(a, tl, "MiXed", "mixed");
    rk_actor_close(a);
    rk_runtime_close(rt);
}

/* A path without a '/' is a file in the current directory, as for any
 * program, not a name for dlopen to look up on the library path (until
 * 2026-11-27 "mod_math.so" from its own directory was "cannot open shared
 * object file"). A bare directory name too, and the worker process of
 * PROCESS loads the same files, also one started after the program moved
 * to another directory (a recovery): the paths are made absolute at open. */
static void test_bare_name(void **state)
{
    (void)state;
    char back[4096];
    assert_non_null(getcwd(back, sizeof back));
    assert_int_equal(chdir(mod_dir), 0); /* tests/modules: mod_math.so and dir/ */
    const char *paths[] = {"mod_math.so", "dir"};
    const rk_isolation isos[] = {RK_ISOLATION_AUTO, RK_ISOLATION_PROCESS};
    for (int i = 0; i < 2; i++) {
        int rc;
        rk_runtime *rt = open_with(isos[i], paths, 2, &rc);
        if (rc)
            fail_msg("isolation %d: %s: %s", (int)isos[i], rk_err_name(rc), rk_last_detail());
        assert_int_equal(rk_runtime_actor_count(rt), 2 + 5 + 2);
        const char *origin = NULL;
        assert_non_null(rk_runtime_actor_at(rt, 2, NULL, &origin));
        char want[PATH_MAX];
        assert_non_null(realpath("mod_math.so", want)); /* made absolute at open */
        assert_string_equal(origin, want);
        uint16_t t_upper;
        assert_non_null(rk_runtime_actor_find(rt, "upper", &t_upper));
        rk_actor *a;
        assert_int_equal(rk_actor_open(rt, &a), 0);
        call_is(a, t_upper, "bare", "BARE");
        if (isos[i] == RK_ISOLATION_PROCESS) {
            /* a worker started after the program moved elsewhere (a
             * recovery) loads the same files */
            assert_int_equal(chdir("/"), 0);
            rk_worker_info w;
            rk_runtime_worker(rt, &w);
            assert_true(w.pid > 0);
            assert_int_equal(kill(w.pid, SIGKILL), 0);
            call_is(a, t_upper, "moved", "MOVED");
            rk_runtime_worker(rt, &w);
            assert_int_equal(w.restarts, 1);
            assert_int_equal(chdir(mod_dir), 0);
        }
        rk_actor_close(a);
        rk_runtime_close(rt);
    }
    assert_int_equal(chdir(back), 0);
}

/* Copies file from to to (a new file, not over a loaded one). */
static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* Size rules whose sum passes 2^64 (an output of len + 2^64 - 1 bytes, two
 * of 2^63): the reply they ask for is refused at send as any reply above
 * max_payload is, not wrapped to a few bytes (until 2026-12 it was). */
static void test_huge_size_rule(void **state)
{
    (void)state;
    char p[512];
    path_of(p, sizeof p, "mod_bad_huge_size");
    const char *paths[] = {p};
    int rc;
    rk_runtime *rt = open_with(RK_ISOLATION_AUTO, paths, 1, &rc);
    if (!rt)
        fail_msg("open: %s", rk_last_detail());
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    const char *names[] = {"huge", "huge_sum"};
    for (int i = 0; i < 2; i++) {
        uint16_t type;
        assert_non_null(rk_runtime_actor_find(rt, names[i], &type));
        rc = rk_actor_send(a, type, "0123456789abcdef", 16, 0, NULL, 1000);
        if (rc != -RK_EMSGSIZE || !strstr(rk_last_detail(), "reply capacity"))
            fail_msg("%s: rc %d, detail \"%s\"", names[i], rc, rk_last_detail());
    }
    rk_actor_close(a);
    rk_runtime_close(rt);
}

/* A module built for another architecture: dlopen's own words for it are
 * "cannot open shared object file: No such file or directory" (of a file
 * that is there); the detail names the machine it was built for. */
static void test_other_architecture(void **state)
{
    (void)state;
    char dir[] = "/tmp/rk_test_modules_XXXXXX", m[PATH_MAX], a_so[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(m, sizeof m, "%s/arm.so", dir);
    snprintf(a_so, sizeof a_so, "%s/mod_a.so", case_dir);
    copy_file(a_so, m);
    FILE *f = fopen(m, "r+b");
    assert_non_null(f);
    const unsigned char other[2] = {NATIVE_MACHINE == 183 ? 62 : 183, 0}; /* AArch64, or x86-64 there */
    assert_int_equal(fseek(f, 18, SEEK_SET), 0); /* e_machine */
    assert_int_equal(fwrite(other, 1, 2, f), 2);
    assert_int_equal(fclose(f), 0);
    const char *paths[] = {m};
    int rc;
    assert_null(open_with(RK_ISOLATION_AUTO, paths, 1, &rc));
    assert_int_equal(rc, -RK_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "ELF machine %u", other[0]);
    const char *d = rk_last_detail();
    if (!strstr(d, m) || !strstr(d, want) || strstr(d, "No such file"))
        fail_msg("detail \"%s\" does not name the file and \"%s\"", d, want);
    assert_int_equal(unlink(m), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* A module rebuilt or removed while a runtime serves it (a user trying a
 * hot redeploy: `cc -o m.so` writes a new file over the name, `rm m.so`):
 * every worker started later (a recovery, a standby) loads the code librk
 * loaded, so the runtime serves one version until it is restarted. Until
 * 2026-11-27 a fresh worker loaded whatever the path held: the new code
 * under the old declarations, or, when the actors changed, nothing at all,
 * and the runtime went degraded (every module request RK_EDEVICE). */
static void test_replaced_while_serving(void **state)
{
    (void)state;
    char dir[] = "/tmp/rk_test_modules_XXXXXX", m[PATH_MAX], next[PATH_MAX], a_so[PATH_MAX], b_so[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    snprintf(m, sizeof m, "%s/m.so", dir);
    snprintf(next, sizeof next, "%s/m.so.new", dir);
    snprintf(a_so, sizeof a_so, "%s/mod_a.so", case_dir);
    snprintf(b_so, sizeof b_so, "%s/mod_b.so", case_dir);
    copy_file(a_so, m); /* "upper" */
    const char *paths[] = {m};
    int rc;
    rk_runtime *rt = open_with(RK_ISOLATION_PROCESS, paths, 1, &rc);
    assert_int_equal(rc, 0);
    uint16_t t_upper;
    assert_non_null(rk_runtime_actor_find(rt, "upper", &t_upper));
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    call_is(a, t_upper, "one", "ONE");
    copy_file(b_so, next); /* "lower": another actor under the same file name */
    assert_int_equal(rename(next, m), 0);
    for (int round = 0; round < 4; round++) {
        if (round == 2)
            assert_int_equal(unlink(m), 0); /* removed altogether */
        rk_worker_info w;
        rk_runtime_worker(rt, &w);
        assert_true(w.pid > 0);
        assert_int_equal(kill(w.pid, SIGKILL), 0);
        rk_reply r;
        rc = rk_actor_call(a, t_upper, "two", 3, 0, &r, 5000);
        rk_runtime_worker(rt, &w);
        if (rc || r.status)
            fail_msg("round %d: %s, status %s; worker state %d: %s", round, rk_err_name(rc),
                     rk_err_name(rc ? 0 : r.status), (int)w.state, w.why);
        assert_memory_equal(r.data, "TWO", 3);
        rk_reply_release(a, &r);
    }
    rk_actor_close(a);
    rk_runtime_close(rt);
    assert_int_equal(rmdir(dir), 0);
}

/* rk_config.modules without n_modules (a NULL-terminated list) would load
 * nothing and open fine: refused, naming both fields. An empty list with
 * n_modules 0 (rk-bridge without --actors) and a NULL or empty path. */
static void test_modules_without_count(void **state)
{
    (void)state;
    char p[512];
    path_of(p, sizeof p, "mod_math");
    const char *listed[] = {p, NULL};
    int rc;
    assert_null(open_with(RK_ISOLATION_AUTO, listed, 0, &rc));
    assert_int_equal(rc, -RK_EINVAL);
    const char *d = rk_last_detail();
    if (!strstr(d, "modules is set") || !strstr(d, "n_modules is 0"))
        fail_msg("the detail does not name both fields: \"%s\"", d);
    /* an empty list is refused too (its entries are not read); NULL is none */
    const char *empty[] = {NULL};
    assert_null(open_with(RK_ISOLATION_AUTO, empty, 0, &rc));
    assert_int_equal(rc, -RK_EINVAL);
    rk_runtime *rt = open_with(RK_ISOLATION_AUTO, NULL, 0, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(rk_runtime_actor_count(rt), 2);
    rk_runtime_close(rt);
    const char *holes[][2] = {{p, NULL}, {p, ""}};
    for (int i = 0; i < 2; i++) {
        assert_null(open_with(RK_ISOLATION_AUTO, holes[i], 2, &rc));
        assert_int_equal(rc, -RK_EINVAL);
        assert_non_null(strstr(rk_last_detail(), "modules[1] of 2"));
    }
}

/* A refused module: open fails with -RK_EINVAL, the detail names the file
 * and the cause, and nothing stays loaded (a valid open follows). */
static void refused(const char *name, const char *cause)
{
    char p[512], q[512];
    path_of(p, sizeof p, "mod_math");
    path_of(q, sizeof q, name);
    const char *paths[] = {p, q};
    int rc;
    rk_runtime *rt = open_with(RK_ISOLATION_AUTO, paths, 2, &rc);
    assert_null(rt);
    assert_int_equal(rc, -RK_EINVAL);
    const char *d = rk_last_detail();
    if (!strstr(d, name) || !strstr(d, cause))
        fail_msg("%s: detail \"%s\" does not name the file and \"%s\"", name, d, cause);
}

static void test_refused(void **state)
{
    (void)state;
    refused("mod_bad_no_symbol", "no symbol rk_module_v1");
    refused("mod_bad_abi", "ABI 99");
    refused("mod_bad_duplicate", "also declared by module");
    refused("mod_bad_builtin_name", "collides with the built-in");
    refused("mod_bad_admin_name", "collides with the built-in");
    refused("mod_bad_field_key", "the protocol's key \"id\"");
    refused("mod_bad_no_handler", "neither a CPU twin");
    refused("mod_bad_gpu_no_kernel", "has no kernel");
    /* the length and the limit, not 500 bytes of the name */
    refused("mod_bad_long_name", "is 1048575 bytes long, more than the 31 allowed");
    refused("mod_missing", "No such file");
    /* the count and the limit (until 2026-12: "out of memory", RK_ENOMEM) */
    refused("mod_bad_many_actors", "declares 4294967295 actors");
    /* nothing leaked into the next runtime */
    char p[512];
    path_of(p, sizeof p, "mod_math");
    const char *paths[] = {p};
    int rc;
    rk_runtime *rt = open_with(RK_ISOLATION_AUTO, paths, 1, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(rk_runtime_actor_count(rt), 7);
    rk_runtime_close(rt);
}

/* A request retried after its worker was killed (its first strike),
 * answered by the fresh worker while its owner does not wait: the
 * supervisor's watch of that suspect must see the answer (it routes the
 * rings first), not replace the healthy worker (until 2026-11-26 it did,
 * after request_deadline_ms, and counted a fault). */
static void test_suspect_answered_unrouted(void **state)
{
    (void)state;
    char p[512];
    path_of(p, sizeof p, "mod_slow");
    const char *paths[] = {p};
    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = RK_BACKEND_CPU;
    cfg.isolation = RK_ISOLATION_PROCESS;
    cfg.modules = paths;
    cfg.n_modules = 1;
    cfg.request_deadline_ms = 400;
    rk_runtime *rt = NULL;
    assert_int_equal(rk_runtime_open(&rt, &cfg), 0);
    uint16_t t_slow;
    assert_non_null(rk_runtime_actor_find(rt, "slow", &t_slow));
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    unsigned char req[64];
    const uint32_t ms = 150;
    size_t lens[1] = {4};
    void *at[1];
    const size_t n = rk_fields_layout(req, sizeof req, 1, lens, at);
    assert_true(n > 0);
    memcpy(at[0], &ms, 4);
    uint64_t id;
    assert_int_equal(rk_actor_send(a, t_slow, req, n, 0, &id, 1000), 0);
    usleep(50000); /* it runs */
    rk_worker_info w;
    rk_runtime_worker(rt, &w);
    assert_int_equal(kill(w.pid, SIGKILL), 0);
    for (int i = 0; i < 200; i++) {
        rk_runtime_worker(rt, &w);
        if (w.restarts >= 1 && w.state == RK_WORKER_RUNNING)
            break;
        usleep(10000);
    }
    assert_int_equal(w.faults, 1);
    rk_reply r;
    assert_int_equal(rk_actor_recv(a, &r, 1), -RK_ETIMEDOUT); /* re-posts it: its retry */
    usleep(1500 * 1000); /* answered after 150 ms; nobody routes it */
    rk_runtime_worker(rt, &w);
    if (w.faults != 1)
        fail_msg("a healthy worker was replaced: %llu faults, last: %s", (unsigned long long)w.faults,
                 w.last_fault.detail);
    assert_int_equal(rk_actor_recv(a, &r, 2000), 0);
    assert_true(r.id == id);
    assert_int_equal(r.status, 0);
    rk_reply_release(a, &r);
    rk_actor_close(a);
    rk_runtime_close(rt);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_modules MODULE_BUILD_DIR MODULE_DIR\n");
        return 2;
    }
    mod_dir = argv[1];
    case_dir = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_process),
        cmocka_unit_test(test_worker_process),
        cmocka_unit_test(test_directory),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_bare_name),
        cmocka_unit_test(test_replaced_while_serving),
        cmocka_unit_test(test_other_architecture),
        cmocka_unit_test(test_huge_size_rule),
        cmocka_unit_test(test_modules_without_count),
        cmocka_unit_test(test_suspect_answered_unrouted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
