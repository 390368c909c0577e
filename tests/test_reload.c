/* test_reload.c - rk_runtime_reload_modules on the CPU backend, in this
 * process and in a worker process: a new set of modules serves by name
 * while actors stay open; a refused module, a request in flight and a
 * worker that does not start on the new set each change nothing (the
 * previous set serves on, no request lost); one that dies as it is told
 * to serve puts the previous set back on a fresh worker; several devices reload all or
 * none; rk_runtime_reload_prepare ahead of a reload. argv[1]: the build folder of tests/modules, argv[2]:
 * tests/modules/dir (mod_a.so "upper", mod_b.so "lower"). */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rk/rk.h"

static const char *mod_dir, *case_dir;
static char p_math[512], p_slow[512], p_fails[512], p_dup[512];

static rk_runtime *open_rt(rk_isolation iso, int devices, const char *const *paths, size_t n)
{
    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = RK_BACKEND_CPU;
    cfg.isolation = iso;
    cfg.modules = n ? paths : NULL;
    cfg.n_modules = n;
    cfg.n_devices = devices;
    for (int i = 0; i < devices; i++)
        cfg.devices[i] = i;
    rk_runtime *rt = NULL;
    int rc = rk_runtime_open(&rt, &cfg);
    if (rc)
        fail_msg("rk_runtime_open: %s", rk_last_detail());
    return rt;
}

/* type of `name`, failing the test when it is not served */
static uint16_t type_of(rk_runtime *rt, const char *name)
{
    uint16_t t = 0;
    if (!rk_runtime_actor_find(rt, name, &t))
        fail_msg("actor \"%s\" is not served", name);
    return t;
}

static void call_is(rk_runtime *rt, rk_actor *a, const char *name, const char *in, const char *want)
{
    rk_reply r;
    int rc = rk_actor_call(a, type_of(rt, name), in, strlen(in), 0, &r, 5000);
    if (rc)
        fail_msg("%s(\"%s\"): %s (%s)", name, in, rk_strerror(rc), rk_last_detail());
    assert_int_equal(r.status, 0);
    assert_int_equal(r.len, strlen(want));
    assert_memory_equal(r.data, want, strlen(want));
    rk_reply_release(a, &r);
}

/* Sends a `slow` request (mod_slow) of ms milliseconds; its id in *id. */
static void send_slow(rk_runtime *rt, rk_actor *a, uint32_t ms, uint64_t *id)
{
    unsigned char req[64];
    size_t lens[1] = {4};
    void *at[1];
    const size_t n = rk_fields_layout(req, sizeof req, 1, lens, at);
    assert_true(n > 0);
    memcpy(at[0], &ms, 4);
    assert_int_equal(rk_actor_send(a, type_of(rt, "slow"), req, n, 0, id, 1000), 0);
}

/* One set after another on one open actor: math, math + the directory,
 * the directory alone, none; each served by name, the previous set's
 * names gone, echo throughout. */
static void swaps(rk_isolation iso)
{
    const char *math[] = {p_math};
    rk_runtime *rt = open_rt(iso, 1, math, 1);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    call_is(rt, a, "twice", "ab", "aabb");
    assert_null(rk_runtime_actor_find(rt, "upper", NULL));

    const char *both[] = {p_math, case_dir};
    if (rk_runtime_reload_modules(rt, both, 2))
        fail_msg("reload: %s", rk_last_detail());
    assert_int_equal(rk_runtime_actor_count(rt), RK_BUILTIN_ACTORS + 5 + 2);
    call_is(rt, a, "upper", "MiXed", "MIXED");
    call_is(rt, a, "lower", "MiXed", "mixed");
    call_is(rt, a, "twice", "xy", "xxyy");
    call_is(rt, a, "echo", "still", "still");

    const char *dir[] = {case_dir};
    assert_int_equal(rk_runtime_reload_modules(rt, dir, 1), 0);
    assert_int_equal(rk_runtime_actor_count(rt), RK_BUILTIN_ACTORS + 2);
    assert_null(rk_runtime_actor_find(rt, "twice", NULL));
    const char *origin = NULL;
    assert_non_null(rk_runtime_actor_at(rt, RK_BUILTIN_ACTORS, NULL, &origin));
    assert_non_null(strstr(origin, "mod_a.so"));
    call_is(rt, a, "upper", "again", "AGAIN");

    assert_int_equal(rk_runtime_reload_modules(rt, NULL, 0), 0);
    assert_int_equal(rk_runtime_actor_count(rt), RK_BUILTIN_ACTORS);
    assert_null(rk_runtime_actor_find(rt, "upper", NULL));
    call_is(rt, a, "echo", "bare", "bare");
    rk_actor_close(a);
    rk_runtime_close(rt);
}

