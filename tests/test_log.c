/* test_log.c - librk's messages (rk/log.h): a program that sets nothing
 * prints nothing (its stdout and stderr are captured by a parent), RK_LOG
 * turns stderr lines on, a handler receives the backend message with the
 * level it asked for, and handlers can be swapped while other threads log.
 *
 *   test_log            the cmocka tests
 *   test_log --child    open an auto and a cpu runtime, echo, close (the
 *                       program whose output the tests capture) */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <rk/rk.h>

extern char **environ;

static void small_config(rk_config *c, rk_backend_kind backend)
{
    rk_config_init(c);
    c->backend = backend;
    c->ring_slots = 64;
    c->arena_size = 1 << 20;
    c->max_payload = 1 << 19;
}

/* Opens a runtime, echoes once, closes; returns the backend's info. */
static int open_echo_close(rk_backend_kind backend, rk_info *info)
{
    rk_config c;
    small_config(&c, backend);
    rk_runtime *rt;
    int rc = rk_runtime_open(&rt, &c);
    if (rc)
        return rc;
    if (info)
        rk_runtime_info(rt, info);
    rk_actor *a;
    if ((rc = rk_actor_open(rt, &a)) == 0) {
        rk_reply r;
        if ((rc = rk_actor_call(a, RK_OP_ECHO, "hi", 2, 0, &r, 5000)) == 0)
            rk_reply_release(a, &r);
    }
    rk_runtime_close(rt);
    return rc;
}

static int child_main(void)
{
    if (open_echo_close(RK_BACKEND_AUTO, NULL) || open_echo_close(RK_BACKEND_CPU, NULL))
        return 3;
    return 0;
}

/* ---- running the child with an environment, capturing its output ---- */

static char self_path[4096];

static void read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)k;
    buf[n] = '\0';
    close(fd);
}

/* Runs `test_log --child` with RK_LOG=rk_log (NULL: unset); returns its
 * exit status and what it wrote on stdout and stderr. */
