// judge-runner: the supervisor that runs inside every sandbox, between bubblewrap and the
// candidate. Compiled by the judge at startup (see judges/sandbox.py); not candidate code.
//
// usage: judge-runner REPORT_FD WALL_MS CPU_SOFT CPU_HARD AS_BYTES NPROC FSIZE STACK -- CMD...
//        judge-runner --enter-cgroups FD[,FD...] -- CMD...   (outside the sandbox, see below)
//
// It runs as PID 1 of the sandbox's PID namespace (bwrap --as-pid-1), so orphans are re-parented
// to it and the program cannot signal it. It sets the rlimits on the program only (CPU seconds
// soft/hard, address space when AS > 0, processes, file size, stack when STACK > 0, no core
// dumps) and makes the program the first victim of an out-of-memory kill, runs
// it, kills it at WALL_MS, then kills and reaps every leftover process and writes one report
// line to REPORT_FD, after a first line `started` written as soon as the sandbox is up:
//   exit=<status|-1> signal=<number|0> cpu_ns=<n> wall_ns=<n> maxrss_kb=<n> timed_out=<0|1>
// bubblewrap folds a signal death into an exit status and loses the CPU time of the process
// tree when the PID namespace ends, which is why this report exists. The runner makes itself
// non-dumpable so the candidate (same uid) cannot reach the report descriptor through /proc.

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out = 0;
static volatile pid_t child = -1;

static void on_alarm(int) {
    timed_out = 1;
    if (child > 0) kill(child, SIGKILL);
}

static long long parse(const char* text, const char* what) {
    char* end = nullptr;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < 0) {
        fprintf(stderr, "judge-runner: bad %s '%s'\n", what, text);
        _exit(120);
    }
    return value;
}

static void limit(int resource, long long soft, long long hard) {
    struct rlimit value;
    value.rlim_cur = (rlim_t)soft;
    value.rlim_max = (rlim_t)hard;
    if (setrlimit(resource, &value) != 0) {
        perror("judge-runner: setrlimit");
        _exit(121);
    }
}

static long long nanoseconds(const struct timeval& value) {
    return (long long)value.tv_sec * 1000000000LL + (long long)value.tv_usec * 1000LL;
}

// Outside the sandbox: write "0" (this process) to each inherited cgroup.procs descriptor,
// close them and execute CMD, so bubblewrap and everything it starts is in the run's groups.
static int enter_cgroups(int argc, char** argv) {
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: judge-runner --enter-cgroups FD[,FD...] -- CMD...\n");
        return 125;
    }
    for (char* item = strtok(argv[2], ","); item != nullptr; item = strtok(nullptr, ",")) {
        int fd = (int)parse(item, "cgroup.procs fd");
        if (write(fd, "0", 1) != 1) {
            fprintf(stderr, "judge-runner: cannot enter the run's cgroup: %s\n", strerror(errno));
            return 125;
        }
        close(fd);
    }
    execv(argv[4], argv + 4);
    fprintf(stderr, "judge-runner: cannot execute %s: %s\n", argv[4], strerror(errno));
    return 125;
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "--enter-cgroups") == 0) return enter_cgroups(argc, argv);
    if (argc < 11 || strcmp(argv[9], "--") != 0) {
        fprintf(stderr, "usage: judge-runner FD WALL_MS CPU_SOFT CPU_HARD AS NPROC FSIZE STACK -- CMD...\n");
        return 120;
    }
    int report = (int)parse(argv[1], "report fd");
    long long wall_ms = parse(argv[2], "wall ms");
    long long cpu_soft = parse(argv[3], "cpu soft"), cpu_hard = parse(argv[4], "cpu hard");
    long long address_space = parse(argv[5], "address space"), processes = parse(argv[6], "nproc");
    long long file_size = parse(argv[7], "file size"), stack = parse(argv[8], "stack");
    if (fcntl(report, F_SETFD, FD_CLOEXEC) != 0) {
        perror("judge-runner: report fd");
        return 122;
    }
    prctl(PR_SET_DUMPABLE, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);  // in case it is not PID 1
    dprintf(report, "started\n");  // the sandbox is up: from here on, failures are the program's

    struct timespec started, ended;
    clock_gettime(CLOCK_MONOTONIC, &started);
    pid_t pid = fork();
    if (pid < 0) {
        perror("judge-runner: fork");
        return 123;
    }
    if (pid == 0) {
        limit(RLIMIT_CORE, 0, 0);
        limit(RLIMIT_CPU, cpu_soft, cpu_hard);
        if (address_space > 0) limit(RLIMIT_AS, address_space, address_space);
        limit(RLIMIT_FSIZE, file_size, file_size);
        if (stack > 0) limit(RLIMIT_STACK, stack, stack);
        limit(RLIMIT_NPROC, processes, processes);
        // Under a memory bound, the kernel's OOM killer picks the program, not this supervisor.
        int adjust = open("/proc/self/oom_score_adj", O_WRONLY);
        if (adjust >= 0) {
            if (write(adjust, "1000", 4) != 4) perror("judge-runner: oom_score_adj");
            close(adjust);
        }
        execvp(argv[10], argv + 10);
        fprintf(stderr, "judge-runner: cannot execute %s: %s\n", argv[10], strerror(errno));
        _exit(127);
    }
    child = pid;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_alarm;
    sigaction(SIGALRM, &action, nullptr);
    struct itimerval timer;
    memset(&timer, 0, sizeof timer);
    timer.it_value.tv_sec = wall_ms / 1000;
    timer.it_value.tv_usec = (wall_ms % 1000) * 1000;
    setitimer(ITIMER_REAL, &timer, nullptr);

    int status = 0;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) {
            perror("judge-runner: wait4");
            return 124;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &ended);
    memset(&timer, 0, sizeof timer);
    setitimer(ITIMER_REAL, &timer, nullptr);

    long long cpu = nanoseconds(usage.ru_utime) + nanoseconds(usage.ru_stime);
    long long maxrss = usage.ru_maxrss;
    // Leftovers (orphans re-parented to this process) die now; their time counts too.
    kill(-1, SIGKILL);
    for (;;) {
        int other_status;
        struct rusage other;
        pid_t done = wait4(-1, &other_status, 0, &other);
        if (done < 0) {
            if (errno == EINTR) continue;
            break;
        }
        cpu += nanoseconds(other.ru_utime) + nanoseconds(other.ru_stime);
        if (other.ru_maxrss > maxrss) maxrss = other.ru_maxrss;
    }
    long long wall = (long long)(ended.tv_sec - started.tv_sec) * 1000000000LL +
                     (long long)(ended.tv_nsec - started.tv_nsec);
    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int signal_number = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    dprintf(report, "exit=%d signal=%d cpu_ns=%lld wall_ns=%lld maxrss_kb=%lld timed_out=%d\n",
            exit_code, signal_number, cpu, wall, maxrss, (int)timed_out);
    return 0;
}
