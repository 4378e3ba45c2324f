/*
 * dispatch.c — opening the services and finding a method's handler.
 */
#include "server/dispatch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

struct dispatch {
    const service_ops *const *ops;
    void **state; /* state[i] of ops[i] */
    size_t n;
    size_t opened; /* ops[0..opened) were opened */
};

/* Whether every method of o is "/<o->name>/..." and in the descriptors. */
static bool
dispatch_names_ok(const service_ops *o)
{
    size_t nlen = strlen(o->name);

    for (size_t i = 0; i < o->nmethods; i++) {
        const char *m = o->methods[i].name;

        if (m[0] != '/' || strncmp(m + 1, o->name, nlen) != 0 ||
            m[1 + nlen] != '/' || wire_method_find(m, strlen(m)) == NULL) {
            log_error("service %s: method %s is not one of its .proto "
                      "methods",
                      o->name, m);
            return false;
        }
    }
    return true;
}

int
dispatch_open(dispatch **dp, const exec_env *env)
{
    dispatch *d = calloc(1, sizeof(*d));
    int rv;

    if (d == NULL) {
        return ENOMEM;
    }
    d->ops = services_list(&d->n);
    if ((d->state = calloc(d->n + 1, sizeof(*d->state))) == NULL) {
        free(d);
        return ENOMEM;
    }
    for (; d->opened < d->n; d->opened++) {
        const service_ops *o = d->ops[d->opened];

        if (!dispatch_names_ok(o)) {
            dispatch_close(d);
            return EINVAL;
        }
        if (o->open != NULL && (rv = o->open(env, &d->state[d->opened])) != 0) {
            dispatch_close(d);
            return rv;
        }
    }
    *dp = d;
    return 0;
}

void
dispatch_close(dispatch *d)
{
    if (d == NULL) {
        return;
    }
    while (d->opened > 0) {
        const service_ops *o = d->ops[--d->opened];

        if (o->close != NULL) {
            o->close(d->state[d->opened]);
        }
    }
    free(d->state);
    free(d);
}

const service_method *
dispatch_find(const dispatch *d, const char *name, size_t len,
              const wire_method **wmp, void **svc)
{
    const wire_method *wm = wire_method_find(name, len);

    *wmp = wm;
    *svc = NULL;
    if (wm == NULL) {
        return NULL;
    }
    for (size_t s = 0; s < d->n; s++) {
        const service_ops *o = d->ops[s];

        for (size_t i = 0; i < o->nmethods; i++) {
            if (strcmp(o->methods[i].name, wm->full_name) == 0) {
                *svc = d->state[s];
                return &o->methods[i];
            }
        }
    }
    return NULL;
}
