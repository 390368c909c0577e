/* modules.h - loading actor modules (rk/module.h): librk loads them to know
 * the actors by name, a worker process loads the same list to run them. Both
 * sides assign message types the same way, so a request's type means the
 * same actor on both. */
#ifndef RK_MODULES_H
#define RK_MODULES_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "rk/module.h"

/* The built-ins as declared actors: echo (data -> data) and vadd (a, b -> c). */
#define RK__N_BUILTIN_ACTORS RK_BUILTIN_ACTORS
RK__HIDDEN extern const rk_actor_decl rk__builtin_decls[RK__N_BUILTIN_ACTORS];
RK__HIDDEN extern const uint16_t rk__builtin_types[RK__N_BUILTIN_ACTORS];

/* Loaded modules and their actors. Types: the module with a GPU kernel goes
 * first (its i-th actor is RK_OP_USER + i, as its kernel was compiled), then
 * the others in the order given, each actor taking the next type. */
typedef struct rk__modset {
    size_t n_files;
    char **files;                /* module files in load order (directories expanded) */
    void **handles;              /* dlopen handles, per file */
    int *fds;                    /* per file: the file loaded, open (or -1): a worker started later
                                  * loads these bytes, whatever the path holds by then */
    size_t n;                    /* actors */
    rk_actor_def *defs;          /* per actor: type, name, cpu, cpu_user, gpu (the kernel) */
    const rk_actor_decl **decls; /* per actor */
    const char **origin;         /* per actor: its file */
    const void *kernel;          /* the one module kernel (rk_kernel_desc), or NULL */
    uint64_t hash;               /* of the types, the names and each file's size and mtime: the
                                  * worker checks it loaded the same */
} rk__modset;

/* Loads paths[0..n) (files, or directories of *.so). On failure frees what
 * it loaded and returns a code with the detail naming the file and the
 * cause. files_given: the paths are module files already expanded and
 * ordered (the worker gets librk's m->fds as /proc/self/fd/N, and loads
 * them by their own names when those still hold the same file). */
RK__HIDDEN int rk__modules_load(rk__modset *m, const char *const *paths, size_t n, int files_given);
/* Unloads everything (a zeroed set is fine). */
RK__HIDDEN void rk__modules_free(rk__modset *m);
/* The declaration of a module actor's type, or NULL. */
RK__HIDDEN const rk_actor_decl *rk__modules_decl(const rk__modset *m, uint16_t type);
/* Reply bytes to reserve for a request of a declared actor whose payload is
 * the concatenation of iov[0..iovcnt) (its field table, when it has one,
 * at the front), at least room (1 or more: for an ACTOR_FAILED
 * sentence); 0 when the payload does not hold the actor's inputs. */
RK__HIDDEN size_t rk__decl_reply_cap(const rk_actor_decl *d, const rk_iov *iov, int iovcnt, size_t room);
/* the most of an actor's own error sentence a reply has room for, where
 * its outputs are smaller and the request goes through the arena anyway */
#define RK__SENTENCE_ROOM 128
/* The most d's rules can ask for a payload of len bytes whose fields are
 * not known yet (rk_actor_buf_alloc): at least room. */
RK__HIDDEN size_t rk__decl_reply_bound(const rk_actor_decl *d, size_t len, size_t room);

#endif
