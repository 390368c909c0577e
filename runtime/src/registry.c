/* registry.c - the actors a runtime serves by name: the built-ins echo and
 * vadd, and those of the modules it loaded (modules.c); and the user actor
 * table (rk_config.actors + module actors) its consumers run. */
#include <stdlib.h>
#include <string.h>

#include "modules.h"

/* Loads paths[0..n) and merges their actors behind own[0..n_own) (the
 * rk_config.actors part) into *out; on failure frees what it made. Logs
 * each actor at `level`. */
static int rk__build(rk__registry *out, const rk_actor_def *own, size_t n_own, const char *const *paths, size_t n,
                     int level)
{
    *out = (rk__registry){0};
    rk__modset *m = out->mods = calloc(1, sizeof *out->mods);
    if (!m)
        return rk__fail(RK_ENOMEM, "loading actor modules: out of memory");
    int rc = n ? rk__modules_load(m, paths, n, 0) : 0;
    for (size_t i = 0; rc == 0 && i < n_own; i++)
        for (size_t j = 0; j < m->n; j++)
            if (own[i].type == m->defs[j].type) {
                rc = rk__fail(RK_EINVAL, "user actor \"%s\" of rk_config.actors has type %u, which module %s's "
                              "actor \"%s\" takes (module actors take types from %u up)",
                              own[i].name ? own[i].name : "?", own[i].type, m->origin[j], m->defs[j].name,
                              RK_OP_USER);
                break;
            }
    if (rc == 0) {
        out->n_defs = n_own + m->n;
        out->defs = calloc(out->n_defs + 1, sizeof *out->defs);
        rc = out->defs ? 0 : rk__fail(RK_ENOMEM, "loading actor modules: out of memory");
    }
    if (rc) {
        rk__registry_drop(out);
        return rc;
    }
    if (n_own)
        memcpy(out->defs, own, n_own * sizeof *out->defs);
    if (m->n)
        memcpy(out->defs + n_own, m->defs, m->n * sizeof *out->defs);
    for (size_t j = 0; j < m->n; j++)
        rk__log(level, "module %s: actor \"%s\" (type %u%s%s)", m->origin[j], m->defs[j].name,
                m->defs[j].type, m->defs[j].cpu ? ", cpu" : "", m->defs[j].gpu ? ", gpu" : "");
    return 0;
}

int rk__registry_load(rk_runtime *rt)
{
    const rk_config *c = &rt->cfg;
    if (c->n_modules && !c->modules)
        return rk__fail(RK_EINVAL, "n_modules is %zu but modules is NULL", c->n_modules);
    /* a list without its count (a NULL-terminated one) would load
     * nothing, silently; its entries are not read: with n_modules 0 there
     * may be none */
    if (!c->n_modules && c->modules)
        return rk__fail(RK_EINVAL, "modules is set but n_modules is 0: set n_modules to the number of paths, "
                        "or modules to NULL for none");
    rk__registry r;
    int rc = rk__build(&r, c->actors, c->n_actors, c->modules, c->n_modules, RK__LOG_INFO);
    /* the paths are borrowed only until open returns; the set keeps copies */
    rt->cfg.modules = NULL;
    rt->cfg.n_modules = 0;
    if (rc == 0)
        rk__registry_swap(rt, &r); /* rt's was empty */
    return rc;
}

int rk__registry_build(const rk_runtime *rt, const char *const *paths, size_t n, rk__registry *out)
{
    /* rk_config.actors lead rt's table (rk__build); the modules follow */
    const size_t n_own = rt->n_defs - (rt->mods ? rt->mods->n : 0);
    /* (a reload's caller says what it deployed; each device loads a copy) */
    return rk__build(out, rt->defs, n_own, paths, n, RK__LOG_DEBUG);
}

void rk__registry_swap(rk_runtime *rt, rk__registry *r)
{
    rk__registry was = {rt->mods, rt->defs, rt->n_defs};
    rt->mods = r->mods;
    rt->defs = r->defs;
    rt->n_defs = r->n_defs;
    *r = was;
}

