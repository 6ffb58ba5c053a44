/* sparsecomp.runtime._fastcall: the C call path of compiled functions.
 *
 * The Python call path (call.py, fastpath.py) costs 10-30 us per call in
 * argument checks, ctypes and result wrapping; a small kernel runs in less.
 * This module does the common case of a call in C, with exactly the checks
 * of fastpath.py, and declines (returns MISS) everything else, which then
 * takes the Python path: that path converts, specializes and raises the
 * errors. Nothing here reports an error of its own about arguments.
 *
 * Kernel: one compiled function, called through its packed form
 *   void _sparsecomp_packed_f(void **args)
 * (pass sparse-iter-pack-entry-points): args[i] points at parameter i's
 * value; a scalar result is stored where the last pointer says. Its plan,
 * built by fastcall.py from the function's ABI, says per argument what is
 * accepted:
 *   (0, typenum, rank, dest)                     dense: an exact ndarray of
 *       that dtype and rank, C-contiguous, aligned, native byte order; `dest`
 *       1 where the kernel writes a result into it (out=, destinations.py):
 *       then writable too, and sharing no byte with any other array passed;
 *   (1, scalar code)                             scalar (codes below);
 *   (2, checked, tensor type, nbuf, rank,        sparse: a SparseTensor the
 *       scipy kind or None, pos, crd, val,           Python path checked
 *       guarded, limit)                              before (fastpath.py keeps
 *       `checked`: id -> entry), or a canonical scipy CSR/CSC matrix of the
 *       ABI's dtypes, its index arrays checked (bounds, positions
 *       non-decreasing) on every call: its positions only where the kernel
 *       guards its coordinates (`guarded` 1); `limit` None or a 1-element int64
 *       array, read at each call: one of at least limit[0] entries (>= 0) is
 *       declined, so that Python can pick a guarded variant.
 * A kernel with a status word (guarded coordinates) gets a zeroed one after
 * its arguments; where the kernel sets it, the call's results are dropped
 * and the call declined: the Python path checks everything and raises.
 * Static sizes and size symbols are checked as fastpath.py does.
 *
 * Results: none, one dense array (built here, owned by a Malloced), or
 * anything else, handed as raw bytes with the call's input arrays to the
 * Python `finish` callback (results.py's rules: aliases, constants, sparse
 * results).
 *
 * Router: per public function, which Kernel takes a call, keyed by the
 * sizes that select a static-size variant (specialize.py): Python adds a
 * route once it has resolved a call; a route to a variant is skipped while
 * SPARSECOMP_SPECIALIZE=0.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 32
#define MAX_RANK 8
#define MAX_PARAMS 256
#define MAX_WORDS 1024
#define MAX_RESULT 2048
#define MAX_INPUTS 128
#define GLOBAL_MARKER 0xDEADBEEFu

enum { ARG_DENSE = 0, ARG_SCALAR = 1, ARG_SPARSE = 2 };
enum { S_BOOL, S_I8, S_I16, S_I32, S_I64, S_F32, S_F64 };
enum { R_NONE = 0, R_ONE_DENSE = 1, R_STRUCT = 2, R_SCALAR = 3 };

static PyObject *MISS;          /* the sentinel: this call is not for the C path */
static PyObject *S_ref, *S_blob, *S_shape, *S_inputs, *S_format, *S_indptr, *S_indices,
    *S_data, *S_canonical;

typedef struct {
    int kind;
    int typenum, rank;          /* dense */
    int scalar;                 /* scalar code */
    PyObject *checked;          /* sparse: dict id -> entry (borrowed from the plan tuple) */
    PyObject *tensor_type;
    int nbuf;
    const char *scipy;          /* "csr", "csc" or NULL */
    int pos, crd, val;          /* typenums of scipy's arrays */
    int guarded;                /* the kernel checks the coordinates it reads (1) */
    PyObject *limit;            /* None, or an int64 array: decline scipy matrices of at
                                   least limit[0] entries (< 0: none); borrowed from the plan */
    int dest;                   /* dense: the kernel writes a result into it (out=) */
} ArgPlan;

typedef struct {
    PyObject_HEAD
    void (*fn)(void **);
    PyObject *plan;             /* keeps the plan's objects alive */
    PyObject *owner;            /* the library object: never unloaded while we live */
    PyObject *finish, *malloced;
    int nargs;
    ArgPlan args[MAX_ARGS];
    int nstatic;
    int statics[64][3];         /* argument, axis, size */
    int nsym;
    int symbols[64][4];         /* argument, axis, argument, axis: equal sizes */
    int result, result_bytes, result_rank, result_typenum, result_item;
    int status;                 /* takes a status word after its arguments */
} Kernel;

typedef struct {
    void *ptrs[MAX_PARAMS];
    uint64_t slots[MAX_PARAMS];
    int nparams;
    int64_t words[MAX_WORDS];
    int nwords;
    int64_t shapes[MAX_ARGS][MAX_RANK];
    uintptr_t inputs[MAX_INPUTS];   /* data addresses of the arrays passed */
    uintptr_t first[MAX_INPUTS], last[MAX_INPUTS]; /* the bytes each may span: [first, last) */
    int ninputs;
    int dest_input[MAX_ARGS];       /* a destination argument's input, else -1 */
    PyObject *entries[MAX_ARGS];    /* a sparse tensor's checked entry (borrowed) */
    int32_t status;                 /* the status word (guarded coordinates) */
} Call;

