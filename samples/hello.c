/* hello.c - the smallest ringkernel host program: open a runtime (GPU if
 * there is a usable one, else CPU), send an echo and a vadd, print the
 * replies and the round-trip time.
 *
 *   cc hello.c $(pkg-config --cflags --libs rk) -o hello && ./hello */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rk/rk.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(void)
{
    rk_runtime *rt;
    int rc = rk_runtime_open(&rt, NULL); /* defaults: backend auto */
    if (rc) {
        fprintf(stderr, "rk_runtime_open: %s: %s\n", rk_strerror(rc), rk_last_detail());
        return 1;
    }
    rk_info info;
    rk_runtime_info(rt, &info);
    printf("backend: %s (%s)\n", info.backend_name, info.why);

    rk_actor *a;
    if ((rc = rk_actor_open(rt, &a))) {
        fprintf(stderr, "rk_actor_open: %s\n", rk_last_detail());
        return 1;
    }

    /* echo: the reply's bytes are borrowed until rk_reply_release */
    const char msg[] = "hello, ring kernel";
    rk_reply r;
    double t0 = now_us();
    rc = rk_actor_call(a, RK_OP_ECHO, msg, sizeof msg, 0, &r, 1000);
    double t1 = now_us();
    if (rc || r.status) {
        fprintf(stderr, "echo: %s\n", rc ? rk_last_detail() : rk_strerror(r.status));
        return 1;
    }
    printf("echo: \"%s\" in %.1f us\n", (const char *)r.data, t1 - t0);
    rk_reply_release(a, &r);

    /* vadd: the payload is a || b, the reply is c = a + b */
    float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40};
    rk_iov iov[2] = {{x, sizeof x}, {y, sizeof y}};
    uint64_t id;
    if ((rc = rk_actor_sendv(a, RK_OP_VADD, iov, 2, 0, &id, 1000)) ||
        (rc = rk_actor_recv(a, &r, 1000)) || r.status) {
        fprintf(stderr, "vadd: %s\n", rc ? rk_last_detail() : rk_strerror(r.status));
        return 1;
    }
    const float *c = r.data;
    printf("vadd: [%g %g %g %g]\n", c[0], c[1], c[2], c[3]);
    rk_reply_release(a, &r);

    /* a short latency run */
    enum { N = 10000 };
    t0 = now_us();
    for (int i = 0; i < N; i++) {
        if (rk_actor_call(a, RK_OP_ECHO, msg, 64 < sizeof msg ? 64 : sizeof msg, 0, &r, 1000))
            return 1;
        rk_reply_release(a, &r);
    }
    printf("%d echo round trips: %.2f us mean\n", N, (now_us() - t0) / N);
    rk_runtime_close(rt);
    return 0;
}
