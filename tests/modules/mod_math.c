/* mod_math.c - a CPU actor module for tests/test_modules.c: table-layout
 * inputs (saxpy), two outputs (minmax), state across messages (count), an
 * actor's own error (-RK_EACTOR), and a GPU-only actor whose kernel
 * descriptor is a stand-in (never launched: the tests run on the CPU), and
 * a reply twice its request (twice). */
#include <stdio.h>
#include <string.h>

#include <rk/module.h>

#include "kernel_desc.h"

static int fail(void *out, size_t cap, size_t *out_len, const char *why)
{
    size_t n = strlen(why) < cap ? strlen(why) : cap;
    memcpy(out, why, n);
    *out_len = n;
    return -RK_EACTOR;
}

/* z = a * x + y (float32) */
static int saxpy_cpu(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    rk_field f[3];
    if (rk_fields_parse(in, in_len, 3, 0, f) != 0)
        return -RK_EPROTO;
    if (f[0].len != 4)
        return fail(out, cap, out_len, "a must be one float32");
    if (f[1].len != f[2].len || f[1].len % 4)
        return fail(out, cap, out_len, "x and y must be float32 vectors of one length");
    if (f[1].len > cap)
        return -RK_EMSGSIZE;
    float a, x, y;
    memcpy(&a, f[0].data, 4);
    for (size_t i = 0; i < f[1].len / 4; i++) {
        memcpy(&x, (const char *)f[1].data + 4 * i, 4);
        memcpy(&y, (const char *)f[2].data + 4 * i, 4);
        float z = a * x + y;
        memcpy((char *)out + 4 * i, &z, 4);
    }
    *out_len = f[1].len;
    return 0;
}

/* the smallest and largest byte, as two outputs */
static int minmax_cpu(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    const unsigned char *b = in;
    unsigned char lo = 255, hi = 0;
    for (size_t i = 0; i < in_len; i++) {
        lo = b[i] < lo ? b[i] : lo;
        hi = b[i] > hi ? b[i] : hi;
    }
    size_t lens[2] = {1, 1};
    void *at[2];
    size_t total = rk_fields_layout(out, cap, 2, lens, at);
    if (!total)
        return -RK_EMSGSIZE;
    *(unsigned char *)at[0] = lo;
    *(unsigned char *)at[1] = hi;
    *out_len = total;
    return 0;
}

/* a running count per key byte: state that lives across messages */
static unsigned long long counts[256];
static int count_cpu(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    (void)cap;
    if (in_len != 1)
        return fail(out, cap, out_len, "key must be one byte");
    unsigned long long c = ++counts[*(const unsigned char *)in];
    memcpy(out, &c, 8);
    *out_len = 8;
    return 0;
}

/* every byte twice: a reply larger than its request */
static int twice_cpu(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    if (2 * in_len > cap)
        return -RK_EMSGSIZE;
    for (size_t i = 0; i < in_len; i++)
        ((unsigned char *)out)[2 * i] = ((unsigned char *)out)[2 * i + 1] = ((const unsigned char *)in)[i];
    *out_len = 2 * in_len;
    return 0;
}

static const rk_kernel_desc stand_in = {.magic = RK_KDESC_MAGIC, .version = RK_KDESC_VERSION,
                                        .name = "stand-in", .n_types = 1, .types = {RK_OP_USER + 3}};

static const rk_actor_decl actors[] = {
    {.name = "saxpy", .n_inputs = 3, .inputs = {"a", "x", "y"}, .n_outputs = 1, .outputs = {"z"},
     .sizes = {RK_SIZE_OF_INPUT(1)}, .cpu = saxpy_cpu},
    {.name = "minmax", .n_inputs = 1, .inputs = {"data"}, .n_outputs = 2, .outputs = {"min", "max"},
     .sizes = {RK_SIZE_FIXED(1), RK_SIZE_FIXED(1)}, .cpu = minmax_cpu},
    {.name = "count", .n_inputs = 1, .inputs = {"key"}, .n_outputs = 1, .outputs = {"total"},
     .sizes = {RK_SIZE_FIXED(8)}, .cpu = count_cpu},
    {.name = "gpu_only", .flags = RK_ACTOR_GPU, .n_inputs = 1, .inputs = {"data"}, .n_outputs = 1,
     .outputs = {"data"}, .sizes = {RK_SIZE_OF_INPUT(0)}},
    {.name = "twice", .n_inputs = 1, .inputs = {"data"}, .n_outputs = 1, .outputs = {"data"},
     .sizes = {{0, 2, 1, 0}}, .cpu = twice_cpu},
};
RK_MODULE_EXPORT("math", actors, &stand_in)
