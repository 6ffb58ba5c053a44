/* MLIR's GPU runtime ABI (the mgpu* functions gpu-to-llvm calls) over a table
 * of CUDA driver entry points that Python fills in (sparsecomp.runtime.cuda).
 *
 * Linked into every kernel.so built for a "cuda:sm_XX" target. The library
 * itself needs no CUDA at load time: the global constructors MLIR emits call
 * mgpuModuleLoadJIT / mgpuModuleLoad when the library is opened, so module
 * loads are recorded here and done on first use, once Python has bound the
 * driver (sparsecomp_cuda_bind). The first failing driver call is remembered
 * with its name; Python reads it after each call (sparsecomp_cuda_error) and
 * raises. Streams: the default stream (NULL), synchronized after each launch
 * as MLIR's lowering asks.
 */
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

/* Filled in by Python; order and types match sparsecomp.runtime.cuda.DriverTable. */
typedef struct {
  CUresult (*load_module)(CUmodule *out, const void *image, size_t size);
  CUresult (*module_get_function)(CUfunction *out, CUmodule module, const char *name);
  CUresult (*launch_kernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned smem, CUstream stream,
                            void **params, void **extra);
  CUresult (*stream_synchronize)(CUstream stream);
  CUresult (*mem_alloc_managed)(CUdeviceptr *out, size_t bytes, unsigned flags);
  CUresult (*mem_alloc)(CUdeviceptr *out, size_t bytes);
  CUresult (*mem_free)(CUdeviceptr ptr);
  CUresult (*memcpy)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  CUresult (*memset_d32)(CUdeviceptr dst, unsigned value, size_t count);
  CUresult (*memset_d16)(CUdeviceptr dst, unsigned short value, size_t count);
} sc_driver;

#define SC_MAX_MODULES 256
#define SC_NOT_INITIALIZED 3 /* CUDA_ERROR_NOT_INITIALIZED */
#define SC_MEM_ATTACH_GLOBAL 1

#define SC_MAX_FUNCTIONS 16

typedef struct {
  const void *image;
  size_t size; /* 0: NUL-terminated PTX */
  CUmodule handle;
  /* Functions looked up in this module (the host code asks before every launch). */
  int function_count;
  char names[SC_MAX_FUNCTIONS][128];
  CUfunction functions[SC_MAX_FUNCTIONS];
} sc_module;

static sc_driver sc_table;
static int sc_bound;
static sc_module sc_modules[SC_MAX_MODULES];
static int sc_module_count;
static CUresult sc_first_error;
static const char *sc_first_where = "";

static int sc_check(CUresult result, const char *where) {
  if (result != 0 && sc_first_error == 0) {
    sc_first_error = result;
    sc_first_where = where;
  }
  return result == 0;
}

static int sc_ready(const char *where) {
  return sc_check(sc_bound ? 0 : SC_NOT_INITIALIZED, where);
}

/* ---- called by Python ---- */

void sparsecomp_cuda_bind(const sc_driver *table) {
  sc_bound = table != NULL;
  if (sc_bound) sc_table = *table;
  for (int i = 0; i < sc_module_count; ++i) { /* a new context: load and look up again */
    sc_modules[i].handle = NULL;
    sc_modules[i].function_count = 0;
  }
}

/* The first error since the last call (0: none) and the driver call that failed. */
int sparsecomp_cuda_error(const char **where) {
  CUresult result = sc_first_error;
  *where = sc_first_where;
  sc_first_error = 0;
  sc_first_where = "";
  return result;
}

/* ---- MLIR's runtime ABI ---- */

static CUmodule sc_record(const void *image, size_t size) {
  if (!sc_check(sc_module_count < SC_MAX_MODULES ? 0 : 2 /* OUT_OF_MEMORY */, "mgpuModuleLoad"))
    return NULL;
  sc_module *m = &sc_modules[sc_module_count++];
  m->image = image;
  m->size = size;
  m->handle = NULL;
  m->function_count = 0;
  return m;
}

CUmodule mgpuModuleLoad(void *data, size_t size) { return sc_record(data, size); }

CUmodule mgpuModuleLoadJIT(void *data, int opt_level) {
  (void)opt_level;
  return sc_record(data, 0);
}

