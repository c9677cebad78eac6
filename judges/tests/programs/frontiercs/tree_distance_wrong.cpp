// Tree distance: answers a path 1-2-...-n with weight 1 without asking (wrong answer).
#include <cstdio>
int main() {
    int t;
    if (scanf("%d", &t) != 1) return 0;
    while (t--) {
        int n;
        if (scanf("%d", &n) != 1) return 0;
        printf("!");
        for (int v = 2; v <= n; ++v) printf(" %d %d 1", v - 1, v);
        printf("\n");
        fflush(stdout);
    }
}
