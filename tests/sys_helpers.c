/*
 * sys_helpers.c — temp trees and free ports for tests and benchmarks
 * (sys_helpers.h).
 */
#include "tests/sys_helpers.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void
sys_rm_at(const char *path, int depth)
{
    struct stat sb;
    DIR *d;
    struct dirent *e;

    if (lstat(path, &sb) != 0) {
        return;
    }
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    if (depth < SYS_RM_DEPTH && (d = opendir(path)) != NULL) {
        while ((e = readdir(d)) != NULL) {
            char child[1024];
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
                continue;
            }
            snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
            sys_rm_at(child, depth + 1);
        }
        closedir(d);
    }
    rmdir(path);
}

void
sys_rm_tree(const char *path)
{
    sys_rm_at(path, 0);
}

/* The ports sys_free_port handed out last, so that it never hands out
 * the same one twice in a row of calls (the kernel may offer a port again
 * as soon as the probe closed it). */
#define SYS_PORTS_RECENT 64
static int sys_ports[SYS_PORTS_RECENT];
static unsigned sys_ports_next;
static pthread_mutex_t sys_ports_mtx = PTHREAD_MUTEX_INITIALIZER;

static int sys_probe_port(void);

int
sys_free_port(void)
{
    int port = -1;

    pthread_mutex_lock(&sys_ports_mtx);
    for (int tries = 0; tries < 32; tries++) {
        bool seen = false;

        if ((port = sys_probe_port()) < 0) {
            break;
        }
        for (unsigned i = 0; i < SYS_PORTS_RECENT && !seen; i++) {
            seen = sys_ports[i] == port;
        }
        if (!seen) {
            sys_ports[sys_ports_next++ % SYS_PORTS_RECENT] = port;
            break;
        }
        port = -1;
    }
    pthread_mutex_unlock(&sys_ports_mtx);
    return port;
}

/* A port the kernel gives a loopback bind now, or -1. */
static int
sys_probe_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
        port = ntohs(a.sin_port);
    }
    if (fd >= 0) {
        close(fd);
    }
    return port;
}
