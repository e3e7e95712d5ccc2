// tests/unit/attention/test_wgmma_layouts.cu: the shared-memory layouts of the wgmma kernels, checked on the CPU
// (no GPU needed: only the __host__ functions of device/wgmma.cuh run). The swizzled tiles that
// TMA and swizzled_offset write and the descriptors that desc_k_major / desc_mn_major build must agree
// under the PTX ISA's canonical layouts for the 128-byte swizzle (T = 8 bf16 = 16 bytes):
//   K-major:  ((8,m),(T,2k)):((8T,SBO),(1,T))       element (row, k) of one k-step of 16
//   MN-major: ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))  element (k, n) of one k-step of 16
// with Swizzle<3,4,3> on the absolute byte address (bits [4,7) ^= bits [7,10)). A simulated shared
// memory holds every tile of a kernel's plan (flash_forward_wgmma.cu, and both kernels of
// flash_backward_wgmma.cu), each element tagged with (tile, row, column); every descriptor the
// kernel issues is decoded and the operand it names is read back and compared with the logical
// tile. What the hardware does with a right descriptor is the GPU tests' business.
// Also: the lanes' ldmatrix addresses of the forward's Q fragments (a_fragment_ldmatrix_offset),
// the accumulator -> A-fragment repacking (c_to_a) against the documented fragment layouts, that
// a wrong LBO or SBO is caught, and the grid order of the kernels' thread blocks (grid_tile).
#include <stdint.h>
#include <string.h>
#include "attention/grid_order.cuh"
#include "device/wgmma.cuh"
#include "tests/lib/test.h"

static unsigned char smem[1 << 18];  // bytes; more than any kernel's plan

// Element tag: tile id (2 bits), row and column (7 bits each), so tiles up to 128 x 128.
static uint16_t tag(int tile, int r, int c) { return (uint16_t)(tile << 14 | r << 7 | c); }

static uint32_t swizzle128(uint32_t addr) { return addr ^ (((addr >> 7) & 7) << 4); }

static uint16_t read_element(uint32_t addr) {
    uint16_t v;
    memcpy(&v, smem + swizzle128(addr), sizeof(v));
    return v;
}

// Places a (ROWS, cols) tile of tags at `base` as swizzled_offset (and TMA's 128-byte swizzle) lays it out.
template <int ROWS>
static void store_tile(uint32_t base, int tile, int cols) {
    CHECK(tile < 4 && ROWS <= 128 && cols <= 128, "tile %d (%d x %d) is more than a tag can name", tile, ROWS, cols);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < cols; c += 8)
            for (int e = 0; e < 8; e++) {
                uint16_t v = tag(tile, r, c + e);
                memcpy(smem + base + swizzled_offset<ROWS>(r, c) + 2 * e, &v, sizeof(v));
            }
}

typedef struct { uint32_t start, lbo, sbo; int ok; } Desc;

static Desc decode(uint64_t d) {
    Desc s;
    s.start = (uint32_t)(d & 0x3FFF) << 4;
    s.lbo = (uint32_t)((d >> 16) & 0x3FFF) << 4;
    s.sbo = (uint32_t)((d >> 32) & 0x3FFF) << 4;
    s.ok = (d >> 62) == 1 && ((d >> 49) & 7) == 0;  // 128-byte swizzle, base offset 0
    return s;
}

static uint64_t with_lbo(uint64_t d, uint32_t bytes) { return (d & ~(0x3FFFull << 16)) | (uint64_t)(bytes >> 4) << 16; }
static uint64_t with_sbo(uint64_t d, uint32_t bytes) { return (d & ~(0x3FFFull << 32)) | (uint64_t)(bytes >> 4) << 32; }

static char first_mismatch[64];  // the first wrong element the last count below found

// Elements of a K-major operand (rows x 16) that differ from rows [row0, row0 + rows), columns
// [k0, k0 + 16) of tile `tile`.
static int k_major_mismatches(uint64_t d, int rows, int tile, int row0, int k0) {
    Desc s = decode(d);
    int bad = s.ok ? 0 : rows * 16;
    snprintf(first_mismatch, sizeof(first_mismatch), "%s", s.ok ? "none" : "swizzle mode or base offset");
    for (int r = 0; r < rows && s.ok; r++)
        for (int k = 0; k < 16; k++) {
            uint32_t addr = s.start + (r % 8) * 128 + (r / 8) * s.sbo + k * 2;
            if (read_element(addr) != tag(tile, row0 + r, k0 + k) && bad++ == 0)
                snprintf(first_mismatch, sizeof(first_mismatch), "(%d, %d) reads tag %04x", r, k, read_element(addr));
        }
    return bad;
}

