/* region.c - the shared region: [header | H2D ring | D2H rings | arena] in
 * one memfd mapping (runtime/abi/rk_abi.h), created by librk and mapped
 * again by a worker process from the inherited fd. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "barrier.h"
#include "internal.h"

static size_t rk__page_up(size_t x) { return (x + 4095) & ~(size_t)4095; }

static void rk__view_set(rk__view *v, void *p, size_t size)
{
    rk__region *reg = p;
    v->hdr = reg;
    v->size = size;
    v->h2d = (rk_ring *)((char *)p + reg->h2d_off);
    v->n_d2h = reg->d2h_rings;
    for (uint32_t i = 0; i < v->n_d2h; i++)
        v->d2h[i] = (rk_ring *)((char *)p + reg->d2h_off + i * reg->d2h_stride);
    v->arena = (uint8_t *)p + reg->arena_off;
    v->arena_size = reg->arena_size;
}

int rk__region_create(const rk_config *c, int *fdp, rk__view *v)
{
    memset(v, 0, sizeof *v);
    size_t ring = rk_ring_memsize(c->ring_slots, c->slot_size);
    size_t h2d_off = rk__page_up(sizeof(rk__region));
    size_t d2h_off = h2d_off + rk__page_up(ring);
    const uint32_t n_d2h = c->reply_rings; /* resolved and checked by rk_runtime_open */
    size_t arena_off = d2h_off + n_d2h * rk__page_up(ring);
    /* rounded up to pages, a larger arena wraps the region's size to a
     * small one that its allocator then writes past */
    const size_t arena_max = (SIZE_MAX - arena_off) & ~(size_t)4095;
    if (c->arena_size > arena_max)
        return rk__fail(RK_EINVAL, "arena_size %zu B exceeds the %zu B the region can hold beside its rings",
                        c->arena_size, arena_max);
    size_t size = arena_off + rk__page_up(c->arena_size);

    /* a memfd, not anonymous memory: a worker process maps the same pages
     * from the fd it inherits, and can fault without taking us down */
    int fd = memfd_create("rk-region", MFD_CLOEXEC);
    if (fd < 0)
        return rk__fail(RK_ESYS, "memfd_create for the %zu B shared region failed: %s", size,
                        strerror(errno));
    if (ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        return rk__fail(RK_ESYS, "sizing the shared region to %zu B failed: %s", size, strerror(e));
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return rk__fail(RK_ENOMEM, "mapping the %zu B shared region failed: %s", size, strerror(e));
    }
    rk__region *reg = p;
    reg->abi = RK_ABI_VERSION;
    reg->size = size;
    reg->h2d_off = h2d_off;
    reg->d2h_off = d2h_off;
    reg->d2h_stride = rk__page_up(ring);
    reg->d2h_rings = n_d2h;
    reg->arena_off = arena_off;
    reg->arena_size = c->arena_size;
    rk__view_set(v, p, size);
    int rc = rk_ring_init(v->h2d, ring, c->ring_slots, c->slot_size);
    for (uint32_t i = 0; rc == 0 && i < n_d2h; i++)
        rc = rk_ring_init(v->d2h[i], ring, c->ring_slots, c->slot_size);
    if (rc) {
        munmap(p, size);
        close(fd);
        memset(v, 0, sizeof *v);
        return rc;
    }
    /* release: whoever sees the magic sees a complete layout; pairs with
     * rk__region_map's load-acquire */
    rk__st_release(&reg->magic, RK__REGION_MAGIC);
    *fdp = fd;
    return 0;
}

int rk__region_map(int fd, rk__view *v)
{
    memset(v, 0, sizeof *v);
    struct stat st;
    if (fstat(fd, &st) != 0)
        return rk__fail(RK_ESYS, "region fd %d: fstat failed: %s", fd, strerror(errno));
    size_t size = (size_t)st.st_size;
    if (size < sizeof(rk__region))
        return rk__fail(RK_EPROTO, "region fd %d holds %zu B, less than a region header", fd, size);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return rk__fail(RK_ENOMEM, "mapping the %zu B region from fd %d failed: %s", size, fd,
                        strerror(errno));
    rk__region *reg = p;
    /* acquire: pairs with rk__region_create's store-release of magic */
    if (rk__ld_acquire(&reg->magic) != RK__REGION_MAGIC || reg->abi != RK_ABI_VERSION) {
        uint32_t abi = reg->abi;
        munmap(p, size);
        return rk__fail(RK_EPROTO, "region fd %d: not a ringkernel region of ABI %u (found ABI %u)", fd,
                        RK_ABI_VERSION, abi);
    }
    const uint32_t n = reg->d2h_rings;
    /* arena_off >= d2h_off first: the stride's bound below subtracts them */
    if (reg->size != size || reg->h2d_off >= reg->d2h_off || reg->d2h_off >= size || reg->arena_off > size ||
        reg->arena_off < reg->d2h_off ||
        reg->arena_size > size - reg->arena_off || n < 1 || n > RK__D2H_RINGS_MAX || (n & (n - 1)) ||
        reg->d2h_stride == 0 || reg->d2h_stride > (reg->arena_off - reg->d2h_off) / n) {
        const unsigned long long stride = reg->d2h_stride; /* (read before the unmap) */
        munmap(p, size);
        return rk__fail(RK_EPROTO, "region fd %d: header offsets (%u reply rings of %llu B) do not fit its %zu B",
                        fd, n, stride, size);
    }
    rk__view_set(v, p, size);
    int rc = rk_ring_check(v->h2d, reg->d2h_off - reg->h2d_off);
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        rc = rk_ring_check(v->d2h[i], reg->d2h_stride);
    if (rc) {
        munmap(p, size);
        memset(v, 0, sizeof *v);
    }
    return rc;
}

void rk__region_unmap(rk__view *v)
{
    if (v->hdr)
        munmap(v->hdr, v->size);
    memset(v, 0, sizeof *v);
}
