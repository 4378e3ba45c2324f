/*
 * certs.h — a test CA and certificates made with the openssl CLI (Debian's
 * openssl), for the suites that speak TLS: onced's tls+tcp:// listener
 * and etcd's https:// client port.
 *
 * Owns: the files it writes in the folder it is given (the caller removes
 * the folder).
 * Never: reads or writes outside that folder; keys are P-256, valid two
 * days.
 */
#ifndef TESTS_CERTS_H
#define TESTS_CERTS_H

/*
 * Writes into dir (it exists):
 *   ca.pem, ca.key              a self-signed CA, CN "once test CA"
 *   other-ca.pem, other-ca.key  an unrelated CA with the same CN
 *   server.pem, server.key      CN localhost, SAN localhost and
 *                               127.0.0.1, signed by ca
 *   client.pem, client.key      CN once-replica, signed by ca
 *   other-client.pem/.key       CN once-replica, signed by other-ca
 * 0, or -1 when openssl failed (its messages on stderr).
 */
int certs_make(const char *dir);

#endif /* TESTS_CERTS_H */
