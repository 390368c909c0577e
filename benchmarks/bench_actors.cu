/* bench_actors.cu - the trivial user actor rk-bench gpu --module times
 * against the built-in echo (issue 10: a user actor's round trip within
 * 5 % of echo's): `copy` returns its one input, as echo does, but as a
 * user actor of a module built from one list (rk/gpu_actor.cuh), served
 * by the same ring kernel's user-actor path (staged, run by the warp,
 * its running mark written to host memory). */
#include <rk/gpu_actor.cuh>

#include <string.h>

static int copy_cpu(const void *in, size_t in_len, void *out, size_t cap, size_t *out_len, void *user)
{
    (void)user;
    size_t n = in_len < cap ? in_len : cap;
    memcpy(out, in, n);
    *out_len = n;
    return 0;
}

struct copy {
    static constexpr rk_actor_decl decl = {.name = "copy", .n_inputs = 1, .inputs = {"in"},
                                           .n_outputs = 1, .outputs = {"out"},
                                           .sizes = {RK_SIZE_OF_INPUT(0)}, .cpu = copy_cpu};
    __device__ static int run(const rk::gpu_ctx &c, const void *in, uint32_t in_len, void *out,
                              uint32_t cap, uint32_t *out_len)
    {
        const uint32_t n = in_len < cap ? in_len : cap;
        for (uint32_t i = c.rank; i < n; i += c.size)
            ((uint8_t *)out)[i] = ((const uint8_t *)in)[i];
        *out_len = n;
        return 0;
    }
};

RK_GPU_MODULE("bench_actors", copy);
