// Seed candidate for Polyomino Packing: every piece in one row, left to right.
//
// Each piece keeps its input orientation (no turn, no mirror). Its bounding box is placed right
// after the previous one, so the rectangle is as wide as the sum of the box widths and as tall as
// the tallest box. Boxes never share a column, so the packing is always valid; the waste is the
// empty cells of each box plus the unused height above every box shorter than the tallest.
#include <algorithm>
#include <cstdio>
#include <vector>

int main() {
    int n = 0;
    if (std::scanf("%d", &n) != 1 || n <= 0) return 0;
    std::vector<long long> shift_x(n), shift_y(n), width(n);
    long long total_width = 0, height = 1;
    for (int i = 0; i < n; ++i) {
        int k = 0;
        if (std::scanf("%d", &k) != 1) return 0;
        long long lo_x = 0, hi_x = 0, lo_y = 0, hi_y = 0;
        for (int c = 0; c < k; ++c) {
            long long x = 0, y = 0;
            if (std::scanf("%lld %lld", &x, &y) != 2) return 0;
            if (c == 0 || x < lo_x) lo_x = x;
            if (c == 0 || x > hi_x) hi_x = x;
            if (c == 0 || y < lo_y) lo_y = y;
            if (c == 0 || y > hi_y) hi_y = y;
        }
        shift_x[i] = total_width - lo_x;  // the box's left edge lands on the running width
        shift_y[i] = -lo_y;               // the box's bottom edge lands on row 0
        total_width += hi_x - lo_x + 1;
        height = std::max(height, hi_y - lo_y + 1);
    }
    std::printf("%lld %lld\n", total_width, height);
    for (int i = 0; i < n; ++i) std::printf("%lld %lld 0 0\n", shift_x[i], shift_y[i]);
    return 0;
}
