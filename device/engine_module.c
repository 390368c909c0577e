/* engine_module.c - the one symbol of rk-cuda.so, the CUDA engine as a
 * module librk loads on demand for the in-process mode (engine.h). */
#include "engine.h"

__attribute__((visibility("default"))) const rk__engine_api *rk_cuda_engine(void) { return &rk__engine_v1; }