static int same_type(PyArrayObject *a, int typenum) {
    int got = PyArray_TYPE(a);
    return (got == typenum || PyArray_EquivTypenums(got, typenum)) && PyArray_ISNOTSWAPPED(a);
}

static int usable(PyObject *o, int typenum, int ndim) {
    if (!PyArray_CheckExact(o))
        return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    return PyArray_NDIM(a) == ndim && same_type(a, typenum) && PyArray_IS_C_CONTIGUOUS(a) &&
           PyArray_ISALIGNED(a);
}

static int param(Call *c, uint64_t value) {
    if (c->nparams >= MAX_PARAMS)
        return 0;
    c->slots[c->nparams] = value;
    c->ptrs[c->nparams] = &c->slots[c->nparams];
    c->nparams++;
    return 1;
}

/* One array passed: its data address, and the bytes [first, last) it may span. */
static int input(Call *c, uintptr_t address, uintptr_t first, uintptr_t last) {
    if (c->ninputs >= MAX_INPUTS)
        return 0;
    c->first[c->ninputs] = first;
    c->last[c->ninputs] = last;
    c->inputs[c->ninputs++] = address;
    return 1;
}

/* Whether a destination's bytes (input `d`) meet another input's: a kernel writing
 * into it would change what it reads (out= then takes the Python path, which copies). */
static int overlaps(const Call *c, int d) {
    if (c->first[d] == c->last[d])
        return 0;
    for (int j = 0; j < c->ninputs; j++)
        if (j != d && c->first[j] < c->last[j] && c->first[j] < c->last[d] &&
            c->first[d] < c->last[j])
            return 1;
    return 0;
}

/* A C-contiguous array's descriptor words, and a parameter pointing at them. */
static int descriptor(Call *c, PyArrayObject *a) {
    int rank = PyArray_NDIM(a);
    if (c->nwords + 3 + 2 * rank > MAX_WORDS)
        return 0;
    int64_t *w = c->words + c->nwords;
    uintptr_t data = (uintptr_t)PyArray_DATA(a);
    w[0] = w[1] = (int64_t)data;
    w[2] = 0;
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
        w[3 + d] = PyArray_DIM(a, d);
        w[3 + rank + d] = stride;
        stride *= PyArray_DIM(a, d);
    }
    c->nwords += 3 + 2 * rank;
    uintptr_t end = data + (uintptr_t)PyArray_NBYTES(a);
    return param(c, (uint64_t)(uintptr_t)w) && input(c, data, data, end);
}

/* Element i of an int32 or int64 index array (the plan takes scipy matrices whose
 * index dtypes are those, exactly: fastcall.py). */
static int64_t load_index(const char *base, int item, npy_intp i) {
    return item == 4 ? ((const int32_t *)base)[i] : ((const int64_t *)base)[i];
}

/* One pass each, written so that the compiler vectorizes them (what scipy's arrays
 * nearly always are: 32-bit). Not inlined: inlined into prepare(), gcc 12
 * vectorizes none of them (4x slower). On x86-64 Linux, AVX2 clones are chosen at
 * load time where the CPU has it (a max over 8 lanes a cycle: SSE2 has no unsigned
 * compare or max, and its emulation made the check 3x slower than numpy's). */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define VECTOR_CLONES __attribute__((noinline, target_clones("avx2", "default")))
#else
#define VECTOR_CLONES __attribute__((noinline))
#endif
VECTOR_CLONES static int any_decrease32(const int32_t *restrict q, npy_intp n) {
    int bad = 0;
    for (npy_intp i = 1; i < n; i++)
        bad |= q[i] < q[i - 1];
    return bad;
}

VECTOR_CLONES static int any_decrease64(const int64_t *restrict q, npy_intp n) {
    int bad = 0;
    for (npy_intp i = 1; i < n; i++)
        bad |= q[i] < q[i - 1];
    return bad;
}

/* Seen as unsigned, a negative index is at least 2^31 (2^63): at or beyond `limit`,
 * which is the size clamped to that. */
VECTOR_CLONES static int any_beyond32(const uint32_t *restrict q, npy_intp n, uint32_t limit) {
    uint32_t top = 0;
    for (npy_intp i = 0; i < n; i++)
        top = q[i] > top ? q[i] : top;
    return n > 0 && top >= limit;
}

VECTOR_CLONES static int any_beyond64(const uint64_t *restrict q, npy_intp n, uint64_t limit) {
    uint64_t bad = 0;
    for (npy_intp i = 0; i < n; i++)
        bad |= (uint64_t)(q[i] >= limit);
    return bad != 0;
}

/* What fastpath.py checks (indptr.check_compressed): major + 1 non-decreasing
 * positions from 0 to nnz, every index in [0, minor). Sortedness within a row is
 * scipy's canonical flag, checked by the caller. Where the kernel guards the
 * coordinates (guarded 1), the indices are its to check (but a level of size 0
 * with entries is refused here: the kernel's clamped reads would read element 0). */
