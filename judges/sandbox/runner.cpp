// judge-runner: the supervisor that runs inside every sandbox, between bubblewrap and the
// candidate. Compiled by the judge at startup (see judges/sandbox.py); not candidate code.
//
// usage: judge-runner REPORT_FD WALL_MS BACKSTOP_MS CPU_SOFT CPU_HARD AS_BYTES NPROC FSIZE STACK
//                     SHARE_FD SHARE_SLOT CPU_FD -- CMD...
//        judge-runner --enter-cgroups FD[,FD...] -- CMD...   (outside the sandbox, see below)
//        judge-runner --launch UID GID FD[,FD...]|- -- CMD... (the same, then the sandbox uid)
//
// It runs as PID 1 of the sandbox's PID namespace (bwrap --as-pid-1), so orphans are re-parented
// to it and the program cannot signal it. It sets the rlimits on the program only (CPU seconds
// soft/hard, address space when AS > 0, processes, file size, stack when STACK > 0, no core
// dumps) and makes the program the first victim of an out-of-memory kill, runs it, then kills
// and reaps every leftover process and writes one report line to REPORT_FD, after a first line
// `started` written as soon as the sandbox is up:
//   exit=<status|-1> signal=<number|0> cpu_ns=<n> wall_ns=<n> maxrss_kb=<n> timed_out=<0|1>
//   wait_ns=<n> starved=<0|1>
// bubblewrap folds a signal death into an exit status and loses the CPU time of the process
// tree when the PID namespace ends, which is why this report exists. The runner makes itself
// non-dumpable so the candidate (same uid) cannot reach the report descriptor through /proc.
//
// The wall-clock limit counts the program's own time only: the time it ran or was idle, not the
// time it waited for a CPU that others (host load) held. About every TICK the runner samples
// the sandbox's tasks (see WaitClock): `wait`, the time some task waited for a CPU; whether
// one is ready to run now; the CPU time of the whole tree. With SHARE_FD >= 0 (an interactive
// case) it publishes the first two in slot SHARE_SLOT of that 32-byte shared file and reads
// its partner's: a candidate blocked on an interactor that waits for a CPU is not charged for
// it either. The program is killed (timed_out=1) when elapsed - wait - partner's wait reaches
// WALL_MS while neither has a task ready to run: the wall-clock limit stops idle programs; a
// busy one reaches its CPU limit first. The tree's CPU time is held to CPU_SOFT seconds (as
// RLIMIT_CPU holds each process), so many processes cannot run on. However long it waited,
// the program is killed when the real time reaches BACKSTOP_MS (starved=1: the host, not the
// program, kept it from finishing, which the judge treats as an infrastructure fault).
//
// CPU_FD >= 0 is a descriptor of the run's cgroup CPU counter (v1 `cpuacct.usage`, ns; v2
// `cpu.stat`, `usage_usec`): it counts every process of the run, also children that nobody
// reaped (a program ignoring SIGCHLD has them reaped by the kernel, and their CPU is then in
// no /proc file nor rusage). The tree's CPU is then the larger of /proc's and the group's
// growth since the fork less the runner's own CPU since then: for the CPU limit while it runs
// and for the report's cpu_ns, so CPU spent in any process is a Time Limit Exceeded, never a
// run that looks starved.

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_map>

static const long long TICK_NS = 20000000LL;  // how often the wait for a CPU is sampled

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

