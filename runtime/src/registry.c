/* registry.c - the actors a runtime serves by name: the built-ins echo and
 * vadd, and those of the modules it loaded (modules.c); and the user actor
 * table (rk_config.actors + module actors) its consumers run. */
#include <stdlib.h>
#include <string.h>

#include "modules.h"

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
    rt->mods = calloc(1, sizeof *rt->mods);
    if (!rt->mods)
        return rk__fail(RK_ENOMEM, "rk_runtime_open: out of memory");
    int rc = c->n_modules ? rk__modules_load(rt->mods, c->modules, c->n_modules, 0) : 0;
    /* the paths are borrowed only until open returns; the set keeps copies */
    rt->cfg.modules = NULL;
    rt->cfg.n_modules = 0;
    if (rc)
        return rc;
    const rk__modset *m = rt->mods;
    for (size_t i = 0; i < c->n_actors; i++)
        for (size_t j = 0; j < m->n; j++)
            if (c->actors[i].type == m->defs[j].type)
                return rk__fail(RK_EINVAL, "user actor \"%s\" of rk_config.actors has type %u, which module %s's "
                                "actor \"%s\" takes (module actors take types from %u up)",
                                c->actors[i].name ? c->actors[i].name : "?", c->actors[i].type, m->origin[j],
                                m->defs[j].name, RK_OP_USER);
    rt->n_defs = c->n_actors + m->n;
    rt->defs = calloc(rt->n_defs + 1, sizeof *rt->defs);
    if (!rt->defs)
        return rk__fail(RK_ENOMEM, "rk_runtime_open: out of memory");
    if (c->n_actors)
        memcpy(rt->defs, c->actors, c->n_actors * sizeof *rt->defs);
    if (m->n)
        memcpy(rt->defs + c->n_actors, m->defs, m->n * sizeof *rt->defs);
    for (size_t j = 0; j < m->n; j++)
        rk__log(RK__LOG_INFO, "module %s: actor \"%s\" (type %u%s%s)", m->origin[j], m->defs[j].name,
                m->defs[j].type, m->defs[j].cpu ? ", cpu" : "", m->defs[j].gpu ? ", gpu" : "");
    return 0;
}

void rk__registry_free(rk_runtime *rt)
{
    if (rt->mods)
        rk__modules_free(rt->mods);
    free(rt->mods);
    free(rt->defs);
    rt->mods = NULL;
    rt->defs = NULL;
    rt->n_defs = 0;
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
