/* test_gpu_fault.c - in-process mode (isolation none): a GPU actor that
 * faults (illegal address) kills the context of THIS process, so every
 * pending and every later request fails with -RK_EDEVICE within 1 s, no
 * hang, and close returns: the documented trade-off of that mode. (A
 * context that faulted is dead for the whole process, so this is its own
 * program; test_gpu_recover.c is the default, isolated mode.) */
#include "gpu_common.h"

int main(void)
{
    gpu_require();
    rk_config c;
    rk_config_init(&c);
    c.backend = RK_BACKEND_CUDA;
    c.isolation = RK_ISOLATION_NONE;
    c.test_faults = 1;
    rk_runtime *rt = NULL;
    CHECK_RK(rk_runtime_open(&rt, &c), "open in-process cuda runtime");
    rk_actor *a;
    CHECK_RK(rk_actor_open(rt, &a), "actor");
    rk_reply r;
    int x = 42;
    CHECK_RK(rk_actor_call(a, RK_OP_ECHO, &x, sizeof x, 0, &r, 5000), "echo before");
    rk_reply_release(a, &r);

    double t0 = gpu_now_s();
    CHECK_RK(rk_actor_send(a, RK_OP_FAULT, &x, sizeof x, 0, NULL, 1000), "send fault");
    for (int i = 0; i < 8; i++)
        CHECK_RK(rk_actor_send(a, RK_OP_ECHO, &i, sizeof i, 0, NULL, 1000), "send after fault");
    int n_dev = 0, n = 0;
    for (;;) {
        int rc = rk_actor_recv(a, &r, 3000);
        if (rc == 0) {
            n++;
            if (r.status == -RK_EDEVICE)
                n_dev++;
            rk_reply_release(a, &r);
            continue;
        }
        CHECK(rc == -RK_EDEVICE || rc == -RK_EAGAIN, "recv: %s (%s)", rk_err_name(rc), rk_last_detail());
        if (rc == -RK_EAGAIN)
            break;
        if (rk_actor_inflight(a) == 0)
            break;
    }
    double dt = gpu_now_s() - t0;
    int h = rk_runtime_health(rt);
    printf("fault seen after %.1f ms: health %s, %d replies (%d with RK_EDEVICE)\n", dt * 1e3, rk_err_name(h), n, n_dev);
    CHECK(h == -RK_EDEVICE, "health %s", rk_err_name(h));
    CHECK(dt < 1.0, "device error took %.3f s", dt);
    int rc = rk_actor_send(a, RK_OP_ECHO, &x, sizeof x, 0, NULL, 100);
    CHECK(rc == -RK_EDEVICE, "send after the fault: %s", rk_err_name(rc));
    rk_actor_close(a);
    t0 = gpu_now_s();
    rk_runtime_close(rt);
    dt = gpu_now_s() - t0;
    printf("close after the fault: %.1f ms\n", dt * 1e3);
    CHECK(dt < 10, "close took %.1f s", dt);
    printf("PASS\n");
    return 0;
}
