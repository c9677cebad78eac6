// Treasure Packing: greedy fills under several mass/volume weightings, then a timed hill-climb
// that drops a few items and refills greedily, keeping any gain (close to the best values).
#include <bits/stdc++.h>
using namespace std;

struct Item { string key; long long count, value, mass, volume; };
const long long MASS = 20000000, VOLUME = 25000000;

vector<Item> read_items() {
    string text((istreambuf_iterator<char>(cin)), istreambuf_iterator<char>());
    vector<Item> items;
    size_t pos = 0;
    while ((pos = text.find('"', pos)) != string::npos) {
        size_t end = text.find('"', pos + 1);
        Item item{text.substr(pos + 1, end - pos - 1), 0, 0, 0, 0};
        long long* fields[4] = {&item.count, &item.value, &item.mass, &item.volume};
        size_t p = text.find('[', end);
        for (auto* field : fields) {
            while (!isdigit(text[p])) ++p;
            while (isdigit(text[p])) *field = *field * 10 + (text[p++] - '0');
        }
        items.push_back(item);
        pos = text.find(']', p) + 1;
    }
    return items;
}

struct Bag {
    vector<long long> take;
    long long mass = 0, volume = 0, value = 0;
};

void fill(const vector<Item>& items, Bag& bag, double alpha) {
    vector<int> order(items.size());
    iota(order.begin(), order.end(), 0);
    auto cost = [&](int i) { return alpha * items[i].mass / MASS + (1 - alpha) * items[i].volume / VOLUME; };
    sort(order.begin(), order.end(), [&](int a, int b) { return items[a].value / cost(a) > items[b].value / cost(b); });
    for (int i : order) {
        long long room = min((MASS - bag.mass) / items[i].mass, (VOLUME - bag.volume) / items[i].volume);
        long long add = min(room, items[i].count - bag.take[i]);
        if (add <= 0) continue;
        bag.take[i] += add;
        bag.mass += add * items[i].mass;
        bag.volume += add * items[i].volume;
        bag.value += add * items[i].value;
    }
}

int main() {
    auto start = chrono::steady_clock::now();
    vector<Item> items = read_items();
    int n = items.size();
    Bag best;
    best.take.assign(n, 0);
    for (int step = 0; step <= 20; ++step) {
        Bag bag;
        bag.take.assign(n, 0);
        fill(items, bag, step / 20.0);
        if (bag.value > best.value) best = bag;
    }
    mt19937 rng(12345);
    Bag current = best;
    while (chrono::duration<double>(chrono::steady_clock::now() - start).count() < 0.7) {
        Bag trial = current;
        int drops = 1 + rng() % 3;
        for (int d = 0; d < drops; ++d) {
            int i = rng() % n;
            if (trial.take[i] == 0) continue;
            long long remove = 1 + rng() % min<long long>(trial.take[i], 1 + trial.take[i] / 4);
            trial.take[i] -= remove;
            trial.mass -= remove * items[i].mass;
            trial.volume -= remove * items[i].volume;
            trial.value -= remove * items[i].value;
        }
        fill(items, trial, uniform_real_distribution<double>(0, 1)(rng));
        if (trial.value >= current.value) current = trial;
        if (current.value > best.value) best = current;
    }
    printf("{\n");
    for (int i = 0; i < n; ++i)
        printf("  \"%s\": %lld%s\n", items[i].key.c_str(), best.take[i], i + 1 < n ? "," : "");
    printf("}\n");
}