static int compressed_ok(PyArrayObject *ptr, PyArrayObject *idx, int64_t major, int64_t minor,
                         int guarded) {
    npy_intp n = PyArray_DIM(ptr, 0), nnz = PyArray_DIM(idx, 0);
    const char *p = PyArray_DATA(ptr), *x = PyArray_DATA(idx);
    int pi = (int)PyArray_ITEMSIZE(ptr), xi = (int)PyArray_ITEMSIZE(idx);
    if (n != major + 1 || load_index(p, pi, 0) != 0 || load_index(p, pi, n - 1) != nnz)
        return 0;
    if (pi == 4 ? any_decrease32((const int32_t *)p, n) : any_decrease64((const int64_t *)p, n))
        return 0;
    if (guarded)
        return minor > 0 || nnz == 0;
    if (xi == 4) {
        uint32_t limit = minor < ((int64_t)1 << 31) ? (uint32_t)minor : (uint32_t)1 << 31;
        return !any_beyond32((const uint32_t *)x, nnz, limit);
    }
    uint64_t limit = (uint64_t)minor < ((uint64_t)1 << 63) ? (uint64_t)minor : (uint64_t)1 << 63;
    return !any_beyond64((const uint64_t *)x, nnz, limit);
}

/* A canonical scipy CSR (CSC) matrix; 1 taken, 0 not for us, -1 error. */
static int scipy_arg(Call *c, const ArgPlan *p, PyObject *v, int64_t *shape) {
    int ok = 0;
    PyObject *fmt = NULL, *ptr = NULL, *idx = NULL, *data = NULL, *canon = NULL, *shp = NULL;
    fmt = PyObject_GetAttr(v, S_format);
    if (fmt == NULL || !PyUnicode_Check(fmt) || PyUnicode_CompareWithASCIIString(fmt, p->scipy))
        goto done;
    ptr = PyObject_GetAttr(v, S_indptr);
    idx = ptr ? PyObject_GetAttr(v, S_indices) : NULL;
    data = idx ? PyObject_GetAttr(v, S_data) : NULL;
    if (data == NULL || !usable(ptr, p->pos, 1) || !usable(idx, p->crd, 1) ||
        !usable(data, p->val, 1))
        goto done;
    if (PyArray_DIM((PyArrayObject *)data, 0) != PyArray_DIM((PyArrayObject *)idx, 0))
        goto done;
    if (p->limit != Py_None) {
        int64_t limit = *(const int64_t *)PyArray_DATA((PyArrayObject *)p->limit);
        if (limit >= 0 && PyArray_DIM((PyArrayObject *)idx, 0) >= limit)
            goto done;
    }
    canon = PyObject_GetAttr(v, S_canonical);
    if (canon == NULL || PyObject_IsTrue(canon) != 1)
        goto done;
    shp = PyObject_GetAttr(v, S_shape);
    if (shp == NULL || !PyTuple_Check(shp) || PyTuple_GET_SIZE(shp) != 2)
        goto done;
    for (int d = 0; d < 2; d++) {
        shape[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shp, d));
        if (shape[d] < 0)
            goto done;
    }
    int csr = p->scipy[2] == 'r';
    if (!compressed_ok((PyArrayObject *)ptr, (PyArrayObject *)idx, csr ? shape[0] : shape[1],
                       csr ? shape[1] : shape[0], p->guarded))
        goto done;
    ok = descriptor(c, (PyArrayObject *)ptr) && descriptor(c, (PyArrayObject *)idx) &&
         descriptor(c, (PyArrayObject *)data) && param(c, (uint64_t)shape[0]) &&
         param(c, (uint64_t)shape[1]);
done:
    Py_XDECREF(fmt);
    Py_XDECREF(ptr);
    Py_XDECREF(idx);
    Py_XDECREF(data);
    Py_XDECREF(canon);
    Py_XDECREF(shp);
    PyErr_Clear();
    return ok;
}

/* A SparseTensor the Python path checked before: its words and shape as it stored them. */
static int tensor_arg(Call *c, const ArgPlan *p, PyObject *v, int64_t *shape, int i) {
    PyObject *key = PyLong_FromVoidPtr(v);
    if (key == NULL)
        return -1;
    PyObject *entry = PyDict_GetItemWithError(p->checked, key);
    Py_DECREF(key);
    if (entry == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int ok = 0;
    PyObject *ref = PyObject_GetAttr(entry, S_ref);
    PyObject *blob = ref ? PyObject_GetAttr(entry, S_blob) : NULL;
    PyObject *shp = blob ? PyObject_GetAttr(entry, S_shape) : NULL;
    if (shp == NULL || !PyWeakref_Check(ref) || !PyBytes_Check(blob) || !PyTuple_Check(shp))
        goto done;
    if (PyWeakref_GET_OBJECT(ref) != v || PyTuple_GET_SIZE(shp) != p->rank)
        goto done;
    Py_ssize_t nwords = PyBytes_GET_SIZE(blob) / 8;
    if (nwords != 5 * p->nbuf || c->nwords + nwords > MAX_WORDS)
        goto done;
    int64_t *w = c->words + c->nwords;
    memcpy(w, PyBytes_AS_STRING(blob), (size_t)nwords * 8);
    c->nwords += (int)nwords;
    ok = 1;
    for (int k = 0; k < p->nbuf && ok; k++) {
        /* rank-1 buffers (allocated, aligned, offset, size, stride); their element
         * size is not in the plan: 8 bytes bounds every one the layouts have */
        const int64_t *b = w + 5 * k;
        uintptr_t start = (uintptr_t)b[1], end = start + (uintptr_t)((b[2] + b[3]) * 8);
        ok = param(c, (uint64_t)(uintptr_t)b) && input(c, (uintptr_t)b[0], start, end);
    }
    for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shp) && ok; d++) {
        shape[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shp, d));
        ok = param(c, (uint64_t)shape[d]);
    }
    c->entries[i] = entry;