static void test_swaps_in_process(void **state)
{
    (void)state;
    swaps(RK_ISOLATION_AUTO);
}

static void test_swaps_in_worker(void **state)
{
    (void)state;
    swaps(RK_ISOLATION_PROCESS);
    /* the worker is a fresh one: its pid changed, its count of restarts grew */
    const char *math[] = {p_math};
    rk_runtime *rt = open_rt(RK_ISOLATION_PROCESS, 1, math, 1);
    rk_worker_info w0, w1;
    rk_runtime_worker(rt, &w0);
    assert_int_equal(rk_runtime_reload_modules(rt, math, 1), 0);
    rk_runtime_worker(rt, &w1);
    assert_int_equal(w1.state, RK_WORKER_RUNNING);
    assert_true(w1.pid != w0.pid);
    assert_int_equal(w1.faults, 0);
    rk_runtime_close(rt);
}

/* A refused module (a duplicate name) and a path that does not exist:
 * the detail names the file, and the set before serves on. */
static void test_refused_changes_nothing(void **state)
{
    (void)state;
    const char *math[] = {p_math};
    rk_runtime *rt = open_rt(RK_ISOLATION_PROCESS, 1, math, 1);
    rk_worker_info w0, w1;
    rk_runtime_worker(rt, &w0);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    const char *dup[] = {p_math, p_dup};
    assert_int_equal(rk_runtime_reload_modules(rt, dup, 2), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "mod_bad_duplicate.so"));
    const char *none[] = {"/nonexistent/mod.so"};
    assert_int_equal(rk_runtime_reload_modules(rt, none, 1), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "/nonexistent/mod.so"));
    assert_int_equal(rk_runtime_reload_modules(rt, NULL, 1), -RK_EINVAL); /* a count without its list */
    assert_non_null(strstr(rk_last_detail(), "paths is NULL"));
    assert_int_equal(rk_runtime_reload_modules(NULL, math, 1), -RK_EINVAL);
    /* a NULL path is refused as rk_runtime_open refuses it (until 2026-12
     * prepare crashed on it, and so did a reload beside a prepared set) */
    const char *hole[] = {p_math, NULL};
    assert_int_equal(rk_runtime_reload_prepare(rt, hole, 2), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "paths[1] of 2 is NULL"));
    assert_int_equal(rk_runtime_reload_prepare(rt, math, 1), 0);
    const char *null1[] = {NULL};
    assert_int_equal(rk_runtime_reload_modules(rt, null1, 1), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "paths[0] of 1 is NULL"));
    rk_runtime_worker(rt, &w1);
    assert_int_equal(w1.pid, w0.pid); /* not even restarted */
    assert_int_equal(rk_runtime_actor_count(rt), RK_BUILTIN_ACTORS + 5);
    call_is(rt, a, "twice", "q", "qq");
    rk_actor_close(a);
    rk_runtime_close(rt);
}

/* A request in flight: -RK_EBUSY naming it, nothing changed, and its
 * reply still comes; once it is in, the reload goes through. */