// Elements of an MN-major operand (16 x n_cols) that differ from rows [k0, k0 + 16), columns
// [n0, n0 + n_cols) of tile `tile`. An MN-major A operand (issued with the transpose flag for A)
// has the same layout with M in place of N, so this reads it too: element (k, m) for m < n_cols.
static int mn_major_mismatches(uint64_t d, int n_cols, int tile, int k0, int n0) {
    Desc s = decode(d);
    int bad = s.ok ? 0 : n_cols * 16;
    snprintf(first_mismatch, sizeof(first_mismatch), "%s", s.ok ? "none" : "swizzle mode or base offset");
    for (int k = 0; k < 16 && s.ok; k++)
        for (int n = 0; n < n_cols; n++) {
            uint32_t addr = s.start + (n % 64) * 2 + (n / 64) * s.lbo + (k % 8) * 128 + (k / 8) * s.sbo;
            if (read_element(addr) != tag(tile, k0 + k, n0 + n) && bad++ == 0)
                snprintf(first_mismatch, sizeof(first_mismatch), "(%d, %d) reads tag %04x", k, n, read_element(addr));
        }
    return bad;
}

// Every k-step of a K-major operand: rows [row0, row0 + rows) of a (ROWS, cols) tile at `addr`.
template <int ROWS>
static void check_k_major_tile(const char (&name)[64], uint32_t addr, int tile, int cols, int row0, int rows) {
    char what[96];
    for (int kk = 0; kk < cols / 16; kk++) {
        snprintf(what, sizeof(what), "%s rows %d.. k-step %d", name, row0, kk);
        int bad = k_major_mismatches(desc_k_major<ROWS>(addr, row0, kk), rows, tile, row0, kk * 16);
        CHECK(bad == 0, "%s: %d elements wrong, first %s", what, bad, first_mismatch);
    }
}

// Every k-step of an MN-major operand: the whole (ROWS, cols) tile at `addr`, k along the rows.
template <int ROWS>
static void check_mn_major_tile(const char (&name)[64], uint32_t addr, int tile, int cols) {
    char what[96];
    for (int kk = 0; kk < ROWS / 16; kk++) {
        snprintf(what, sizeof(what), "%s k-step %d", name, kk);
        int bad = mn_major_mismatches(desc_mn_major<ROWS>(addr, kk), cols, tile, kk * 16, 0);
        CHECK(bad == 0, "%s: %d elements wrong, first %s", what, bad, first_mismatch);
    }
}

// Accumulator element i of a lane -> (row, col) in its warp's 16 rows; A-fragment register j,
// half h -> (row, k) in a 16 x 16 k-step (wgmma.cuh, top comment).
static void accumulator_position(int lane, int i, int* row, int* col) {
    int e = i % 4;
    *row = lane / 4 + 8 * (e >> 1);
    *col = (i / 4) * 8 + 2 * (lane % 4) + (e & 1);
}
static void a_fragment_position(int lane, int j, int h, int* row, int* k) {
    *row = lane / 4 + 8 * (j & 1);
    *k = 2 * (lane % 4) + 8 * (j >> 1) + h;
}

