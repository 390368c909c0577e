/* test_gpu_lock.c - the per-GPU lock's logic (runtime/src/gpu_lock.c):
 * one holder per GPU UUID; a second process is refused with a message that
 * names the holder's pid; the lock goes when its holder goes, however it
 * goes. The GPU machine checks the same through two runtimes on one GPU. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker.h"

/* In a child process: tries the lock, exits 0 (got it), 1 (refused with
 * the holder's pid named) or 2 (anything else). */
static int try_in_child(const char *uuid, pid_t holder)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = rk__gpu_lock(uuid, "Test GPU");
        if (fd >= 0)
            _exit(0);
        char want[32];
        snprintf(want, sizeof want, "process %d", (int)holder);
        _exit(fd == -RK_EBUSY && strstr(rk_last_detail(), want) && strstr(rk_last_detail(), "share_gpu") ? 1 : 2);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 3;
}

static void test_lock_names_holder(void **state)
{
    (void)state;
    char uuid[64];
    snprintf(uuid, sizeof uuid, "GPU-test-%d", (int)getpid());
    int fd = rk__gpu_lock(uuid, "Test GPU");
    assert_true(fd >= 0);
    assert_int_equal(try_in_child(uuid, getpid()), 1);
    /* this process cannot take it twice either (two runtimes, one GPU) */
    assert_int_equal(rk__gpu_lock(uuid, "Test GPU"), -RK_EBUSY);
    /* another GPU is another lock */
    char other[72];
    snprintf(other, sizeof other, "%s-other", uuid);
    assert_int_equal(try_in_child(other, 0), 0);
    close(fd);
    assert_int_equal(try_in_child(uuid, 0), 0);
}

static void test_lock_freed_by_death(void **state)
{
    (void)state;
    char uuid[64];
    snprintf(uuid, sizeof uuid, "GPU-test-death-%d", (int)getpid());
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = rk__gpu_lock(uuid, "Test GPU");
        char c = fd >= 0 ? 'y' : 'n';
        if (write(p[1], &c, 1) != 1)
            _exit(2);
        pause(); /* holds it until killed */
        _exit(0);
    }
    char c = 0;
    assert_int_equal(read(p[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    assert_int_equal(rk__gpu_lock(uuid, "Test GPU"), -RK_EBUSY);
    char want[32];
    snprintf(want, sizeof want, "process %d", (int)pid);
    assert_non_null(strstr(rk_last_detail(), want));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    int fd = rk__gpu_lock(uuid, "Test GPU");
    assert_true(fd >= 0);
    close(fd);
    close(p[0]);
    close(p[1]);
}

/* Refusals past the listen backlog (64) still name the holder: its
 * periodic pass (rk__gpu_lock_drain: the supervisor's tick, the in-process
 * watchdog) takes the connections they left. Until 2026-12 nobody took
 * them, and from the 66th on the refusal said "another process". */
static void test_lock_names_holder_many_times(void **state)
{
    (void)state;
    char uuid[64];
    snprintf(uuid, sizeof uuid, "GPU-test-many-%d", (int)getpid());
    int fd = rk__gpu_lock(uuid, "Test GPU");
    assert_true(fd >= 0);
    char want[32];
    snprintf(want, sizeof want, "process %d", (int)getpid());
    for (int i = 0; i < 200; i++) {
        assert_int_equal(rk__gpu_lock(uuid, "Test GPU"), -RK_EBUSY);
        if (!strstr(rk_last_detail(), want))
            fail_msg("refusal %d: %s", i, rk_last_detail());
        if (i % 50 == 49)
            rk__gpu_lock_drain(fd);
    }
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_names_holder),
        cmocka_unit_test(test_lock_freed_by_death),
        cmocka_unit_test(test_lock_names_holder_many_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