done:
    Py_XDECREF(ref);
    Py_XDECREF(blob);
    Py_XDECREF(shp);
    if (PyErr_Occurred())
        PyErr_Clear();
    return ok;
}

static int scalar_arg(Call *c, int code, PyObject *v) {
    uint64_t slot = 0;
    if (code == S_BOOL) {
        if (!PyBool_Check(v))
            return 0;
        uint8_t b = v == Py_True;
        memcpy(&slot, &b, 1);
        return param(c, slot);
    }
    if (code == S_F32 || code == S_F64) {
        double d;
        if (PyFloat_CheckExact(v))
            d = PyFloat_AS_DOUBLE(v);
        else if (PyLong_CheckExact(v)) {
            d = PyLong_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
        } else
            return 0;
        if (code == S_F32) {
            float f = (float)d;
            memcpy(&slot, &f, 4);
        } else
            memcpy(&slot, &d, 8);
        return param(c, slot);
    }
    if (!PyLong_CheckExact(v))
        return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    switch (code) {
    case S_I8:
        if (x < INT8_MIN || x > INT8_MAX)
            return 0;
        int8_t x8 = (int8_t)x;
        memcpy(&slot, &x8, 1);
        break;
    case S_I16:
        if (x < INT16_MIN || x > INT16_MAX)
            return 0;
        int16_t x16 = (int16_t)x;
        memcpy(&slot, &x16, 2);
        break;
    case S_I32:
        if (x < INT32_MIN || x > INT32_MAX)
            return 0;
        int32_t x32 = (int32_t)x;
        memcpy(&slot, &x32, 4);
        break;
    default:
        memcpy(&slot, &x, 8);
    }
    return param(c, slot);
}

/* Every argument's parameters into `c`: 1 taken, 0 not for us, -1 error. */
static int prepare(Kernel *k, PyObject *args, Call *c, char *result) {
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != k->nargs)
        return 0;
    c->nparams = c->nwords = c->ninputs = 0;
    if (k->result == R_ONE_DENSE || k->result == R_STRUCT)
        param(c, (uint64_t)(uintptr_t)result);
    for (int i = 0; i < k->nargs; i++) {
        const ArgPlan *p = &k->args[i];
        PyObject *v = PyTuple_GET_ITEM(args, i);
        int ok;
        c->entries[i] = NULL;
        c->dest_input[i] = -1;
        if (p->kind == ARG_DENSE) {
            if (p->dest) { /* out=: written, so writable, and apart from every other input */
                if (!PyArray_Check(v) || !PyArray_ISWRITEABLE((PyArrayObject *)v))
                    return 0;
                c->dest_input[i] = c->ninputs;
            }
            ok = usable(v, p->typenum, p->rank) && descriptor(c, (PyArrayObject *)v);
            for (int d = 0; ok && d < p->rank; d++)
                c->shapes[i][d] = PyArray_DIM((PyArrayObject *)v, d);
        } else if (p->kind == ARG_SCALAR) {
            ok = scalar_arg(c, p->scalar, v);
        } else if ((PyObject *)Py_TYPE(v) == p->tensor_type) {
            ok = tensor_arg(c, p, v, c->shapes[i], i);
        } else {
            ok = p->scipy != NULL ? scipy_arg(c, p, v, c->shapes[i]) : 0;
        }
        if (ok != 1)
            return ok;
    }
    for (int i = 0; i < k->nargs; i++)
        if (c->dest_input[i] >= 0 && overlaps(c, c->dest_input[i]))
            return 0;
    for (int s = 0; s < k->nstatic; s++)
        if (c->shapes[k->statics[s][0]][k->statics[s][1]] != k->statics[s][2])
            return 0;
    for (int s = 0; s < k->nsym; s++)
        if (c->shapes[k->symbols[s][0]][k->symbols[s][1]] !=
            c->shapes[k->symbols[s][2]][k->symbols[s][3]])
            return 0;
    if (k->status) { /* a rank-1 descriptor of one int32: the status word */
        if (c->nwords + 5 > MAX_WORDS)
            return 0;
        int64_t *w = c->words + c->nwords;
        c->status = 0;
        w[0] = w[1] = (int64_t)(uintptr_t)&c->status;
        w[2] = 0;
        w[3] = w[4] = 1;
        c->nwords += 5;
        if (!param(c, (uint64_t)(uintptr_t)w))
            return 0;
    }
    if (k->result == R_SCALAR) { /* the packed form stores the value where this points */
        if (c->nparams >= MAX_PARAMS)
            return 0;
        c->ptrs[c->nparams++] = result;
    }
    return 1;
}

