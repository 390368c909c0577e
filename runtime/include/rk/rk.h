/* rk/rk.h - ringkernel: messages between host actors and GPU actors that
 * live in one persistent CUDA kernel, with a CPU backend where no GPU is.
 *
 * Start with rk/runtime.h (open a runtime, open actors, send/recv/call);
 * rk/ring.h is the lock-free ring underneath, usable on its own; rk/msg.h
 * is the message format the rings carry; rk/error.h the error codes;
 * rk/log.h where librk's few messages go (nowhere unless asked);
 * rk/version.h the version (rk_version(), RK_VERSION_*). */
#ifndef RK_RK_H
#define RK_RK_H

#include "rk/error.h"
#include "rk/log.h"
#include "rk/module.h"
#include "rk/msg.h"
#include "rk/ring.h"
#include "rk/runtime.h"
#include "rk/version.h"

#endif
