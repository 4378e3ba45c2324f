/*
 * tls_server.c — tls+tcp:// server configuration (tls_server.h).
 */
#include "base/tls_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A whole PEM file as a string (malloc'd, the caller frees), or NULL. */
static char *
tls_read_pem(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    long n;

    if (f == NULL) {
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n < (1L << 20) &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

int
tls_server_config(nng_tls_config **out, const char *cert_file,
                  const char *key_file, char *err, size_t errlen)
{
    char *cert, *key;
    int rv;

    *out = NULL;
    if (cert_file == NULL || key_file == NULL) {
        snprintf(err, errlen,
                 "a tls+tcp:// address needs --tls-cert FILE "
                 "and --tls-key FILE");
        return NNG_EINVAL;
    }
    cert = tls_read_pem(cert_file);
    key = tls_read_pem(key_file);
    if (cert == NULL || key == NULL) {
        snprintf(err, errlen, "cannot read the TLS %s %s",
                 cert == NULL ? "certificate" : "key",
                 cert == NULL ? cert_file : key_file);
        rv = NNG_EINVAL;
    } else if ((rv = nng_tls_config_alloc(out, NNG_TLS_MODE_SERVER)) != 0 ||
               (rv = nng_tls_config_own_cert(*out, cert, key, NULL)) != 0) {
        snprintf(err, errlen, "TLS certificate %s / key %s: %s", cert_file,
                 key_file, nng_strerror(rv));
        if (*out != NULL) {
            nng_tls_config_free(*out);
            *out = NULL;
        }
    }
    if (key != NULL) {
        memset(key, 0, strlen(key));
    }
    free(cert);
    free(key);
    return rv;
}

int
tls_server_listen(nng_socket s, const char *url, nng_tls_config *cfg,
                  nng_listener *lp)
{
    nng_listener nl;
    int rv;

    if ((rv = nng_listener_create(&nl, s, url)) != 0) {
        return rv;
    }
    if ((rv = nng_listener_set_ptr(nl, NNG_OPT_TLS_CONFIG, cfg)) != 0 ||
        (rv = nng_listener_start(nl, 0)) != 0) {
        nng_listener_close(nl);
        return rv;
    }
    if (lp != NULL) {
        *lp = nl;
    }
    return 0;
}