/* data address -> array of every array passed (the first one wins), for `finish`. */
static PyObject *input_arrays(Kernel *k, PyObject *args, Call *c) {
    PyObject *out = PyDict_New();
    for (int i = 0; out != NULL && i < k->nargs; i++) {
        PyObject *v = PyTuple_GET_ITEM(args, i);
        PyObject *arrays[3] = {NULL, NULL, NULL};
        if (k->args[i].kind == ARG_DENSE) {
            arrays[0] = v;
            Py_INCREF(v);
        } else if (k->args[i].kind == ARG_SPARSE && c->entries[i] != NULL) {
            PyObject *pairs = PyObject_GetAttr(c->entries[i], S_inputs);
            Py_ssize_t n = pairs && PyList_Check(pairs) ? PyList_GET_SIZE(pairs) : 0;
            for (Py_ssize_t j = 0; j < n; j++) {
                PyObject *pair = PyList_GET_ITEM(pairs, j);
                PyDict_SetDefault(out, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1));
            }
            Py_XDECREF(pairs);
        } else if (k->args[i].kind == ARG_SPARSE) {
            arrays[0] = PyObject_GetAttr(v, S_indptr);
            arrays[1] = PyObject_GetAttr(v, S_indices);
            arrays[2] = PyObject_GetAttr(v, S_data);
        }
        for (int j = 0; j < 3; j++) {
            if (arrays[j] == NULL)
                continue;
            PyObject *key = PyLong_FromVoidPtr(PyArray_DATA((PyArrayObject *)arrays[j]));
            if (key != NULL)
                PyDict_SetDefault(out, key, arrays[j]);
            Py_XDECREF(key);
            Py_DECREF(arrays[j]);
        }
    }
    if (PyErr_Occurred())
        Py_CLEAR(out);
    return out;
}

/* The one dense result, built here when it is fresh memory the kernel allocated:
 * 1 built (*out), 0 not (results.py decides), -1 error. */
static int dense_result(Kernel *k, Call *c, const int64_t *w, PyObject **out) {
    uintptr_t allocated = (uintptr_t)w[0];
    int rank = k->result_rank;
    if (allocated == 0 || allocated == GLOBAL_MARKER)
        return 0;
    for (int j = 0; j < c->ninputs; j++)
        if (c->inputs[j] == allocated)
            return 0;
    npy_intp dims[MAX_RANK], strides[MAX_RANK];
    for (int d = 0; d < rank; d++) {
        if (w[3 + d] <= 0)
            return 0;
        dims[d] = (npy_intp)w[3 + d];
        strides[d] = (npy_intp)(w[3 + rank + d] * k->result_item);
    }
    /* The owner first: from here on, the block is freed whatever fails. */
    PyObject *address = PyLong_FromVoidPtr((void *)allocated);
    PyObject *owner = address ? PyObject_CallOneArg(k->malloced, address) : NULL;
    Py_XDECREF(address);
    if (owner == NULL)
        return -1;
    char *data = (char *)(uintptr_t)w[1] + w[2] * k->result_item;
    PyObject *array = PyArray_New(&PyArray_Type, rank, dims, k->result_typenum, strides, data,
                                  k->result_item, NPY_ARRAY_CARRAY, NULL);
    if (array == NULL) {
        Py_DECREF(owner);
        return -1;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)array, owner) < 0) { /* steals owner */
        Py_DECREF(array);
        return -1;
    }
    PyArray_UpdateFlags((PyArrayObject *)array, NPY_ARRAY_UPDATE_ALL);
    *out = array;
    return 1;
}

static PyObject *results(Kernel *k, PyObject *args, Call *c, char *result);

/* A run-time check that fails in compiled code (sparsecomp.ir.fatal: a reshape whose
 * sizes do not multiply out, a BSR shape not in whole blocks, ...) calls the handler a
 * loaded library's `__sparsecomp_fatal_handler` points at (loader.py sets it to
 * fatal_jump) with its message, before it would print it and exit. Where the thread
 * is in a guarded call (below), the handler jumps back to it, and the call raises
 * sparsecomp.errors.KernelError with the message; anywhere else it returns and the program exits, as
 * under mlir-runner. What the kernel allocated before the check is not freed. */
static _Thread_local jmp_buf *fatal_target = NULL;
static _Thread_local char fatal_message[1024];
static PyObject *KernelError = NULL;

static void fatal_jump(const char *message) {
    jmp_buf *target = fatal_target;
    if (target == NULL)
        return;
    strncpy(fatal_message, message, sizeof fatal_message - 1);
    fatal_message[sizeof fatal_message - 1] = 0;
    fatal_target = NULL;
    longjmp(*target, 1);
}

/* fn(ptrs) with the GIL released; 0, or -1 (with KernelError set) where a check in
 * the kernel failed. */
static int guarded(void (*fn)(void **), void **ptrs) {
    jmp_buf env;
    volatile int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    if (setjmp(env) == 0) {
        fatal_target = &env;
        fn(ptrs);
        fatal_target = NULL;
    } else {
        failed = 1;
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_SetString(KernelError, fatal_message);
        return -1;
    }
    return 0;
}

/* guarded_call(packed function address, argument array address): the Python call
 * path's call of a packed entry point, guarded as the C path's. */