static void busy(rk_isolation iso)
{
    const char *slow[] = {p_slow};
    rk_runtime *rt = open_rt(iso, 1, slow, 1);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    const uint32_t ms = 300;
    uint64_t id;
    send_slow(rt, a, ms, &id);
    const char *math[] = {p_math};
    assert_int_equal(rk_runtime_reload_modules(rt, math, 1), -RK_EBUSY);
    const char *d = rk_last_detail();
    if (!strstr(d, "1 request(s) in flight") || !strstr(d, "slow"))
        fail_msg("detail: %s", d);
    assert_non_null(rk_runtime_actor_find(rt, "slow", NULL));
    rk_reply r;
    assert_int_equal(rk_actor_recv(a, &r, 5000), 0);
    assert_true(r.id == id);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.len, 4);
    assert_memory_equal(r.data, &ms, 4);
    rk_reply_release(a, &r);
    assert_int_equal(rk_runtime_reload_modules(rt, math, 1), 0);
    assert_null(rk_runtime_actor_find(rt, "slow", NULL));
    call_is(rt, a, "twice", "z", "zz");
    rk_actor_close(a);
    rk_runtime_close(rt);
}

static void test_busy_in_process(void **state)
{
    (void)state;
    busy(RK_ISOLATION_AUTO);
}

static void test_busy_in_worker(void **state)
{
    (void)state;
    busy(RK_ISOLATION_PROCESS);
}

/* A reload to mod_worker_fails.so whose worker fails while the test
 * variable var is set (to val): the reload fails with a detail holding
 * want1, want2 and the worker's exit; the previous set serves on (`fragile` unknown, `twice`
 * answers), on the worker that served (same_worker) or a fresh one. The
 * same reload without the variable then serves `fragile`. */
static void fails_then_serves(const char *var, const char *val, const char *want1, const char *want2,
                              bool same_worker)
{
    const char *math[] = {p_math};
    rk_runtime *rt = open_rt(RK_ISOLATION_PROCESS, 1, math, 1);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    call_is(rt, a, "twice", "ab", "aabb");
    rk_worker_info w0;
    rk_runtime_worker(rt, &w0);
    const char *fails[] = {p_fails};
    setenv(var, val, 1);
    int rc = rk_runtime_reload_modules(rt, fails, 1);
    unsetenv(var);
    assert_true(rc < 0);
    const char *d = rk_last_detail();
    if (!strstr(d, want1) || !strstr(d, want2) || !strstr(d, "exit")) /* (and says the worker exited) */
        fail_msg("detail: %s", d);
    assert_null(rk_runtime_actor_find(rt, "fragile", NULL));
    assert_non_null(rk_runtime_actor_find(rt, "twice", NULL));
    rk_worker_info w;
    rk_runtime_worker(rt, &w);
    assert_int_equal(w.state, RK_WORKER_RUNNING);
    if (same_worker)
        assert_int_equal(w.pid, w0.pid);
    else /* the old one was stopped for the switch */
        assert_true(w.pid > 0 && w.pid != w0.pid);
    call_is(rt, a, "twice", "ok", "ookk");
    assert_int_equal(rk_runtime_reload_modules(rt, fails, 1), 0);
    call_is(rt, a, "fragile", "fine", "fine");
    rk_actor_close(a);
    rk_runtime_close(rt);
}

/* The new set loads here but its worker exits at start (the module's
 * constructor, RK_TEST_WORKER_FAILS): the error says so, and nothing
 * changed: the worker that served serves on. */
static void test_worker_fails_goes_back(void **state)
{
    (void)state;
    fails_then_serves("RK_TEST_WORKER_FAILS", "1", "did not start", "nothing was changed", true);
}

/* The new set's worker starts, then exits when told to serve (between GO
 * and RUNNING; device/worker.c's RK_TEST_WORKER_EXITS_AT_GO): the
 * previous set serves again, on a fresh worker. */
