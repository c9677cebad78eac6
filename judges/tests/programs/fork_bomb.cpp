// Hostile test program: forks until the kernel refuses, reports how many forks succeeded on
// stderr, then every process spins. Expected: the process limit stops the forks early and the
// case ends as Time Limit Exceeded with nothing left running.
#include <cstdio>
#include <unistd.h>

int main() {
    long forks = 0;
    while (fork() >= 0) ++forks;  // parent and children all keep forking
    std::fprintf(stderr, "fork refused after %ld forks\n", forks);
    std::fflush(stderr);
    volatile unsigned long long spins = 0;
    for (;;) ++spins;
}