void rk__registry_drop(rk__registry *r)
{
    if (r->mods)
        rk__modules_free(r->mods);
    free(r->mods);
    free(r->defs);
    r->mods = NULL;
    r->defs = NULL;
    r->n_defs = 0;
}

void rk__registry_free(rk_runtime *rt)
{
    rk__registry own = {0};
    rk__registry_swap(rt, &own);
    rk__registry_drop(&own);
}

int rk__registry_check(const rk_runtime *rt, uint16_t type)
{
    const rk_actor_def *d = rk__find_def(rt->defs, rt->n_defs, type);
    if (!d)
        return rk__fail(RK_ENOTSUP, "send: no actor is registered for message type %u", type);
    const bool cuda = rt->info.backend == RK_BACKEND_CUDA;
    if (cuda ? !d->gpu : !d->cpu)
        return rk__fail(RK_ENODEV, "actor \"%s\" has no %s; this runtime serves on the %s backend",
                        d->name ? d->name : "?", cuda ? "GPU handler" : "CPU twin (it runs only on a GPU)",
                        rt->info.backend_name);
    return 0;
}

const char *rk__type_name(const rk_runtime *rt, uint16_t type)
{
    for (int i = 0; i < RK__N_BUILTIN_ACTORS; i++) /* echo, vadd */
        if (rk__builtin_types[i] == type)
            return rk__builtin_decls[i].name;
    switch (type) {
    case RK_OP_NOP:
        return "nop";
    case RK_OP_FAULT:
        return "fault (test-only)";
    case RK_OP_HANG:
        return "hang (test-only)";
    default: {
        const rk_actor_def *d = rt ? rk__find_def(rt->defs, rt->n_defs, type) : NULL;
        return d && d->name ? d->name : "unknown";
    }
    }
}

int rk_runtime_actor_count(const rk_runtime *rt)
{
    rt = rt ? rk__lane0(rt) : NULL; /* a group's devices load the same modules */
    return RK__N_BUILTIN_ACTORS + (int)(rt && rt->mods ? rt->mods->n : 0);
}

const rk_actor_decl *rk_runtime_actor_at(const rk_runtime *rt, int i, uint16_t *type, const char **origin)
{
    if (!rt || i < 0 || i >= rk_runtime_actor_count(rt))
        return NULL;
    rt = rk__lane0(rt);
    if (i < RK__N_BUILTIN_ACTORS) {
        if (type)
            *type = rk__builtin_types[i];
        if (origin)
            *origin = "built-in";
        return &rk__builtin_decls[i];
    }
    i -= RK__N_BUILTIN_ACTORS;
    if (type)
        *type = rt->mods->defs[i].type;
    if (origin)
        *origin = rt->mods->origin[i];
    return rt->mods->decls[i];
}

const rk_actor_decl *rk_runtime_actor_find(const rk_runtime *rt, const char *name, uint16_t *type)
{
    if (!rt || !name) /* (the count of a NULL runtime is the built-ins') */
        return NULL;
    int n = rk_runtime_actor_count(rt);
    for (int i = 0; i < n; i++) {
        uint16_t t;
        const rk_actor_decl *d = rk_runtime_actor_at(rt, i, &t, NULL);
        if (strcmp(d->name, name) == 0) {
            if (type)
                *type = t;
            return d;
        }
    }
    return NULL;
}

int rk_runtime_actor_runs(const rk_runtime *rt, const rk_actor_decl *decl)
{
    if (!rt || !decl)
        return 0;
    rt = rk__lane0(rt);
    if (rt->info.backend == RK_BACKEND_CUDA)
        return (decl->flags & RK_ACTOR_GPU) != 0;
    return decl->cpu != NULL || (decl >= rk__builtin_decls && decl < rk__builtin_decls + RK__N_BUILTIN_ACTORS);
}
