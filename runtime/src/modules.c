/* modules.c - loading actor modules (modules.h, rk/module.h): every check a
 * module must pass happens here, once, with a message naming the file. */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel_desc.h"
#include "modules.h"

const rk_actor_decl rk__builtin_decls[RK__N_BUILTIN_ACTORS] = {
    {.name = "echo", .flags = RK_ACTOR_GPU, .n_inputs = 1, .inputs = {"data"}, .n_outputs = 1,
     .outputs = {"data"}, .sizes = {{0, 1, 1, 0}}},
    {.name = "vadd", .flags = RK_ACTOR_GPU | RK_ACTOR_EQUAL_INPUTS, .n_inputs = 2, .inputs = {"a", "b"},
     .n_outputs = 1, .outputs = {"c"}, .sizes = {{0, 1, 1, 0}}},
};
const uint16_t rk__builtin_types[RK__N_BUILTIN_ACTORS] = {RK_OP_ECHO, RK_OP_VADD};

/* Names a module actor may not take: the built-ins and every operation of
 * rk-bridge (bridge/PROTOCOL.md), so a client's op always means one thing. */
static const char *const rk__reserved[] = {"echo", "vadd", "ping", "status", "launch",
                                           "retry_gpu", "fault", "hang", "nop"};

/* Whether s is a valid actor or field name, [a-z][a-z0-9_]* of at most
 * RK_ACTOR_NAME_MAX bytes; if not, why (what follows "is" in a message):
 * the length and the limit for a long one, not the name itself, which may
 * be larger than any message. */
static bool rk__name_ok(const char *s, char *why, size_t cap)
{
    size_t l = s ? strlen(s) : 0;
    if (!s)
        snprintf(why, cap, "NULL, not a name");
    else if (l > RK_ACTOR_NAME_MAX)
        snprintf(why, cap, "%zu bytes long, more than the %d allowed (\"%.16s...\")", l, RK_ACTOR_NAME_MAX, s);
    else if (!(*s >= 'a' && *s <= 'z') || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") != l)
        snprintf(why, cap, "named \"%s\", not [a-z][a-z0-9_]*", s);
    else
        return true;
    return false;
}

/* A field list: valid names, none twice, none a request or reply key. */
static int rk__fields_check(const char *file, const char *actor, const char *what, const char *const *names,
                            uint32_t n, const char *const *keys)
{
    if (n < 1 || n > RK_FIELDS_MAX)
        return rk__fail(RK_EINVAL, "module %s: actor \"%s\" has %u %s; 1..%d are allowed", file, actor, n, what,
                        RK_FIELDS_MAX);
    char why[96];
    for (uint32_t i = 0; i < n; i++) {
        if (!rk__name_ok(names[i], why, sizeof why))
            return rk__fail(RK_EINVAL, "module %s: actor \"%s\": %s %u is %s", file, actor, what, i, why);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(names[j], names[i]) == 0)
                return rk__fail(RK_EINVAL, "module %s: actor \"%s\" names its %s \"%s\" twice", file, actor,
                                what, names[i]);
        for (const char *const *k = keys; *k; k++)
            if (strcmp(*k, names[i]) == 0)
                return rk__fail(RK_EINVAL, "module %s: actor \"%s\": %s \"%s\" collides with the protocol's "
                                "key \"%s\"", file, actor, what, names[i], *k);
    }
    return 0;
}

static int rk__decl_check(const char *file, const rk_module *mod, uint32_t i, uint16_t type)
{
    static const char *const in_keys[] = {"v", "id", "op", NULL};
    static const char *const out_keys[] = {"v", "id", "ok", "error", NULL};
    const rk_actor_decl *d = &mod->actors[i];
    char why[96];
    if (!rk__name_ok(d->name, why, sizeof why))
        return rk__fail(RK_EINVAL, "module %s: actor %u is %s", file, i, why);
    for (size_t r = 0; r < sizeof rk__reserved / sizeof *rk__reserved; r++)
        if (strcmp(d->name, rk__reserved[r]) == 0)
            return rk__fail(RK_EINVAL, "module %s: actor \"%s\" collides with the built-in operation of that "
                            "name", file, d->name);
    int rc = rk__fields_check(file, d->name, "inputs", d->inputs, d->n_inputs, in_keys);
    if (rc == 0)
        rc = rk__fields_check(file, d->name, "outputs", d->outputs, d->n_outputs, out_keys);
    if (rc)
        return rc;
    for (uint32_t o = 0; o < d->n_outputs; o++) {
        const rk_size_rule *s = &d->sizes[o];
        if (s->div == 0 || s->input >= (int32_t)d->n_inputs)
            return rk__fail(RK_EINVAL, "module %s: actor \"%s\": the size rule of output \"%s\" %s", file,
                            d->name, d->outputs[o], s->div == 0 ? "divides by 0" : "names no input");
    }
    if (!d->cpu && !(d->flags & RK_ACTOR_GPU))
        return rk__fail(RK_EINVAL, "module %s: actor \"%s\" has neither a CPU twin nor the RK_ACTOR_GPU flag",
                        file, d->name);
    if (d->flags & RK_ACTOR_GPU) {
        const rk_kernel_desc *k = mod->kernel;
        bool served = false;
        for (uint32_t t = 0; k && t < k->n_types && t < RK_KDESC_MAX_TYPES; t++)
            served |= k->types[t] == type;
        if (!served)
            return rk__fail(RK_EINVAL, "module %s: actor \"%s\" is flagged RK_ACTOR_GPU but %s", file, d->name,
                            k ? "the module's kernel does not serve it (its GPU actors must be listed in "
                                "declaration order)" : "the module has no kernel");
    }
    return 0;
}

