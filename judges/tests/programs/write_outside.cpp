// Hostile test program: tries to create files outside its temporary directory. The test prepends
// `#define HOST_DIRS "dir1", …` with host directories of the running judge. Exits 44 when every
// write outside /tmp failed and writing inside /tmp worked; exits 0 (an escape) otherwise.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#ifndef HOST_DIRS
#define HOST_DIRS "/nonexistent"
#endif

static bool write_in(const std::string& directory) {
    std::string path = directory + "/sandbox-escape.txt";
    std::FILE* file = std::fopen(path.c_str(), "w");
    bool ok = file && std::fputs("escaped\n", file) >= 0;
    if (file) ok = std::fclose(file) == 0 && ok;
    std::fprintf(stderr, "%s %s (%s)\n", ok ? "WROTE" : "blocked", path.c_str(),
                 ok ? "" : std::strerror(errno));
    return ok;
}

int main() {
    const char* outside[] = {"/", "/usr", "/etc", "/box", "/judge", "/dev", "/proc", HOST_DIRS};
    bool escaped = false;
    for (const char* directory : outside) escaped = write_in(directory) || escaped;
    if (!write_in("/tmp")) return 45;
    return escaped ? 0 : 44;
}
