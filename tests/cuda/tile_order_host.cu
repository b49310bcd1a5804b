// Host-only run of mmq_tile_order.cuh (no GPU): prints the (row tile, token tile) of every queue
// index of a persistent schedule, so tests can check each ORDER visits every tile exactly once.
// Built as plain C++ (nvcc -x c++).
// usage: tile_order_host <order 0..2> <group rows: 1, 3 or 8> <n_row> <n_tok>  -> "row tok" lines
#include "mmq_tile_order.cuh"

#include <cstdio>
#include <cstdlib>

template <int Order, int Group>
static void print_order(int n_row, int n_tok) {
    for (int tile = 0; tile < n_row * n_tok; ++tile) {
        const mmq::TileCoord c = mmq::tile_coord<Order, Group>(tile, n_row, n_tok);
        std::printf("%d %d\n", c.row_tile, c.tok_tile);
    }
}

template <int Order>
static int with_group(int group, int n_row, int n_tok) {
    switch (group) {
        case 1: print_order<Order, 1>(n_row, n_tok); return 0;
        case 3: print_order<Order, 3>(n_row, n_tok); return 0;
        case 8: print_order<Order, 8>(n_row, n_tok); return 0;
        default: return 2;
    }
}

int main(int argc, char** argv) {
    if (argc != 5) return 2;
    const int order = std::atoi(argv[1]), group = std::atoi(argv[2]);
    const int n_row = std::atoi(argv[3]), n_tok = std::atoi(argv[4]);
    switch (order) {
        case 0: return with_group<0>(group, n_row, n_tok);
        case 1: return with_group<1>(group, n_row, n_tok);
        case 2: return with_group<2>(group, n_row, n_tok);
        default: return 2;
    }
}
