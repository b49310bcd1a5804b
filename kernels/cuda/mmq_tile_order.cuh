// Tile order of a persistent MMQ schedule: queue index -> (row tile, token tile).
//
// The order decides what stays in L2 while the resident CTAs work through the queue:
//   0 row-major   consecutive indices: one weight row tile, consecutive token tiles
//                 (the weight tile is read from HBM once, then hit in L2 by its token tiles)
//   1 token-major consecutive indices: one token tile, consecutive weight row tiles
//   2 grouped     bands of GROUP_ROWS row tiles; inside a band the row tile moves fastest,
//                 so a wave of CTAs covers a GROUP_ROWS x (wave / GROUP_ROWS) block of tiles
//                 and reuses both its weight rows and its activation tokens
// Host-callable so a host harness (tests/cuda/tile_order_host.cu) checks it is a bijection.
#pragma once

#if defined(__CUDACC__)
#define MMQ_ORDER_HD __host__ __device__ __forceinline__
#else
#define MMQ_ORDER_HD inline
#endif

namespace mmq {

struct TileCoord {
    int row_tile, tok_tile;
};

template <int Order, int GroupRows>
MMQ_ORDER_HD TileCoord tile_coord(int tile, int n_row, int n_tok) {
    static_assert(Order >= 0 && Order <= 2, "ORDER must be 0 (row-major), 1 (token-major) or 2 (grouped)");
    static_assert(GroupRows >= 1, "GROUP_ROWS must be >= 1");
    if constexpr (Order == 0) {
        return {tile / n_tok, tile % n_tok};
    } else if constexpr (Order == 1) {
        return {tile % n_row, tile / n_row};
    } else {
        const int per_band = GroupRows * n_tok;
        const int first = (tile / per_band) * GroupRows;
        const int rows = (n_row - first < GroupRows) ? n_row - first : GroupRows;  // the last band may be short
        const int local = tile % per_band;
        return {first + local % rows, local / rows};
    }
}

}  // namespace mmq