// Outside the sandbox: enter the run's cgroups (FDS, or "-" for none), then, with UID >= 0,
// drop every group and become UID:GID, and execute CMD (bubblewrap). Dropping the identity here
// rather than in the judge lets the judge start each run with vfork (Python's subprocess copies
// the whole judge with fork() when it must change the uid itself).
static int launch(int argc, char** argv) {
    if (argc < 7 || strcmp(argv[5], "--") != 0) {
        fprintf(stderr, "usage: judge-runner --launch UID GID FD[,FD...]|- -- CMD...\n");
        return 125;
    }
    long long uid = strcmp(argv[2], "-1") == 0 ? -1 : parse(argv[2], "uid");
    long long gid = strcmp(argv[3], "-1") == 0 ? -1 : parse(argv[3], "gid");
    if (strcmp(argv[4], "-") != 0) {
        for (char* item = strtok(argv[4], ","); item != nullptr; item = strtok(nullptr, ",")) {
            int fd = (int)parse(item, "cgroup.procs fd");
            if (write(fd, "0", 1) != 1) {
                fprintf(stderr, "judge-runner: cannot enter the run's cgroup: %s\n",
                        strerror(errno));
                return 125;
            }
            close(fd);
        }
    }
    if (uid >= 0 && (setgroups(0, nullptr) != 0 || setgid((gid_t)gid) != 0 ||
                     setuid((uid_t)uid) != 0)) {
        fprintf(stderr, "judge-runner: cannot become uid %lld: %s\n", uid, strerror(errno));
        return 125;
    }
    execv(argv[6], argv + 6);
    fprintf(stderr, "judge-runner: cannot execute %s: %s\n", argv[6], strerror(errno));
    return 125;
}

static long long now_ns() {
    struct timespec value;
    clock_gettime(CLOCK_MONOTONIC, &value);
    return (long long)value.tv_sec * 1000000000LL + value.tv_nsec;
}

static bool numeric(const char* name) {
    if (*name == '\0') return false;
    for (const char* c = name; *c; ++c)
        if (*c < '0' || *c > '9') return false;
    return true;
}

// The text of a small /proc file into `text` (at most size - 1 bytes); its length, or -1.
static ssize_t read_small(const char* path, char* text, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t length = read(fd, text, size - 1);
    close(fd);
    if (length <= 0) return -1;
    text[length] = '\0';
    return length;
}

// The fields of a /proc stat file after the command name (which may hold spaces and brackets).
static const char* stat_fields(const char* text) {
    const char* after = strrchr(text, ')');
    return after == nullptr ? nullptr : after + 1;
}