static PyObject *guarded_call(PyObject *self, PyObject *args) {
    unsigned long long fn, ptrs;
    if (!PyArg_ParseTuple(args, "KK", &fn, &ptrs))
        return NULL;
    if (guarded((void (*)(void **))(uintptr_t)fn, (void **)(uintptr_t)ptrs) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *kernel_run(Kernel *k, PyObject *args) {
    Call c;
    _Alignas(16) char result[MAX_RESULT];
    int ok = prepare(k, args, &c, result);
    if (ok < 0)
        return NULL;
    if (ok == 0)
        return Py_NewRef(MISS);
    if (guarded(k->fn, c.ptrs) < 0)
        return NULL;
    PyObject *out = results(k, args, &c, result);
    if (out != NULL && k->status && c.status != 0) { /* a coordinate out of range */
        Py_DECREF(out); /* frees what the kernel allocated */
        return Py_NewRef(MISS);
    }
    return out;
}

/* The call's results, from the result struct the kernel filled. */
static PyObject *results(Kernel *k, PyObject *args, Call *c, char *result) {
    if (k->result == R_NONE)
        Py_RETURN_NONE;
    if (k->result == R_ONE_DENSE) {
        PyObject *array = NULL;
        int built = dense_result(k, c, (const int64_t *)result, &array);
        if (built != 0)
            return array; /* NULL on error */
    }
    PyObject *raw = PyBytes_FromStringAndSize(result, k->result_bytes);
    PyObject *inputs = raw ? input_arrays(k, args, c) : NULL;
    PyObject *out = inputs ? PyObject_CallFunctionObjArgs(k->finish, raw, inputs, NULL) : NULL;
    Py_XDECREF(raw);
    Py_XDECREF(inputs);
    return out;
}

static PyObject *kernel_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *given;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "a Kernel takes its arguments as one tuple");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "Kernel", 1, 1, &given))
        return NULL;
    return kernel_run((Kernel *)self, given);
}

static PyObject *kernel_accepts(PyObject *self, PyObject *given) {
    Call c;
    _Alignas(16) char result[MAX_RESULT];
    int ok = prepare((Kernel *)self, given, &c, result);
    if (ok < 0)
        return NULL;
    return PyBool_FromLong(ok);
}

static int int_item(PyObject *tuple, Py_ssize_t i, int *out) {
    long v = PyLong_AsLong(PyTuple_GetItem(tuple, i));
    *out = (int)v;
    return !(v == -1 && PyErr_Occurred());
}

static int limit_item(PyObject *tuple, Py_ssize_t i, PyObject **out) {
    PyObject *v = PyTuple_GetItem(tuple, i);
    *out = v;
    return v == Py_None || (v != NULL && usable(v, NPY_INT64, 1) &&
                            PyArray_DIM((PyArrayObject *)v, 0) == 1);
}

static int parse_arg(ArgPlan *p, PyObject *spec) {
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 2 || !int_item(spec, 0, &p->kind))
        return 0;
    p->dest = 0;
    if (p->kind == ARG_DENSE)
        return PyTuple_GET_SIZE(spec) == 4 && int_item(spec, 1, &p->typenum) &&
               int_item(spec, 2, &p->rank) && p->rank <= MAX_RANK && int_item(spec, 3, &p->dest);
    if (p->kind == ARG_SCALAR)
        return int_item(spec, 1, &p->scalar) && p->scalar >= S_BOOL && p->scalar <= S_F64;
    if (p->kind != ARG_SPARSE || PyTuple_GET_SIZE(spec) != 11)
        return 0;
    p->checked = PyTuple_GET_ITEM(spec, 1);
    p->tensor_type = PyTuple_GET_ITEM(spec, 2);
    PyObject *scipy = PyTuple_GET_ITEM(spec, 5);
    p->scipy = scipy == Py_None ? NULL : PyUnicode_AsUTF8(scipy);
    return PyDict_Check(p->checked) && int_item(spec, 3, &p->nbuf) &&
           int_item(spec, 4, &p->rank) && p->rank <= MAX_RANK && (scipy == Py_None || p->scipy) &&
           int_item(spec, 6, &p->pos) && int_item(spec, 7, &p->crd) && int_item(spec, 8, &p->val) &&
           int_item(spec, 9, &p->guarded) && limit_item(spec, 10, &p->limit);
}

static int parse_pairs(PyObject *list, int (*out)[4], int *n, int width) {
    if (!PyTuple_Check(list) || PyTuple_GET_SIZE(list) > 64)
        return 0;
    *n = (int)PyTuple_GET_SIZE(list);
    for (int i = 0; i < *n; i++) {
        PyObject *item = PyTuple_GET_ITEM(list, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != width)
            return 0;
        for (int j = 0; j < width; j++)
            if (!int_item(item, j, &out[i][j]))
                return 0;
    }
    return 1;
}

static int slot_ok(const Kernel *k, int argument, int axis) {
    return argument >= 0 && argument < k->nargs && axis >= 0 && axis < k->args[argument].rank;
}

