// Hostile test program: prints 1 MiB of control bytes (0x01..0x1f) per case and exits 0, so
// every byte of its output would become a six-character JSON escape in a stored result.
// Expected: each case stores a bounded prefix plus the output's size and sha256; the result
// stays small and the judge's health answers stay quick while it is judged.
#include <cstdio>

int main() {
    static char block[1 << 20];
    for (int i = 0; i < (1 << 20); ++i) block[i] = (char)(1 + i % 31);
    fwrite(block, 1, sizeof block, stdout);
    return 0;
}
