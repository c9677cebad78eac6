// Treasure Packing (FrontierCS problem 1): greedy by value per combined weight, then fill.
#include <bits/stdc++.h>
using namespace std;
int main() {
    string text((istreambuf_iterator<char>(cin)), istreambuf_iterator<char>());
    vector<string> keys;
    vector<array<long long, 4>> items;
    size_t pos = 0;
    while ((pos = text.find('"', pos)) != string::npos) {
        size_t end = text.find('"', pos + 1);
        keys.push_back(text.substr(pos + 1, end - pos - 1));
        array<long long, 4> a{};
        size_t p = text.find('[', end);
        for (int i = 0; i < 4; ++i) {
            while (!isdigit(text[p])) ++p;
            a[i] = 0;
            while (isdigit(text[p])) a[i] = a[i] * 10 + (text[p++] - '0');
        }
        items.push_back(a);
        pos = text.find(']', p) + 1;
    }
    const long long M = 20000000, L = 25000000;
    vector<int> order(items.size());
    iota(order.begin(), order.end(), 0);
    auto density = [&](int i) {
        return items[i][1] / (items[i][2] / double(M) + items[i][3] / double(L));
    };
    sort(order.begin(), order.end(), [&](int a, int b) { return density(a) > density(b); });
    vector<long long> take(items.size(), 0);
    long long mass = 0, vol = 0;
    for (int i : order) {
        while (take[i] < items[i][0] && mass + items[i][2] <= M && vol + items[i][3] <= L) {
            ++take[i]; mass += items[i][2]; vol += items[i][3];
        }
    }
    printf("{\n");
    for (size_t i = 0; i < keys.size(); ++i)
        printf(" \"%s\": %lld%s\n", keys[i].c_str(), take[i], i + 1 < keys.size() ? "," : "");
    printf("}\n");
}