/* Kernel(address, owner, args, statics, symbols, result, finish, malloced, status) */
static int kernel_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    Kernel *k = (Kernel *)self;
    PyObject *address, *owner, *plan, *statics, *symbols, *result, *finish, *malloced;
    if (!PyArg_ParseTuple(args, "OOO!O!O!O!OOi", &address, &owner, &PyTuple_Type, &plan,
                          &PyTuple_Type, &statics, &PyTuple_Type, &symbols, &PyTuple_Type,
                          &result, &finish, &malloced, &k->status))
        return -1;
    k->fn = (void (*)(void **))PyLong_AsVoidPtr(address);
    if (k->fn == NULL || PyTuple_GET_SIZE(plan) > MAX_ARGS)
        goto bad;
    k->nargs = (int)PyTuple_GET_SIZE(plan);
    for (int i = 0; i < k->nargs; i++)
        if (!parse_arg(&k->args[i], PyTuple_GET_ITEM(plan, i)))
            goto bad;
    int triples[64][4];
    if (!parse_pairs(statics, triples, &k->nstatic, 3) ||
        !parse_pairs(symbols, k->symbols, &k->nsym, 4))
        goto bad;
    for (int s = 0; s < k->nstatic; s++)
        for (int j = 0; j < 3; j++)
            k->statics[s][j] = triples[s][j];
    for (int s = 0; s < k->nstatic; s++) /* every (argument, axis) names a shape slot */
        if (!slot_ok(k, k->statics[s][0], k->statics[s][1]))
            goto bad;
    for (int s = 0; s < k->nsym; s++)
        if (!slot_ok(k, k->symbols[s][0], k->symbols[s][1]) ||
            !slot_ok(k, k->symbols[s][2], k->symbols[s][3]))
            goto bad;
    if (PyTuple_GET_SIZE(result) != 5 || !int_item(result, 0, &k->result) ||
        !int_item(result, 1, &k->result_bytes) || !int_item(result, 2, &k->result_rank) ||
        !int_item(result, 3, &k->result_typenum) || !int_item(result, 4, &k->result_item) ||
        k->result_bytes > MAX_RESULT || k->result_rank > MAX_RANK)
        goto bad;
    Py_INCREF(plan);
    Py_INCREF(owner);
    Py_INCREF(finish);
    Py_INCREF(malloced);
    Py_XSETREF(k->plan, plan);
    Py_XSETREF(k->owner, owner);
    Py_XSETREF(k->finish, finish);
    Py_XSETREF(k->malloced, malloced);
    return 0;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "Kernel: a plan this module cannot follow");
    return -1;
}

static int kernel_traverse(PyObject *self, visitproc visit, void *arg) {
    Kernel *k = (Kernel *)self;
    Py_VISIT(k->plan);
    Py_VISIT(k->owner);
    Py_VISIT(k->finish);
    Py_VISIT(k->malloced);
    return 0;
}

static int kernel_clear(PyObject *self) {
    Kernel *k = (Kernel *)self;
    Py_CLEAR(k->plan);
    Py_CLEAR(k->owner);
    Py_CLEAR(k->finish);
    Py_CLEAR(k->malloced);
    return 0;
}

static void kernel_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    kernel_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef kernel_methods[] = {
    {"accepts", kernel_accepts, METH_O, "Whether the C path takes this argument tuple."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sparsecomp.runtime._fastcall.Kernel",
    .tp_basicsize = sizeof(Kernel),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One compiled function's C call path: kernel(args) -> result or MISS.",
    .tp_new = PyType_GenericNew,
    .tp_init = kernel_init,
    .tp_call = kernel_call,
    .tp_traverse = kernel_traverse,
    .tp_clear = kernel_clear,
    .tp_dealloc = kernel_dealloc,
    .tp_methods = kernel_methods,
};

/* ---- Router ---- */

#define MAX_ROUTES 64
#define MAX_PER_ROUTE 8

typedef struct {
    PyObject_HEAD
    int ndims;
    int dims[16][2];            /* argument, dimension: the sizes that pick a variant */
    PyObject *routes;           /* key tuple -> list of (Kernel, needs specialization) */
} Router;

/* The route key of `args`: the sizes at `dims`; NULL (no error) where an argument
 * is not an array with that dimension. */
static PyObject *route_key(Router *r, PyObject *args) {
    if (!PyTuple_Check(args))
        return NULL;
    PyObject *key = PyTuple_New(r->ndims);
    for (int i = 0; key != NULL && i < r->ndims; i++) {
        int a = r->dims[i][0], d = r->dims[i][1];
        PyObject *v = a < PyTuple_GET_SIZE(args) ? PyTuple_GET_ITEM(args, a) : NULL;
        if (v == NULL || !PyArray_CheckExact(v) || PyArray_NDIM((PyArrayObject *)v) <= d) {
            Py_CLEAR(key);
            break;
        }
        PyObject *size = PyLong_FromSsize_t(PyArray_DIM((PyArrayObject *)v, d));
        if (size == NULL)
            Py_CLEAR(key);
        else
            PyTuple_SET_ITEM(key, i, size);
    }
    return key;
}

static int specializing(void) {
    const char *v = getenv("SPARSECOMP_SPECIALIZE");
    return v == NULL || strcmp(v, "0") != 0;
}

static PyObject *router_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    Router *r = (Router *)self;
    PyObject *given;
    if (!PyArg_UnpackTuple(args, "Router", 1, 1, &given))
        return NULL;
    PyObject *key = route_key(r, given);
    if (key == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_INCREF(MISS);
        return MISS;
    }
    PyObject *list = PyDict_GetItemWithError(r->routes, key);
    Py_DECREF(key);
    if (list == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_INCREF(MISS);
        return MISS;
    }
    int checked = 0, on = 1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *entry = PyList_GET_ITEM(list, i);
        if (PyTuple_GET_ITEM(entry, 1) == Py_True) {
            if (!checked) {
                on = specializing();
                checked = 1;
            }
            if (!on)
                continue;
        }
        PyObject *out = kernel_run((Kernel *)PyTuple_GET_ITEM(entry, 0), given);
        if (out != MISS)
            return out;
        Py_DECREF(out);
    }
    Py_INCREF(MISS);
    return MISS;
}

