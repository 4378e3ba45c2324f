/*
 * svc_grants.h — the start-grants service's server-side state: the Ed25519
 * signing key, loaded (or created, mode 0600) from the data folder when
 * onced starts.
 */
#ifndef SERVER_SVC_GRANTS_H
#define SERVER_SVC_GRANTS_H

typedef struct server server;

/* Loads or creates <data>/grants_ed25519.key into srv->grants. 0 or an
 * errno code after logging why. */
int svc_grants_open(server *srv);

/* Wipes and frees srv->grants. */
void svc_grants_close(server *srv);

#endif /* SERVER_SVC_GRANTS_H */
