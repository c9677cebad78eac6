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
// dumps), refuses it the kernel's keyrings (seccomp: add_key, keyctl and request_key fail with
// EPERM) and makes the program the first victim of an out-of-memory kill, runs it, then kills
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
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <vector>
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
    bool runner_inside = true;  // false in a session: only the program is in the case's group
    long long base = 0, own_base = 0;

    void start() {
        base = group_cpu(fd);
        own_base = own_cpu();
    }
    long long program() const {
        long long now = group_cpu(fd);
        if (fd < 0 || now < 0 || base < 0) return 0;
        long long own = runner_inside ? own_cpu() - own_base : 0;
        return std::max(0LL, now - base - own);
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

// One program's run: its limits, command and descriptors.
struct RunSpec {
    long long wall_ns = 0, backstop_ns = 0, cpu_soft = 0, cpu_hard = 0;
    long long address_space = 0, processes = 0, file_size = 0, stack = 0;
    Share share;
    GroupClock group;
    int in = -1, out = -1, err = -1;  // -1: keep the runner's own 0, 1, 2
    std::vector<int> procs;           // cgroup.procs descriptors the program enters first
    char** command = nullptr;
};

// The kernel's keyrings (user, user-session, persistent) live as long as the user namespace,
// and their quota is kept per uid across every sandbox: no run may touch them. A seccomp filter
// makes add_key, keyctl and request_key fail with EPERM, for every system call convention a
// program can use here (on x86-64 also the i386 one of `int 0x80` and x32's numbers).
#if defined(__x86_64__)
static const unsigned NATIVE_ARCH = AUDIT_ARCH_X86_64;
static const unsigned NATIVE_KEYS[3] = {248, 249, 250};  // add_key, request_key, keyctl
static const unsigned NATIVE_MASK = ~0x40000000U;        // x32's numbers are these | 0x40000000
#define COMPAT_ARCH AUDIT_ARCH_I386
static const unsigned COMPAT_KEYS[3] = {286, 287, 288};
#elif defined(__aarch64__)
static const unsigned NATIVE_ARCH = AUDIT_ARCH_AARCH64;
static const unsigned NATIVE_KEYS[3] = {217, 218, 219};
static const unsigned NATIVE_MASK = ~0U;
#define COMPAT_ARCH AUDIT_ARCH_ARM
static const unsigned COMPAT_KEYS[3] = {309, 310, 311};
#else
#error "judge-runner: add this architecture's add_key, request_key and keyctl numbers"
#endif
static_assert(SYS_add_key == 248 || SYS_add_key == 217, "the key system calls' numbers");

static bool refuse_keyrings() {
    const unsigned deny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, NATIVE_MASK),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_KEYS[0], 8, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_KEYS[1], 7, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_KEYS[2], 6, 5),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_ARCH, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_KEYS[0], 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_KEYS[1], 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, COMPAT_KEYS[2], 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, deny),
    };
    struct sock_fprog program = {(unsigned short)(sizeof filter / sizeof filter[0]), filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

static bool write_zero_to_each(const std::vector<int>& fds) {
    for (int fd : fds) {
        if (write(fd, "0", 1) != 1) return false;
    }
    return true;
}

// Fork the program under `spec`'s limits, supervise it (module comment), kill and reap every
// leftover process, and return the report line.
static std::string supervise(RunSpec& spec) {
    sigset_t children, previous;
    sigemptyset(&children);
    sigaddset(&children, SIGCHLD);
    sigprocmask(SIG_BLOCK, &children, &previous);
    spec.group.start();
    long long started = now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("judge-runner: fork");
        _exit(123);
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &previous, nullptr);
        if (!write_zero_to_each(spec.procs)) {
            fprintf(stderr, "judge-runner: cannot enter the run's cgroup: %s\n", strerror(errno));
            _exit(125);
        }
        for (int fd : spec.procs) close(fd);
        if ((spec.in >= 0 && dup2(spec.in, 0) < 0) || (spec.out >= 0 && dup2(spec.out, 1) < 0) ||
            (spec.err >= 0 && dup2(spec.err, 2) < 0)) {
            perror("judge-runner: dup2");
            _exit(125);
        }
        limit(RLIMIT_CORE, 0, 0);
        limit(RLIMIT_CPU, spec.cpu_soft, spec.cpu_hard);
        if (spec.address_space > 0) limit(RLIMIT_AS, spec.address_space, spec.address_space);
        limit(RLIMIT_FSIZE, spec.file_size, spec.file_size);
        if (spec.stack > 0) limit(RLIMIT_STACK, spec.stack, spec.stack);
        limit(RLIMIT_NPROC, spec.processes, spec.processes);
        limit(RLIMIT_MSGQUEUE, 0, 0);  // no POSIX message queue outlives a case (sessions)
        if (!refuse_keyrings()) {
            perror("judge-runner: seccomp");
            _exit(125);
        }
        // Under a memory bound, the kernel's OOM killer picks the program, not this supervisor.
        int adjust = open("/proc/self/oom_score_adj", O_WRONLY);
        if (adjust >= 0) {
            if (write(adjust, "1000", 4) != 4) perror("judge-runner: oom_score_adj");
            close(adjust);
        }
        execvp(spec.command[0], spec.command);
        fprintf(stderr, "judge-runner: cannot execute %s: %s\n", spec.command[0], strerror(errno));
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
            waited.cpu = std::max(waited.cpu, spec.group.program());
            spec.share.publish(waited.total, waited.runnable);
        }
        if (exited) {
            ended = now;
            break;
        }
        long long elapsed = now - started;
        long long own = elapsed - std::min(elapsed, waited.total + spec.share.partner_wait());
        // RLIMIT_CPU holds each process; the whole tree is held here, to the same soft limit.
        bool over_cpu = waited.cpu >= spec.cpu_soft * 1000000000LL;
        // The wall-clock limit stops a program that is idle (asleep, blocked); one ready to run
        // is using its CPU limit or waiting for a CPU, and is not stopped by it.
        bool idle = !waited.runnable && !spec.share.partner_runnable();
        if (!killed && (over_cpu || (own >= spec.wall_ns && idle) || elapsed >= spec.backstop_ns)) {
            timed_out = !over_cpu && own >= spec.wall_ns && idle;
            starved = !over_cpu && !timed_out;
            kill(pid, SIGKILL);
            killed = true;
        }
        long long pause = killed ? TICK_NS / 4
                                 : std::min(TICK_NS, std::max(spec.wall_ns - own, TICK_NS / 2));
        pause = std::min(pause, std::max(spec.backstop_ns - elapsed, 1000000LL));
        struct timespec timeout = {(time_t)(pause / 1000000000LL), (long)(pause % 1000000000LL)};
        sigtimedwait(&children, nullptr, &timeout);
    }

    int status = 0;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) {
            perror("judge-runner: wait4");
            _exit(124);
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
    cpu = std::max(cpu, spec.group.program());  // children the kernel reaped count too
    sigprocmask(SIG_SETMASK, &previous, nullptr);  // a session's next program starts as this one
    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int signal_number = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    char line[512];
    snprintf(line, sizeof line,
             "exit=%d signal=%d cpu_ns=%lld wall_ns=%lld maxrss_kb=%lld timed_out=%d wait_ns=%lld "
             "starved=%d\n",
             exit_code, signal_number, cpu, ended - started, maxrss, timed_out,
             std::min(waited.total, ended - started), starved);
    return line;
}

