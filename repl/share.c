/*
 * share.c — the grants signing key, the same on every replica.
 *
 * A credential signed before a failover must verify after it, so every
 * replica signs with one Ed25519 key: the first leader of a cluster makes
 * it (grants_signer_load creates <data>/grants_ed25519.key) and puts the
 * file's bytes under /once/<cluster>/grants-key, in a Txn under its leader
 * key, before it serves anything; every later leader writes etcd's copy to
 * its data folder before it opens its server.
 * Owns: the etcd key /once/<cluster>/grants-key.
 * Invariant: a leader serves only with the key etcd holds.
 * Never: replaces a different local key (the operator must settle that:
 * onced stops with a message saying so); the key travels in etcd in
 * plain text, so etcd must be as private as the data folders.
 */
#include "repl/repl_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grants/credential.h"
#include "base/log.h"

#define SHARE_FILE_MAX 4096

static int
share_read(const char *path, uint8_t *buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0) {
        return errno;
    }
    n = read(fd, buf, SHARE_FILE_MAX);
    close(fd);
    if (n < 0) {
        return EIO;
    }
    *len = (size_t)n;
    return 0;
}

/* Writes the file as grants_signer_load would: temp, fsync, rename, fsync
 * of the folder. */
static int
share_write(const char *dir, const char *path, const void *p, size_t len)
{
    char tmp[4200];
    int fd, dfd, rv = 0;

    snprintf(tmp, sizeof(tmp), "%s.repl-tmp", path);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
        return errno;
    }
    if (write(fd, p, len) != (ssize_t)len || fsync(fd) != 0) {
        rv = EIO;
    }
    close(fd);
    if (rv == 0 && rename(tmp, path) != 0) {
        rv = errno;
    }
    if (rv == 0 && (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    if (rv != 0) {
        unlink(tmp);
    }
    return rv;
}

int
repl_share_key(repl *r)
{
    char key[REPL_KEY_MAX], path[4096], err[256];
    uint8_t local[SHARE_FILE_MAX];
    size_t llen = 0;
    etcd_kv *kvs = NULL;
    size_t n = 0;
    int rv, lrv;

    snprintf(key, sizeof(key), "/once/%s/grants-key", r->cfg.cluster);
    snprintf(path, sizeof(path), "%s/%s", r->cfg.data_dir, GRANTS_KEY_FILE);
    if ((rv = etcd_range(r->kv, key, strlen(key), NULL, 0, 1, &kvs, &n, NULL,
                         NULL)) != 0) {
        return rv;
    }
    lrv = share_read(path, local, &llen);
    if (n == 1) {
        if (lrv == ENOENT) {
            rv = share_write(r->cfg.data_dir, path, kvs[0].val, kvs[0].vlen);
            log_info("repl: grants key: the cluster's, written to %s%s", path,
                     rv == 0 ? "" : " — FAILED");
        } else if (lrv != 0 || llen != kvs[0].vlen ||
                   memcmp(local, kvs[0].val, llen) != 0) {
            log_error("repl: %s differs from the cluster's grants key "
                      "(%s in etcd): remove it (this replica then takes the "
                      "cluster's) or settle which key the cluster uses",
                      path, key);
            rv = EEXIST;
        }
        etcd_kvs_free(kvs, n);
        return rv;
    }
    etcd_kvs_free(kvs, n);
    if (lrv == ENOENT) {
        grants_signer s;
        if ((rv = grants_signer_load(&s, r->cfg.data_dir, err, sizeof(err))) !=
            0) {
            log_error("repl: %s", err);
            return rv;
        }
        grants_signer_fini(&s);
        lrv = share_read(path, local, &llen);
    }
    if (lrv != 0) {
        return lrv;
    }
    {
        etcd_txn *t = etcd_txn_alloc();
        bool ok = false;

        if (t == NULL) {
            return ENOMEM;
        }
        etcd_txn_if_created(t, r->leader_key, strlen(r->leader_key),
                            r->leader_rev);
        etcd_txn_if_created(t, key, strlen(key), 0);
        etcd_txn_put(t, key, strlen(key), local, llen, 0);
        rv = etcd_txn_run(r->kv, t, &ok, NULL);
        etcd_txn_free(t);
        if (rv == 0 && !ok) {
            rv = EAGAIN; /* deposed meanwhile, or another put it */
        }
    }
    if (rv == 0) {
        log_info("repl: grants key: %s is now the cluster's", path);
    }
    return rv;
}