static int rk__cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int rk__add_file(rk__modset *m, const char *path)
{
    char **f = realloc(m->files, (m->n_files + 1) * sizeof *f);
    if (!f)
        return rk__fail(RK_ENOMEM, "loading modules: out of memory");
    m->files = f;
    if (!(f[m->n_files] = strdup(path)))
        return rk__fail(RK_ENOMEM, "loading modules: out of memory");
    m->n_files++;
    return 0;
}

/* A path: a module file, or a directory whose *.so files load in name order.
 * A path is a file path, made absolute here: dlopen would search the
 * library path for a name without a '/' (and miss ./case.so), and a worker
 * started after the program changed directory (a recovery) would miss a
 * relative one. */
static int rk__expand(rk__modset *m, const char *arg)
{
    char path[PATH_MAX];
    if (!realpath(arg, path))
        return rk__fail(RK_EINVAL, "module %s: %s", arg, strerror(errno));
    struct stat st;
    if (stat(path, &st) != 0)
        return rk__fail(RK_EINVAL, "module %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return rk__add_file(m, path);
    DIR *dir = opendir(path);
    if (!dir)
        return rk__fail(RK_EINVAL, "module directory %s: %s", path, strerror(errno));
    size_t first = m->n_files;
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(dir));) {
        size_t l = strlen(e->d_name);
        if (l > 3 && strcmp(e->d_name + l - 3, ".so") == 0) {
            char p[4096];
            if ((size_t)snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= sizeof p)
                rc = rk__fail(RK_EINVAL, "module %s/%s: the path is longer than %zu bytes", path, e->d_name,
                              sizeof p - 1);
            else
                rc = rk__add_file(m, p);
        }
    }
    closedir(dir);
    if (rc == 0 && m->n_files == first)
        return rk__fail(RK_EINVAL, "module directory %s holds no *.so file", path);
    qsort(m->files + first, m->n_files - first, sizeof *m->files, rk__cmp_str);
    return rc;
}

