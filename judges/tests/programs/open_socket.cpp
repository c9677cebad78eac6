// Hostile test program: tries to reach the network — the judge itself on 127.0.0.1 and an
// outside address. The test prepends `#define JUDGE_PORT <port>`. Exits 43 when every attempt
// failed; exits 0 (network reachable) otherwise.
#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef JUDGE_PORT
#define JUDGE_PORT 8081
#endif

static bool reach(const char* address, int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        std::fprintf(stderr, "socket: %s\n", std::strerror(errno));
        return false;
    }
    sockaddr_in target{};
    target.sin_family = AF_INET;
    target.sin_port = htons(port);
    inet_pton(AF_INET, address, &target.sin_addr);
    bool connected = connect(fd, (sockaddr*)&target, sizeof target) == 0;
    std::fprintf(stderr, "%s %s:%d (%s)\n", connected ? "CONNECTED" : "blocked", address, port,
                 connected ? "" : std::strerror(errno));
    close(fd);
    return connected;
}

int main() {
    bool any = reach("127.0.0.1", JUDGE_PORT);
    any = reach("1.1.1.1", 53) || any;
    return any ? 0 : 43;
}
