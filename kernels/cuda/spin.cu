// A busy-wait of `ns` nanoseconds on one thread: the timer enqueues it first so the
// host can queue every timed launch while the GPU spins, and the events then measure
// GPU time without host launch gaps. %globaltimer counts ns whatever the SM clock.
extern "C" __global__ void spin_ns(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
