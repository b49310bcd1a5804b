// Host-only (no GPU): prints mmq_core.cuh's kSmemBytes for the compile-time parameters given
// with -D, so a test can hold a launcher's shared-memory formula against the kernel's own
// constant on a machine without a GPU (build() checks the same on the device).
#include "mmq_core.cuh"

#include <cstdio>

int main() {
    std::printf("%d\n", mmq::kSmemBytes);
    return 0;
}