static bool rk__same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Opens module file f and keeps it open (m->fds[f]), so that a worker
 * started later loads these bytes even after the path got another file (a
 * rebuild) or none. A worker gets them as /proc/self/fd/N: it loads them
 * by the name they were opened under while that still names them (the
 * module's $ORIGIN and messages stay its own), else by the descriptor. */
static int rk__open_file(rk__modset *m, size_t f)
{
    const char *file = m->files[f];
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    struct stat at, named;
    if (fd < 0 || fstat(fd, &at) != 0) {
        const int e = errno;
        if (fd >= 0)
            close(fd); /* not yet in m->fds, which the caller closes */
        return rk__fail(RK_EINVAL, "module %s: %s", file, strerror(e));
    }
    m->fds[f] = fd;
    char link[PATH_MAX];
    ssize_t l = strncmp(file, "/proc/self/fd/", 14) == 0 ? readlink(file, link, sizeof link - 1) : -1;
    if (l > 0) {
        link[l] = '\0';
        if (stat(link, &named) == 0 && rk__same_file(&named, &at)) {
            char *own = strdup(link);
            if (!own)
                return rk__fail(RK_ENOMEM, "loading modules: out of memory");
            free(m->files[f]);
            m->files[f] = own;
        }
    }
    return 0;
}

#if defined(__x86_64__)
#define RK__ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define RK__ELF_MACHINE EM_AARCH64
#elif defined(__powerpc64__)
#define RK__ELF_MACHINE EM_PPC64
#else
#define RK__ELF_MACHINE 0 /* not checked */
#endif

static const char *rk__machine_name(unsigned m)
{
    return m == EM_X86_64 ? "x86-64" : m == EM_AARCH64 ? "AArch64" : m == EM_PPC64 ? "PowerPC 64"
         : m == EM_386 ? "x86 (32-bit)" : m == EM_ARM ? "ARM (32-bit)" : m == EM_RISCV ? "RISC-V"
         : "another architecture";
}

/* Why a file dlopen refused is no module for this process, from its ELF
 * header (dlopen says "No such file or directory" of a file built for
 * another machine); false when the header looks right. */
static bool rk__elf_why(int fd, char *why, size_t cap)
{
    unsigned char h[20] = {0};
    ssize_t n = pread(fd, h, sizeof h, 0);
    uint16_t type = (uint16_t)(h[16] | h[17] << 8), machine = (uint16_t)(h[18] | h[19] << 8);
    if (n < (ssize_t)sizeof h || memcmp(h, ELFMAG, SELFMAG) != 0)
        snprintf(why, cap, "it is not an ELF shared library (build it with cc -shared -fPIC)");
    else if (h[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32))
        snprintf(why, cap, "it is a %s-bit ELF file; this process is %zu-bit", h[EI_CLASS] == ELFCLASS32 ? "32" : "64",
                 8 * sizeof(void *));
    else if (h[EI_DATA] == ELFDATA2LSB && RK__ELF_MACHINE && machine != RK__ELF_MACHINE)
        snprintf(why, cap, "it is built for %s (ELF machine %u); this process runs on %s (%u): rebuild it "
                 "on or for this machine", rk__machine_name(machine), machine, rk__machine_name(RK__ELF_MACHINE),
                 RK__ELF_MACHINE);
    else if (h[EI_DATA] == ELFDATA2LSB && type != ET_DYN)
        snprintf(why, cap, "it is an ELF file of type %u, not a shared library (build it with cc -shared -fPIC)",
                 type);
    else
        return false;
    return true;
}

static int rk__open_one(rk__modset *m, size_t f, const rk_module **out)
{
    int rc = rk__open_file(m, f);
    if (rc)
        return rc;
    const char *file = m->files[f];
    /* RTLD_LOCAL: two modules may use the same internal names */
    m->handles[f] = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!m->handles[f]) {
        const char *dl = dlerror();
        char why[160];
        if (rk__elf_why(m->fds[f], why, sizeof why))
            return rk__fail(RK_EINVAL, "module %s could not be loaded: %s", file, why);
        return rk__fail(RK_EINVAL, "module %s could not be loaded: %s", file, dl);
    }
    struct stat at, named;
    if (fstat(m->fds[f], &at) != 0 || stat(file, &named) != 0 || !rk__same_file(&at, &named))
        return rk__fail(RK_EINVAL, "module %s was replaced while it was being loaded; load it again", file);
    rk_module_fn fn = (rk_module_fn)dlsym(m->handles[f], RK_MODULE_SYMBOL);
    if (!fn)
        return rk__fail(RK_EINVAL, "module %s has no symbol %s (is it an actor module? rk/module.h, "
                        "RK_MODULE_EXPORT)", file, RK_MODULE_SYMBOL);
    const rk_module *mod = fn();
    if (!mod)
        return rk__fail(RK_EINVAL, "module %s: %s() returned NULL", file, RK_MODULE_SYMBOL);
    if (mod->abi != RK_MODULE_ABI)
        return rk__fail(RK_EINVAL, "module %s was built for module ABI %u; this ringkernel speaks ABI %u "
                        "(rebuild it against this version's headers)", file, mod->abi, RK_MODULE_ABI);
    if (mod->n_actors == 0 || !mod->actors)
        return rk__fail(RK_EINVAL, "module %s declares no actors", file);
    const rk_kernel_desc *k = mod->kernel;
    if (k && (k->magic != RK_KDESC_MAGIC || k->version != RK_KDESC_VERSION))
        return rk__fail(RK_EINVAL, "module %s: its kernel was built with another ringkernel (descriptor "
                        "version %u, this one %u)", file, k->version, RK_KDESC_VERSION);
    *out = mod;
    return 0;
}

