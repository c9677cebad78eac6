// A candidate that tries to pass something from one case to the next (tests/judges/
// test_judge_sandbox_channels.py). `write` leaves a mark in every channel it can reach; `read`
// prints what it finds, one `name=value` a channel; `hoard MIB TAG` sets that many MiB of extended
// attributes on /tmp (named after TAG: one case's do not replace another's). Without an argument it is a Polyomino solution whose packing (and so its
// score) depends on what `read` finds, and which then writes: a verdict that depends on the
// cases before it.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <netinet/in.h>
#include <string>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <vector>

static const char MARK[] = "from-an-earlier-case";
static const long long MARK_TIME = 1234567;

static long add_key(const char* description, int ring) {
    return syscall(SYS_add_key, "user", description, MARK, sizeof MARK, ring);
}

static long find_key(const char* description, int ring) {
    return syscall(SYS_keyctl, KEYCTL_SEARCH, ring, "user", description, 0);
}

// A default ACL (user::rwx group::r-x other::r-x): its mere presence on /tmp is the mark.
static int set_default_acl() {
    unsigned char acl[4 + 3 * 8] = {2, 0, 0, 0};
    const unsigned short tags[3] = {0x01, 0x04, 0x20}, perms[3] = {7, 5, 5};
    for (int i = 0; i < 3; ++i) {
        memcpy(acl + 4 + 8 * i, &tags[i], 2);
        memcpy(acl + 6 + 8 * i, &perms[i], 2);
        unsigned id = 0xffffffffU;
        memcpy(acl + 8 + 8 * i, &id, 4);
    }
    return setxattr("/tmp", "system.posix_acl_default", acl, sizeof acl, 0);
}

static long loopback_bytes() {
    FILE* file = fopen("/proc/net/dev", "r");
    char line[512];
    long bytes = 0;
    while (file && fgets(line, sizeof line, file))
        if (char* lo = strstr(line, "lo:")) bytes = atol(lo + 3);
    if (file) fclose(file);
    return bytes;
}

static void write_marks() {
    setxattr("/tmp", "user.mark", MARK, sizeof MARK, 0);
    setxattr(".", "user.cwd", MARK, sizeof MARK, 0);
    set_default_acl();
    add_key("user-mark", KEY_SPEC_USER_KEYRING);
    add_key("session-mark", KEY_SPEC_USER_SESSION_KEYRING);
    long persistent = syscall(SYS_keyctl, KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_PROCESS_KEYRING);
    if (persistent > 0) add_key("persistent-mark", (int)persistent);
    for (int i = 0; i < 40; ++i) {  // the PID counter
        pid_t child = fork();
        if (child == 0) _exit(0);
        waitpid(child, nullptr, 0);
    }
    for (int i = 0; i < 40; ++i) {  // the tmpfs inode counter
        std::string name = "/tmp/n" + std::to_string(i);
        close(open(name.c_str(), O_CREAT | O_WRONLY, 0600));
        unlink(name.c_str());
    }
    shmctl(shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600), IPC_RMID, nullptr);  // System V ids
    int udp = socket(AF_INET, SOCK_DGRAM, 0);  // the loopback's counters
    struct sockaddr_in to = {};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char payload[700] = {0};
    sendto(udp, payload, sizeof payload, 0, (struct sockaddr*)&to, sizeof to);
    struct timespec times[2] = {{MARK_TIME, 0}, {MARK_TIME, 0}};
    utimensat(AT_FDCWD, "/tmp", times, 0);
}

// keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, create) through the i386 entry (`int
// 0x80`), which a 64-bit program can use too: its raw result (-EPERM when refused).
static long compat_keyctl() {
#if defined(__x86_64__)
    long result;
    asm volatile("int $0x80" : "=a"(result) : "a"(288), "b"(0), "c"(-4), "d"(1) : "memory");
    return result;
#else
    return -EPERM;
#endif
}

// What the case finds, as one line of `name=value` (the same in a fresh sandbox every time).
static std::string read_marks() {
    char value[64];
    struct stat tmp;
    stat("/tmp", &tmp);
    int file = open("/tmp/probe", O_CREAT | O_WRONLY, 0600);
    struct stat created;
    fstat(file, &created);
    close(file);
    unlink("/tmp/probe");
    int shm = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    shmctl(shm, IPC_RMID, nullptr);
    errno = 0;
    long refused = add_key("try", KEY_SPEC_PROCESS_KEYRING);
    int add_key_errno = refused < 0 ? errno : 0;
    char line[1024];
    snprintf(line, sizeof line,
             "tmp_xattr=%zd cwd_xattr=%zd tmp_xattr_names=%zd acl=%zd user_key=%d session_key=%d "
             "add_key_errno=%d compat_keyctl=%ld tmp_time_kept=%d pid=%d inode=%llu shm_id=%d "
             "loopback_bytes=%ld",
             getxattr("/tmp", "user.mark", value, sizeof value),
             getxattr(".", "user.cwd", value, sizeof value), listxattr("/tmp", nullptr, 0),
             getxattr("/tmp", "system.posix_acl_default", nullptr, 0),
             find_key("user-mark", KEY_SPEC_USER_KEYRING) > 0,
             find_key("session-mark", KEY_SPEC_USER_SESSION_KEYRING) > 0, add_key_errno,
             compat_keyctl(),
             (long long)tmp.st_mtime == MARK_TIME || (long long)tmp.st_atime == MARK_TIME,
             (int)getpid(), (unsigned long long)created.st_ino, shm, loopback_bytes());
    return line;
}

static void hoard(int mib, const char* tag) {
    static char value[65536];
    memset(value, 7, sizeof value);
    for (int i = 0; i < mib * 16; ++i) {
        std::string name = std::string("user.") + tag + "." + std::to_string(i);
        if (setxattr("/tmp", name.c_str(), value, sizeof value, 0) != 0) {
            printf("hoarded %d KiB, then errno %d\n", i * 64, errno);
            return;
        }
    }
    printf("hoarded %d MiB\n", mib);
}

// Polyomino: every piece in a column of its own, a column one wider for each channel that
// carried something from an earlier case (so the score says how much got through).
static void solve() {
    std::string found = read_marks();
    int leaks = 0;
    for (const char* clean : {"tmp_xattr=-1", "cwd_xattr=-1", "tmp_xattr_names=0", "acl=-1",
                              "user_key=0", "session_key=0", "tmp_time_kept=0", "pid=2 ",
                              "inode=2 ", "shm_id=0 ", "loopback_bytes=0"}) {
        leaks += found.find(clean) == std::string::npos;
    }
    int n;
    if (scanf("%d", &n) != 1) return;
    for (int i = 0; i < n; ++i) {
        int k, x, y;
        if (scanf("%d", &k) != 1) return;
        for (int j = 0; j < k; ++j)
            if (scanf("%d %d", &x, &y) != 2) return;
    }
    int column = 10 + leaks;
    printf("%d 10\n", column * n);
    for (int i = 0; i < n; ++i) printf("%d 0 0 0\n", column * i);
    fflush(stdout);
    write_marks();
}

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "write") write_marks();
    else if (mode == "read") puts(read_marks().c_str());
    else if (mode == "hoard" && argc == 4) hoard(atoi(argv[2]), argv[3]);
    else solve();
    return 0;
}
