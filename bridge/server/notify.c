/* bridge/server/notify.c - systemd's readiness protocol (sd_notify(3)):
 * when systemd starts the bridge with Type=notify it sets $NOTIFY_SOCKET
 * to a datagram socket (a path, or '@' for the abstract namespace); the
 * bridge sends "READY=1" once it listens and "STOPPING=1" when a stop
 * signal arrives. Without $NOTIFY_SOCKET this does nothing. A failure is
 * logged and otherwise ignored: the bridge serves either way. */
#include "server.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void rkb_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !path[0])
        return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof sa.sun_path) {
        rkb_log(RKB_LOG_WARN, "NOTIFY_SOCKET=%s is not a socket path; not telling systemd", path);
        return;
    }
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = 0; /* abstract: the name is not NUL-terminated */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    if (fd < 0 || sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
        rkb_log(RKB_LOG_WARN, "telling systemd %s through %s: %s", state, path, strerror(errno));
    if (fd >= 0)
        close(fd);
}