/* Called by a global destructor at exit, when Python may be gone: the module is
 * only forgotten (the driver frees it with its context). */
void mgpuModuleUnload(CUmodule module) {
  sc_module *m = module;
  if (m != NULL) {
    m->handle = NULL;
    m->function_count = 0;
  }
}

/* String helpers: the library links no C library of its own. */
static int sc_same(const char *a, const char *b) {
  while (*a != 0 && *a == *b) ++a, ++b;
  return *a == *b;
}

/* Copy name into a names[] slot; 0 (nothing kept) when it does not fit. */
static int sc_copy(char *slot, const char *name) {
  size_t n = 0;
  while (name[n] != 0)
    if (++n >= 128) return 0;
  for (size_t i = 0; i <= n; ++i) slot[i] = name[i];
  return 1;
}

CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  sc_module *m = module;
  CUfunction function = NULL;
  if (m == NULL || !sc_ready("cuModuleGetFunction")) return NULL;
  if (m->handle == NULL &&
      !sc_check(sc_table.load_module(&m->handle, m->image, m->size), "cuModuleLoadData"))
    return NULL;
  for (int i = 0; i < m->function_count; ++i)
    if (sc_same(m->names[i], name)) return m->functions[i];
  if (!sc_check(sc_table.module_get_function(&function, m->handle, name), "cuModuleGetFunction"))
    return NULL;
  if (m->function_count < SC_MAX_FUNCTIONS && sc_copy(m->names[m->function_count], name))
    m->functions[m->function_count++] = function;
  return function;
}

void mgpuLaunchKernel(CUfunction function, intptr_t gx, intptr_t gy, intptr_t gz, intptr_t bx,
                      intptr_t by, intptr_t bz, int32_t smem, CUstream stream, void **params,
                      void **extra, size_t count) {
  (void)count;
  if (function == NULL || !sc_ready("cuLaunchKernel")) return;
  if (gx == 0 || gy == 0 || gz == 0) return; /* an empty grid: nothing to run */
  sc_check(sc_table.launch_kernel(function, (unsigned)gx, (unsigned)gy, (unsigned)gz,
                                  (unsigned)bx, (unsigned)by, (unsigned)bz, (unsigned)smem,
                                  stream, params, extra),
           "cuLaunchKernel");
}

CUstream mgpuStreamCreate(void) { return NULL; }

void mgpuStreamDestroy(CUstream stream) { (void)stream; }

void mgpuStreamSynchronize(CUstream stream) {
  if (sc_ready("cuStreamSynchronize"))
    sc_check(sc_table.stream_synchronize(stream), "cuStreamSynchronize");
}

void *mgpuMemAlloc(uint64_t bytes, CUstream stream, int8_t host_shared) {
  (void)stream;
  CUdeviceptr ptr = 0;
  if (!sc_ready("cuMemAlloc")) return NULL;
  size_t size = bytes ? (size_t)bytes : 1; /* the driver refuses 0 bytes */
  if (host_shared)
    sc_check(sc_table.mem_alloc_managed(&ptr, size, SC_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
  else
    sc_check(sc_table.mem_alloc(&ptr, size), "cuMemAlloc");
  return (void *)(uintptr_t)ptr;
}

void mgpuMemFree(void *ptr, CUstream stream) {
  (void)stream;
  if (ptr != NULL && sc_ready("cuMemFree"))
    sc_check(sc_table.mem_free((CUdeviceptr)(uintptr_t)ptr), "cuMemFree");
}

void mgpuMemcpy(void *dst, void *src, size_t bytes, CUstream stream) {
  (void)stream;
  if (sc_ready("cuMemcpy"))
    sc_check(sc_table.memcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes),
             "cuMemcpy");
}

void mgpuMemset32(void *dst, unsigned value, size_t count, CUstream stream) {
  (void)stream;
  if (sc_ready("cuMemsetD32"))
    sc_check(sc_table.memset_d32((CUdeviceptr)(uintptr_t)dst, value, count), "cuMemsetD32");
}

void mgpuMemset16(void *dst, unsigned short value, size_t count, CUstream stream) {
  (void)stream;
  if (sc_ready("cuMemsetD16"))
    sc_check(sc_table.memset_d16((CUdeviceptr)(uintptr_t)dst, value, count), "cuMemsetD16");
}
