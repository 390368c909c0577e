/* rk/module.h - actors as modules: the declaration every actor has, and the
 * table a module (a shared library) exports so that a runtime
 * (rk_config.modules) or rk-bridge (--actors) can load it by path and serve
 * its actors by name.
 *
 * An actor is a name, named input fields and named output fields (each a
 * byte string), a size rule for each output, a GPU handler (in the module's
 * ring kernel) and/or a CPU twin. A module:
 *
 *     #include <rk/module.h>
 *     static int counter_cpu(const void *in, size_t in_len, void *out, size_t cap,
 *                            size_t *out_len, void *user) { ... }
 *     static const rk_actor_decl actors[] = {
 *         {.name = "count", .n_inputs = 1, .inputs = {"key"},
 *          .n_outputs = 1, .outputs = {"total"}, .sizes = {RK_SIZE_FIXED(8)},
 *          .cpu = counter_cpu},
 *     };
 *     RK_MODULE_EXPORT("counters", actors, NULL)
 *
 * built with `cc -shared -fPIC $(pkg-config --cflags rk)`; a module with GPU
 * actors is built with nvcc from one list (rk/gpu_actor.cuh, RK_GPU_MODULE).
 *
 * Field layout (requests and replies): one field is the payload itself. Several
 * fields of an actor flagged RK_ACTOR_EQUAL_INPUTS are concatenated, each
 * payload/n bytes (vadd: a || b). Otherwise several fields travel as a table:
 * u32 count, u32 len[count], zero padding to 16 bytes, then each field at the
 * next 16-byte boundary (rk_fields_parse, rk_fields_layout below). A request
 * and its reply may use either layout independently: n_inputs decides the
 * request's, n_outputs the reply's.
 *
 * Errors of the actor's own: a handler returns -RK_EACTOR and writes a short
 * sentence (bytes, no NUL needed) as its reply; the caller gets status
 * -RK_EACTOR with that sentence as data (rk-bridge: ACTOR_FAILED). The
 * reply has room for at least 128 bytes of it, or, for a request whose
 * inputs and outputs fit a ring slot, as much as an inline reply holds
 * (96 bytes with the default 256-byte slots): a small request stays out of
 * the arena, where a GPU handler's every access would cross PCIe.
 *
 * Thread-safety: the declarations are read-only data; a CPU twin is called
 * from one consumer thread at a time. Ownership: everything a module exports
 * stays owned by the module and must live as long as it is loaded.
 * The helpers below are static inline, so a module needs no library symbol.
 */
#ifndef RK_MODULE_H
#define RK_MODULE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rk/error.h"
#include "rk/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI a module is built against; a module of another ABI is refused. */
#define RK_MODULE_ABI 1u
/* The symbol a module exports: `const rk_module *rk_module_v1(void)`. */
#define RK_MODULE_SYMBOL "rk_module_v1"
#define RK_FIELDS_MAX 8     /* inputs, and outputs, per actor */
#define RK_ACTOR_NAME_MAX 31 /* bytes of an actor's or a field's name */

/* Bytes an output may need: len(inputs[input]) * mul / div + add, or just
 * add when input < 0. */
typedef struct rk_size_rule {
    int32_t input;
    uint32_t mul, div;
    uint64_t add;
} rk_size_rule;
#ifdef __cplusplus
#define RK_SIZE_OF_INPUT(i) (rk_size_rule{(i), 1, 1, 0})
#define RK_SIZE_FIXED(n) (rk_size_rule{-1, 1, 1, (n)})
#else
#define RK_SIZE_OF_INPUT(i) ((rk_size_rule){(i), 1, 1, 0})
#define RK_SIZE_FIXED(n) ((rk_size_rule){-1, 1, 1, (n)})
#endif

/* rk_actor_decl.flags */
enum {
    RK_ACTOR_GPU = 1u << 0,          /* the module's kernel serves it on the GPU */
    RK_ACTOR_EQUAL_INPUTS = 1u << 1, /* every input has the same length (checked before it
                                      * runs); they travel concatenated, without a table */
};

/* Members in the order a C++ designated initializer must follow. */
typedef struct rk_actor_decl {
    const char *name;      /* [a-z][a-z0-9_]*, at most RK_ACTOR_NAME_MAX bytes */
    uint32_t flags;        /* RK_ACTOR_* */
    uint32_t n_inputs;     /* 1..RK_FIELDS_MAX */
    const char *inputs[RK_FIELDS_MAX];  /* field names, [a-z][a-z0-9_]* */
    uint32_t n_outputs;    /* 1..RK_FIELDS_MAX */
    const char *outputs[RK_FIELDS_MAX];
    rk_size_rule sizes[RK_FIELDS_MAX];  /* per output: the most bytes it may need */
    rk_cpu_actor_fn cpu;   /* the CPU twin, or NULL (a GPU-only actor) */
    void *cpu_user;
} rk_actor_decl;

struct rk_kernel_desc;

