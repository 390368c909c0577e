/* mod_slow.c - a CPU actor module for tests/test_modules.c: `slow` sleeps
 * for the milliseconds its one input field names, then answers them back:
 * a request that is surely running when its worker is killed. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <rk/module.h>

static int slow_cpu(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    rk_field f[1];
    uint32_t ms;
    if (rk_fields_parse(in, in_len, 1, 0, f) != 0 || f[0].len != 4 || cap < 4)
        return -RK_EPROTO;
    memcpy(&ms, f[0].data, 4);
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    memcpy(out, &ms, 4);
    *out_len = 4;
    return 0;
}

static const rk_actor_decl actors[] = {
    {.name = "slow", .n_inputs = 1, .inputs = {"ms"}, .n_outputs = 1, .outputs = {"ms"},
     .sizes = {RK_SIZE_FIXED(4)}, .cpu = slow_cpu},
};
RK_MODULE_EXPORT("slow", actors, NULL)
