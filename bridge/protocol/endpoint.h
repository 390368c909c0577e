/* bridge/protocol/endpoint.h - the endpoints of the transports the
 * protocol names (PROTOCOL.md, "Transport": tcp://, ipc://, inproc://),
 * checked before ZeroMQ sees them, so that a malformed one is refused with
 * a sentence saying what is wrong instead of ZeroMQ's bare EINVAL. One
 * check for both sides: rk-bridge (--bind, --status-bind) and librkc
 * (rkc_connect, so rk-client and every C client). No ZeroMQ call: the
 * syntax only (whether a host resolves or a path can be created is found
 * out by binding or connecting). */
#ifndef RKB_ENDPOINT_H
#define RKB_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>

/* NULL when ep is well formed for a bind (bind: tcp://HOST:PORT with PORT
 * 0..65535 or a star, ipc://PATH, inproc://NAME) or for a connect
 * (tcp://HOST:PORT with PORT 1..65535, optionally SOURCE;HOST:PORT as
 * ZeroMQ allows, ipc://PATH, inproc://NAME). Otherwise why (a sentence
 * without the endpoint itself, e.g. "no transport: ... (tcp://localhost:5601?)"),
 * written to why (cap bytes) and returned. */
const char *rkb_endpoint_problem(const char *ep, bool bind, char *why, size_t cap);

#endif