typedef struct rk_module {
    uint32_t abi;                 /* RK_MODULE_ABI */
    uint32_t n_actors;
    const char *name;             /* for messages */
    const rk_actor_decl *actors;
    /* The module's ring kernel (rk/gpu_actor.cuh): the built-ins plus this
     * module's GPU actors, the i-th of `actors` served as message type
     * RK_OP_USER + i. NULL for a CPU-only module. A runtime runs one ring
     * kernel, so at most one loaded module may have one. */
    const struct rk_kernel_desc *kernel;
} rk_module;

typedef const rk_module *(*rk_module_fn)(void);

#ifdef __cplusplus
#define RK__MODULE_LINKAGE extern "C" /* dlsym finds the symbol by its C name */
#else
#define RK__MODULE_LINKAGE
#endif
#define RK_MODULE_EXPORT(name_, actors_, kernel_)                                                  \
    RK__MODULE_LINKAGE __attribute__((visibility("default"))) const rk_module *rk_module_v1(void)  \
    {                                                                                              \
        static const rk_module m = {RK_MODULE_ABI, (uint32_t)(sizeof(actors_) / sizeof((actors_)[0])), \
                                    (name_), (actors_), (kernel_)};                                \
        return &m;                                                                                 \
    }

/* ---- field layout ---- */

typedef struct rk_field {
    const void *data;
    size_t len;
} rk_field;

/* The field helpers also run in a GPU actor (nvcc: host and device). */
#ifdef __CUDACC__
#define RK_FIELDS_FN static inline __host__ __device__
#else
#define RK_FIELDS_FN static inline
#endif

/* Bytes of a table's head for n fields (16-byte aligned). */
RK_FIELDS_FN size_t rk_fields_head(uint32_t n) { return (4u + 4u * (size_t)n + 15u) & ~(size_t)15; }

/* Bytes of n fields of lens[] in the table layout. */
RK_FIELDS_FN size_t rk_fields_size(uint32_t n, const size_t *lens)
{
    size_t s = rk_fields_head(n);
    for (uint32_t i = 0; i < n; i++)
        s += (lens[i] + 15u) & ~(size_t)15;
    return s;
}

/* Splits a payload of n fields (layout above; equal: RK_ACTOR_EQUAL_INPUTS)
 * into out[0..n). Returns 0, or -RK_EPROTO when the bytes do not hold n
 * fields (a length past the end, a wrong count, unequal parts). */
RK_FIELDS_FN int rk_fields_parse(const void *buf, size_t len, uint32_t n, int equal, rk_field *out)
{
    const unsigned char *b = (const unsigned char *)buf;
    if (n == 0 || n > RK_FIELDS_MAX)
        return -RK_EPROTO;
    if (n == 1 || equal) {
        if (len % n)
            return -RK_EPROTO;
        for (uint32_t i = 0; i < n; i++) {
            out[i].data = b + i * (len / n);
            out[i].len = len / n;
        }
        return 0;
    }
    size_t off = rk_fields_head(n);
    uint32_t count;
    if (len < off)
        return -RK_EPROTO;
    memcpy(&count, b, 4);
    if (count != n)
        return -RK_EPROTO;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l;
        memcpy(&l, b + 4 + 4 * i, 4);
        if (l > len - off)
            return -RK_EPROTO;
        out[i].data = b + off;
        out[i].len = l;
        off += ((size_t)l + 15u) & ~(size_t)15;
        if (off > len)
            off = len; /* the last field's padding may be cut off */
    }
    return 0;
}

/* Writes the table head of n fields of lens[] (rk_fields_head(n) bytes,
 * padding zeroed) at buf; the fields follow, each 16-byte aligned. */
RK_FIELDS_FN void rk_fields_write_head(void *buf, uint32_t n, const size_t *lens)
{
    unsigned char *b = (unsigned char *)buf;
    memset(b, 0, rk_fields_head(n));
    memcpy(b, &n, 4);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = (uint32_t)lens[i];
        memcpy(b + 4 + 4 * i, &l, 4);
    }
}

/* Lays out n fields of lens[] in buf (cap bytes) in the table layout (n >= 2)
 * or as the bytes themselves (n == 1): writes the head and stores where
 * each field goes in at[0..n); the caller then fills them. Returns the total
 * bytes, or 0 when they do not fit in cap. */
RK_FIELDS_FN size_t rk_fields_layout(void *buf, size_t cap, uint32_t n, const size_t *lens, void **at)
{
    unsigned char *b = (unsigned char *)buf;
    if (n == 1) {
        if (lens[0] > cap)
            return 0;
        at[0] = b;
        return lens[0];
    }
    size_t total = rk_fields_size(n, lens);
    if (n == 0 || n > RK_FIELDS_MAX || total > cap)
        return 0;
    size_t off = rk_fields_head(n);
    rk_fields_write_head(b, n, lens);
    for (uint32_t i = 0; i < n; i++) {
        at[i] = b + off;
        off += (lens[i] + 15u) & ~(size_t)15;
    }
    return total;
}

#ifdef __cplusplus
}
#endif

#endif /* RK_MODULE_H */
