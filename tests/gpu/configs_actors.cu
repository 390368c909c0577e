/* configs_actors.cu - the user actors gpu_configs serves on the GPU (their
 * CPU twins, the reference, are in test_gpu_configs.c): widen, whose reply
 * is up to 8 x its request (a reply longer than a warp's lines from a
 * request that fits them), and shrink, whose reply is an eighth of it. */
#include "actor.cuh"
#include "configs_actors.h"

struct configs_widen {
    static constexpr uint16_t type = CONFIGS_WIDEN;
    __device__ static int run(const rk::gpu_ctx &c, const void *in, uint32_t in_len, void *out, uint32_t out_cap,
                              uint32_t *out_len)
    {
        const uint8_t *i = (const uint8_t *)in;
        if (in_len == 0)
            return -RK_EINVAL;
        const uint32_t n = (1u + i[0] % 8u) * in_len;
        if (n > out_cap)
            return -RK_EMSGSIZE;
        for (uint32_t j = c.rank; j < n; j += c.size)
            ((uint8_t *)out)[j] = (uint8_t)(i[j % in_len] ^ (j / in_len));
        *out_len = n;
        return 0;
    }
};

struct configs_shrink {
    static constexpr uint16_t type = CONFIGS_SHRINK;
    __device__ static int run(const rk::gpu_ctx &c, const void *in, uint32_t in_len, void *out, uint32_t out_cap,
                              uint32_t *out_len)
    {
        const uint32_t n = (in_len + 7u) / 8u;
        if (n > out_cap)
            return -RK_EMSGSIZE;
        for (uint32_t j = c.rank; j < n; j += c.size)
            ((uint8_t *)out)[j] = (uint8_t)(((const uint8_t *)in)[8 * j] + 1);
        *out_len = n;
        return 0;
    }
};

RK_GPU_ACTOR_HANDLE(configs_actors, configs_widen, configs_shrink);