// The forward's plan (flash_forward_wgmma.cu): Q (128, HS), K in 3 stages and V in 3 stages of
// (BLOCK_N, HS), one after the other from a 1024-byte aligned base. Tile ids: Q 0, stage st 1 + st
// (K and V stages share ids; they live at different addresses).
template <int HS, int BLOCK_N>
static void check_forward_plan(uint32_t base) {
    constexpr int BLOCK_M = 128, KV_BYTES = BLOCK_N * HS * 2;
    uint32_t sQ = base, sK = sQ + BLOCK_M * HS * 2, sV = sK + 3 * KV_BYTES;
    char case_name[96], name[64];
    snprintf(case_name, sizeof(case_name), "wgmma layouts: forward HS%d, %d-key blocks", HS, BLOCK_N);
    test_begin(case_name);
    CHECK(sV + 3 * KV_BYTES <= sizeof(smem), "the plan does not fit the simulated shared memory");
    CHECK(sQ % 1024 == 0 && sK % 1024 == 0 && sV % 1024 == 0, "a tile does not start on a 1024-byte boundary");
    memset(smem, 0, sizeof(smem));
    store_tile<BLOCK_M>(sQ, 0, HS);
    for (int st = 0; st < 3; st++) store_tile<BLOCK_N>(sK + st * KV_BYTES, 1 + st, HS);
    for (int st = 0; st < 3; st++) store_tile<BLOCK_N>(sV + st * KV_BYTES, 1 + st, HS);
    // S = Q K^T: Q as A fragments, loaded by ldmatrix.x4 from the lanes' rows
    // (a_fragment_ldmatrix_offset); matrix i, row r comes from lane 8i + r, and lane l receives
    // its row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 as register i.
    int q_bad = 0;
    for (int row0 = 0; row0 < BLOCK_M; row0 += 16)  // each warp's 16 rows, both warpgroups
        for (int kk = 0; kk < HS / 16; kk++)
            for (int lane = 0; lane < 32; lane++)
                for (int i = 0; i < 4; i++)
                    for (int h = 0; h < 2; h++) {
                        uint32_t addr = sQ + a_fragment_ldmatrix_offset<BLOCK_M>(row0, 8 * i + lane / 4, kk) +
                                        2 * (2 * (lane % 4) + h);
                        uint16_t got;
                        memcpy(&got, smem + addr, sizeof(got));
                        int r, k;
                        a_fragment_position(lane, i, h, &r, &k);
                        q_bad += got != tag(0, row0 + r, 16 * kk + k);
                    }
    CHECK(q_bad == 0, "HS%d Q fragments: %d elements wrong", HS, q_bad);
    for (int st = 0; st < 3; st++) {
        snprintf(name, sizeof(name), "HS%d K stage %d", HS, st);
        check_k_major_tile<BLOCK_N>(name, sK + st * KV_BYTES, 1 + st, HS, 0, BLOCK_N);
    }
    for (int st = 0; st < 3; st++) {  // O += P V: V is the MN-major B operand
        snprintf(name, sizeof(name), "HS%d V stage %d", HS, st);
        check_mn_major_tile<BLOCK_N>(name, sV + st * KV_BYTES, 1 + st, HS);
    }
    test_end();
}

// A tag holds only 2 bits of tile id, too few for the seven tiles of a backward plan, so those are
// checked in rounds: every tile is stored each round, the (up to three) tiles under check get ids
// 1..3 and every other tile id 0. A descriptor that strays into another tile still reads a wrong id.
static int round_id(int tile_index, int round) { return tile_index / 3 == round ? 1 + tile_index % 3 : 0; }

// store_tile for the two row counts the plans use.
static void store_tile_rows(uint32_t base, int rows, int tile, int cols) {
    if (rows == 64) store_tile<64>(base, tile, cols);
    else if (rows == 128) store_tile<128>(base, tile, cols);
    else CHECK(0, "no plan has tiles of %d rows", rows);
}