/* Appends a module's actors from type `base` on; names unique over all. */
static int rk__take_actors(rk__modset *m, size_t f, const rk_module *mod, uint32_t base)
{
    /* the count first: a garbage one must not size the tables below, nor
     * walk mod->actors past its end */
    if (mod->n_actors > RK_OP_MAX + 1u - base)
        return rk__fail(RK_EINVAL, "module %s declares %u actors; the message types left for it (%u..%u) "
                        "hold at most %u", m->files[f], mod->n_actors, base, RK_OP_MAX, RK_OP_MAX + 1u - base);
    size_t n = m->n + mod->n_actors;
    rk_actor_def *defs = realloc(m->defs, n * sizeof *defs);
    if (defs)
        m->defs = defs;
    const rk_actor_decl **decls = realloc(m->decls, n * sizeof *decls);
    if (decls)
        m->decls = decls;
    const char **origin = realloc(m->origin, n * sizeof *origin);
    if (origin)
        m->origin = origin;
    if (!defs || !decls || !origin)
        return rk__fail(RK_ENOMEM, "loading modules: out of memory");
    for (uint32_t i = 0; i < mod->n_actors; i++) {
        const rk_actor_decl *d = &mod->actors[i];
        if (base + i > RK_OP_MAX)
            return rk__fail(RK_EINVAL, "module %s: more actors than message types", m->files[f]);
        int rc = rk__decl_check(m->files[f], mod, i, (uint16_t)(base + i));
        if (rc)
            return rc;
        for (size_t j = 0; j < m->n; j++)
            if (strcmp(m->decls[j]->name, d->name) == 0)
                return rk__fail(RK_EINVAL, "module %s: actor \"%s\" is also declared by module %s", m->files[f],
                                d->name, m->origin[j]);
        m->defs[m->n] = (rk_actor_def){.type = (uint16_t)(base + i), .name = d->name, .cpu = d->cpu,
                                       .cpu_user = d->cpu_user,
                                       .gpu = (d->flags & RK_ACTOR_GPU) ? mod->kernel : NULL};
        m->decls[m->n] = d;
        m->origin[m->n] = m->files[f];
        m->n++;
    }
    return 0;
}

static uint64_t rk__fnv(uint64_t h, const char *t, int l)
{
    for (int c = 0; c < l; c++)
        h = (h ^ (unsigned char)t[c]) * 1099511628211ull;
    return h;
}

/* FNV-1a over "type name;" per actor and "size mtime;" per file: a worker
 * that loaded other actors, or a file written over in place (cp over a
 * loaded module), does not match. */
static uint64_t rk__hash(const rk__modset *m)
{
    uint64_t h = 1469598103934665603ull;
    char t[80];
    for (size_t i = 0; i < m->n; i++)
        h = rk__fnv(h, t, snprintf(t, sizeof t, "%u %.40s;", m->defs[i].type, m->defs[i].name));
    for (size_t f = 0; f < m->n_files; f++) {
        struct stat st = {0};
        fstat(m->fds[f], &st);
        h = rk__fnv(h, t, snprintf(t, sizeof t, "%lld %lld.%09ld;", (long long)st.st_size,
                                   (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec));
    }
    return h;
}

int rk__modules_load(rk__modset *m, const char *const *paths, size_t n, int files_given)
{
    memset(m, 0, sizeof *m);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!paths[i] || !paths[i][0])
            rc = rk__fail(RK_EINVAL, "modules[%zu] of %zu is %s, not a module file or directory", i, n,
                          paths[i] ? "an empty string" : "NULL");
        else
            rc = files_given ? rk__add_file(m, paths[i]) : rk__expand(m, paths[i]);
    }
    const rk_module **mods = calloc(m->n_files + 1, sizeof *mods);
    m->handles = calloc(m->n_files + 1, sizeof *m->handles);
    m->fds = malloc((m->n_files + 1) * sizeof *m->fds);
    if (rc == 0 && (!mods || !m->handles || !m->fds))
        rc = rk__fail(RK_ENOMEM, "loading modules: out of memory");
    for (size_t f = 0; m->fds && f < m->n_files; f++)
        m->fds[f] = -1;
    size_t gpu = m->n_files;
    for (size_t f = 0; rc == 0 && f < m->n_files; f++) {
        rc = rk__open_one(m, f, &mods[f]);
        if (rc == 0 && mods[f]->kernel && gpu < m->n_files)
            rc = rk__fail(RK_EINVAL, "modules %s and %s both carry a GPU kernel; a runtime runs one ring kernel, "
                          "so GPU actors must be built into one module", m->files[gpu], m->files[f]);
        if (rc == 0 && mods[f]->kernel)
            gpu = f;
    }
    /* the GPU module's actors take the types its kernel was compiled with */
    uint32_t base = RK_OP_USER;
    if (rc == 0 && gpu < m->n_files) {
        rc = rk__take_actors(m, gpu, mods[gpu], base);
        m->kernel = mods[gpu]->kernel;
        base += mods[gpu]->n_actors;
    }
    for (size_t f = 0; rc == 0 && f < m->n_files; f++) {
        if (f == gpu)
            continue;
        rc = rk__take_actors(m, f, mods[f], base);
        base += mods[f]->n_actors;
    }
    free(mods);
    if (rc) {
        rk__modules_free(m);
        return rc;
    }
    m->hash = rk__hash(m);
    return 0;
}

