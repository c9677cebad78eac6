// Hamiltonian Path Challenge (FrontierCS problem 5): the longest greedy walk from a few starts.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    if (scanf("%d %d", &n, &m) != 2) return 0;
    for (int i = 0; i < 10; ++i) { int a; if (scanf("%d", &a) != 1) return 0; }
    vector<vector<int>> out(n + 1);
    for (int i = 0; i < m; ++i) { int u, v; if (scanf("%d %d", &u, &v) != 2) return 0; out[u].push_back(v); }
    vector<int> best;
    mt19937 rng(1);
    for (int start = 1; start <= min(n, 20); ++start) {
        vector<char> seen(n + 1, 0);
        vector<int> path{start};
        seen[start] = 1;
        while (true) {
            int u = path.back(), next = -1, fewest = INT_MAX;
            for (int v : out[u]) if (!seen[v]) {
                int free = 0;
                for (int w : out[v]) free += !seen[w];
                if (free < fewest) { fewest = free; next = v; }
            }
            if (next < 0) break;
            seen[next] = 1;
            path.push_back(next);
        }
        if (path.size() > best.size()) best = path;
    }
    printf("%zu\n", best.size());
    for (size_t i = 0; i < best.size(); ++i) printf("%d%c", best[i], i + 1 < best.size() ? ' ' : '\n');
}