// The backward K/V-block kernel's plan (flash_backward_wgmma_kernel, ATOMIC_DQ; without it the same
// tiles but dS^T, and the same descriptors but those of dQ): from a 1024-byte aligned base, K and V
// (128, HS), Q in 2 stages and dO in 2 stages of (BLOCK_M, HS), BLOCK_M = 8192 / HS, then two
// buffers of the dS^T tile (128 keys, BLOCK_M queries).
template <int HS>
static void check_backward_plan(uint32_t base) {
    constexpr int BLOCK_N = 128, BLOCK_M = 8192 / HS;
    constexpr int KV_BYTES = BLOCK_N * HS * 2, Q_BYTES = BLOCK_M * HS * 2;
    uint32_t sK = base, sV = sK + KV_BYTES, sQ = sV + KV_BYTES, sdO = sQ + 2 * Q_BYTES, sdS = sdO + 2 * Q_BYTES;
    constexpr int DS_BYTES = BLOCK_N * BLOCK_M * 2;
    enum { K, V, DS0, DS1, Q0, Q1, DO0, DO1, N_TILES };
    const uint32_t addr[N_TILES] = {sK, sV, sdS, sdS + DS_BYTES, sQ, sQ + Q_BYTES, sdO, sdO + Q_BYTES};
    const int rows[N_TILES] = {BLOCK_N, BLOCK_N, BLOCK_N, BLOCK_N, BLOCK_M, BLOCK_M, BLOCK_M, BLOCK_M};
    const int cols[N_TILES] = {HS, HS, BLOCK_M, BLOCK_M, HS, HS, HS, HS};
    char case_name[96], name[64];
    snprintf(case_name, sizeof(case_name), "wgmma layouts: backward HS%d, %d-query blocks", HS, BLOCK_M);
    test_begin(case_name);
    CHECK(sdS + 2 * DS_BYTES <= sizeof(smem), "the plan does not fit the simulated shared memory");
    for (int i = 0; i < N_TILES; i++) CHECK(addr[i] % 1024 == 0, "tile %d does not start on a 1024-byte boundary", i);
    for (int round = 0; round < 3; round++) {
        memset(smem, 0, sizeof(smem));
        for (int i = 0; i < N_TILES; i++) store_tile_rows(addr[i], rows[i], round_id(i, round), cols[i]);
        auto id = [&](int i) { return round_id(i, round); };
        // S^T = K Q^T and dP^T = V dO^T: each warpgroup's 64 keys of K and V as K-major A operands.
        for (int wg = 0; wg < 2; wg++) {
            snprintf(name, sizeof(name), "HS%d K as A of S^T (warpgroup %d)", HS, wg);
            if (id(K)) check_k_major_tile<BLOCK_N>(name, sK, id(K), HS, 64 * wg, 64);
            snprintf(name, sizeof(name), "HS%d V as A of dP^T (warpgroup %d)", HS, wg);
            if (id(V)) check_k_major_tile<BLOCK_N>(name, sV, id(V), HS, 64 * wg, 64);
        }
        // Q and dO stages: K-major B operands (N = BLOCK_M queries) of S^T and dP^T, MN-major B
        // operands (k = queries, N = HS) of dK += dS^T Q and dV += P^T dO.
        for (int st = 0; st < 2; st++) {
            if (id(Q0 + st)) {
                snprintf(name, sizeof(name), "HS%d Q stage %d as B of S^T", HS, st);
                check_k_major_tile<BLOCK_M>(name, addr[Q0 + st], id(Q0 + st), HS, 0, BLOCK_M);
                snprintf(name, sizeof(name), "HS%d Q stage %d as B of dK", HS, st);
                check_mn_major_tile<BLOCK_M>(name, addr[Q0 + st], id(Q0 + st), HS);
            }
            if (id(DO0 + st)) {
                snprintf(name, sizeof(name), "HS%d dO stage %d as B of dP^T", HS, st);
                check_k_major_tile<BLOCK_M>(name, addr[DO0 + st], id(DO0 + st), HS, 0, BLOCK_M);
                snprintf(name, sizeof(name), "HS%d dO stage %d as B of dV", HS, st);
                check_mn_major_tile<BLOCK_M>(name, addr[DO0 + st], id(DO0 + st), HS);
            }
        }
        // dQ piece of warpgroup wg = dS[queries of panel qh] K[:, dims of panel dh]: A is panel qh
        // of the dS^T tile (k = key, m = query), B panel dh of the K tile (k = key, n = dim).
        for (int wg = 0; wg < 2; wg++) {
            const int qh = HS == 64 ? wg : 0, dh = HS == 64 ? 0 : wg;
            for (int kk = 0; kk < BLOCK_N / 16; kk++) {
                for (int buf = 0; buf < 2; buf++) {
                    if (!id(DS0 + buf)) continue;
                    int bad = mn_major_mismatches(desc_mn_major<BLOCK_N>(addr[DS0 + buf] + qh * BLOCK_N * 128, kk), 64,
                                                  id(DS0 + buf), 16 * kk, 64 * qh);
                    CHECK(bad == 0, "HS%d dS^T buffer %d as A of dQ (warpgroup %d) k-step %d: %d elements wrong, first %s",
                          HS, buf, wg, kk, bad, first_mismatch);
                }
                if (id(K)) {
                    int bad = mn_major_mismatches(desc_mn_major<BLOCK_N>(sK + dh * BLOCK_N * 128, kk), 64, id(K),
                                                  16 * kk, 64 * dh);
                    CHECK(bad == 0, "HS%d K as B of dQ (warpgroup %d) k-step %d: %d elements wrong, first %s", HS, wg,
                          kk, bad, first_mismatch);
                }
            }
        }
    }
    test_end();
}

