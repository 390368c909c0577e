/* tests/bridge/main.c - the rk-bridge test program (suite 'bridge'):
 *
 *   test_bridge PATH-TO-rk-bridge GROUP [EXTRA rk-bridge OPTIONS...]
 *
 * runs one group (harness.h lists them); rk-client is looked for next to
 * rk-bridge. Returns 0 (pass), 1 (fail) or 77 (skip: a gpu_ group without
 * a GPU). */
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness.h"

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        struct CMUnitTest t;
    } all[] = {
        {"errors", cmocka_unit_test(test_error_rows)},
        {"envelopes", cmocka_unit_test(test_envelopes)},
        {"pipeline", cmocka_unit_test(test_pipeline)},
        {"launch", cmocka_unit_test(test_launch_status)},
        {"busy", cmocka_unit_test(test_busy)},
        {"shutdown", cmocka_unit_test(test_shutdown)},
        {"curve", cmocka_unit_test(test_curve)},
        {"flood", cmocka_unit_test(test_flood)},
        {"startup", cmocka_unit_test(test_startup)},
        {"large", cmocka_unit_test(test_large)},
        {"cap", cmocka_unit_test(test_cap)},
        {"stall", cmocka_unit_test(test_stall)},
        {"stall_bytes", cmocka_unit_test(test_stall_bytes)},
        {"stall_entries", cmocka_unit_test(test_stall_entries)},
        {"tiny_queue", cmocka_unit_test(test_tiny_queue)},
        {"proxies", cmocka_unit_test(test_proxies)},
        {"sigterm", cmocka_unit_test(test_sigterm)},
        {"drain_deadline", cmocka_unit_test(test_drain_deadline)},
        {"sigterm_idle", cmocka_unit_test(test_sigterm_idle)},
        {"sighup_stopping", cmocka_unit_test(test_sighup_stopping)},
        {"logflood", cmocka_unit_test(test_logflood)},
        {"counters", cmocka_unit_test(test_counters)},
        {"ipc", cmocka_unit_test(test_ipc)},
        {"remote", cmocka_unit_test(test_remote)},
        {"keys", cmocka_unit_test(test_keys)},
        {"fdlimit", cmocka_unit_test(test_fdlimit)},
        {"broker", cmocka_unit_test(test_broker)},
        {"devices", cmocka_unit_test(test_devices)},
        {"admin", cmocka_unit_test(test_admin)},
        {"cli", cmocka_unit_test(test_cli)},
        {"client", cmocka_unit_test(test_client)},
        {"notify", cmocka_unit_test(test_notify)},
        {"status_stall", cmocka_unit_test(test_status_stall)},
        {"status_ops", cmocka_unit_test(test_status_ops)},
        {"status_startup", cmocka_unit_test(test_status_startup)},
        {"status_curve", cmocka_unit_test(test_status_curve)},
        {"worker_kill", cmocka_unit_test(test_worker_kill)},
        {"worker_faults", cmocka_unit_test(test_worker_faults)},
        {"gpu_faults", cmocka_unit_test(test_worker_gpu_faults)},
        {"gpu_crash_actor", cmocka_unit_test(test_worker_gpu_crash_actor)},
        {"gpu_launch", cmocka_unit_test(test_worker_gpu_launch)},
    };
    if (argc < 3) {
        fprintf(stderr, "usage: %s PATH-TO-rk-bridge GROUP [EXTRA rk-bridge OPTIONS...]\n", argv[0]);
        return 2;
    }
    g_bridge_path = argv[1];
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", argv[1]);
    snprintf(g_client_path, sizeof g_client_path, "%s/rk-client", dirname(dir));
    for (int i = 3; i < argc && g_n_extra < 16; i++)
        g_extra[g_n_extra++] = argv[i];
    signal(SIGPIPE, SIG_IGN);
    /* the fdlimit group opens hundreds of sockets */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* the GPU groups (suite gpu) skip where no NVIDIA driver is */
    if (!strncmp(argv[2], "gpu_", 4) && access("/dev/nvidiactl", F_OK) != 0) {
        fprintf(stderr, "skip: group %s needs a GPU (no /dev/nvidiactl)\n", argv[2]);
        return 77;
    }
    int rc = 2;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (!strcmp(argv[2], all[i].name))
            rc = _cmocka_run_group_tests(argv[2], &all[i].t, 1, NULL, bridge_teardown);
    if (rc == 2)
        fprintf(stderr, "no test group %s\n", argv[2]);
    free(g_last_err);
    return rc ? 1 : 0;
}