// --- sessions: one sandbox for every case of a submission ---------------------------------
//
// judge-runner --session CONTROL_FD: PID 1 of a sandbox kept for one submission's cases. The
// judge sends each run over CONTROL_FD (a SOCK_SEQPACKET socket) as one message: the text
// "run WALL_MS BACKSTOP_MS CPU_SOFT CPU_HARD AS NPROC FSIZE STACK NGROUPS HAS_CPU_FD" and then
// the command's words, each ended by a NUL, with the descriptors stdin, stdout, stderr, the
// group's CPU counter (when HAS_CPU_FD is 1) and NGROUPS cgroup.procs descriptors attached. The
// program enters those groups before it executes (only it: this supervisor stays in the
// session's group), runs as above, and every process it left is killed. Then the sandbox is
// put back as it was before the case: everything under /tmp removed, /tmp's extended
// attributes removed, its mode restored and its times set to now, every System V shared memory
// segment, semaphore set and message queue removed (POSIX queues cannot be made: RLIMIT_MSGQUEUE
// is 0; keyrings cannot be used: seccomp). PIDs, inode numbers, System V ids and the loopback's
// counters go on from where the case left them: see judges/MEASUREMENTS.md. The answer is the report line with ` clean=1`, or
// ` clean=0` when anything could not be removed: the judge then ends the session, and the next
// case gets a fresh sandbox. The first message, at start, is `started`. End of file on
// CONTROL_FD ends the session.

static const int MAX_CLEAN_DEPTH = 64;
static const size_t MAX_CLEAN_ENTRIES = 100000;  // per directory; more: a fresh sandbox instead

