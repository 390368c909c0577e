/* rk/rk.h - ringkernel: messages between host actors and GPU actors that
 * live in one persistent CUDA kernel, with a CPU backend where no GPU is.
 *
 * Start with rk/runtime.h (open a runtime, open actors, send/recv/call);
 * rk/ring.h is the lock-free ring underneath, usable on its own; rk/msg.h
 * is the message format the rings carry; rk/error.h the error codes. */
#ifndef RK_RK_H
#define RK_RK_H

#include "rk/error.h"
#include "rk/msg.h"
#include "rk/ring.h"
#include "rk/runtime.h"

#define RK_VERSION_MAJOR 0
#define RK_VERSION_MINOR 1
#define RK_VERSION_PATCH 0

#endif
