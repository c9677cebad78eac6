// Polyomino Packing: every piece at the origin, unrotated (overlaps: invalid on every case).
#include <cstdio>
int main() {
    int n;
    if (scanf("%d", &n) != 1) return 0;
    printf("100 100\n");
    for (int i = 0; i < n; ++i) printf("50 50 0 0\n");
}