// Remove everything inside the directory `dir` (a descriptor), making each directory below it
// traversable and writable first (a program may leave one at mode 0). False when something
// stays (too deep, or a removal failed).
static bool remove_contents(int dir, int depth) {
    if (depth > MAX_CLEAN_DEPTH) return false;
    int listing = dup(dir);
    if (listing < 0) return false;
    DIR* entries = fdopendir(listing);
    if (entries == nullptr) {
        close(listing);
        return false;
    }
    bool clean = true;
    std::vector<std::string> names;
    while (struct dirent* entry = readdir(entries)) {
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) {
            names.emplace_back(entry->d_name);
        }
        if (names.size() > MAX_CLEAN_ENTRIES) break;
    }
    closedir(entries);
    if (names.size() > MAX_CLEAN_ENTRIES) return false;
    for (const std::string& name : names) {
        struct stat info;
        if (fstatat(dir, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
            clean = false;
            continue;
        }
        if (S_ISDIR(info.st_mode)) {
            if (fchmodat(dir, name.c_str(), 0700, 0) != 0) {
                clean = false;
                continue;
            }
            int below = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (below < 0) {
                clean = false;
                continue;
            }
            clean = remove_contents(below, depth + 1) && clean;
            close(below);
            if (unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0) clean = false;
        } else if (unlinkat(dir, name.c_str(), 0) != 0) {
            clean = false;
        }
    }
    return clean;
}

// The ids in one /proc/sysvipc table (its second column), each removed by `remove`.
static bool remove_ipc(const char* table, int (*remove)(int)) {
    FILE* file = fopen(table, "re");
    if (file == nullptr) return true;  // no System V IPC here
    char line[1024];
    bool clean = true;
    if (fgets(line, sizeof line, file) != nullptr) {  // the header
        while (fgets(line, sizeof line, file) != nullptr) {
            long long key = 0, id = -1;
            if (sscanf(line, "%lld %lld", &key, &id) == 2 && remove((int)id) != 0) clean = false;
        }
    }
    fclose(file);
    return clean;
}

static int remove_shm(int id) { return shmctl(id, IPC_RMID, nullptr); }
static int remove_sem(int id) { return semctl(id, 0, IPC_RMID); }
static int remove_msg(int id) { return msgctl(id, IPC_RMID, nullptr); }

// Remove every extended attribute of the directory `dir` (user.* values and POSIX ACLs: the
// only ones a program without capabilities can set, and their memory is nobody's once the
// case's cgroup is gone). False when one stays.
static bool remove_xattrs(int dir) {
    static char names[65536];
    ssize_t length = flistxattr(dir, names, sizeof names);
    if (length < 0) return errno == ENOTSUP;
    bool clean = true;
    for (ssize_t at = 0; at < length; at += (ssize_t)strlen(names + at) + 1) {
        if (fremovexattr(dir, names + at) != 0 && errno != ENODATA) clean = false;
    }
    return clean && flistxattr(dir, names, sizeof names) == 0;
}

// /tmp as a fresh sandbox has it: empty, without extended attributes (it is also the working
// directory), its mode and its access and modification times those of now; no System V IPC
// object. (What is not put back, and why, is in judges/MEASUREMENTS.md.)
static bool reset_sandbox(mode_t tmp_mode) {
    if (chmod("/tmp", 0700) != 0) return false;  // the program may have closed it (mode 0)
    int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tmp < 0) return false;
    bool clean = remove_contents(tmp, 0);
    clean = remove_xattrs(tmp) && clean;
    clean = fchmod(tmp, tmp_mode) == 0 && clean;
    clean = futimens(tmp, nullptr) == 0 && clean;
    close(tmp);
    clean = remove_ipc("/proc/sysvipc/shm", remove_shm) && clean;
    clean = remove_ipc("/proc/sysvipc/sem", remove_sem) && clean;
    clean = remove_ipc("/proc/sysvipc/msg", remove_msg) && clean;
    return clean;
}

static void answer(int control, const std::string& text) {
    if (send(control, text.data(), text.size(), MSG_NOSIGNAL) < 0) _exit(0);  // judge gone
}

// One request: its text and descriptors into `spec` (the words point into `buffer`).
static bool read_request(char* buffer, ssize_t length, std::vector<int>& fds, RunSpec& spec,
                         std::vector<char*>& words) {
    if (length <= 0 || buffer[length - 1] != '\0') return false;
    for (char* word = buffer; word < buffer + length; word += strlen(word) + 1) words.push_back(word);
    long long values[11];
    if (words.size() < 2 ||
        sscanf(words[0], "run %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &values[0],
               &values[1], &values[2], &values[3], &values[4], &values[5], &values[6], &values[7],
               &values[8], &values[9]) != 10) {
        return false;
    }
    long long groups = values[8], has_cpu = values[9];
    if (groups < 0 || (has_cpu != 0 && has_cpu != 1) || (long long)fds.size() != 3 + has_cpu + groups) {
        return false;
    }
    spec.wall_ns = values[0] * 1000000LL;
    spec.backstop_ns = values[1] * 1000000LL;
    spec.cpu_soft = values[2];
    spec.cpu_hard = values[3];
    spec.address_space = values[4];
    spec.processes = values[5];
    spec.file_size = values[6];
    spec.stack = values[7];
    spec.in = fds[0];
    spec.out = fds[1];
    spec.err = fds[2];
    spec.group.fd = has_cpu ? fds[3] : -1;
    spec.group.runner_inside = false;
    spec.procs.assign(fds.begin() + 3 + has_cpu, fds.end());
    words.erase(words.begin());
    words.push_back(nullptr);
    spec.command = words.data();
    return true;
}