// The deterministic dQ kernel's plan (flash_backward_dq_wgmma_kernel): from a 1024-byte aligned
// base, Q and dO (128, HS), K in 3 stages and V in 2 stages of (BLOCK_N, HS).
template <int HS, int BLOCK_N>
static void check_dq_plan(uint32_t base) {
    constexpr int BLOCK_M = 128, KV_BYTES = BLOCK_N * HS * 2, Q_BYTES = BLOCK_M * HS * 2;
    uint32_t sQ = base, sdO = sQ + Q_BYTES, sK = sdO + Q_BYTES, sV = sK + 3 * KV_BYTES;
    enum { Q, DO, K0, K1, K2, V0, V1, N_TILES };
    const uint32_t addr[N_TILES] = {sQ, sdO, sK, sK + KV_BYTES, sK + 2 * KV_BYTES, sV, sV + KV_BYTES};
    const int rows[N_TILES] = {BLOCK_M, BLOCK_M, BLOCK_N, BLOCK_N, BLOCK_N, BLOCK_N, BLOCK_N};
    char case_name[96], name[64];
    snprintf(case_name, sizeof(case_name), "wgmma layouts: deterministic dQ HS%d, %d-key blocks", HS, BLOCK_N);
    test_begin(case_name);
    CHECK(sV + 2 * KV_BYTES <= sizeof(smem), "the plan does not fit the simulated shared memory");
    for (int i = 0; i < N_TILES; i++) CHECK(addr[i] % 1024 == 0, "tile %d does not start on a 1024-byte boundary", i);
    for (int round = 0; round < 3; round++) {
        memset(smem, 0, sizeof(smem));
        for (int i = 0; i < N_TILES; i++) store_tile_rows(addr[i], rows[i], round_id(i, round), HS);
        auto id = [&](int i) { return round_id(i, round); };
        // S = Q K^T and dP = dO V^T: each warpgroup's 64 queries of Q and dO as K-major A operands.
        for (int wg = 0; wg < 2; wg++) {
            snprintf(name, sizeof(name), "HS%d Q as A of S (warpgroup %d)", HS, wg);
            if (id(Q)) check_k_major_tile<BLOCK_M>(name, sQ, id(Q), HS, 64 * wg, 64);
            snprintf(name, sizeof(name), "HS%d dO as A of dP (warpgroup %d)", HS, wg);
            if (id(DO)) check_k_major_tile<BLOCK_M>(name, sdO, id(DO), HS, 64 * wg, 64);
        }
        // K stages: K-major B of S (N = BLOCK_N keys), MN-major B of dQ += dS K (k = keys, N = HS).
        for (int st = 0; st < 3; st++)
            if (id(K0 + st)) {
                snprintf(name, sizeof(name), "HS%d K stage %d as B of S", HS, st);
                check_k_major_tile<BLOCK_N>(name, addr[K0 + st], id(K0 + st), HS, 0, BLOCK_N);
                snprintf(name, sizeof(name), "HS%d K stage %d as B of dQ", HS, st);
                check_mn_major_tile<BLOCK_N>(name, addr[K0 + st], id(K0 + st), HS);
            }
        for (int st = 0; st < 2; st++)
            if (id(V0 + st)) {
                snprintf(name, sizeof(name), "HS%d V stage %d as B of dP", HS, st);
                check_k_major_tile<BLOCK_N>(name, addr[V0 + st], id(V0 + st), HS, 0, BLOCK_N);
            }
    }
    test_end();
}

// c_to_a(a, &s[8kk], &s[8kk + 4]) packs a[j] = (s[8kk + 2j], s[8kk + 2j + 1]): those accumulator
// elements must sit where the A fragment of k-step kk expects them.
static void test_repacking(void) {
    test_begin("wgmma layouts: accumulator -> A fragment repacking");
    int bad = 0;
    for (int lane = 0; lane < 32; lane++)
        for (int kk = 0; kk < 8; kk++)
            for (int j = 0; j < 4; j++)
                for (int h = 0; h < 2; h++) {
                    int r1, c1, r2, k2;
                    accumulator_position(lane, 8 * kk + 2 * j + h, &r1, &c1);
                    a_fragment_position(lane, j, h, &r2, &k2);
                    bad += r1 != r2 || c1 != 16 * kk + k2;
                }
    CHECK(bad == 0, "%d elements land in the wrong place", bad);
    test_end();
}

