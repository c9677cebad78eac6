// Hostile test program: writes 1 GiB to stdout. Expected: Output Limit Exceeded.
#include <cstdio>
#include <vector>

int main() {
    std::vector<char> block(1 << 20, 'x');
    for (int i = 0; i < 1024; ++i) std::fwrite(block.data(), 1, block.size(), stdout);
    return 0;
}
