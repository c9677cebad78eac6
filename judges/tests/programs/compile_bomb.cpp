// Hostile test program: a template instantiation explosion (a binary tree of 2^26 distinct
// class instantiations). Expected: the compiler hits the judge's compile limits.
template <int Depth, long Index>
struct Node {
    static constexpr long value = Node<Depth - 1, 2 * Index>::value + Node<Depth - 1, 2 * Index + 1>::value;
};
template <long Index>
struct Node<0, Index> {
    static constexpr long value = Index;
};
int main() { return Node<26, 1>::value == 0; }