// The CPU time (ns) of one process and of the children it reaped, from /proc/<pid>/stat
// (utime, stime, cutime, cstime in clock ticks); 0 when it cannot be read.
static long long process_cpu(const char* pid) {
    char path[300], text[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    const char* fields = read_small(path, text, sizeof text) < 0 ? nullptr : stat_fields(text);
    unsigned long long user = 0, system = 0, children_user = 0, children_system = 0;
    if (fields == nullptr ||
        sscanf(fields, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
               &user, &system, &children_user, &children_system) != 4) {
        return 0;
    }
    static const long ticks = sysconf(_SC_CLK_TCK);
    return (long long)(user + system + children_user + children_system) * (1000000000LL / ticks);
}

// What the runner samples of the sandbox's tasks (every process but itself, every thread):
//  - `total`: the time the run waited for a CPU: per sample, the largest growth of any task's
//    run queue delay (/proc/<pid>/task/<tid>/schedstat, 2nd field), so many threads waiting at
//    once count once. The kernel adds a wait to that field when the task gets its CPU back, so
//    a growth may cover waits before the previous sample; it is not cut to the interval (the
//    caller caps the sum at the elapsed time).
//  - `runnable`: some task is ready to run (state R) now: running, or waiting for a CPU in a
//    wait the kernel has not added yet.
//  - `cpu`: the CPU time of the whole process tree (/proc/<pid>/stat, reaped children too).
struct WaitClock {
    std::unordered_map<long, long long> last;  // task id -> its delay at the previous sample
    long long total = 0;
    long long cpu = 0;
    long long sampled_at = -1;
    bool runnable = false;

    void sample(long long now) {
        std::unordered_map<long, long long> seen;
        long long largest = 0, tree_cpu = 0;
        bool ready = false;
        char self[32];
        snprintf(self, sizeof self, "%d", (int)getpid());  // 1 in the sandbox
        DIR* proc = opendir("/proc");
        if (proc == nullptr) return;
        while (struct dirent* process = readdir(proc)) {
            if (!numeric(process->d_name) || strcmp(process->d_name, self) == 0) continue;
            tree_cpu += process_cpu(process->d_name);
            char tasks_path[300];
            snprintf(tasks_path, sizeof tasks_path, "/proc/%s/task", process->d_name);
            DIR* tasks = opendir(tasks_path);
            if (tasks == nullptr) continue;
            while (struct dirent* task = readdir(tasks)) {
                if (!numeric(task->d_name)) continue;
                char path[600], text[1024];
                snprintf(path, sizeof path, "%s/%s/stat", tasks_path, task->d_name);
                const char* fields =
                    read_small(path, text, sizeof text) < 0 ? nullptr : stat_fields(text);
                char state = '?';
                if (fields != nullptr && sscanf(fields, " %c", &state) == 1 && state == 'R') {
                    ready = true;
                }
                snprintf(path, sizeof path, "%s/%s/schedstat", tasks_path, task->d_name);
                unsigned long long on_cpu = 0, delay = 0;
                if (read_small(path, text, sizeof text) < 0 ||
                    sscanf(text, "%llu %llu", &on_cpu, &delay) != 2) {
                    continue;
                }
                long id = strtol(task->d_name, nullptr, 10);
                auto before = last.find(id);
                long long grown = (long long)delay - (before == last.end() ? 0 : before->second);
                largest = std::max(largest, grown);
                seen[id] = (long long)delay;
            }
            closedir(tasks);
        }
        closedir(proc);
        total += largest;
        cpu = std::max(cpu, tree_cpu);
        runnable = ready;
        sampled_at = now;
        last.swap(seen);
    }
};

// The CPU time (ns) the run's cgroup counted so far, from CPU_FD; -1 when unreadable.
static long long group_cpu(int fd) {
    if (fd < 0) return -1;
    char text[4096];
    ssize_t length = pread(fd, text, sizeof text - 1, 0);
    if (length <= 0) return -1;
    text[length] = '\0';
    const char* usec = strstr(text, "usage_usec ");
    if (usec != nullptr) return strtoll(usec + 11, nullptr, 10) * 1000LL;  // v2 cpu.stat
    return strtoll(text, nullptr, 10);  // v1 cpuacct.usage
}

static long long own_cpu() {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return nanoseconds(usage.ru_utime) + nanoseconds(usage.ru_stime);
}

// The program's CPU as its cgroup counts it: the group's growth since `base`, less the
// runner's own growth since `own_base` (its sampling of /proc is in the group too).
struct GroupClock {
    int fd = -1;
    long long base = 0, own_base = 0;

    void start() {
        base = group_cpu(fd);
        own_base = own_cpu();
    }
    long long program() const {
        long long now = group_cpu(fd);
        if (fd < 0 || now < 0 || base < 0) return 0;
        return std::max(0LL, now - base - (own_cpu() - own_base));
    }
};

// The 32-byte file an interactive case's two runners share: for slot 0 and 1, each one's wait
// (bytes 0-15) and whether one of its tasks is ready to run (bytes 16-31).
struct Share {
    int fd = -1;
    int slot = 0;

    void publish(long long wait, bool runnable) const {
        long long values[2] = {wait, runnable ? 1 : 0};
        if (fd < 0) return;
        if (pwrite(fd, &values[0], 8, slot * 8) < 0 || pwrite(fd, &values[1], 8, 16 + slot * 8) < 0) {
            perror("judge-runner: share");
        }
    }
    long long partner(int offset) const {
        long long value = 0;
        if (fd < 0) return 0;
        if (pread(fd, &value, sizeof value, offset + (1 - slot) * 8) != sizeof value) return 0;
        return value > 0 ? value : 0;
    }
    long long partner_wait() const { return partner(0); }
    bool partner_runnable() const { return partner(16) != 0; }
};

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "--enter-cgroups") == 0) return enter_cgroups(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--launch") == 0) return launch(argc, argv);
    if (argc < 15 || strcmp(argv[13], "--") != 0) {
        fprintf(stderr, "usage: judge-runner FD WALL_MS BACKSTOP_MS CPU_SOFT CPU_HARD AS NPROC "
                        "FSIZE STACK SHARE_FD SHARE_SLOT CPU_FD -- CMD...\n");
        return 120;
    }
    int report = (int)parse(argv[1], "report fd");
    long long wall_ns = parse(argv[2], "wall ms") * 1000000LL;
    long long backstop_ns = parse(argv[3], "backstop ms") * 1000000LL;
    long long cpu_soft = parse(argv[4], "cpu soft"), cpu_hard = parse(argv[5], "cpu hard");
    long long address_space = parse(argv[6], "address space"), processes = parse(argv[7], "nproc");
    long long file_size = parse(argv[8], "file size"), stack = parse(argv[9], "stack");
    Share share;
    if (strcmp(argv[10], "-1") != 0) {
        share.fd = (int)parse(argv[10], "share fd");
        share.slot = parse(argv[11], "share slot") == 0 ? 0 : 1;
    }
    GroupClock group;
    if (strcmp(argv[12], "-1") != 0) group.fd = (int)parse(argv[12], "cpu fd");
    if (fcntl(report, F_SETFD, FD_CLOEXEC) != 0 ||
        (share.fd >= 0 && fcntl(share.fd, F_SETFD, FD_CLOEXEC) != 0) ||
        (group.fd >= 0 && fcntl(group.fd, F_SETFD, FD_CLOEXEC) != 0)) {
        perror("judge-runner: report fd");
        return 122;
    }
    if (getpid() != 1) {  // its clean-up, kill(-1, SIGKILL), would reach every process it sees
        fprintf(stderr, "judge-runner: not PID 1 of its own PID namespace (bwrap --as-pid-1); "
                        "refusing to run\n");
        return 126;
    }
    prctl(PR_SET_DUMPABLE, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    dprintf(report, "started\n");  // the sandbox is up: from here on, failures are the program's

    // SIGCHLD stays blocked here, so sigtimedwait below wakes up when a child ends.
    sigset_t children, previous;
    sigemptyset(&children);
    sigaddset(&children, SIGCHLD);
    sigprocmask(SIG_BLOCK, &children, &previous);
    group.start();
    long long started = now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("judge-runner: fork");
        return 123;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &previous, nullptr);
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
        execvp(argv[14], argv + 14);
        fprintf(stderr, "judge-runner: cannot execute %s: %s\n", argv[14], strerror(errno));
        _exit(127);
    }

    WaitClock waited;
    int timed_out = 0, starved = 0;
    bool killed = false;
    long long ended = started;
    for (;;) {
        siginfo_t info;
        memset(&info, 0, sizeof info);
        // WNOWAIT: an ended program stays a zombie, so its last delay can still be read.
        bool exited = waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                      info.si_pid == pid;
        long long now = now_ns();
        if (exited || killed || waited.sampled_at < 0 || now - waited.sampled_at >= TICK_NS / 2) {
            waited.sample(now);
            waited.cpu = std::max(waited.cpu, group.program());
            share.publish(waited.total, waited.runnable);
        }
        if (exited) {
            ended = now;
            break;
        }
        long long elapsed = now - started;
        long long own = elapsed - std::min(elapsed, waited.total + share.partner_wait());
        // RLIMIT_CPU holds each process; the whole tree is held here, to the same soft limit.
        bool over_cpu = waited.cpu >= cpu_soft * 1000000000LL;
        // The wall-clock limit stops a program that is idle (asleep, blocked); one ready to run
        // is using its CPU limit or waiting for a CPU, and is not stopped by it.
        bool idle = !waited.runnable && !share.partner_runnable();
        if (!killed && (over_cpu || (own >= wall_ns && idle) || elapsed >= backstop_ns)) {
            timed_out = !over_cpu && own >= wall_ns && idle;
            starved = !over_cpu && !timed_out;
            kill(pid, SIGKILL);
            killed = true;
        }
        long long pause = killed ? TICK_NS / 4 : std::min(TICK_NS, std::max(wall_ns - own, TICK_NS / 2));
        pause = std::min(pause, std::max(backstop_ns - elapsed, 1000000LL));
        struct timespec timeout = {(time_t)(pause / 1000000000LL), (long)(pause % 1000000000LL)};
        sigtimedwait(&children, nullptr, &timeout);
    }

    int status = 0;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) {
            perror("judge-runner: wait4");
            return 124;
        }
    }
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
    cpu = std::max(cpu, group.program());  // children the kernel reaped count too
    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int signal_number = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    dprintf(report,
            "exit=%d signal=%d cpu_ns=%lld wall_ns=%lld maxrss_kb=%lld timed_out=%d wait_ns=%lld "
            "starved=%d\n",
            exit_code, signal_number, cpu, ended - started, maxrss, timed_out,
            std::min(waited.total, ended - started), starved);
    return 0;
}
