// Tree distance (FrontierCS problem 10, interactive): distances from vertex 1, then each vertex's
// parent is the deepest earlier vertex on its path from 1. Correct, not query-optimal.
#include <bits/stdc++.h>
using namespace std;
long long ask(int u, int v) {
    printf("? %d %d\n", u, v);
    fflush(stdout);
    long long d;
    if (scanf("%lld", &d) != 1) exit(0);
    return d;
}
int main() {
    int t;
    if (scanf("%d", &t) != 1) return 0;
    while (t--) {
        int n;
        if (scanf("%d", &n) != 1) return 0;
        vector<long long> d1(n + 1, 0);
        for (int v = 2; v <= n; ++v) d1[v] = ask(1, v);
        vector<int> order(n);
        iota(order.begin(), order.end(), 1);
        sort(order.begin(), order.end(), [&](int a, int b) { return d1[a] < d1[b]; });
        vector<int> placed{1};
        vector<array<long long, 3>> edges;
        for (int i = 1; i < n; ++i) {
            int v = order[i];
            for (int k = (int)placed.size() - 1; k >= 0; --k) {
                int u = placed[k];
                long long w = u == 1 ? d1[v] : ask(u, v);
                if (d1[u] + w == d1[v]) { edges.push_back({u, v, w}); break; }
            }
            placed.push_back(v);
        }
        printf("!");
        for (auto& e : edges) printf(" %lld %lld %lld", e[0], e[1], e[2]);
        printf("\n");
        fflush(stdout);
    }
}
