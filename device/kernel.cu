/* device/kernel.cu - the library's ring kernel: the template of kernel.cuh
 * with no user actors (echo, vadd, the test-only fault, the self-test NOP). */
#include "kernel.cuh"

extern "C" const rk_kernel_desc rk_builtin_kernel = rk::dev::make_desc<1024>("builtin");
