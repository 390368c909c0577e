/* bridge/protocol/endpoint.c - what is wrong with an endpoint, before
 * ZeroMQ answers EINVAL for it (endpoint.h). */
#include "endpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* HOST:PORT after tcp:// (a connect may name a source first: SRC;HOST:PORT). */
static const char *rkb__tcp(const char *a, bool bind, char *why, size_t cap)
{
    const char *form = bind ? "HOST:PORT or HOST:*, e.g. tcp://127.0.0.1:5555"
                            : "HOST:PORT, e.g. tcp://127.0.0.1:5555";
    const char *semi = bind ? NULL : strrchr(a, ';');
    if (semi)
        a = semi + 1;
    const char *colon = strrchr(a, ':'), *bracket = strrchr(a, ']'); /* [::1]:5555 */
    if (!colon || (bracket && colon < bracket)) {
        snprintf(why, cap, "no port: tcp:// needs %s", form);
        return why;
    }
    if (colon == a) {
        snprintf(why, cap, "no host: tcp:// needs %s%s", form, bind ? " (tcp://*:PORT: every interface)" : "");
        return why;
    }
    if (!bind && colon - a == 1 && a[0] == '*') {
        snprintf(why, cap, "host * (every interface) is for binding: connect to a host, e.g. tcp://127.0.0.1%s",
                 colon);
        return why;
    }
    const char *port = colon + 1;
    if (bind && !strcmp(port, "*"))
        return NULL;
    size_t n = strspn(port, "0123456789");
    long v = n && n <= 5 && !port[n] ? strtol(port, NULL, 10) : -1;
    if (v < (bind ? 0 : 1) || v > 65535) {
        snprintf(why, cap, "port \"%.16s\" is not a number from %d to 65535%s", port, bind ? 0 : 1,
                 bind ? " or *" : "");
        return why;
    }
    return NULL;
}

const char *rkb_endpoint_problem(const char *ep, bool bind, char *why, size_t cap)
{
    if (!ep || !*ep) {
        snprintf(why, cap, "an empty endpoint: it is tcp://HOST:PORT, ipc://PATH or inproc://NAME");
        return why;
    }
    const char *sep = strstr(ep, "://");
    if (!sep) {
        /* localhost:5601: the usual slip, a tcp address without its scheme */
        bool hostport = strchr(ep, ':') && !strchr(ep, '/');
        snprintf(why, cap, "no transport: an endpoint is tcp://HOST:PORT, ipc://PATH or inproc://NAME%s%.200s%s",
                 hostport ? " (tcp://" : "", hostport ? ep : "", hostport ? "?)" : "");
        return why;
    }
    if (!strncmp(ep, "tcp://", 6))
        return rkb__tcp(ep + 6, bind, why, cap);
    if (!strcmp(ep, "ipc://")) {
        snprintf(why, cap, "no path: ipc:// needs a socket file's path, e.g. ipc:///tmp/rk-bridge.sock");
        return why;
    }
    if (!strcmp(ep, "inproc://")) {
        snprintf(why, cap, "no name: inproc:// needs a name, e.g. inproc://bridge");
        return why;
    }
    if (!strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9))
        return NULL;
    snprintf(why, cap, "unknown transport %.*s:// (the bridge serves tcp://, ipc:// and inproc://)",
             (int)(sep - ep < 32 ? sep - ep : 32), ep);
    return why;
}