static int session(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: judge-runner --session CONTROL_FD\n");
        return 120;
    }
    int control = (int)parse(argv[2], "control fd");
    if (fcntl(control, F_SETFD, FD_CLOEXEC) != 0) {
        perror("judge-runner: control fd");
        return 122;
    }
    if (getpid() != 1) {
        fprintf(stderr, "judge-runner: not PID 1 of its own PID namespace; refusing to run\n");
        return 126;
    }
    prctl(PR_SET_DUMPABLE, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    struct stat tmp;
    if (stat("/tmp", &tmp) != 0) {
        perror("judge-runner: /tmp");
        return 122;
    }
    answer(control, "started\n");
    static char buffer[65536];
    for (;;) {
        char space[CMSG_SPACE(16 * sizeof(int))];
        struct iovec part = {buffer, sizeof buffer};
        struct msghdr message;
        memset(&message, 0, sizeof message);
        message.msg_iov = &part;
        message.msg_iovlen = 1;
        message.msg_control = space;
        message.msg_controllen = sizeof space;
        ssize_t length = recvmsg(control, &message, MSG_CMSG_CLOEXEC);
        if (length == 0) return 0;  // the judge ended the session
        if (length < 0) {
            if (errno == EINTR) continue;
            return 0;
        }
        std::vector<int> fds;
        for (struct cmsghdr* item = CMSG_FIRSTHDR(&message); item != nullptr;
             item = CMSG_NXTHDR(&message, item)) {
            if (item->cmsg_level == SOL_SOCKET && item->cmsg_type == SCM_RIGHTS) {
                size_t count = (item->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                const int* received = (const int*)CMSG_DATA(item);
                fds.insert(fds.end(), received, received + count);
            }
        }
        RunSpec spec;
        std::vector<char*> words;
        bool valid = (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0 &&
                     read_request(buffer, length, fds, spec, words);
        if (!valid) {
            for (int fd : fds) close(fd);
            answer(control, "error=bad-request\n");
            return 0;
        }
        std::string line = supervise(spec);
        for (int fd : fds) close(fd);
        bool clean = reset_sandbox(tmp.st_mode & 07777);
        line.insert(line.size() - 1, clean ? " clean=1" : " clean=0");
        answer(control, line);
    }
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "--enter-cgroups") == 0) return enter_cgroups(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--launch") == 0) return launch(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--session") == 0) return session(argc, argv);
    if (argc < 15 || strcmp(argv[13], "--") != 0) {
        fprintf(stderr, "usage: judge-runner FD WALL_MS BACKSTOP_MS CPU_SOFT CPU_HARD AS NPROC "
                        "FSIZE STACK SHARE_FD SHARE_SLOT CPU_FD -- CMD...\n");
        return 120;
    }
    int report = (int)parse(argv[1], "report fd");
    RunSpec spec;
    spec.wall_ns = parse(argv[2], "wall ms") * 1000000LL;
    spec.backstop_ns = parse(argv[3], "backstop ms") * 1000000LL;
    spec.cpu_soft = parse(argv[4], "cpu soft");
    spec.cpu_hard = parse(argv[5], "cpu hard");
    spec.address_space = parse(argv[6], "address space");
    spec.processes = parse(argv[7], "nproc");
    spec.file_size = parse(argv[8], "file size");
    spec.stack = parse(argv[9], "stack");
    if (strcmp(argv[10], "-1") != 0) {
        spec.share.fd = (int)parse(argv[10], "share fd");
        spec.share.slot = parse(argv[11], "share slot") == 0 ? 0 : 1;
    }
    if (strcmp(argv[12], "-1") != 0) spec.group.fd = (int)parse(argv[12], "cpu fd");
    if (fcntl(report, F_SETFD, FD_CLOEXEC) != 0 ||
        (spec.share.fd >= 0 && fcntl(spec.share.fd, F_SETFD, FD_CLOEXEC) != 0) ||
        (spec.group.fd >= 0 && fcntl(spec.group.fd, F_SETFD, FD_CLOEXEC) != 0)) {
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
    spec.command = argv + 14;
    std::string line = supervise(spec);
    dprintf(report, "%s", line.c_str());
    return 0;
}
