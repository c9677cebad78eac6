// Treasure Packing: takes every item, far over the bag's limits (wrong answer).
#include <bits/stdc++.h>
using namespace std;
int main() {
    string text((istreambuf_iterator<char>(cin)), istreambuf_iterator<char>());
    printf("{");
    size_t pos = 0;
    bool first = true;
    while ((pos = text.find('"', pos)) != string::npos) {
        size_t end = text.find('"', pos + 1);
        string key = text.substr(pos + 1, end - pos - 1);
        size_t p = text.find('[', end);
        while (!isdigit(text[p])) ++p;
        long long q = 0;
        while (isdigit(text[p])) q = q * 10 + (text[p++] - '0');
        printf("%s\"%s\": %lld", first ? "" : ", ", key.c_str(), q);
        first = false;
        pos = text.find(']', p) + 1;
    }
    printf(" }\n");
}
