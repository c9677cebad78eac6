// Test program (valid packer A): every piece keeps its input orientation (R = 0, F = 0) and is
// placed by its bounding box on shelves of a fixed width, left to right, bottom to top.
// Deterministic and fast; density is modest, which is all the tests need.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

int main() {
    int n;
    if (std::scanf("%d", &n) != 1) return 1;
    std::vector<long long> min_x(n), min_y(n), width(n), height(n);
    long long area = 0;
    for (int i = 0; i < n; ++i) {
        int k;
        std::scanf("%d", &k);
        long long lo_x = 1LL << 60, lo_y = 1LL << 60, hi_x = -(1LL << 60), hi_y = -(1LL << 60);
        for (int j = 0; j < k; ++j) {
            long long x, y;
            std::scanf("%lld %lld", &x, &y);
            lo_x = std::min(lo_x, x), hi_x = std::max(hi_x, x);
            lo_y = std::min(lo_y, y), hi_y = std::max(hi_y, y);
        }
        min_x[i] = lo_x, min_y[i] = lo_y;
        width[i] = hi_x - lo_x + 1, height[i] = hi_y - lo_y + 1;
        area += width[i] * height[i];
    }
    long long shelf_width = std::max<long long>(10, (long long)std::sqrt((double)area) + 1);
    std::vector<long long> px(n), py(n);
    long long x = 0, y = 0, shelf_height = 0, used_width = 0;
    for (int i = 0; i < n; ++i) {
        if (x + width[i] > shelf_width) y += shelf_height, x = 0, shelf_height = 0;
        px[i] = x - min_x[i];
        py[i] = y - min_y[i];
        x += width[i];
        used_width = std::max(used_width, x);
        shelf_height = std::max(shelf_height, height[i]);
    }
    std::printf("%lld %lld\n", used_width, y + shelf_height);
    for (int i = 0; i < n; ++i) std::printf("%lld %lld 0 0\n", px[i], py[i]);
    return 0;
}
