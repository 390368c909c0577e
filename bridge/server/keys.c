/* bridge/server/keys.c - CURVE key files: one Z85 key (40 characters) on
 * the first line. A secret key file that group or others may access is
 * refused (as ssh does with private keys) unless the operator says
 * --allow-insecure-key. --gen-keys creates its files with O_EXCL and
 * O_NOFOLLOW, the secret one at 0600 whatever the umask, and replaces
 * existing files only with --force (and then never through a symlink). */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rkb_key_read(const char *path, char z85[41], bool secret, bool allow_insecure)
{
    /* O_NONBLOCK: a FIFO named *.pub would block the start until a writer came */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "rk-bridge: cannot open key file %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "rk-bridge: key file %s is not a regular file (%s)\n", path,
                S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
        close(fd);
        return -1;
    }
    if (secret && (st.st_mode & 077)) {
        if (!allow_insecure) {
            fprintf(stderr, "rk-bridge: secret key file %s has mode %04o: group or others may "
                    "read it; chmod 600 %s (or accept that with --allow-insecure-key)\n",
                    path, (unsigned)(st.st_mode & 07777), path);
            close(fd);
            return -1;
        }
        rkb_log(RKB_LOG_WARN, "secret key file %s has mode %04o: group or others may read it "
                "(--allow-insecure-key)", path, (unsigned)(st.st_mode & 07777));
    }
    char line[256] = "";
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    line[n > 0 ? n : 0] = 0;
    uint8_t bin[32];
    if (strcspn(line, " \t\r\n") == 40) {
        memcpy(z85, line, 40);
        z85[40] = 0;
        if (zmq_z85_decode(bin, z85))
            return 0;
    }
    fprintf(stderr, "rk-bridge: key file %s does not start with a 40-character Z85 key\n", path);
    return -1;
}

/* Creates path for writing: never through a symlink, never over an
 * existing file unless force (which removes what is there first: a
 * symlink itself, not its target). */
static int rkb__create(const char *path, mode_t mode, bool force)
{
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!force) {
            fprintf(stderr, "rk-bridge: %s exists; not replacing it (--force replaces it)\n", path);
            return -1;
        }
        if (S_ISDIR(st.st_mode) || unlink(path) != 0) {
            fprintf(stderr, "rk-bridge: cannot replace %s: %s\n", path,
                    S_ISDIR(st.st_mode) ? "a directory" : strerror(errno));
            return -1;
        }
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        fprintf(stderr, "rk-bridge: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    /* the mode asked for, whatever the umask took away */
    if (fchmod(fd, mode) != 0) {
        fprintf(stderr, "rk-bridge: chmod %04o %s: %s\n", (unsigned)mode, path, strerror(errno));
        close(fd);
        unlink(path);
        return -1;
    }
    return fd;
}

static int rkb__write_key(int fd, const char *path, const char *z85)
{
    if (dprintf(fd, "%s\n", z85) < 0 || fsync(fd) != 0 || close(fd) != 0) {
        fprintf(stderr, "rk-bridge: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int rkb_keys_generate(const char *prefix, bool force)
{
    char pub[41], sec[41], kpath[4096], ppath[4096];
    if (zmq_curve_keypair(pub, sec) != 0) {
        fprintf(stderr, "rk-bridge: zmq_curve_keypair failed: %s (libzmq without CURVE?)\n",
                zmq_strerror(errno));
        return RKB_EXIT_FAIL;
    }
    if ((size_t)snprintf(kpath, sizeof kpath, "%s.key", prefix) >= sizeof kpath ||
        (size_t)snprintf(ppath, sizeof ppath, "%s.pub", prefix) >= sizeof ppath) {
        fprintf(stderr, "rk-bridge: --gen-keys %s: the name is too long\n", prefix);
        return RKB_EXIT_USAGE;
    }
    int kfd = rkb__create(kpath, 0600, force);
    if (kfd < 0)
        return RKB_EXIT_FAIL;
    int pfd = rkb__create(ppath, 0644, force);
    if (pfd < 0) {
        close(kfd);
        unlink(kpath);
        return RKB_EXIT_FAIL;
    }
    int rc = rkb__write_key(kfd, kpath, sec) | rkb__write_key(pfd, ppath, pub);
    explicit_bzero(sec, sizeof sec);
    if (rc) {
        unlink(kpath);
        unlink(ppath);
        return RKB_EXIT_FAIL;
    }
    printf("wrote %s (secret, mode 0600) and %s (public: %s)\n", kpath, ppath, pub);
    return RKB_EXIT_OK;
}