// The checks above must see a descriptor with a wrong stride: LBO and SBO swapped (the usual
// mistake), SBO off by one 8-row group, and LBO pointing at the wrong panel where N spans two.
static void test_wrong_strides_caught(void) {
    test_begin("wgmma layouts: a wrong LBO or SBO is caught");
    constexpr int ROWS = 64, COLS = 128;
    memset(smem, 0, sizeof(smem));
    store_tile<ROWS>(0, 1, COLS);
    uint64_t k = desc_k_major<ROWS>(0, 0, 1), v = desc_mn_major<ROWS>(0, 1);
    Desc dk = decode(k), dv = decode(v);
    CHECK(k_major_mismatches(k, ROWS, 1, 0, 16) == 0, "the unmutated K descriptor fails");
    CHECK(mn_major_mismatches(v, COLS, 1, 16, 0) == 0, "the unmutated V descriptor fails");
    CHECK(k_major_mismatches(with_sbo(with_lbo(k, dk.sbo), dk.lbo), ROWS, 1, 0, 16) > 0,
          "K-major with LBO and SBO swapped passes");
    CHECK(k_major_mismatches(with_sbo(k, dk.sbo + 1024), ROWS, 1, 0, 16) > 0, "K-major with SBO + 1024 passes");
    CHECK(mn_major_mismatches(with_sbo(with_lbo(v, dv.sbo), dv.lbo), COLS, 1, 16, 0) > 0,
          "MN-major with LBO and SBO swapped passes");
    CHECK(mn_major_mismatches(with_lbo(v, dv.lbo + 1024), COLS, 1, 16, 0) > 0, "MN-major with LBO + 1024 passes");
    CHECK(mn_major_mismatches(with_sbo(v, 2048), COLS, 1, 16, 0) > 0, "MN-major with SBO 2048 passes");
    test_end();
}

// grid_tile hands every (rank, head) of the grid to exactly one thread block, and within a group
// of heads the ranks come in order (the longest tiles first), also when the last group is short.
static void test_grid_order(void) {
    test_begin("wgmma grid order: every tile once, groups of heads in rank order");
    const int shapes[][3] = {{8, 16, 1}, {8, 16, 3}, {8, 16, 16}, {5, 7, 3}, {1, 5, 2}, {256, 12, 4}};
    static unsigned char seen[256 * 16];
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        int n_ranks = shapes[k][0], BH = shapes[k][1], group = shapes[k][2];
        memset(seen, 0, sizeof(seen));
        int bad = 0, last_group = -1, last_rank = 0;
        for (int block = 0; block < n_ranks * BH; block++) {
            GridTile t = grid_tile(block, n_ranks, BH, group);
            if (t.rank < 0 || t.rank >= n_ranks || t.bh < 0 || t.bh >= BH || seen[t.rank * BH + t.bh]++) bad++;
            int g = t.bh / group;
            if (g == last_group && t.rank < last_rank) bad++;
            if (g < last_group) bad++;
            last_group = g;
            last_rank = t.rank;
        }
        CHECK(bad == 0, "%d ranks x %d heads in groups of %d: %d blocks wrong", n_ranks, BH, group, bad);
    }
    test_end();
}

int main(void) {
    // The configurations the launchers are instantiated with, at a base that is 1024-aligned
    // but not 0, as the kernel's own alignment of dynamic shared memory gives.
    check_forward_plan<64, 64>(0x400);
    check_forward_plan<128, 128>(0x800);
    // launch_backward_wgmma's two head sizes, and launch_dq_wgmma's (HS, BLOCK_N) pairs.
    check_backward_plan<64>(0x400);
    check_backward_plan<128>(0xC00);
    check_dq_plan<64, 128>(0x400);
    check_dq_plan<128, 64>(0x800);
    test_repacking();
    test_wrong_strides_caught();
    test_grid_order();
    return test_exit_code();
}
