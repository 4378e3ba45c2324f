/*
 * sys_helpers.c — temp trees and free ports for tests and benchmarks
 * (sys_helpers.h).
 */
#include "tests/sys_helpers.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
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

int
sys_free_port(void)
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
