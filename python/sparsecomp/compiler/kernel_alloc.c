/* The heap allocations of a CPU kernel library. Each kernel.so is linked with
 * this object and `-Wl,--wrap=malloc,--wrap=free` (sparsecomp.compiler.aot):
 * the kernel's own calls to malloc and free (memref.alloc and memref.dealloc,
 * lowered by MLIR) come here; other libraries' do not, and the IR stays
 * MLIR's own (sparsecomp-opt's output still runs under mlir-runner).
 *
 * Blocks of MIN_CACHED bytes or more that a kernel frees are kept, up to
 * IDLE_BLOCKS of them and IDLE_BYTES in all, and handed out again to an
 * allocation they fit (at most twice its size): the next call's temporaries
 * then reuse pages already mapped. glibc maps blocks above its mmap threshold
 * (32 MiB at most) afresh on every malloc and unmaps them on free, and the
 * kernel zeroes each new page on first touch: an SpGEMM whose temporaries
 * were 43 MB spent more time in page faults than in the product. Smaller
 * blocks go to malloc and free, which recycle them already.
 *
 * Every block is an ordinary malloc block, so memory a kernel returns to its
 * caller, which the runtime frees with libc free, needs nothing from here. A
 * freed block's size is malloc_usable_size's: no table of the blocks handed
 * out, whose entries a block freed elsewhere would leave stale (and whose
 * address malloc may then give to a small block). Calls may come from OpenMP
 * threads: one mutex guards the idle blocks.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MIN_CACHED ((size_t)1 << 20)
#define IDLE_BLOCKS 8
#define IDLE_BYTES ((size_t)1 << 29)

typedef struct {
  void *ptr;
  size_t size; /* malloc_usable_size */
} block;

static block idle[IDLE_BLOCKS];
static size_t idle_bytes;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void *__real_malloc(size_t size);
void __real_free(void *ptr);

/* A kernel's allocation that malloc refused, once more after the idle blocks
 * are given back; then the process ends with a message that says so (MLIR's
 * lowered code uses what malloc returns unchecked: a NULL result was written
 * through, a segfault with no word of why, as a 2 x 2^33 column count did on
 * a 23 GiB machine). */
static void *out_of_memory(size_t size) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < IDLE_BLOCKS; ++i) {
    __real_free(idle[i].ptr);
    idle[i].ptr = NULL;
  }
  idle_bytes = 0;
  pthread_mutex_unlock(&lock);
  void *ptr = __real_malloc(size);
  if (ptr != NULL)
    return ptr;
  fprintf(stderr,
          "sparsecomp: out of memory: a kernel could not allocate %zu bytes (%.3g GiB) "
          "for a result or a temporary; the process stops here\n",
          size, (double)size / (double)((size_t)1 << 30));
  fflush(stderr);
  abort();
}

/* Hidden: the kernel's own calls bind to these at link time, and no other
 * library in the process can reach them. */
__attribute__((visibility("hidden"))) void *__wrap_malloc(size_t size) {
  if (size < MIN_CACHED) {
    void *ptr = __real_malloc(size);
    return ptr != NULL || size == 0 ? ptr : out_of_memory(size);
  }
  void *ptr = NULL;
  pthread_mutex_lock(&lock);
  int best = -1;
  for (int i = 0; i < IDLE_BLOCKS; ++i) {
    size_t have = idle[i].size;
    if (idle[i].ptr != NULL && have >= size && have / 2 <= size &&
        (best < 0 || have < idle[best].size))
      best = i;
  }
  if (best >= 0) {
    ptr = idle[best].ptr;
    idle_bytes -= idle[best].size;
    idle[best].ptr = NULL;
  }
  pthread_mutex_unlock(&lock);
  if (ptr == NULL)
    ptr = __real_malloc(size);
  if (ptr == NULL && size != 0)
    ptr = out_of_memory(size);
  return ptr;
}

__attribute__((visibility("hidden"))) void __wrap_free(void *ptr) {
  if (ptr == NULL)
    return;
  size_t size = malloc_usable_size(ptr);
  int slot = -1;
  if (size >= MIN_CACHED) {
    pthread_mutex_lock(&lock);
    if (idle_bytes + size <= IDLE_BYTES) {
      for (int i = 0; i < IDLE_BLOCKS && slot < 0; ++i)
        if (idle[i].ptr == NULL)
          slot = i;
    }
    if (slot >= 0) {
      idle[slot].ptr = ptr;
      idle[slot].size = size;
      idle_bytes += size;
    }
    pthread_mutex_unlock(&lock);
  }
  if (slot < 0)
    __real_free(ptr);
}