/* add(args, kernel, variant) -> bool: calls like `args` may go to `kernel`. */
static PyObject *router_add(PyObject *self, PyObject *args) {
    Router *r = (Router *)self;
    PyObject *given, *kernel, *variant;
    if (!PyArg_ParseTuple(args, "OO!O", &given, &KernelType, &kernel, &variant))
        return NULL;
    PyObject *key = route_key(r, given);
    if (key == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_FALSE;
    }
    PyObject *list = PyDict_GetItemWithError(r->routes, key);
    if (list == NULL && !PyErr_Occurred() && PyDict_GET_SIZE(r->routes) < MAX_ROUTES) {
        list = PyList_New(0);
        if (list != NULL && PyDict_SetItem(r->routes, key, list) < 0)
            Py_CLEAR(list);
        Py_XDECREF(list); /* the dict holds it */
    }
    Py_DECREF(key);
    if (list == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
    Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyTuple_GET_ITEM(PyList_GET_ITEM(list, i), 0) == kernel)
            Py_RETURN_TRUE;
    if (n >= MAX_PER_ROUTE)
        Py_RETURN_FALSE;
    PyObject *entry = PyTuple_Pack(2, kernel, PyObject_IsTrue(variant) ? Py_True : Py_False);
    if (entry == NULL || PyList_Append(list, entry) < 0) {
        Py_XDECREF(entry);
        return NULL;
    }
    Py_DECREF(entry);
    Py_RETURN_TRUE;
}

/* Router(dims): dims a tuple of (argument, dimension) pairs. */
static int router_init(PyObject *self, PyObject *args, PyObject *kwargs) {
    Router *r = (Router *)self;
    PyObject *dims;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &dims))
        return -1;
    if (PyTuple_GET_SIZE(dims) > 16) {
        PyErr_SetString(PyExc_ValueError, "Router: at most 16 dimensions");
        return -1;
    }
    r->ndims = (int)PyTuple_GET_SIZE(dims);
    for (int i = 0; i < r->ndims; i++) {
        PyObject *pair = PyTuple_GET_ITEM(dims, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !int_item(pair, 0, &r->dims[i][0]) || !int_item(pair, 1, &r->dims[i][1])) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "Router: dims are (argument, dimension)");
            return -1;
        }
    }
    Py_XSETREF(r->routes, PyDict_New());
    return r->routes ? 0 : -1;
}

static int router_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((Router *)self)->routes);
    return 0;
}

static int router_clear(PyObject *self) {
    Py_CLEAR(((Router *)self)->routes);
    return 0;
}

static void router_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    router_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *router_len(PyObject *self, PyObject *unused) {
    Router *r = (Router *)self;
    return PyLong_FromSsize_t(r->routes ? PyDict_GET_SIZE(r->routes) : 0);
}

static PyMethodDef router_methods[] = {
    {"add", router_add, METH_VARARGS, "add(args, kernel, variant): route calls like args."},
    {"routes", router_len, METH_NOARGS, "How many keys have routes."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RouterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sparsecomp.runtime._fastcall.Router",
    .tp_basicsize = sizeof(Router),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Which Kernel takes a call: router(args) -> result or MISS.",
    .tp_new = PyType_GenericNew,
    .tp_init = router_init,
    .tp_call = router_call,
    .tp_traverse = router_traverse,
    .tp_clear = router_clear,
    .tp_dealloc = router_dealloc,
    .tp_methods = router_methods,
};

static PyMethodDef module_methods[] = {
    {"guarded_call", guarded_call, METH_VARARGS,
     "guarded_call(fn, args): call a packed entry point; a failed check raises KernelError."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_fastcall",
    .m_doc = "The C call path of compiled functions.", .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__fastcall(void) {
    import_array();
    if (PyType_Ready(&KernelType) < 0 || PyType_Ready(&RouterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    MISS = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    S_ref = PyUnicode_InternFromString("ref");
    S_blob = PyUnicode_InternFromString("blob");
    S_shape = PyUnicode_InternFromString("shape");
    S_inputs = PyUnicode_InternFromString("inputs");
    S_format = PyUnicode_InternFromString("format");
    S_indptr = PyUnicode_InternFromString("indptr");
    S_indices = PyUnicode_InternFromString("indices");
    S_data = PyUnicode_InternFromString("data");
    S_canonical = PyUnicode_InternFromString("has_canonical_format");
    PyObject *errors = PyImport_ImportModule("sparsecomp.errors");
    KernelError = errors ? PyObject_GetAttrString(errors, "KernelError") : NULL;
    Py_XDECREF(errors);
    PyObject *handler = PyLong_FromVoidPtr((void *)fatal_jump);
    if (KernelError == NULL || handler == NULL ||
        PyModule_AddObjectRef(m, "KernelError", KernelError) < 0 ||
        PyModule_AddObject(m, "FATAL_HANDLER", handler) < 0) {
        Py_XDECREF(handler);
        Py_DECREF(m);
        return NULL;
    }
    if (MISS == NULL || PyModule_AddObjectRef(m, "MISS", MISS) < 0 ||
        PyModule_AddObjectRef(m, "Kernel", (PyObject *)&KernelType) < 0 ||
        PyModule_AddObjectRef(m, "Router", (PyObject *)&RouterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
