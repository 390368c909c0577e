/* tests/cpu_common.h - what the CPU-backend tests share: a runtime on the
 * CPU backend, in the mode RK_TEST_ISOLATION asks for ("process": a
 * worker process; the isolation suite runs the same tests so). Include
 * after <cmocka.h>. */
#ifndef RK_TESTS_CPU_COMMON_H
#define RK_TESTS_CPU_COMMON_H

#include <stdlib.h>
#include <string.h>

#include "rk/rk.h"

/* Opens a runtime of config c on the CPU backend; fails the test when it
 * cannot. */
static inline rk_runtime *test_open_cpu(rk_config *c)
{
    c->backend = RK_BACKEND_CPU;
    const char *iso = getenv("RK_TEST_ISOLATION");
    if (iso && !strcmp(iso, "process"))
        c->isolation = RK_ISOLATION_PROCESS;
    rk_runtime *rt = NULL;
    int rc = rk_runtime_open(&rt, c);
    if (rc)
        fail_msg("rk_runtime_open: %s: %s", rk_err_name(rc), rk_last_detail());
    return rt;
}

#endif
