// Attack: hide CPU time in children the kernel reaps. With SIGCHLD ignored, a child that exits
// is reaped by the kernel: its CPU time is added to no parent's cutime/cstime and to no rusage
// a wait returns. The parent sleeps while two children at a time each burn 50 ms of CPU; after
// 100 children (5 s of CPU in all, 0.01 s in the parent) it prints nothing and exits 0.
#include <csignal>
#include <ctime>
#include <unistd.h>

static double cpu_seconds() {
    timespec now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return now.tv_sec + now.tv_nsec / 1e9;
}

int main() {
    signal(SIGCHLD, SIG_IGN);
    for (int child = 0; child < 100; ++child) {
        if (fork() == 0) {
            volatile unsigned long spin = 0;
            while (cpu_seconds() < 0.05) ++spin;
            _exit(0);
        }
        usleep(25000);  // about two children alive at any time
    }
    return 0;
}
