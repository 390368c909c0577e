/* mod_bad.c - broken modules for tests/test_modules.c, one per BAD_*
 * definition (tests/meson.build builds each): every way a module can be
 * refused at load (and BAD_HUGE_SIZE: a size rule refused at send). */
#include <rk/module.h>

#if defined(BAD_NO_SYMBOL)
int not_a_module = 1;
#else
static int ok_cpu(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)in, (void)in_len, (void)out, (void)cap, (void)user;
    *out_len = 0;
    return 0;
}

#if defined(BAD_LONG_NAME)
/* a name of 1 MiB - 1 bytes: more than any message holds */
static char long_name[1 << 20];
__attribute__((constructor)) static void fill_long_name(void) { memset(long_name, 'a', sizeof long_name - 1); }
#endif

static const rk_actor_decl actors[] = {
#if defined(BAD_BUILTIN_NAME)
    {.name = "echo",
#elif defined(BAD_ADMIN_NAME)
    {.name = "launch",
#elif defined(BAD_FIELD_KEY)
    {.name = "keyed", .n_inputs = 1, .inputs = {"id"}, .n_outputs = 1, .outputs = {"r"}, .cpu = ok_cpu},
    {.name = "unused",
#elif defined(BAD_NO_HANDLER)
    {.name = "idle", .n_inputs = 1, .inputs = {"x"}, .n_outputs = 1, .outputs = {"r"},
     .sizes = {RK_SIZE_OF_INPUT(0)}},
    {.name = "unused",
#elif defined(BAD_GPU_NO_KERNEL)
    {.name = "gpu_wish", .flags = RK_ACTOR_GPU,
#elif defined(BAD_LONG_NAME)
    {.name = long_name,
#elif defined(BAD_HUGE_SIZE)
    /* loads, but its rule asks for more than 2^64 bytes: a request is
     * refused at send (the sum must not wrap to a small reply) */
    {.name = "huge", .n_inputs = 1, .inputs = {"x"}, .n_outputs = 1, .outputs = {"r"},
     .sizes = {{0, 1, 1, UINT64_MAX}}, .cpu = ok_cpu},
    {.name = "huge_sum", .n_inputs = 1, .inputs = {"x"}, .n_outputs = 2, .outputs = {"r", "s"},
     .sizes = {RK_SIZE_FIXED(1ull << 63), RK_SIZE_FIXED(1ull << 63)}, .cpu = ok_cpu},
    {.name = "unused",
#else /* BAD_DUPLICATE, BAD_ABI and BAD_MANY_ACTORS: a valid actor */
    {.name = "saxpy",
#endif
     .n_inputs = 1, .inputs = {"x"}, .n_outputs = 1, .outputs = {"r"}, .sizes = {RK_SIZE_OF_INPUT(0)},
     .cpu = ok_cpu},
};
#if defined(BAD_ABI)
__attribute__((visibility("default"))) const rk_module *rk_module_v1(void)
{
    static const rk_module m = {RK_MODULE_ABI + 98, 1, "future", actors, NULL};
    return &m;
}
#elif defined(BAD_MANY_ACTORS)
/* an actor count no message type space holds (a garbage count): refused
 * by its value before any actor past the array is read */
__attribute__((visibility("default"))) const rk_module *rk_module_v1(void)
{
    static const rk_module m = {RK_MODULE_ABI, 0xffffffffu, "many", actors, NULL};
    return &m;
}
#else
RK_MODULE_EXPORT("bad", actors, NULL)
#endif
#endif