static int run_child(const char *rk_log, char *out, char *err, size_t cap)
{
    char *env[256];
    size_t n = 0;
    for (char **e = environ; *e && n < 250; e++)
        if (strncmp(*e, "RK_LOG=", 7))
            env[n++] = *e;
    char setting[64];
    if (rk_log) {
        snprintf(setting, sizeof setting, "RK_LOG=%s", rk_log);
        env[n++] = setting;
    }
    env[n] = NULL;
    int po[2], pe[2];
    assert_int_equal(pipe(po), 0);
    assert_int_equal(pipe(pe), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    posix_spawn_file_actions_addclose(&fa, po[0]);
    posix_spawn_file_actions_addclose(&fa, pe[0]);
    char *argv[] = {self_path, "--child", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, self_path, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    assert_int_equal(rc, 0);
    close(po[1]);
    close(pe[1]);
    read_all(po[0], out, cap); /* small outputs: the pipe never fills while we read the other */
    read_all(pe[0], err, cap);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The must-show: a program linked with librk, on whichever
 * backend auto picks and on the CPU backend, prints nothing it did not ask
 * for when RK_LOG is unset, off, an error level or not a level at all. */
static void test_silent_by_default(void **state)
{
    (void)state;
    static char out[65536], err[65536];
    const char *settings[] = {NULL, "off", "error", "bogus", ""};
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        int st = run_child(settings[i], out, err, sizeof out);
        if (st || out[0] || err[0])
            fail_msg("RK_LOG=%s: exit %d, stdout \"%s\", stderr \"%s\"",
                     settings[i] ? settings[i] : "(unset)", st, out, err);
    }
}

/* RK_LOG=info|debug (any case) shows the backend line on stderr, and
 * nothing on stdout; warn shows no info line. */
static void test_rk_log_env(void **state)
{
    (void)state;
    static char out[65536], err[65536];
    const char *on[] = {"info", "DEBUG", "Info"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(run_child(on[i], out, err, sizeof out), 0);
        assert_string_equal(out, "");
        if (!strstr(err, "rk info: backend cpu: "))
            fail_msg("RK_LOG=%s: no \"rk info: backend cpu:\" line in \"%s\"", on[i], err);
    }
    assert_int_equal(run_child("warn", out, err, sizeof out), 0);
    assert_null(strstr(err, "rk info:"));
}

/* ---- handlers ---- */

typedef struct capture {
    pthread_mutex_t lock;
    int n;
    rk_log_level level[16];
    char msg[16][512];
} capture;

static void capture_fn(rk_log_level level, const char *msg, void *user)
{
    capture *c = user;
    pthread_mutex_lock(&c->lock);
    if (c->n < 16) {
        c->level[c->n] = level;
        snprintf(c->msg[c->n], sizeof c->msg[0], "%s", msg);
    }
    c->n++;
    pthread_mutex_unlock(&c->lock);
}

/* The backend message reaches the handler with what rk_runtime_info
 * says; a fallback of auto to the CPU comes as a warning. */
static void test_handler_gets_backend_message(void **state)
{
    (void)state;
    capture c = {.lock = PTHREAD_MUTEX_INITIALIZER};
    assert_int_equal(rk_log_set_handler(capture_fn, &c), 0);
    assert_int_equal(rk_log_set_level(RK_LOG_INFO), 0);
    rk_info info;
    assert_int_equal(open_echo_close(RK_BACKEND_AUTO, &info), 0);
    assert_int_equal(rk_log_set_handler(NULL, NULL), 0);
    /* exactly one backend message; with a GPU, the CUDA backend also says
     * (info) how long its self-test ping took, and the supervisor may say
     * that its standby worker is ready */
    int at = -1;
    assert_in_range(c.n, 1, 16);
    for (int i = 0; i < c.n; i++) {
        if (strncmp(c.msg[i], "backend ", 8) == 0) {
            assert_int_equal(at, -1);
            at = i;
        } else if (c.level[i] != RK_LOG_INFO ||
                   (strncmp(c.msg[i], "self-test: ping", 15) != 0 && !strstr(c.msg[i], "standby worker"))) {
            fail_msg("unexpected message (level %d): %s", c.level[i], c.msg[i]);
        }
    }
    assert_int_not_equal(at, -1);
    char want[512];
    snprintf(want, sizeof want, "backend %s: %s", info.backend_name, info.why);
    assert_string_equal(c.msg[at], want);
    /* auto on a machine without a usable GPU falls back: a warning */
    assert_int_equal(c.level[at], info.backend == RK_BACKEND_CPU ? RK_LOG_WARN : RK_LOG_INFO);
    if (info.backend == RK_BACKEND_CPU)
        assert_non_null(strstr(c.msg[at], "CUDA"));
}

/* Only messages at the level or more severe are delivered. */
static void test_levels_filter(void **state)
{
    (void)state;
    const struct {
        rk_log_level level;
        int want;
    } rows[] = {{RK_LOG_OFF, 0}, {RK_LOG_ERROR, 0}, {RK_LOG_WARN, 0}, {RK_LOG_INFO, 1},
                {RK_LOG_DEBUG, 1}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        capture c = {.lock = PTHREAD_MUTEX_INITIALIZER};
        rk_log_set_handler(capture_fn, &c);
        assert_int_equal(rk_log_set_level(rows[i].level), 0);
        assert_int_equal(rk_log_get_level(), rows[i].level);
        assert_int_equal(open_echo_close(RK_BACKEND_CPU, NULL), 0); /* one info line */
        rk_log_set_handler(NULL, NULL);
        if (c.n != rows[i].want)
            fail_msg("level %s: %d messages, expected %d", rk_log_level_name(rows[i].level), c.n,
                     rows[i].want);
        if (c.n)
            assert_int_equal(c.level[0], RK_LOG_INFO);
    }
    rk_log_set_level(RK_LOG_OFF);
}

static void test_parse_and_names(void **state)
{
    (void)state;
    const struct {
        const char *s;
        rk_log_level l;
    } ok[] = {{"off", RK_LOG_OFF},   {"none", RK_LOG_OFF},  {"error", RK_LOG_ERROR},
              {"warn", RK_LOG_WARN}, {"WARNING", RK_LOG_WARN}, {"info", RK_LOG_INFO},
              {"Debug", RK_LOG_DEBUG}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        rk_log_level l = (rk_log_level)-1;
        assert_int_equal(rk_log_level_parse(ok[i].s, &l), 0);
        assert_int_equal(l, ok[i].l);
    }
    rk_log_level l = RK_LOG_INFO;
    assert_int_equal(rk_log_level_parse("verbose", &l), -RK_EINVAL);
    assert_int_equal(l, RK_LOG_INFO);
    assert_non_null(strstr(rk_last_detail(), "\"verbose\""));
    assert_int_equal(rk_log_level_parse("", &l), -RK_EINVAL);
    assert_int_equal(rk_log_level_parse(NULL, &l), -RK_EINVAL);
    assert_int_equal(rk_log_set_level((rk_log_level)5), -RK_EINVAL);
    assert_int_equal(rk_log_set_level((rk_log_level)-1), -RK_EINVAL);
    for (int i = RK_LOG_OFF; i <= RK_LOG_DEBUG; i++) {
        assert_int_equal(rk_log_level_parse(rk_log_level_name((rk_log_level)i), &l), 0);
        assert_int_equal(l, i);
    }
    assert_string_equal(rk_log_level_name((rk_log_level)9), "?");
}

/* ---- swapping handlers while other threads log ---- */

typedef struct tagged {
    atomic_int calls;
    atomic_int wrong_user; /* called with another handler's user pointer */
    atomic_int set_rc;     /* what rk_log_set_handler returned inside the handler */
} tagged;
static tagged tag_a, tag_b, tag_c;

static void tagged_fn(rk_log_level level, const char *msg, void *user)
{
    (void)level, (void)msg;
    tagged *t = user;
    atomic_fetch_add(&t->calls, 1);
    atomic_store(&t->set_rc, rk_log_set_handler(NULL, NULL)); /* must refuse, not deadlock */
}
static void tagged_fn_b(rk_log_level level, const char *msg, void *user)
{
    (void)level, (void)msg;
    if (user != &tag_b)
        atomic_fetch_add(&((tagged *)user)->wrong_user, 1);
    atomic_fetch_add(&tag_b.calls, 1);
}

static atomic_bool stop_loggers;
static void *logger(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_loggers))
        if (open_echo_close(RK_BACKEND_CPU, NULL))
            return (void *)1;
    return NULL;
}

