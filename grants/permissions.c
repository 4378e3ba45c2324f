/*
 * permissions.c — SetPermission: the per-principal denied flag
 * (g/a/<principal>) that every start, renewal and replay reads now.
 *
 * Never: touches a grant; a denied principal's grants are kept.
 */
#include "grants/rules_impl.h"

void
grants_set_permission(const grants_env *e,
                      const Once__V1__SetPermissionRequest *r,
                      grants_outcome *o)
{
    Once__V1__SetPermissionResponse resp =
        ONCE__V1__SET_PERMISSION_RESPONSE__INIT;
    gkey k;
    int rv;

    gkey_denied(&k, r->principal);
    if ((rv = rows_set_flag(e->txn, &k, !r->allowed)) != 0) {
        o->err = rv;
        return;
    }
    grants_ok(o, &resp.base);
}
