/*
 * The deployment rules the shim (C) and the runtime library (Go, package
 * deploy) both apply to a launch of a tuned kernel, defined once:
 *   - the limits: CUDA's launch limits, the most folded arguments and the
 *     largest argument a variant's key holds, the keys kept per kernel, and
 *     the dynamic shared memory a launch may use without opting in;
 *   - the geometry rule: a launch with the block tuning started from runs
 *     with the tuned block and a grid re-derived so its threads stay
 *     covered (deploy.Plan.Geometry);
 *   - the variant key: what tells a specialized kernel's launches apart,
 *     or a classed kernel's launch shapes (deploy.VariantLaunchKey).
 * The runtime library reads the limits through cgo (cmd/mneme-rt); the
 * table in cmd/mneme-rt/shim/policytest/testdata runs through these
 * functions and the Go ones, which must agree on every row, and ties
 * package deploy's own copies of the limits to these.
 */
#ifndef MNEME_DEPLOY_POLICY_H
#define MNEME_DEPLOY_POLICY_H

#include <stdint.h>
#include <string.h>

/* CUDA's launch limits. */
#define MNEME_DEPLOY_MAX_THREADS 1024u
#define MNEME_DEPLOY_MAX_GRID_X 2147483647ull
#define MNEME_DEPLOY_MAX_GRID_YZ 65535ull

/* The most specialized arguments a variant's launch key may hold. */
#define MNEME_DEPLOY_MAX_FOLDED 32
/* A specialized argument larger than this is not keyed: such launches
 * keep asking the library. */
#define MNEME_DEPLOY_MAX_KEYED_ARG 4096u
/* Launch keys remembered per kernel (the shim's table of variants, the
 * library's table of launches seen); beyond them launches keep asking. */
#define MNEME_DEPLOY_MAX_KEYS 4096u
/* Dynamic shared memory a launch may use without the function opting in. */
#define MNEME_DEPLOY_DEFAULT_SHARED (48u << 10)

/* mneme_deploy_rederive is the grid dimension that covers grid * block
 * threads in blocks of tuned (all positive); an unchanged block dimension
 * keeps the grid's; 0 when it exceeds limit. */
static inline unsigned mneme_deploy_rederive(unsigned grid, unsigned block,
                                             unsigned tuned,
                                             unsigned long long limit) {
  if (tuned == block)
    return grid;
  unsigned long long g = ((unsigned long long)grid * block + tuned - 1) / tuned;
  return g > limit ? 0 : (unsigned)g;
}

/* mneme_deploy_geometry is the geometry to launch with (out[0..2] the
 * grid, out[3..5] the block) for a launch of grid and block, given the
 * tuned block (zero: none) and the recorded block tuning started from
 * (zero: unknown). The launch keeps its geometry when there is no tuned
 * block, its block is not the recorded one, any dimension is zero, the
 * tuned block exceeds CUDA's limit or the derived grid would. Returns
 * non-zero when the geometry changed. */
static inline int mneme_deploy_geometry(const unsigned tuned[3],
                                        const unsigned recorded[3],
                                        const unsigned grid[3],
                                        const unsigned block[3],
                                        unsigned out[6]) {
  memcpy(out, grid, 3 * sizeof(unsigned));
  memcpy(out + 3, block, 3 * sizeof(unsigned));
  int tuned_zero = tuned[0] == 0 && tuned[1] == 0 && tuned[2] == 0;
  int recorded_zero = recorded[0] == 0 && recorded[1] == 0 && recorded[2] == 0;
  if (tuned_zero)
    return 0;
  if (tuned[0] == block[0] && tuned[1] == block[1] && tuned[2] == block[2])
    return 0;
  for (int i = 0; i < 3; i++)
    if (tuned[i] == 0 || grid[i] == 0 || block[i] == 0)
      return 0;
  if ((unsigned long long)tuned[0] * tuned[1] * tuned[2] >
      MNEME_DEPLOY_MAX_THREADS)
    return 0;
  if (!recorded_zero && (block[0] != recorded[0] || block[1] != recorded[1] ||
                         block[2] != recorded[2]))
    return 0;
  unsigned g[3];
  for (int i = 0; i < 3; i++) {
    g[i] = mneme_deploy_rederive(grid[i], block[i], tuned[i],
                                 i == 0 ? MNEME_DEPLOY_MAX_GRID_X
                                        : MNEME_DEPLOY_MAX_GRID_YZ);
    if (g[i] == 0)
      return 0;
  }
  memcpy(out, g, sizeof g);
  memcpy(out + 3, tuned, 3 * sizeof(unsigned));
  return 1;
}

/* mneme_deploy_key_len is the length of a variant's launch key: the block,
 * the grid when dimensions are folded (or the kernel has launch-shape
 * classes), the dynamic shared memory when shared_keyed (classes), and the
 * folded arguments' bytes. */
static inline size_t mneme_deploy_key_len(int dims_folded, int shared_keyed,
                                          int nfolded,
                                          const unsigned *folded_size) {
  size_t n =
      ((dims_folded ? 6 : 3) + (shared_keyed ? 1 : 0)) * sizeof(uint32_t);
  for (int i = 0; i < nfolded; i++)
    n += folded_size[i];
  return n;
}

/* mneme_deploy_variant_key writes a launch's key into buf
 * (mneme_deploy_key_len bytes): block x, y, z, then grid x, y, z when
 * dimensions are folded, as little-endian u32, then the dynamic shared
 * memory as a little-endian u32 when shared_keyed, then each folded
 * argument's bytes in order. It fails (0) when an argument cannot be read. */
static inline int
mneme_deploy_variant_key(int dims_folded, int shared_keyed, int nfolded,
                         const int *folded, const unsigned *folded_size,
                         const unsigned grid[3], const unsigned block[3],
                         uint32_t shared, void **args, unsigned char *buf) {
  if (nfolded > 0 && args == NULL)
    return 0;
  size_t off = 0;
  int n = dims_folded ? 6 : 3;
  for (int i = 0; i < n + (shared_keyed ? 1 : 0); i++) {
    uint32_t v = i < 3 ? block[i] : i < n ? grid[i - 3] : shared;
    for (int b = 0; b < 4; b++)
      buf[off++] = (unsigned char)(v >> (8 * b));
  }
  for (int i = 0; i < nfolded; i++) {
    const void *a = args[folded[i]];
    if (a == NULL)
      return 0;
    memcpy(buf + off, a, folded_size[i]);
    off += folded_size[i];
  }
  return 1;
}

#endif
