// Hostile test program: spins forever without output. Expected: Time Limit Exceeded.
int main() {
    volatile unsigned long long spins = 0;
    for (;;) ++spins;
}
