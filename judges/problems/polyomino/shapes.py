"""Enumeration of free polyominoes (the piece set of the Polyomino Packing generator).

A polyomino is a set of grid cells joined edge to edge; it is *free* when rotations and
reflections count as the same piece. Pieces are grown one cell at a time from the pieces one size
smaller and deduplicated by a canonical form, so the set of each size is complete by induction.
The counts for sizes 1..10 are the published ones (OEIS A000105): 1, 1, 2, 5, 12, 35, 108, 369,
1285, 4655.
"""

from __future__ import annotations

from functools import cache

type Cell = tuple[int, int]
type Shape = tuple[Cell, ...]

MAX_PIECE_SIZE = 10


def normalize(cells: list[Cell] | Shape) -> Shape:
    """Translate `cells` so that the smallest x and the smallest y are 0, and sort them.

    Two cell sets that differ only by a translation have the same normalized form.
    """
    min_x = min([x for x, _ in cells])
    min_y = min([y for _, y in cells])
    return tuple(sorted([(x - min_x, y - min_y) for x, y in cells]))


def transform(cells: Shape, rotations: int, reflect: bool) -> Shape:
    """Apply the Polyomino Packing transform: reflect x -> -x first (when `reflect`), then rotate
    `rotations` times with one clockwise step (x, y) -> (y, -x). No translation, no sorting."""
    out = []
    for x, y in cells:
        if reflect:
            x = -x
        for _ in range(rotations % 4):
            x, y = y, -x
        out.append((x, y))
    return tuple(out)


@cache
def orientations(cells: Shape) -> tuple[Shape, ...]:
    """All distinct normalized orientations of a piece (1 to 8 of them), in a fixed order: those
    of `transform` with rotations 0..3 unreflected, then 0..3 reflected (written out, as the
    enumeration calls this for every piece)."""
    turned = (
        [(x, y) for x, y in cells],
        [(y, -x) for x, y in cells],
        [(-x, -y) for x, y in cells],
        [(-y, x) for x, y in cells],
        [(-x, y) for x, y in cells],
        [(y, x) for x, y in cells],
        [(x, -y) for x, y in cells],
        [(-y, -x) for x, y in cells],
    )
    return tuple(dict.fromkeys(normalize(shape) for shape in turned))


def canonical(cells: Shape) -> Shape:
    """The representative of the free polyomino `cells` belongs to: its smallest orientation."""
    return min(orientations(cells))


def is_connected(cells: Shape) -> bool:
    """True when the cells form one edge-connected (4-connected) piece."""
    remaining = set(cells)
    if not remaining:
        return False
    stack = [remaining.pop()]
    while stack:
        x, y = stack.pop()
        for neighbour in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if neighbour in remaining:
                remaining.remove(neighbour)
                stack.append(neighbour)
    return not remaining


@cache
def free_polyominoes(size: int) -> tuple[Shape, ...]:
    """All free polyominoes with `size` cells, each in canonical form, sorted.

    Sizes 1..MAX_PIECE_SIZE are supported; the result is cached for the life of the process.
    """
    if not 1 <= size <= MAX_PIECE_SIZE:
        raise ValueError(f"polyomino size must be in 1..{MAX_PIECE_SIZE}, got {size}")
    if size == 1:
        return (((0, 0),),)
    found: set[Shape] = set()
    placed: set[Shape] = set()  # every orientation of every piece found: one sort finds a repeat
    for smaller in free_polyominoes(size - 1):
        occupied = set(smaller)
        for x, y in smaller:
            for cell in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                if cell in occupied:
                    continue
                grown = normalize((*smaller, cell))
                if grown in placed:
                    continue
                turned = orientations(grown)
                placed.update(turned)
                found.add(min(turned))
    return tuple(sorted(found))


def all_free_polyominoes(max_size: int = MAX_PIECE_SIZE) -> tuple[Shape, ...]:
    """Every free polyomino of size 1..`max_size`, smallest sizes first (6473 pieces for 10)."""
    return tuple(shape for size in range(1, max_size + 1) for shape in free_polyominoes(size))
