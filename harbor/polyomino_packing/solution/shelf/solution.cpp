// Seed candidate for Polyomino Packing: bounding boxes on shelves.
//
// Each piece is turned (a quarter turn at most, never reflected) so that its bounding box is at
// least as wide as it is tall. The boxes are sorted by height, then width, and placed
// first-fit on horizontal shelves of one fixed strip width: a box goes on the lowest shelf with
// room left, or opens a new shelf on top. A handful of strip widths around the square root of
// the total box area are tried and the one with the smallest enclosing rectangle is kept.
// Boxes never overlap, so the packing is valid; its density is the pieces' bounding-box fill
// minus the shelf waste. Deterministic, O(n log n + widths * n * shelves), a few MiB of memory.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {

struct Piece {
    long long min_x = 0, min_y = 0;  // bottom-left corner of the oriented piece
    long long width = 0, height = 0;  // bounding box of the oriented piece
    int rotation = 0;                 // quarter turns clockwise applied by the checker
};

struct Layout {
    long long width = 0, height = 0;
    std::vector<long long> x, y;  // box corner per piece, indexed like the input
};

// One clockwise quarter turn as the checker applies it: (x, y) -> (y, -x).
void turn(long long& x, long long& y) {
    const long long old_x = x;
    x = y;
    y = -old_x;
}

Piece orient(const std::vector<std::pair<long long, long long>>& cells) {
    Piece best;
    for (int rotation = 0; rotation < 2; ++rotation) {
        long long lo_x = 0, hi_x = 0, lo_y = 0, hi_y = 0;
        for (std::size_t i = 0; i < cells.size(); ++i) {
            long long x = cells[i].first, y = cells[i].second;
            for (int r = 0; r < rotation; ++r) turn(x, y);
            if (i == 0 || x < lo_x) lo_x = x;
            if (i == 0 || x > hi_x) hi_x = x;
            if (i == 0 || y < lo_y) lo_y = y;
            if (i == 0 || y > hi_y) hi_y = y;
        }
        Piece candidate{lo_x, lo_y, hi_x - lo_x + 1, hi_y - lo_y + 1, rotation};
        if (rotation == 0 || candidate.width > best.width) best = candidate;
    }
    return best;
}

// First-fit decreasing-height shelves in a strip of the given width.
Layout shelve(const std::vector<Piece>& pieces, const std::vector<int>& order, long long strip) {
    Layout layout;
    layout.x.assign(pieces.size(), 0);
    layout.y.assign(pieces.size(), 0);
    std::vector<long long> shelf_y, shelf_height, shelf_used;
    for (int index : order) {
        const Piece& piece = pieces[index];
        std::size_t shelf = 0;
        while (shelf < shelf_y.size() && shelf_used[shelf] + piece.width > strip) ++shelf;
        if (shelf == shelf_y.size()) {
            shelf_y.push_back(layout.height);
            shelf_height.push_back(piece.height);
            shelf_used.push_back(0);
            layout.height += piece.height;
        }
        layout.x[index] = shelf_used[shelf];
        layout.y[index] = shelf_y[shelf];
        shelf_used[shelf] += piece.width;
        layout.width = std::max(layout.width, shelf_used[shelf]);
    }
    return layout;
}

}  // namespace

int main() {
    int n = 0;
    if (std::scanf("%d", &n) != 1 || n <= 0) return 0;
    std::vector<Piece> pieces(n);
    long long box_area = 0, widest = 1;
    for (int i = 0; i < n; ++i) {
        int k = 0;
        if (std::scanf("%d", &k) != 1) return 0;
        std::vector<std::pair<long long, long long>> cells(k);
        for (auto& cell : cells) {
            if (std::scanf("%lld %lld", &cell.first, &cell.second) != 2) return 0;
        }
        pieces[i] = orient(cells);
        box_area += pieces[i].width * pieces[i].height;
        widest = std::max(widest, pieces[i].width);
    }

    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        if (pieces[a].height != pieces[b].height) return pieces[a].height > pieces[b].height;
        return pieces[a].width > pieces[b].width;
    });

    Layout best;
    const double side = std::sqrt(static_cast<double>(box_area));
    for (int step = 0; step <= 16; ++step) {
        const double factor = 0.8 + 0.05 * step;
        const long long strip = std::max(widest, static_cast<long long>(std::ceil(side * factor)));
        Layout layout = shelve(pieces, order, strip);
        if (best.width == 0 || layout.width * layout.height < best.width * best.height) {
            best = std::move(layout);
        }
    }

    std::printf("%lld %lld\n", best.width, best.height);
    for (int i = 0; i < n; ++i) {
        // Translating by (box corner - oriented minimum) puts the piece's box at the corner.
        std::printf("%lld %lld %d 0\n", best.x[i] - pieces[i].min_x, best.y[i] - pieces[i].min_y,
                    pieces[i].rotation);
    }
    return 0;
}
