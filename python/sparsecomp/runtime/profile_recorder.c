/* The profiler's recorder, linked into every `profile=True` emulation build
 * (sparsecomp.compiler.build) and pointed at by the kernel's access hook
 * (`sparsecomp_emu_hook`, sparsecomp.transforms._gpu_profile) for one call
 * (sparsecomp.runtime.profile.profile_call).
 *
 * Each access the emulated kernels report is (site, address, bytes, block,
 * thread, kind), with `site` 1000 * launch + its index in the launch body.
 * Emulation runs a launch's blocks one after the other (sparse-iter-emulate-gpu),
 * so a block's accesses arrive together. Per block, the recorder counts each
 * thread's accesses per site: the k-th access of a site by the lanes of a warp
 * is one warp request, and
 *
 * - the access gets its request's key, ((block number * 32 + warp) * 1024 +
 *   site in launch) * 2^24 + k, with the block number counted from the start of
 *   the recording (-1 where a field does not fit: the caller then finds the
 *   requests by sorting, as for records from elsewhere);
 * - when the block changes, each warp's global requests (loads, stores,
 *   atomics) are, summed over sites, the most accesses any of its lanes made
 *   there. The busiest warp of the call, the warps that made any and their
 *   requests in all are kept: these figures are exact however many records
 *   are kept;
 * - the access is kept as a record (seven int64s: the six and the key) if its
 *   block is sampled:
 *   block % stride == 0, stride 1 at the start. When the records reach the
 *   limit the caller gave, the stride doubles and the records of blocks no
 *   longer sampled are dropped, so that memory stays bounded on large
 *   matrices; the caller scales what it counts from the records by the
 *   global accesses seen over those kept. (Where every record is of block 0,
 *   nothing can be dropped, and the buffer grows.)
 *
 * The emulated kernels run on the calling thread: no locking.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIELDS 7
#define MAX_THREADS 1024 /* per block, as on the GPU */
#define MAX_SITES 1000   /* per launch: sites are 1000 * launch + i */

enum { LOAD = 0, STORE = 1, ATOMIC = 5 };

static int64_t *records;
static int64_t count, capacity, limit, stride = 1, failed;
static int64_t global_seen, global_kept;

static uint32_t *lane_counts; /* [thread][site] of the current block */
static uint16_t used_sites[MAX_SITES];
static unsigned char site_used[MAX_SITES], site_global[MAX_SITES];
static int64_t n_used, top_thread = -1, current_launch = -1, current_block = -1;
static int64_t block_number = -1;
static int64_t busiest, warps, warp_total;

static int is_global(int64_t kind) { return kind == LOAD || kind == STORE || kind == ATOMIC; }

/* The current block's warps: requests per warp, then cleared for the next block. */
static void fold_block(void) {
  if (top_thread < 0)
    return;
  int64_t n_warps = top_thread / 32 + 1;
  for (int64_t w = 0; w < n_warps; ++w) {
    int64_t requests = 0;
    for (int64_t u = 0; u < n_used; ++u) {
      if (!site_global[used_sites[u]]) {
        for (int64_t lane = 0; lane < 32 && w * 32 + lane <= top_thread; ++lane)
          lane_counts[(w * 32 + lane) * MAX_SITES + used_sites[u]] = 0;
        continue;
      }
      uint32_t most = 0;
      for (int64_t lane = 0; lane < 32; ++lane) {
        int64_t t = w * 32 + lane;
        if (t > top_thread)
          break;
        uint32_t *c = &lane_counts[t * MAX_SITES + used_sites[u]];
        if (*c > most)
          most = *c;
        *c = 0;
      }
      requests += most;
    }
    if (requests) {
      ++warps;
      warp_total += requests;
      if (requests > busiest)
        busiest = requests;
    }
  }
  for (int64_t u = 0; u < n_used; ++u)
    site_used[used_sites[u]] = site_global[used_sites[u]] = 0;
  n_used = 0;
  top_thread = -1;
}

/* Keep the records of blocks still sampled at twice the stride. */
static void thin(void) {
  stride *= 2;
  int64_t kept = 0, globals = 0;
  for (int64_t i = 0; i < count; ++i) {
    int64_t *r = &records[i * FIELDS];
    if (r[3] % stride)
      continue;
    memmove(&records[kept * FIELDS], r, FIELDS * sizeof(int64_t));
    globals += is_global(r[5]);
    ++kept;
  }
  count = kept;
  global_kept = globals;
}

static int reserve(void) {
  if (count < capacity)
    return 1;
  int64_t grown = capacity ? 2 * capacity : 1 << 16;
  int64_t *bigger = realloc(records, (size_t)grown * FIELDS * sizeof(int64_t));
  if (!bigger)
    return 0;
  records = bigger;
  capacity = grown;
  return 1;
}

void sparsecomp_profile_record(int64_t site, int64_t address, int64_t bytes, int64_t block,
                               int64_t thread, int64_t kind) {
  if (failed)
    return;
  int64_t launch = site / 1000, local = site % 1000, key = -1;
  if (launch != current_launch || block != current_block) {
    fold_block();
    current_launch = launch;
    current_block = block;
    ++block_number;
  }
  if (is_global(kind))
    ++global_seen;
  if (thread >= 0 && thread < MAX_THREADS && local >= 0) {
    if (!site_used[local]) {
      site_used[local] = 1;
      used_sites[n_used++] = (uint16_t)local;
    }
    site_global[local] |= (unsigned char)is_global(kind);
    uint32_t k = lane_counts[thread * MAX_SITES + local]++;
    if (thread > top_thread)
      top_thread = thread;
    if (block_number < (1 << 24) && k < (1u << 24))
      key = (((block_number * 32 + thread / 32) * 1024 + local) << 24) + k;
  }
  if (block % stride)
    return;
  if (limit && count >= limit) {
    thin();
    if (4 * count > 3 * limit)
      limit = 2 * count; /* little to drop (few blocks): let the buffer grow */
  }
  if (block % stride)
    return;
  if (!reserve()) {
    failed = 1;
    return;
  }
  int64_t *r = &records[count * FIELDS];
  r[0] = site, r[1] = address, r[2] = bytes, r[3] = block, r[4] = thread, r[5] = kind;
  r[6] = key;
  ++count;
  global_kept += is_global(kind);
}

/* Start a recording that keeps at most about `max_records` records (0: all). */
int sparsecomp_profile_begin(int64_t max_records) {
  free(records);
  records = NULL;
  count = capacity = 0;
  limit = max_records;
  stride = 1;
  failed = 0;
  global_seen = global_kept = 0;
  busiest = warps = warp_total = 0;
  n_used = 0;
  top_thread = current_launch = current_block = block_number = -1;
  memset(site_used, 0, sizeof site_used);
  memset(site_global, 0, sizeof site_global);
  if (!lane_counts)
    lane_counts = calloc((size_t)MAX_THREADS * MAX_SITES, sizeof(uint32_t));
  return lane_counts != NULL;
}

/* End it: out[0..6] = records kept, stride, global accesses seen, global accesses
 * kept, busiest warp's requests, warps with any, their requests in all; out[7] =
 * 1 if memory ran out. The records stay readable at sparsecomp_profile_records()
 * until the next begin. */
void sparsecomp_profile_end(int64_t *out) {
  fold_block();
  out[0] = count, out[1] = stride, out[2] = global_seen, out[3] = global_kept;
  out[4] = busiest, out[5] = warps, out[6] = warp_total, out[7] = failed;
}

const int64_t *sparsecomp_profile_records(void) { return records; }
