// Hostile test program: tries to read host secrets and the judge's own files. The test prepends
// `#define JUDGE_FILES "path1", "path2", …` with files of the running judge (its state directory,
// its source, the test input). Exits 42 when every read failed; exits 0 (a leak) otherwise.
#include <cerrno>
#include <cstdio>
#include <cstring>

#ifndef JUDGE_FILES
#define JUDGE_FILES "/nonexistent"
#endif

int main() {
    const char* paths[] = {"/etc/shadow", "/etc/passwd", "/root/.bashrc", "/proc/1/environ",
                           "/proc/1/root/etc/shadow", JUDGE_FILES};
    int leaked = 0;
    for (const char* path : paths) {
        std::FILE* file = std::fopen(path, "r");
        if (file && std::fgetc(file) != EOF) {
            std::fprintf(stderr, "LEAK: read %s\n", path);
            leaked = 1;
        } else {
            std::fprintf(stderr, "blocked: %s (%s)\n", path, file ? "empty" : std::strerror(errno));
        }
        if (file) std::fclose(file);
    }
    return leaked ? 0 : 42;
}
