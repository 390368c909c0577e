/* configs_actors.h - the message types of gpu_configs' user actors
 * (configs_actors.cu on the GPU, their CPU twins in test_gpu_configs.c). */
#ifndef RK_TESTS_CONFIGS_ACTORS_H
#define RK_TESTS_CONFIGS_ACTORS_H

#include "rk/msg.h"

#define CONFIGS_WIDEN (RK_OP_USER + 40)  /* reply: the request k = 1 + in[0] % 8 times, copy j XOR j */
#define CONFIGS_SHRINK (RK_OP_USER + 41) /* reply: byte 8j of the request, plus one */

#endif
