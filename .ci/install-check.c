/* install-check.c - built by .ci/install-check.sh against an installed
 * librk (pkg-config, dynamic and static): the headers' version is the
 * library's, and a CPU runtime answers an echo. Prints exactly one line
 * on stdout and nothing else: the check compares both streams. */
#include <stdio.h>
#include <string.h>

#include <rk/rk.h>

int main(void)
{
    if (strcmp(rk_version(), RK_VERSION_STRING) || rk_version_number() != RK_VERSION_NUMBER) {
        printf("version mismatch: headers %s, library %s\n", RK_VERSION_STRING, rk_version());
        return 1;
    }
    rk_config cfg;
    rk_config_init(&cfg);
    cfg.backend = RK_BACKEND_CPU;
    cfg.arena_size = 1 << 20;
    cfg.max_payload = 1 << 19;
    rk_runtime *rt;
    rk_actor *a;
    rk_reply r;
    int rc = rk_runtime_open(&rt, &cfg);
    if (rc || (rc = rk_actor_open(rt, &a)) ||
        (rc = rk_actor_call(a, RK_OP_ECHO, "ping", 4, 0, &r, 5000))) {
        printf("failed: %s: %s\n", rk_err_name(rc), rk_last_detail());
        return 1;
    }
    int same = r.status == 0 && r.len == 4 && !memcmp(r.data, "ping", 4);
    rk_reply_release(a, &r);
    rk_runtime_close(rt);
    printf("%s librk %s\n", same ? "ok" : "wrong echo from", rk_version());
    return same ? 0 : 1;
}
