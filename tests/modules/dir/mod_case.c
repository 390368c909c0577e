/* mod_case.c - two small CPU modules for the directory test of
 * tests/test_modules.c: built as mod_a.so ("upper") and, with -DLOWER,
 * mod_b.so ("lower"). */
#include <ctype.h>

#include <rk/module.h>

static int change_case(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    if (in_len > cap)
        return -RK_EMSGSIZE;
    for (size_t i = 0; i < in_len; i++) {
        int c = ((const unsigned char *)in)[i];
#ifdef LOWER
        ((unsigned char *)out)[i] = (unsigned char)tolower(c);
#else
        ((unsigned char *)out)[i] = (unsigned char)toupper(c);
#endif
    }
    *out_len = in_len;
    return 0;
}

static const rk_actor_decl actors[] = {
#ifdef LOWER
    {.name = "lower",
#else
    {.name = "upper",
#endif
     .n_inputs = 1, .inputs = {"text"}, .n_outputs = 1, .outputs = {"text"}, .sizes = {RK_SIZE_OF_INPUT(0)},
     .cpu = change_case},
};
RK_MODULE_EXPORT("case", actors, NULL)
