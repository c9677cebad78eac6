// Test program (valid packer B): drops every piece, in the best of its 8 orientations, onto a
// skyline of fixed width (lowest resulting top first), like Tetris without line clears. It uses
// every rotation and reflection, applied exactly as the problem defines them (reflect x -> -x,
// then R clockwise steps (x, y) -> (y, -x)), and it writes a scratch file in /tmp to show the
// sandbox gives programs a private writable temporary directory.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

struct Cell { long long x, y; };

int main() {
    std::FILE* scratch = std::fopen("/tmp/skyline-scratch.txt", "w");
    if (!scratch || std::fputs("scratch\n", scratch) < 0 || std::fclose(scratch) != 0) return 3;

    int n;
    if (std::scanf("%d", &n) != 1) return 1;
    std::vector<std::vector<Cell>> pieces(n);
    long long cells = 0;
    for (auto& piece : pieces) {
        int k;
        std::scanf("%d", &k);
        piece.resize(k);
        for (auto& c : piece) std::scanf("%lld %lld", &c.x, &c.y);
        cells += k;
    }
    long long width = std::max<long long>(10, (long long)std::ceil(std::sqrt(cells / 0.75)));
    std::vector<long long> sky(width, 0);
    std::vector<long long> out_x(n), out_y(n);
    std::vector<int> out_r(n), out_f(n);
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return pieces[a].size() > pieces[b].size(); });

    for (int i : order) {
        long long best_top = -1, best_x = 0, best_base = 0, best_min_x = 0, best_min_y = 0;
        int best_r = 0, best_f = 0;
        for (int f = 0; f < 2; ++f) {
            for (int r = 0; r < 4; ++r) {
                std::vector<Cell> t;
                for (Cell c : pieces[i]) {
                    long long x = f ? -c.x : c.x, y = c.y;
                    for (int s = 0; s < r; ++s) { long long nx = y, ny = -x; x = nx, y = ny; }
                    t.push_back({x, y});
                }
                long long min_x = t[0].x, min_y = t[0].y, max_x = t[0].x;
                for (Cell c : t) min_x = std::min(min_x, c.x), min_y = std::min(min_y, c.y),
                                 max_x = std::max(max_x, c.x);
                long long w = max_x - min_x + 1;
                if (w > width) continue;
                std::vector<long long> bottom(w, 1LL << 60), top(w, -1);
                for (Cell c : t) {
                    long long col = c.x - min_x, row = c.y - min_y;
                    bottom[col] = std::min(bottom[col], row);
                    top[col] = std::max(top[col], row);
                }
                for (long long x = 0; x + w <= width; ++x) {
                    long long base = 0;
                    for (long long c = 0; c < w; ++c) base = std::max(base, sky[x + c] - bottom[c]);
                    long long piece_top = 0;
                    for (long long c = 0; c < w; ++c) piece_top = std::max(piece_top, base + top[c] + 1);
                    if (best_top < 0 || piece_top < best_top) {
                        best_top = piece_top, best_x = x, best_base = base;
                        best_min_x = min_x, best_min_y = min_y, best_r = r, best_f = f;
                    }
                }
            }
        }
        // Re-derive the chosen orientation's columns to raise the skyline.
        for (Cell c : pieces[i]) {
            long long x = best_f ? -c.x : c.x, y = c.y;
            for (int s = 0; s < best_r; ++s) { long long nx = y, ny = -x; x = nx, y = ny; }
            long long gx = best_x + x - best_min_x, gy = best_base + y - best_min_y;
            sky[gx] = std::max(sky[gx], gy + 1);
        }
        out_x[i] = best_x - best_min_x;
        out_y[i] = best_base - best_min_y;
        out_r[i] = best_r;
        out_f[i] = best_f;
    }
    long long height = *std::max_element(sky.begin(), sky.end());
    std::printf("%lld %lld\n", width, std::max<long long>(1, height));
    for (int i = 0; i < n; ++i) std::printf("%lld %lld %d %d\n", out_x[i], out_y[i], out_r[i], out_f[i]);
    return 0;
}
