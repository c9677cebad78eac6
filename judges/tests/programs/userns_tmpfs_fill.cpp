// Hostile test program: creates a user namespace, mounts a tmpfs of unlimited size in it and
// fills it with 2 GiB, then exits 0 as if nothing happened.
// Expected: no user namespace can be created in the sandbox (a runtime failure, exit 3), and
// were it possible, the run's memory bound would stop the fill (Memory Limit Exceeded).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static bool write_file(const char* path, const char* text) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) return false;
    bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    close(fd);
    return ok;
}

int main() {
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
        fprintf(stderr, "unshare(CLONE_NEWUSER): %s\n", strerror(errno));
        return 3;
    }
    char map[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "0 %u 1", uid);
    write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "0 %u 1", gid);
    write_file("/proc/self/gid_map", map);
    mkdir("/tmp/fill", 0700);
    if (mount("none", "/tmp/fill", "tmpfs", 0, nullptr) != 0) {
        fprintf(stderr, "mount tmpfs: %s\n", strerror(errno));
        return 4;
    }
    int fd = open("/tmp/fill/data", O_CREAT | O_WRONLY, 0600);
    static char chunk[1 << 20];
    memset(chunk, 7, sizeof chunk);
    for (int i = 0; i < 2048; ++i) {
        if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) {
            fprintf(stderr, "tmpfs write stopped after %d MiB: %s\n", i, strerror(errno));
            break;
        }
    }
    return 0;
}
