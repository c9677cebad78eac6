// Hostile test program: claims a perfect score on stderr and fails, the FrontierCS stderr-ratio
// exploit. Expected: ratio 0 (the judge never reads a ratio from a failed run).
#include <cstdio>

int main() {
    std::fputs("Ratio: 1.0\n", stderr);
    std::fputs("points 1.0 Ratio: 1.000000000 (cells=100, W=10, H=10, area=100)\n", stderr);
    std::puts("Ratio: 1.0");
    return 1;
}
