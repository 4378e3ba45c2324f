/*
 * certs.c — test certificates with the openssl CLI (certs.h).
 */
#include "tests/certs.h"

#include <stdio.h>
#include <stdlib.h>

/* A new P-256 key NAME.key and, with -x509, a self-signed NAME.pem, else a
 * request NAME.csr. */
#define CERTS_KEY                                                              \
    "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
#define CERTS_CA(name)                                                         \
    CERTS_KEY "-x509 -nodes -keyout " name ".key -out " name ".pem -days 2 "   \
              "-subj '/CN=once test CA' 2>/dev/null && "
#define CERTS_CSR(name, cn)                                                    \
    CERTS_KEY "-nodes -keyout " name ".key -out " name ".csr "                 \
              "-subj '/CN=" cn "' 2>/dev/null && "
/* Signs NAME.csr with CA into NAME.pem (extensions from ext.cnf). */
#define CERTS_SIGN(name, ca)                                                   \
    "openssl x509 -req -in " name ".csr -CA " ca ".pem -CAkey " ca ".key "     \
    "-CAcreateserial -out " name ".pem -days 2 -extfile ext.cnf 2>/dev/null"

int
certs_make(const char *dir)
{
    char cmd[4096];

    snprintf(cmd, sizeof(cmd),
             "cd '%s' && "
             "printf 'subjectAltName=DNS:localhost,DNS:127.0.0.1,"
             "IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext.cnf && " //
             CERTS_CA("ca") CERTS_CA("other-ca")                          //
             CERTS_CSR("server", "localhost")                             //
             CERTS_CSR("client", "once-replica")                          //
             CERTS_CSR("other-client", "once-replica")                    //
             CERTS_SIGN("server", "ca") " && "                            //
             CERTS_SIGN("client", "ca") " && "                            //
             CERTS_SIGN("other-client", "other-ca"),
             dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "certs_make: openssl failed in %s\n", dir);
        return -1;
    }
    return 0;
}