void rk__modules_free(rk__modset *m)
{
    for (size_t f = 0; f < m->n_files; f++) {
        if (m->handles && m->handles[f])
            dlclose(m->handles[f]);
        if (m->fds && m->fds[f] >= 0)
            close(m->fds[f]);
        free(m->files[f]);
    }
    free(m->files);
    free(m->handles);
    free(m->fds);
    free(m->defs);
    free(m->decls);
    free(m->origin);
    memset(m, 0, sizeof *m);
}

const rk_actor_decl *rk__modules_decl(const rk__modset *m, uint16_t type)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->defs[i].type == type)
            return m->decls[i];
    return NULL;
}

/* Gathers up to cap bytes of the payload's front (the field table). */
static size_t rk__front(const rk_iov *iov, int iovcnt, void *buf, size_t cap, size_t *total)
{
    size_t got = 0;
    *total = 0;
    for (int i = 0; i < iovcnt; i++) {
        size_t take = iov[i].len < cap - got ? iov[i].len : cap - got;
        memcpy((char *)buf + got, iov[i].base, take);
        got += take;
        *total += iov[i].len;
    }
    return got;
}

static size_t rk__decl_outs_cap(const rk_actor_decl *d, const size_t *lens, size_t room);

size_t rk__decl_reply_cap(const rk_actor_decl *d, const rk_iov *iov, int iovcnt, size_t room)
{
    _Alignas(16) unsigned char head[4 + 4 * RK_FIELDS_MAX + 16];
    size_t total;
    size_t got = rk__front(iov, iovcnt, head, sizeof head, &total);
    size_t lens[RK_FIELDS_MAX];
    const bool equal = d->n_inputs == 1 || (d->flags & RK_ACTOR_EQUAL_INPUTS);
    if (equal) {
        if (total % d->n_inputs)
            return 0;
        for (uint32_t i = 0; i < d->n_inputs; i++)
            lens[i] = total / d->n_inputs;
    } else {
        uint32_t count;
        if (got < rk_fields_head(d->n_inputs))
            return 0;
        memcpy(&count, head, 4);
        if (count != d->n_inputs)
            return 0;
        /* every length within the payload, as rk_fields_parse checks it
         * (a lying table must not size a huge reply) */
        size_t off = rk_fields_head(d->n_inputs);
        for (uint32_t i = 0; i < d->n_inputs; i++) {
            uint32_t l;
            memcpy(&l, head + 4 + 4 * i, 4);
            if (l > total - off)
                return 0;
            lens[i] = l;
            off += ((size_t)l + 15u) & ~(size_t)15;
            if (off > total)
                off = total;
        }
    }
    return rk__decl_outs_cap(d, lens, room);
}

/* The reply size d's rules give for inputs of lens[] bytes, at least room
 * (for an ACTOR_FAILED sentence, however small the outputs). */
static size_t rk__decl_outs_cap(const rk_actor_decl *d, const size_t *lens, size_t room)
{
    size_t outs[RK_FIELDS_MAX];
    for (uint32_t o = 0; o < d->n_outputs; o++) {
        const rk_size_rule *s = &d->sizes[o];
        /* (lens are payload bytes, below 2^32: the product fits) */
        const size_t from = s->input >= 0 ? lens[s->input] * s->mul / s->div : 0;
        /* a module's absurd rule must not wrap the sum (here or in the
         * table's) to a small reply: SIZE_MAX, which a send refuses */
        if (from > (SIZE_MAX >> 4) || s->add > (SIZE_MAX >> 4) - from)
            return SIZE_MAX;
        outs[o] = from + s->add;
    }
    /* the reply: the output itself, or the table of them */
    size_t cap = d->n_outputs == 1 ? outs[0] : rk_fields_size(d->n_outputs, outs);
    return cap < room ? room : cap;
}

size_t rk__decl_reply_bound(const rk_actor_decl *d, size_t len, size_t room)
{
    size_t lens[RK_FIELDS_MAX];
    /* equal inputs split the payload; a table's fields are each at most
     * the payload */
    const bool equal = d->n_inputs == 1 || (d->flags & RK_ACTOR_EQUAL_INPUTS);
    for (uint32_t i = 0; i < d->n_inputs; i++)
        lens[i] = equal ? len / d->n_inputs : len;
    return rk__decl_outs_cap(d, lens, room);
}