static void test_worker_dies_at_go_rolls_back(void **state)
{
    (void)state;
    fails_then_serves("RK_TEST_WORKER_EXITS_AT_GO", "fragile", "failed as it started to serve",
                      "the previous modules serve again", false);
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

/* The child processes of this one into out[0..max); returns how many. */
static int children(pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    int k = 0;
    for (struct dirent *e; k < max && (e = readdir(d));) {
        char path[300], st[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = e->d_name[0] >= '1' && e->d_name[0] <= '9' ? fopen(path, "r") : NULL;
        size_t n = f ? fread(st, 1, sizeof st - 1, f) : 0;
        if (f)
            fclose(f);
        st[n] = 0;
        const char *p = strrchr(st, ')');
        int ppid = 0;
        if (p && sscanf(p + 1, " %*c %d", &ppid) == 1 && ppid == getpid())
            out[k++] = atoi(e->d_name);
    }
    closedir(d);
    return k;
}

/* Prepares dir on rt and stops (SIGSTOP) the worker the prepare started:
 * the one child process that is new. Returns its pid. */
static pid_t prepare_stopped(rk_runtime *rt, const char *const *dir)
{
    pid_t was[64], now[64];
    const int n_was = children(was, 64);
    assert_int_equal(rk_runtime_reload_prepare(rt, dir, 1), 0);
    const int n_now = children(now, 64);
    pid_t next = 0;
    for (int i = 0; i < n_now; i++) {
        bool old = false;
        for (int j = 0; j < n_was; j++)
            old |= now[i] == was[j];
        if (!old)
            next = now[i];
    }
    assert_true(next > 0);
    assert_int_equal(kill(next, SIGSTOP), 0);
    return next;
}

/* A prepared worker that takes GO but never says RUNNING (stopped here:
 * it stays alive): the reload fails, the previous set serves again, and
 * the stuck worker is ended, not left running on the rings beside the
 * fresh one (until 2026-12 its process and control socket were leaked). */
static void test_prepared_worker_stuck_at_go(void **state)
{
    (void)state;
    const int fds = count_fds();
    const char *math[] = {p_math};
    rk_runtime *rt = open_rt(RK_ISOLATION_PROCESS, 1, math, 1);
    const char *dir[] = {case_dir};
    const pid_t next = prepare_stopped(rt, dir);
    setenv("RK_WORKER_START_MS", "900", 1); /* RUNNING awaited 300 ms */
    const int rc = rk_runtime_reload_modules(rt, dir, 1);
    unsetenv("RK_WORKER_START_MS");
    const pid_t r = waitpid(next, NULL, WNOHANG);
    if (r == 0) { /* still there: end it before failing */
        kill(next, SIGKILL);
        waitpid(next, NULL, 0);
        fail_msg("the worker stuck at GO (%d) was left running; reload: %s", (int)next, rk_last_detail());
    }
    assert_true(rc < 0);
    assert_null(rk_runtime_actor_find(rt, "upper", NULL));
    assert_non_null(rk_runtime_actor_find(rt, "twice", NULL));
    rk_runtime_close(rt);
    assert_int_equal(count_fds(), fds);
}

/* rk_runtime_reload_prepare: while a request runs (allowed: the serving
 * worker serves on), a refused set changes nothing, a worker that exits
 * on the new set changes nothing, a reload of other paths drops what was
 * prepared, one of the same paths takes it; a close drops it too. */
static void prepare(rk_isolation iso)
{
    const char *slow[] = {p_slow};
    rk_runtime *rt = open_rt(iso, 1, slow, 1);
    rk_actor *a;
    assert_int_equal(rk_actor_open(rt, &a), 0);
    const uint32_t ms = 200;
    uint64_t id;
    send_slow(rt, a, ms, &id);
    const char *dup[] = {p_math, p_dup};
    assert_int_equal(rk_runtime_reload_prepare(rt, dup, 2), -RK_EINVAL);
    assert_non_null(strstr(rk_last_detail(), "mod_bad_duplicate.so"));
    const char *both[] = {p_slow, case_dir};
    if (rk_runtime_reload_prepare(rt, both, 2))
        fail_msg("prepare: %s", rk_last_detail());
    assert_null(rk_runtime_actor_find(rt, "upper", NULL)); /* not yet */
    assert_int_equal(rk_runtime_reload_modules(rt, both, 2), -RK_EBUSY);
    rk_reply r;
    assert_int_equal(rk_actor_recv(a, &r, 5000), 0);
    assert_true(r.id == id && r.status == 0);
    rk_reply_release(a, &r);
    assert_int_equal(rk_runtime_reload_modules(rt, both, 2), 0);
    call_is(rt, a, "upper", "prep", "PREP");
    /* prepared for one set, reloaded with another: the other serves */
    const char *math[] = {p_math};
    assert_int_equal(rk_runtime_reload_prepare(rt, both, 2), 0);
    assert_int_equal(rk_runtime_reload_modules(rt, math, 1), 0);
    assert_null(rk_runtime_actor_find(rt, "upper", NULL));
    call_is(rt, a, "twice", "o", "oo");
    if (iso == RK_ISOLATION_PROCESS) {
        rk_worker_info w0, w1;
        rk_runtime_worker(rt, &w0);
        const char *fails[] = {p_fails};
        setenv("RK_TEST_WORKER_FAILS", "1", 1);
        int rc = rk_runtime_reload_prepare(rt, fails, 1);
        unsetenv("RK_TEST_WORKER_FAILS");
        assert_true(rc < 0);
        assert_non_null(strstr(rk_last_detail(), "nothing was changed"));
        rk_runtime_worker(rt, &w1);
        assert_int_equal(w1.pid, w0.pid);
        call_is(rt, a, "twice", "p", "pp");
    }
    assert_int_equal(rk_runtime_reload_prepare(rt, both, 2), 0); /* dropped by the close */
    rk_actor_close(a);
    rk_runtime_close(rt);
}

static void test_prepare_in_process(void **state)
{
    (void)state;
    prepare(RK_ISOLATION_AUTO);
}

static void test_prepare_in_worker(void **state)
{
    (void)state;
    prepare(RK_ISOLATION_PROCESS);
}

/* Two devices (two CPU workers): each serves the new set, and one
 * device's request in flight refuses the whole reload. */
static void test_devices(void **state)
{
    (void)state;
    const char *math[] = {p_math};
    rk_runtime *rt = open_rt(RK_ISOLATION_PROCESS, 2, math, 1);
    assert_int_equal(rk_runtime_device_count(rt), 2);
    rk_actor *a[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(rk_actor_open_on(rt, i, &a[i]), 0);
    const char *dir_slow[] = {case_dir, p_slow};
    if (rk_runtime_reload_modules(rt, dir_slow, 2))
        fail_msg("reload: %s", rk_last_detail());
    for (int i = 0; i < 2; i++) {
        call_is(rt, a[i], "upper", "dev", "DEV");
        assert_null(rk_runtime_actor_find(rk_runtime_device(rt, i), "twice", NULL));
        assert_non_null(rk_runtime_actor_find(rk_runtime_device(rt, i), "slow", NULL));
    }
    const uint32_t ms = 300;
    uint64_t id;
    send_slow(rt, a[1], ms, &id);
    assert_int_equal(rk_runtime_reload_modules(rt, math, 1), -RK_EBUSY);
    assert_non_null(strstr(rk_last_detail(), "on one device"));
    for (int i = 0; i < 2; i++) /* neither device changed */
        assert_non_null(rk_runtime_actor_find(rk_runtime_device(rt, i), "slow", NULL));
    rk_reply r;
    assert_int_equal(rk_actor_recv(a[1], &r, 5000), 0);
    assert_true(r.id == id);
    assert_int_equal(r.status, 0);
    rk_reply_release(a[1], &r);
    assert_int_equal(rk_runtime_reload_prepare(rt, math, 1), 0); /* both devices' workers */
    assert_int_equal(rk_runtime_reload_modules(rt, math, 1), 0);
    for (int i = 0; i < 2; i++)
        call_is(rt, a[i], "twice", "d", "dd");
    for (int i = 0; i < 2; i++)
        rk_actor_close(a[i]);
    rk_runtime_close(rt);
}

/* Two devices on mod_worker_fails.so reload to the directory: device 0
 * switches, device 1's prepared worker takes GO and never says RUNNING
 * (stopped here), and no worker on the previous set starts (its module
 * exits in rk-worker, RK_TEST_WORKER_FAILS). Each device is then on the
 * previous set, degraded, none left serving the new one (until 2026-12
 * device 0's way back "changed nothing": it served `upper` beside a
 * device without it); a retry serves the previous set on both. */
static void test_devices_rollback_fails(void **state)
{
    (void)state;
    const char *fails[] = {p_fails};
    rk_runtime *rt = open_rt(RK_ISOLATION_PROCESS, 2, fails, 1);
    const char *dir[] = {case_dir};
    /* device 1 alone, so that its prepared worker is the one new child */
    (void)prepare_stopped(rk_runtime_device(rt, 1), dir);
    setenv("RK_WORKER_START_MS", "900", 1); /* RUNNING awaited 300 ms */
    setenv("RK_TEST_WORKER_FAILS", "1", 1);
    const int rc = rk_runtime_reload_modules(rt, dir, 1);
    unsetenv("RK_TEST_WORKER_FAILS");
    unsetenv("RK_WORKER_START_MS");
    assert_true(rc < 0);
    for (int i = 0; i < 2; i++) {
        rk_runtime *dev = rk_runtime_device(rt, i);
        rk_worker_info w;
        rk_runtime_worker(dev, &w);
        if (rk_runtime_actor_find(dev, "upper", NULL) || w.state != RK_WORKER_DEGRADED)
            fail_msg("device %d: %s, `upper` %s; reload: %s", i, w.state_name,
                     rk_runtime_actor_find(dev, "upper", NULL) ? "served" : "gone", rk_last_detail());
        assert_non_null(rk_runtime_actor_find(dev, "fragile", NULL));
    }
    assert_int_equal(rk_runtime_retry_gpu(rt), 0);
    for (int i = 0; i < 2; i++) {
        rk_actor *a;
        assert_int_equal(rk_actor_open_on(rt, i, &a), 0);
        call_is(rk_runtime_device(rt, i), a, "fragile", "back", "back");
        rk_actor_close(a);
    }
    rk_runtime_close(rt);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODULE_BUILD_DIR MODULE_DIR\n", argv[0]);
        return 2;
    }
    mod_dir = argv[1];
    case_dir = argv[2];
    snprintf(p_math, sizeof p_math, "%s/mod_math.so", mod_dir);
    snprintf(p_slow, sizeof p_slow, "%s/mod_slow.so", mod_dir);
    snprintf(p_fails, sizeof p_fails, "%s/mod_worker_fails.so", mod_dir);
    snprintf(p_dup, sizeof p_dup, "%s/mod_bad_duplicate.so", mod_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swaps_in_process),
        cmocka_unit_test(test_swaps_in_worker),
        cmocka_unit_test(test_refused_changes_nothing),
        cmocka_unit_test(test_busy_in_process),
        cmocka_unit_test(test_busy_in_worker),
        cmocka_unit_test(test_worker_fails_goes_back),
        cmocka_unit_test(test_worker_dies_at_go_rolls_back),
        cmocka_unit_test(test_prepared_worker_stuck_at_go),
        cmocka_unit_test(test_prepare_in_process),
        cmocka_unit_test(test_prepare_in_worker),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_devices_rollback_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
