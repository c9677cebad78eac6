// Hamiltonian Path Challenge: repeats a vertex along an edge and back (invalid path).
#include <bits/stdc++.h>
int main() {
    int n, m;
    if (scanf("%d %d", &n, &m) != 2) return 0;
    for (int i = 0; i < 10; ++i) { int a; if (scanf("%d", &a) != 1) return 0; }
    int u, v;
    if (scanf("%d %d", &u, &v) != 2) return 0;
    printf("3\n%d %d %d\n", u, v, u);
}
