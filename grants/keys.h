/*
 * keys.h — the LevelDB keys of the start grants, all under "g/".
 *
 * Owns the key layout (one prefix per kind of row, then the identifying
 * bytes as given, so a key is an exact name; the only range scans are
 * ListSurfaces' over g/s/, g/j/ and g/q/, in surface name order, and
 * ListMachines' over g/m/ and g/d/, in machine name order):
 *   g/p/<surface>            Placement: machine, location, generation
 *   g/s/<surface>            SurfaceRow: THE surface index and lock — the
 *                            open grant (or legacy holder), fencing epoch,
 *                            closed-grant history
 *   g/j/<surface>            RejectionLog of the surface
 *   g/r/<attempt:be32><rid>  RequestLock: (request_id, attempt) → grant id
 *                            and digest, written with the grant
 *   g/l/<rid>                highest accepted attempt of a request (be32)
 *   g/g/<grant_id:be64>      Grant
 *   g/w/<work_id:be64>       WorkRow
 *   g/q/<surface>            pending WorkRow id of the surface (be64)
 *   g/m/<machine>            MachineQueue
 *   g/d/<machine>            the machine was deleted (1 byte)
 *   g/a/<principal>          the principal may not obtain grants (1 byte)
 *   g/n/grant, g/n/work      next grant id / work id (be64)
 * Invariant: a surface key, machine, request id or principal is an
 * arbitrary byte string validated by rules.c (1..256 bytes, no control
 * characters); it is always the last component, so keys never collide.
 * Never: reuses a prefix for another kind of row.
 */
#ifndef GRANTS_KEYS_H
#define GRANTS_KEYS_H

#include <stddef.h>
#include <stdint.h>

#define GRANTS_KEY_MAX 300

typedef struct gkey {
    char b[GRANTS_KEY_MAX];
    size_t n;
} gkey;

void gkey_placement(gkey *k, const char *surface);
void gkey_surface(gkey *k, const char *surface);
void gkey_rejections(gkey *k, const char *surface);
void gkey_lock(gkey *k, const char *request_id, uint32_t attempt);
void gkey_latest(gkey *k, const char *request_id);
void gkey_grant(gkey *k, uint64_t grant_id);
void gkey_work(gkey *k, uint64_t work_id);
void gkey_pending(gkey *k, const char *surface);
void gkey_machine(gkey *k, const char *machine);
void gkey_machine_deleted(gkey *k, const char *machine);
void gkey_denied(gkey *k, const char *principal);
void gkey_next_grant(gkey *k);
void gkey_next_work(gkey *k);

#endif /* GRANTS_KEYS_H */