static void test_swap_handlers_while_logging(void **state)
{
    (void)state;
    assert_int_equal(rk_log_set_handler(tagged_fn, &tag_a), 0);
    rk_log_set_level(RK_LOG_INFO);
    atomic_store(&stop_loggers, false);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, logger, NULL), 0);
    for (int i = 0; i < 300; i++) {
        assert_int_equal(rk_log_set_handler(tagged_fn, &tag_a), 0);
        usleep(100);
        assert_int_equal(rk_log_set_handler(tagged_fn_b, &tag_b), 0);
        usleep(100);
    }
    /* once set returns, the old handlers are never called again */
    assert_int_equal(rk_log_set_handler(tagged_fn, &tag_c), 0);
    int a = atomic_load(&tag_a.calls), b = atomic_load(&tag_b.calls);
    while (atomic_load(&tag_c.calls) < 20)
        usleep(1000);
    assert_int_equal(atomic_load(&tag_a.calls), a);
    assert_int_equal(atomic_load(&tag_b.calls), b);
    atomic_store(&stop_loggers, true);
    for (int i = 0; i < 2; i++) {
        void *ret;
        pthread_join(th[i], &ret);
        assert_null(ret);
    }
    rk_log_set_handler(NULL, NULL);
    rk_log_set_level(RK_LOG_OFF);
    assert_true(a > 0 && b > 0);
    assert_int_equal(atomic_load(&tag_b.wrong_user), 0);
    assert_int_equal(atomic_load(&tag_a.set_rc), -RK_EBUSY);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--child"))
        return child_main();
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0)
        return 1;
    self_path[n] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_silent_by_default),
        cmocka_unit_test(test_rk_log_env),
        cmocka_unit_test(test_handler_gets_backend_message),
        cmocka_unit_test(test_levels_filter),
        cmocka_unit_test(test_parse_and_names),
        cmocka_unit_test(test_swap_handlers_while_logging),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
