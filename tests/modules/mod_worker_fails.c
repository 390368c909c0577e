/* mod_worker_fails.c - a CPU actor module for tests/test_reload.c: `fragile`
 * answers its input back, but a worker process that loads it while
 * RK_TEST_WORKER_FAILS is set exits at once (its constructor), as a module
 * that crashes on load would: the reload that brings it must go back to
 * the previous modules. In the program itself it loads fine, so librk's
 * checks pass and only the worker's start fails. */
#include <errno.h> /* program_invocation_short_name (_GNU_SOURCE: the build's) */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rk/module.h>

__attribute__((constructor)) static void fail_in_worker(void)
{
    if (getenv("RK_TEST_WORKER_FAILS") && strcmp(program_invocation_short_name, "rk-worker") == 0)
        _exit(7);
}

static int fragile_cpu(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    if (in_len > cap)
        return -RK_EMSGSIZE;
    memcpy(out, in, in_len);
    *out_len = in_len;
    return 0;
}

static const rk_actor_decl actors[] = {
    {.name = "fragile", .n_inputs = 1, .inputs = {"data"}, .n_outputs = 1, .outputs = {"data"},
     .sizes = {RK_SIZE_OF_INPUT(0)}, .cpu = fragile_cpu},
};
RK_MODULE_EXPORT("worker_fails", actors, NULL)
