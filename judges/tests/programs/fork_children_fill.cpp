// Hostile test program: forks 8 children that each allocate and touch 200 MiB (each under the
// per-process address-space limit) and hold it for a second; the parent exits 0 whatever
// happened to them.
// Expected: the run's memory bound kills children (Memory Limit Exceeded).
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>

int main() {
    for (int i = 0; i < 8; ++i) {
        if (fork() == 0) {
            size_t size = 200u << 20;
            volatile char* block = static_cast<volatile char*>(malloc(size));
            if (block == nullptr) _exit(2);
            for (size_t at = 0; at < size; at += 4096) block[at] = 1;  // touch every page
            sleep(1);
            _exit(block[size / 2]);
        }
    }
    while (wait(nullptr) > 0) {
    }
    return 0;
}
