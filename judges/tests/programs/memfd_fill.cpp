// Hostile test program: writes 2 GiB into anonymous memfd files, 64 MiB each (write(2), no
// mapping, so neither the address-space limit nor the file-size limit stops it), keeps them
// open, then exits 0 as if nothing happened.
// Expected: the run's memory bound stops it (Memory Limit Exceeded).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

int main() {
    static char chunk[1 << 20];
    memset(chunk, 7, sizeof chunk);
    for (int file = 0; file < 32; ++file) {
        int fd = memfd_create("fill", 0);
        if (fd < 0) {
            fprintf(stderr, "memfd_create: %s\n", strerror(errno));
            return 3;
        }
        for (int mib = 0; mib < 64; ++mib) {
            if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) {
                fprintf(stderr, "memfd write stopped at %d MiB: %s\n", file * 64 + mib,
                        strerror(errno));
                return 4;
            }
        }
    }
    return 0;
}
