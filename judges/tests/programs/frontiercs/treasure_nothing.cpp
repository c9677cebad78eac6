// Treasure Packing: a well-formed empty bag (valid, below the baseline: ratio 0).
#include <bits/stdc++.h>
using namespace std;
int main() {
    string text((istreambuf_iterator<char>(cin)), istreambuf_iterator<char>());
    vector<string> keys;
    size_t pos = 0;
    while ((pos = text.find('"', pos)) != string::npos) {
        size_t end = text.find('"', pos + 1);
        keys.push_back(text.substr(pos + 1, end - pos - 1));
        pos = text.find(']', end) + 1;
    }
    printf("{");
    for (size_t i = 0; i < keys.size(); ++i)
        printf("\"%s\": 0%s", keys[i].c_str(), i + 1 < keys.size() ? ", " : "");
    printf(" }\n");
}
