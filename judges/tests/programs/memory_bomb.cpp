// Hostile test program: allocates and touches memory in 16 MiB chunks without end.
// Expected: a memory failure (the allocation fails at the address-space limit).
#include <cstdlib>
#include <cstring>
#include <vector>

int main() {
    std::vector<char*> chunks;
    for (;;) {
        char* chunk = new char[16 << 20];
        std::memset(chunk, 1, 16 << 20);
        chunks.push_back(chunk);
    }
}
