/*
 * dispatch.c — handler lookup by full method name.
 */
#include "dispatch.h"

#include <string.h>

typedef struct dispatch_service {
    const dispatch_entry *entries;
    const size_t *count;
} dispatch_service;

static const dispatch_service dispatch_services[] = {
    {svc_counter_methods, &svc_counter_count},
    {svc_lease_methods, &svc_lease_count},
    {svc_admin_methods, &svc_admin_count},
    {svc_grants_methods, &svc_grants_count},
};

const dispatch_entry *
dispatch_find(const char *name, size_t len, const wire_method **wmp)
{
    const wire_method *wm = wire_method_find(name, len);
    size_t ns = sizeof(dispatch_services) / sizeof(dispatch_services[0]);

    *wmp = wm;
    if (wm == NULL) {
        return NULL;
    }
    for (size_t s = 0; s < ns; s++) {
        const dispatch_service *ds = &dispatch_services[s];
        for (size_t i = 0; i < *ds->count; i++) {
            if (strcmp(ds->entries[i].name, wm->full_name) == 0) {
                return &ds->entries[i];
            }
        }
    }
    return NULL;
}
