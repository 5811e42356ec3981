/* Exact integer matrices in fixed-width two's complement words, for single inputs and small
 * batches (untrusted, outside the kernel; see fixedwidth.py).
 *
 * Words: an r x c matrix of integers, each stored as L 64-bit limbs in two's complement,
 * little-endian (limb 0 lowest), row-major.  Every operation computes its result modulo
 * 2^(64 L') for a width L' chosen *before* the operation from a bound on the result:
 *
 *     |result| < 2^bits   and   bits + 1 <= 64 L'.
 *
 * Arithmetic modulo 2^(64 L') is a ring homomorphism, so whatever happens to intermediate
 * carries, the result's residue is right; since the true result lies in
 * [-2^(64 L' - 1), 2^(64 L' - 1)), its residue *is* its two's complement representation.
 * That is the whole exactness argument; the bounds are stated where they are computed.
 *
 * Weights: an r x c matrix of int64 entries (the scaled layers of a network), stored as sparse
 * rows, with the bit length of its largest row L1 norm.
 *
 * A result wider than MAX_LIMBS raises OverflowError, and so does a Weights entry or scalar
 * outside int64: the caller then uses the kernel's evaluator, which has no such limit.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef uint64_t limb;
typedef unsigned __int128 dlimb;

#define MAX_LIMBS 512 /* 32768 bits */

/* ---------------------------------------------------------------- limb arithmetic */

/* limb i of x (L limbs) sign-extended to any width */
static inline limb ext(const limb *x, Py_ssize_t L, Py_ssize_t i)
{
    if (i < L)
        return x[i];
    return (x[L - 1] >> 63) ? ~(limb)0 : 0;
}

/* an upper bound on the bit length of |x|: exact for x >= 0; for x < 0 it is
 * bitlen(~x) + 1 = bitlen(|x| - 1) + 1 >= bitlen(|x|) */
static Py_ssize_t bits_of(const limb *x, Py_ssize_t L)
{
    int neg = (int)(x[L - 1] >> 63);
    for (Py_ssize_t i = L - 1; i >= 0; i--) {
        limb v = neg ? ~x[i] : x[i];
        if (v)
            return 64 * i + (64 - __builtin_clzll(v)) + neg;
    }
    return neg; /* x = 0, or x = -1 */
}

static Py_ssize_t bitlen_u128(dlimb v)
{
    limb hi = (limb)(v >> 64), lo = (limb)v;
    if (hi)
        return 128 - __builtin_clzll(hi);
    return lo ? 64 - __builtin_clzll(lo) : 0;
}

/* acc += w x  (mod 2^(64 Lo)), x of Lx limbs.  For w < 0, (uint64) w = w + 2^64, so
 * acc + (w + 2^64) x - 2^64 x is computed: the second pass subtracts x one limb up. */
static void addmul_u(limb *acc, Py_ssize_t Lo, limb w, const limb *x, Py_ssize_t Lx)
{
    limb carry = 0;
    for (Py_ssize_t i = 0; i < Lo; i++) {
        dlimb p = (dlimb)w * ext(x, Lx, i) + acc[i] + carry;
        acc[i] = (limb)p;
        carry = (limb)(p >> 64);
    }
}

static void addmul_1(limb *acc, Py_ssize_t Lo, int64_t w, const limb *x, Py_ssize_t Lx)
{
    addmul_u(acc, Lo, (limb)w, x, Lx);
    if (w < 0) {
        limb borrow = 0;
        for (Py_ssize_t i = 1; i < Lo; i++) {
            limb s = ext(x, Lx, i - 1);
            limb a = acc[i];
            limb d = a - s - borrow;
            borrow = (a < s) || (a - s < borrow);
            acc[i] = d;
        }
    }
}

/* acc += x y  (mod 2^(64 Lo)): the product of the two's complement residues */
static void addmul_n(limb *acc, Py_ssize_t Lo, const limb *x, Py_ssize_t Lx,
                     const limb *y, Py_ssize_t Ly)
{
    for (Py_ssize_t i = 0; i < Lo; i++) {
        limb xi = ext(x, Lx, i), carry = 0;
        if (!xi)
            continue;
        for (Py_ssize_t j = 0; i + j < Lo; j++) {
            dlimb p = (dlimb)xi * ext(y, Ly, j) + acc[i + j] + carry;
            acc[i + j] = (limb)p;
            carry = (limb)(p >> 64);
        }
    }
}

/* x modulo 2^128 (its low two limbs, sign-extended) */
static inline dlimb load2(const limb *x, Py_ssize_t L)
{
    return ((dlimb)ext(x, L, 1) << 64) | x[0];
}

/* the residue v modulo 2^(64 L) into L <= 2 limbs */
static inline void store2(limb *out, Py_ssize_t L, dlimb v)
{
    out[0] = (limb)v;
    if (L == 2)
        out[1] = (limb)(v >> 64);
}

/* sign of x - y for x, y of L limbs each */
static int compare(const limb *x, const limb *y, Py_ssize_t L)
{
    int64_t a = (int64_t)x[L - 1], b = (int64_t)y[L - 1];
    if (a != b)
        return a < b ? -1 : 1;
    for (Py_ssize_t i = L - 2; i >= 0; i--)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* a b for a, b >= 0, or -1 when it does not fit in a Py_ssize_t */
static Py_ssize_t mul_size(Py_ssize_t a, Py_ssize_t b)
{
    Py_ssize_t r;
    return __builtin_mul_overflow(a, b, &r) ? -1 : r;
}

static Py_ssize_t limbs_for(Py_ssize_t bits)
{
    return (bits + 1 + 63) / 64; /* bits of magnitude and one sign bit */
}

/* ---------------------------------------------------------------- the Words type */

typedef struct {
    PyObject_HEAD
    Py_ssize_t rows, cols, L;
    limb *d;
} Words;

static PyTypeObject WordsType;

#define AT(m, i, j) ((m)->d + ((i) * (m)->cols + (j)) * (m)->L)

/* 1 if arg is a Words, else 0 with a TypeError naming the operation */
static int is_words(PyObject *arg, const char *operation)
{
    if (PyObject_TypeCheck(arg, &WordsType))
        return 1;
    PyErr_Format(PyExc_TypeError, "%s: expected Words, got %s", operation, Py_TYPE(arg)->tp_name);
    return 0;
}

static Words *words_new(Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t L)
{
    if (L > MAX_LIMBS) {
        PyErr_Format(PyExc_OverflowError,
                     "fixed-width integers: a result needs %zd limbs, more than %d", L,
                     MAX_LIMBS);
        return NULL;
    }
    /* rows cols L limbs must be addressable: every index computed later then fits */
    Py_ssize_t n = mul_size(mul_size(rows, cols), L < 1 ? 1 : L);
    if (n < 0 || n > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(limb)) {
        PyErr_NoMemory();
        return NULL;
    }
    Words *m = PyObject_New(Words, &WordsType);
    if (!m)
        return NULL;
    m->rows = rows;
    m->cols = cols;
    m->L = L < 1 ? 1 : L;
    m->d = PyMem_Calloc(n ? n : 1, sizeof(limb));
    if (!m->d) {
        Py_DECREF(m);
        PyErr_NoMemory();
        return NULL;
    }
    return m;
}

static void words_dealloc(Words *m)
{
    PyMem_Free(m->d);
    PyObject_Free(m);
}

static Py_ssize_t words_bits(const Words *m)
{
    Py_ssize_t best = 0, n = m->rows * m->cols;
    for (Py_ssize_t e = 0; e < n; e++) {
        Py_ssize_t b = bits_of(m->d + e * m->L, m->L);
        if (b > best)
            best = b;
    }
    return best;
}

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the limbs are copied to and from Python ints as little-endian bytes"
#endif

/* Python int -> L limbs (little-endian two's complement bytes, which on this little-endian
 * host is the limb array itself); returns -1 with an exception set on failure */
static int int_to_limbs(PyObject *v, limb *out, Py_ssize_t L)
{
    int overflow = 0;
    long long s = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (s == -1 && PyErr_Occurred())
        return -1;
    if (!overflow) {
        out[0] = (limb)s;
        for (Py_ssize_t i = 1; i < L; i++)
            out[i] = s < 0 ? ~(limb)0 : 0;
        return 0;
    }
#if PY_VERSION_HEX >= 0x030D0000
    Py_ssize_t need = PyLong_AsNativeBytes(v, out, 8 * L, Py_ASNATIVEBYTES_LITTLE_ENDIAN);
    if (need < 0)
        return -1;
    if (need > 8 * L) {
        PyErr_SetString(PyExc_OverflowError, "fixed-width integers: an int wider than its words");
        return -1;
    }
    return 0;
#else
    return _PyLong_AsByteArray((PyLongObject *)v, (unsigned char *)out, 8 * L, 1, 1);
#endif
}

/* an upper bound on the bit length of |v| for a Python int (exact below 2^63), -1 on error */
static Py_ssize_t int_bits(PyObject *v)
{
    int overflow = 0;
    long long s = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (s == -1 && PyErr_Occurred())
        return -1;
    if (!overflow) {
        unsigned long long a = s < 0 ? 0ULL - (unsigned long long)s : (unsigned long long)s;
        return a ? 64 - __builtin_clzll(a) : 0;
    }
#if PY_VERSION_HEX >= 0x030D0000
    Py_ssize_t need = PyLong_AsNativeBytes(v, NULL, 0, Py_ASNATIVEBYTES_LITTLE_ENDIAN);
    return need < 0 ? -1 : 8 * need;   /* bytes of the signed representation */
#else
    size_t bits = _PyLong_NumBits(v);
    if (bits == (size_t)-1 && PyErr_Occurred())
        return -1;
    return (Py_ssize_t)bits;
#endif
}

static PyObject *limbs_to_int(const limb *x, Py_ssize_t L)
{
    int neg = (int)(x[L - 1] >> 63);
    Py_ssize_t top = L - 1;
    while (top > 0 && x[top] == (neg ? ~(limb)0 : 0))
        top--;
    /* keep one limb of sign fill when x[top]'s top bit is not the sign */
    Py_ssize_t n = top + 1 + ((x[top] >> 63) != (limb)neg);
    if (n == 1)
        return PyLong_FromLongLong((long long)(int64_t)x[0]);
#if PY_VERSION_HEX >= 0x030D0000
    return PyLong_FromNativeBytes(x, 8 * n, Py_ASNATIVEBYTES_LITTLE_ENDIAN);
#else
    return _PyLong_FromByteArray((const unsigned char *)x, 8 * n, 1, 1);
#endif
}

/* Words(rows, cols, values): values a flat row-major sequence of Python ints */
static PyObject *words_tp_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    Py_ssize_t rows, cols;
    PyObject *values;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Words() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "nnO", &rows, &cols, &values))
        return NULL;
    if (rows < 0 || cols < 0) {
        PyErr_SetString(PyExc_ValueError, "Words: negative shape");
        return NULL;
    }
    /* a list of exact ints: Python ints as they are, others (python-flint's fmpz) through
     * __index__, which floats do not have */
    PyObject *ints = PySequence_List(values);
    if (!ints)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ints);
    if (n != mul_size(rows, cols)) {
        Py_DECREF(ints);
        PyErr_Format(PyExc_ValueError, "Words: %zd values for a %zd x %zd matrix", n, rows, cols);
        return NULL;
    }
    Py_ssize_t bits = 0;
    for (Py_ssize_t e = 0; e < n; e++) {
        PyObject *v = PyList_GET_ITEM(ints, e);
        if (!PyLong_Check(v)) {
            PyObject *i = PyNumber_Index(v);
            if (!i) {
                Py_DECREF(ints);
                return NULL;
            }
            PyList_SET_ITEM(ints, e, i);
            Py_DECREF(v);
            v = i;
        }
        Py_ssize_t b = int_bits(v);
        if (b < 0) {
            Py_DECREF(ints);
            return NULL;
        }
        if (b > bits)
            bits = b;
    }
    Words *m = words_new(rows, cols, limbs_for(bits));
    if (!m) {
        Py_DECREF(ints);
        return NULL;
    }
    for (Py_ssize_t e = 0; e < n; e++)
        if (int_to_limbs(PyList_GET_ITEM(ints, e), m->d + e * m->L, m->L) < 0) {
            Py_DECREF(ints);
            Py_DECREF(m);
            return NULL;
        }
    Py_DECREF(ints);
    return (PyObject *)m;
}

static int ctz128(dlimb x)
{
    limb lo = (limb)x;
    return lo ? __builtin_ctzll(lo) : 64 + __builtin_ctzll((limb)(x >> 64));
}

/* gcd(a, b) by the binary algorithm */
static dlimb gcd128(dlimb a, dlimb b)
{
    if (!a || !b)
        return a | b;
    int shift = ctz128(a | b);
    a >>= ctz128(a);
    do {
        b >>= ctz128(b);
        if (a > b) {
            dlimb t = a;
            a = b;
            b = t;
        }
        b -= a;
    } while (b);
    return a << shift;
}

/* value -> (numerator, denominator) as Python ints: value is an int or of type Q (with
 * integer attributes p, q); 0 on success */
static int split_rational(PyObject *v, PyObject *Q, PyObject **p, PyObject **q)
{
    if (PyLong_Check(v) && !PyBool_Check(v)) {
        Py_INCREF(v);
        *p = v;
        *q = PyLong_FromLong(1);
        return *q ? 0 : -1;
    }
    if ((PyObject *)Py_TYPE(v) != Q) {
        PyErr_Format(PyExc_TypeError, "expected an exact rational, got %s", Py_TYPE(v)->tp_name);
        return -1;
    }
    PyObject *a = PyObject_GetAttrString(v, "p"), *b = a ? PyObject_GetAttrString(v, "q") : NULL;
    *p = b ? PyNumber_Index(a) : NULL;
    *q = *p ? PyNumber_Index(b) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (*q)
        return 0;
    Py_CLEAR(*p);
    return -1;
}

/* Words.from_rationals(values, rows, cols, Q): values a row-major rows x cols matrix of exact
 * rationals (ints, or objects of type Q with integer attributes p and q > 0); returns the
 * (rows + 1) x cols Words of their numerators over the least common denominator E of all of
 * them, with a last row of E's.  OverflowError when E does not fit in 64 bits (the caller then
 * scales in Python). */
static PyObject *words_from_rationals(PyObject *cls, PyObject *args)
{
    PyObject *values, *Q;
    Py_ssize_t rows, cols;
    if (!PyArg_ParseTuple(args, "OnnO", &values, &rows, &cols, &Q))
        return NULL;
    /* a tuple: Q's attributes may run Python code, which must not resize it */
    PyObject *seq = PySequence_Tuple(values);
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (rows < 0 || cols < 0 || rows == PY_SSIZE_T_MAX || n != mul_size(rows, cols)) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "from_rationals: %zd values for a %zd x %zd matrix", n,
                     rows, cols);
        return NULL;
    }
    PyObject **ps = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    limb *qs = PyMem_Malloc((n ? n : 1) * sizeof(limb));
    Words *m = NULL;
    if (!ps || !qs) {
        PyErr_NoMemory();
        goto done;
    }
    limb E = 1;
    Py_ssize_t bits = 64;   /* E < 2^64 */
    for (Py_ssize_t e = 0; e < n; e++) {
        PyObject *q;
        if (split_rational(PySequence_Fast_GET_ITEM(seq, e), Q, &ps[e], &q) < 0)
            goto done;
        unsigned long long uq = PyLong_AsUnsignedLongLong(q);
        Py_DECREF(q);
        if (uq == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_SetString(PyExc_OverflowError, "from_rationals: a denominator beyond 64 bits");
            goto done;
        }
        if (uq == 0) {
            PyErr_SetString(PyExc_ValueError, "from_rationals: a zero denominator");
            goto done;
        }
        qs[e] = (limb)uq;
        if (E % uq) {
            dlimb l = (dlimb)(E / (limb)gcd128(E, uq)) * uq;
            if (l >> 64) {
                PyErr_SetString(PyExc_OverflowError, "from_rationals: the common denominator "
                                "is beyond 64 bits");
                goto done;
            }
            E = (limb)l;
        }
    }
    for (Py_ssize_t e = 0; e < n; e++) {
        Py_ssize_t b = int_bits(ps[e]);
        if (b < 0)
            goto done;
        if (b + 64 > bits)
            bits = b + 64;   /* |p E / q| < 2^(bits(p) + 64) */
    }
    m = words_new(rows + 1, cols, limbs_for(bits));
    if (!m)
        goto done;
    limb *tmp = PyMem_Malloc(m->L * sizeof(limb));
    if (!tmp) {
        PyErr_NoMemory();
        Py_CLEAR(m);
        goto done;
    }
    for (Py_ssize_t e = 0; e < n; e++) {
        if (int_to_limbs(ps[e], tmp, m->L) < 0) {
            Py_CLEAR(m);
            break;
        }
        addmul_u(m->d + e * m->L, m->L, E / qs[e], tmp, m->L);
    }
    PyMem_Free(tmp);
    if (m)
        for (Py_ssize_t c = 0; c < cols; c++)
            AT(m, rows, c)[0] = E;   /* the other limbs are 0: E < 2^64 <= 2^(64 L - 1) */
done:
    if (ps)
        for (Py_ssize_t e = 0; e < n; e++)
            Py_XDECREF(ps[e]);
    PyMem_Free(ps);
    PyMem_Free(qs);
    Py_DECREF(seq);
    return (PyObject *)m;
}

static PyObject *words_tolist(Words *m, PyObject *unused)
{
    Py_ssize_t n = m->rows * m->cols;
    PyObject *out = PyList_New(n);
    if (!out)
        return NULL;
    for (Py_ssize_t e = 0; e < n; e++) {
        PyObject *v = limbs_to_int(m->d + e * m->L, m->L);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, e, v);
    }
    return out;
}

static PyObject *words_bits_py(Words *m, PyObject *unused)
{
    return PyLong_FromSsize_t(words_bits(m));
}

/* max_blocks(k, n): rows [0, k n) as k blocks of n rows -> their entrywise max (n rows),
 * followed by rows [k n, rows) unchanged.  The max of entries of width L has width L. */
static PyObject *words_max_blocks(Words *m, PyObject *args)
{
    Py_ssize_t k, n;
    if (!PyArg_ParseTuple(args, "nn", &k, &n))
        return NULL;
    if (k < 1 || n < 0 || mul_size(k, n) < 0 || k * n > m->rows) {
        PyErr_Format(PyExc_ValueError, "max_blocks: %zd blocks of %zd rows in %zd rows", k, n,
                     m->rows);
        return NULL;
    }
    Py_ssize_t rest = m->rows - k * n, L = m->L, row = m->cols * L;
    Words *r = words_new(n + rest, m->cols, L);
    if (!r)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        for (Py_ssize_t c = 0; c < m->cols; c++) {
            const limb *best = AT(m, i, c);
            for (Py_ssize_t j = 1; j < k; j++) {
                const limb *x = AT(m, j * n + i, c);
                if (compare(x, best, L) > 0)
                    best = x;
            }
            memcpy(AT(r, i, c), best, L * sizeof(limb));
        }
    memcpy(r->d + n * row, m->d + k * n * row, rest * row * sizeof(limb));
    return (PyObject *)r;
}

/* max(x, 0) entrywise */
static PyObject *words_relu(Words *m, PyObject *unused)
{
    Words *r = words_new(m->rows, m->cols, m->L);
    if (!r)
        return NULL;
    Py_ssize_t n = m->rows * m->cols, L = m->L;
    for (Py_ssize_t e = 0; e < n; e++)
        if (!(m->d[e * L + L - 1] >> 63))
            memcpy(r->d + e * L, m->d + e * L, L * sizeof(limb));
    return (PyObject *)r;
}

/* s x for an int64 scalar s: |s x| < 2^(bitlen|s| + bits(x)) */
static PyObject *words_scale(Words *m, PyObject *arg)
{
    int overflow = 0;
    long long s = PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (s == -1 && PyErr_Occurred())
        return NULL;
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "scale: the scalar does not fit in 64 bits");
        return NULL;
    }
    unsigned long long a = s < 0 ? 0ULL - (unsigned long long)s : (unsigned long long)s;
    Py_ssize_t sb = a ? 64 - __builtin_clzll(a) : 0;
    Words *r = words_new(m->rows, m->cols, limbs_for(words_bits(m) + sb));
    if (!r)
        return NULL;
    Py_ssize_t n = m->rows * m->cols;
    for (Py_ssize_t e = 0; e < n; e++)
        addmul_1(r->d + e * r->L, r->L, (int64_t)s, m->d + e * m->L, m->L);
    return (PyObject *)r;
}

/* x + y for equal shapes: |x + y| < 2^(max(bits) + 1) */
static PyObject *words_add(Words *m, PyObject *arg)
{
    if (!is_words(arg, "add"))
        return NULL;
    Words *o = (Words *)arg;
    if (o->rows != m->rows || o->cols != m->cols) {
        PyErr_SetString(PyExc_ValueError, "add: shapes differ");
        return NULL;
    }
    Py_ssize_t b1 = words_bits(m), b2 = words_bits(o);
    Words *r = words_new(m->rows, m->cols, limbs_for((b1 > b2 ? b1 : b2) + 1));
    if (!r)
        return NULL;
    Py_ssize_t n = m->rows * m->cols, L = r->L;
    for (Py_ssize_t e = 0; e < n; e++) {
        limb *z = r->d + e * L, carry = 0;
        const limb *x = m->d + e * m->L, *y = o->d + e * o->L;
        for (Py_ssize_t i = 0; i < L; i++) {
            dlimb s = (dlimb)ext(x, m->L, i) + ext(y, o->L, i) + carry;
            z[i] = (limb)s;
            carry = (limb)(s >> 64);
        }
    }
    return (PyObject *)r;
}

/* the row indices of one sequence, checked against rows; NULL with an exception on error */
static Py_ssize_t *row_indices(PyObject *obj, Py_ssize_t rows, Py_ssize_t *count)
{
    PyObject *seq = PySequence_Fast(obj, "row indices must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    Py_ssize_t *out = PyMem_Malloc((k ? k : 1) * sizeof(Py_ssize_t));
    if (!out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        out[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (out[i] < 0 || out[i] >= rows) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_IndexError, "row %zd of %zd", out[i], rows);
            PyMem_Free(out);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    *count = k;
    return out;
}

/* hardmax_attention(heads, n): P holds the key, query and value rows of every head, columns in
 * blocks of n tokens (one block per input); heads is a sequence of (keys, queries, values)
 * row-index sequences (as many keys as queries).  For each head and column c = b n + t the
 * winner set S(c) is the set of keys t' of block b with the largest score
 * sum_r P[keys_r][b n + t'] P[queries_r][b n + t]; with L the lcm of all winner-set sizes,
 * returns (A, L): A has one row per value row of every head, in order, and
 * A[.][c] = (L / |S(c)|) sum_{t' in S(c)} P[values_.][b n + t'], i.e. L times the hardmax mean.
 * |score| <= keys max|P|^2 < 2^(2 bits(P) + bitlen(keys)); |A| <= L max|P|.  OverflowError for n > 64 tokens or L beyond
 * 63 bits. */
static PyObject *words_hardmax_attention(Words *m, PyObject *args)
{
    PyObject *heads;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On", &heads, &n))
        return NULL;
    if (n < 1 || m->cols % n) {
        PyErr_SetString(PyExc_ValueError, "hardmax_attention: n must divide the columns");
        return NULL;
    }
    if (n > 64) {
        PyErr_SetString(PyExc_OverflowError, "hardmax_attention: more than 64 tokens");
        return NULL;
    }
    PyObject *seq = PySequence_Tuple(heads);   /* not resizable by the heads' iterators */
    if (!seq)
        return NULL;
    Py_ssize_t H = PySequence_Fast_GET_SIZE(seq), cols = m->cols, Lm = m->L;
    Py_ssize_t nwin = mul_size(H ? H : 1, cols ? cols : 1);
    Py_ssize_t **idx = PyMem_Calloc(3 * (H ? H : 1), sizeof(Py_ssize_t *));
    Py_ssize_t *cnt = PyMem_Calloc(3 * (H ? H : 1), sizeof(Py_ssize_t));
    uint64_t *win = nwin < 0 ? NULL : PyMem_Calloc(nwin, sizeof(uint64_t));
    limb *score = NULL, *best = NULL;
    Words *r = NULL;
    PyObject *result = NULL;
    if (!idx || !cnt || !win) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t nvalues = 0, maxk = 1;
    for (Py_ssize_t h = 0; h < H; h++) {
        PyObject *head = PySequence_Tuple(PySequence_Fast_GET_ITEM(seq, h));
        if (!head)
            goto done;
        if (PySequence_Fast_GET_SIZE(head) < 3) {
            Py_DECREF(head);
            PyErr_SetString(PyExc_ValueError, "hardmax_attention: (keys, queries, values)");
            goto done;
        }
        for (int j = 0; j < 3; j++) {
            idx[3 * h + j] = row_indices(PySequence_Fast_GET_ITEM(head, j), m->rows,
                                         &cnt[3 * h + j]);
            if (!idx[3 * h + j]) {
                Py_DECREF(head);
                goto done;
            }
        }
        Py_DECREF(head);
        if (cnt[3 * h] != cnt[3 * h + 1]) {
            PyErr_SetString(PyExc_ValueError, "hardmax_attention: keys and queries differ");
            goto done;
        }
        nvalues += cnt[3 * h + 2];
        if (cnt[3 * h] > maxk)
            maxk = cnt[3 * h];
    }
    /* scores: |s| <= maxk 2^(2 bits(P)) */
    Py_ssize_t Ls = limbs_for(2 * words_bits(m) + bitlen_u128((dlimb)maxk));
    if (Ls > MAX_LIMBS) {
        PyErr_SetString(PyExc_OverflowError, "hardmax_attention: scores beyond the word limit");
        goto done;
    }
    score = PyMem_Malloc(Ls * sizeof(limb));
    best = PyMem_Malloc(Ls * sizeof(limb));
    if (!score || !best) {
        PyErr_NoMemory();
        goto done;
    }
    uint64_t sizes = 0;   /* bit s - 1 set when a winner set of size s occurs */
    for (Py_ssize_t h = 0; h < H; h++) {
        const Py_ssize_t *keys = idx[3 * h], *queries = idx[3 * h + 1], kr = cnt[3 * h];
        for (Py_ssize_t b0 = 0; b0 < cols; b0 += n)
            for (Py_ssize_t t = 0; t < n; t++) {
                uint64_t set = 0;
                for (Py_ssize_t u = 0; u < n; u++) {
                    memset(score, 0, Ls * sizeof(limb));
                    if (Ls <= 2) {
                        dlimb a = 0;
                        for (Py_ssize_t k = 0; k < kr; k++)
                            a += load2(AT(m, keys[k], b0 + u), Lm) *
                                 load2(AT(m, queries[k], b0 + t), Lm);
                        store2(score, Ls, a);
                    } else {
                        for (Py_ssize_t k = 0; k < kr; k++)
                            addmul_n(score, Ls, AT(m, keys[k], b0 + u), Lm,
                                     AT(m, queries[k], b0 + t), Lm);
                    }
                    int c = u ? compare(score, best, Ls) : 1;
                    if (c > 0) {
                        memcpy(best, score, Ls * sizeof(limb));
                        set = 0;
                    }
                    if (c >= 0)
                        set |= (uint64_t)1 << u;
                }
                win[h * cols + b0 + t] = set;
                sizes |= (uint64_t)1 << (__builtin_popcountll(set) - 1);
            }
    }
    dlimb L = 1;
    for (int s = 1; s <= 64; s++)
        if (sizes >> (s - 1) & 1) {
            L = L / gcd128(L, (dlimb)s) * s;
            if (L >> 63) {
                PyErr_SetString(PyExc_OverflowError, "hardmax_attention: the lcm of the tie "
                                "sizes is beyond 63 bits");
                goto done;
            }
        }
    r = words_new(nvalues, cols, limbs_for(words_bits(m) + bitlen_u128(L)));
    if (!r)
        goto done;
    Py_ssize_t row = 0;
    for (Py_ssize_t h = 0; h < H; h++) {
        const Py_ssize_t *values = idx[3 * h + 2];
        for (Py_ssize_t v = 0; v < cnt[3 * h + 2]; v++, row++)
            for (Py_ssize_t c = 0; c < cols; c++) {
                uint64_t set = win[h * cols + c];
                int64_t factor = (int64_t)(L / (dlimb)__builtin_popcountll(set));
                for (Py_ssize_t u = 0; u < n; u++)
                    if (set >> u & 1)
                        addmul_1(AT(r, row, c), r->L, factor, AT(m, values[v], c - c % n + u),
                                 Lm);
            }
    }
    result = Py_BuildValue("(OK)", r, (unsigned long long)L);
done:
    Py_XDECREF(r);
    if (idx)
        for (Py_ssize_t i = 0; i < 3 * H; i++)
            PyMem_Free(idx[i]);
    PyMem_Free(idx);
    PyMem_Free(cnt);
    PyMem_Free(win);
    PyMem_Free(score);
    PyMem_Free(best);
    Py_DECREF(seq);
    return result;
}

/* unstack(n): n blocks of R rows -> R rows, column c n + t = column c of block t */
static PyObject *words_unstack(Words *m, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1 || m->rows % n) {
        PyErr_SetString(PyExc_ValueError, "unstack: n must divide the rows");
        return NULL;
    }
    Py_ssize_t R = m->rows / n;
    Words *r = words_new(R, m->cols * n, m->L);
    if (!r)
        return NULL;
    for (Py_ssize_t t = 0; t < n; t++)
        for (Py_ssize_t i = 0; i < R; i++)
            for (Py_ssize_t c = 0; c < m->cols; c++)
                memcpy(AT(r, i, c * n + t), AT(m, t * R + i, c), m->L * sizeof(limb));
    return (PyObject *)r;
}

/* block_columns(n, t): the columns in blocks of n (one block per input) -> one column per
 * block: column b n + t of its block for 0 <= t < n, or for t < 0 the sum of the block's n
 * columns (|sum| < n 2^bits(X) < 2^(bits(X) + bitlen(n))) */
static PyObject *words_block_columns(Words *m, PyObject *args)
{
    Py_ssize_t n, t;
    if (!PyArg_ParseTuple(args, "nn", &n, &t))
        return NULL;
    if (n < 1 || m->cols % n || t >= n) {
        PyErr_SetString(PyExc_ValueError, "block_columns: n must divide the columns, t < n");
        return NULL;
    }
    Py_ssize_t B = m->cols / n;
    Words *r = words_new(m->rows, B, t >= 0 ? m->L
                         : limbs_for(words_bits(m) + bitlen_u128((dlimb)n)));
    if (!r)
        return NULL;
    for (Py_ssize_t i = 0; i < m->rows; i++)
        for (Py_ssize_t b = 0; b < B; b++) {
            if (t >= 0) {
                memcpy(AT(r, i, b), AT(m, i, b * n + t), m->L * sizeof(limb));
                continue;
            }
            for (Py_ssize_t u = 0; u < n; u++)
                addmul_1(AT(r, i, b), r->L, 1, AT(m, i, b * n + u), m->L);
        }
    return (PyObject *)r;
}

static PyObject *GCD; /* math.gcd, for entries beyond 127 bits */

/* fractions(): the last row holds one positive denominator per column; returns
 * (numerators, denominators, small): every other entry over its column's denominator in lowest
 * terms (row-major, denominators > 0), and whether all of them are below 2^62 in absolute
 * value. */
static PyObject *words_fractions(Words *m, PyObject *unused)
{
    if (m->rows < 1) {
        PyErr_SetString(PyExc_ValueError, "fractions: no row of denominators");
        return NULL;
    }
    Py_ssize_t n = (m->rows - 1) * m->cols, L = m->L;
    for (Py_ssize_t c = 0; c < m->cols; c++) {
        const limb *q = AT(m, m->rows - 1, c);
        Py_ssize_t i = 0;
        while (i < L && !q[i])
            i++;
        if ((q[L - 1] >> 63) || i == L) {
            PyErr_SetString(PyExc_ValueError, "fractions: a denominator is not positive");
            return NULL;
        }
    }
    PyObject *ps = PyList_New(n), *qs = ps ? PyList_New(n) : NULL;
    if (!qs)
        goto fail;
    int small = 1;
    const dlimb bound = (dlimb)1 << 62;
    for (Py_ssize_t e = 0; e < n; e++) {
        const limb *x = m->d + e * L, *q = AT(m, m->rows - 1, e % m->cols);
        PyObject *pn, *qn;
        if (bits_of(x, L) <= 127 && bits_of(q, L) <= 127) {
            __int128 sp = (__int128)(((dlimb)ext(x, L, 1) << 64) | ext(x, L, 0));
            dlimb a = sp < 0 ? -(dlimb)sp : (dlimb)sp;
            dlimb b = ((dlimb)ext(q, L, 1) << 64) | ext(q, L, 0);
            dlimb g = gcd128(a, b);
            a /= g;
            b /= g;
            small &= a < bound && b < bound;
            __int128 pr = sp < 0 ? -(__int128)a : (__int128)a;
            if (a < bound && b < bound) {
                pn = PyLong_FromLongLong((long long)pr);
                qn = PyLong_FromLongLong((long long)b);
            } else {
                limb t[2] = {(limb)pr, (limb)((dlimb)pr >> 64)};
                limb u[2] = {(limb)b, (limb)(b >> 64)};   /* b < 2^127 */
                pn = limbs_to_int(t, 2);
                qn = limbs_to_int(u, 2);
            }
        } else {
            small = 0;
            PyObject *p0 = limbs_to_int(x, L), *q0 = limbs_to_int(q, L), *g = NULL;
            if (p0 && q0)
                g = PyObject_CallFunctionObjArgs(GCD, p0, q0, NULL);
            pn = g ? PyNumber_FloorDivide(p0, g) : NULL;
            qn = g ? PyNumber_FloorDivide(q0, g) : NULL;
            Py_XDECREF(p0);
            Py_XDECREF(q0);
            Py_XDECREF(g);
        }
        if (!pn || !qn) {
            Py_XDECREF(pn);
            Py_XDECREF(qn);
            goto fail;
        }
        PyList_SET_ITEM(ps, e, pn);
        PyList_SET_ITEM(qs, e, qn);
    }
    return Py_BuildValue("(NNO)", ps, qs, small ? Py_True : Py_False);
fail:
    Py_XDECREF(ps);
    Py_XDECREF(qs);
    return NULL;
}

static PyObject *words_shape(Words *m, void *unused)
{
    return Py_BuildValue("(nn)", m->rows, m->cols);
}

static PyObject *words_width(Words *m, void *unused)
{
    return PyLong_FromSsize_t(m->L);
}

/* ---------------------------------------------------------------- the Weights type */

typedef struct {
    PyObject_HEAD
    Py_ssize_t rows, cols;
    /* sparse rows: row i has entries rstart[i] .. rstart[i+1] of (rcol, rval) */
    Py_ssize_t *rstart, *rcol;
    int64_t *rval;
    Py_ssize_t row_bits; /* the bit length of the largest row L1 norm */
} Weights;

static PyTypeObject WeightsType;

static void weights_dealloc(Weights *w)
{
    PyMem_Free(w->rstart);
    PyMem_Free(w->rcol);
    PyMem_Free(w->rval);
    PyObject_Free(w);
}

/* Weights(rows, cols, values): values a flat row-major sequence of ints in int64 */
static PyObject *weights_tp_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    Py_ssize_t rows, cols;
    PyObject *values;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Weights() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "nnO", &rows, &cols, &values))
        return NULL;
    if (rows < 0 || cols < 0 || cols > ((Py_ssize_t)1 << 40) || rows == PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_ValueError, "Weights: bad shape");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(values, "Weights: values must be a sequence of ints");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n != mul_size(rows, cols)) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "Weights: %zd values for a %zd x %zd matrix", n, rows,
                     cols);
        return NULL;
    }
    Weights *w = PyObject_New(Weights, &WeightsType);
    if (!w) {
        Py_DECREF(seq);
        return NULL;
    }
    w->rows = rows;
    w->cols = cols;
    w->rcol = NULL;
    w->rval = NULL;
    w->rstart = PyMem_Calloc(rows + 1, sizeof(Py_ssize_t));   /* checks the size */
    w->rcol = PyMem_Malloc((n ? n : 1) * sizeof(Py_ssize_t));
    w->rval = PyMem_Malloc((n ? n : 1) * sizeof(int64_t));
    if (!w->rstart || !w->rcol || !w->rval) {
        PyErr_NoMemory();
        goto fail;
    }
    dlimb rowmax = 0;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        dlimb sum = 0;
        w->rstart[i] = k;
        for (Py_ssize_t j = 0; j < cols; j++) {
            PyObject *v = PySequence_Fast_GET_ITEM(seq, i * cols + j);
            if (!PyLong_Check(v)) {
                PyErr_Format(PyExc_TypeError, "Weights: expected an int, got %s",
                             Py_TYPE(v)->tp_name);
                goto fail;
            }
            int overflow = 0;
            long long s = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (s == -1 && PyErr_Occurred())
                goto fail;
            if (overflow) {
                PyErr_SetString(PyExc_OverflowError, "Weights: an entry does not fit in 64 bits");
                goto fail;
            }
            if (!s)
                continue;
            sum += s < 0 ? (dlimb)(0ULL - (limb)s) : (dlimb)s;
            w->rcol[k] = j;
            w->rval[k++] = s;
        }
        if (sum > rowmax)
            rowmax = sum;
    }
    w->rstart[rows] = k;
    /* sums of < 2^40 entries below 2^63 stay below 2^103: no u128 overflow */
    w->row_bits = bitlen_u128(rowmax);
    Py_DECREF(seq);
    return (PyObject *)w;
fail:
    Py_DECREF(seq);
    Py_DECREF(w);
    return NULL;
}

/* apply(X): W X.  |(W X)[i][c]| <= (sum_j |W_ij|) max|X| < 2^(row_bits + bits(X)) */
static PyObject *weights_apply(Weights *w, PyObject *arg)
{
    if (!is_words(arg, "apply"))
        return NULL;
    Words *x = (Words *)arg;
    if (x->rows != w->cols) {
        PyErr_Format(PyExc_ValueError, "apply: a %zd x %zd matrix times %zd rows", w->rows,
                     w->cols, x->rows);
        return NULL;
    }
    Words *r = words_new(w->rows, x->cols, limbs_for(w->row_bits + words_bits(x)));
    if (!r)
        return NULL;
    if (r->L <= 2) {   /* the same sums modulo 2^128, in one register pair */
        for (Py_ssize_t i = 0; i < w->rows; i++)
            for (Py_ssize_t c = 0; c < x->cols; c++) {
                dlimb acc = 0;
                for (Py_ssize_t e = w->rstart[i]; e < w->rstart[i + 1]; e++)
                    acc += (dlimb)(__int128)w->rval[e] * load2(AT(x, w->rcol[e], c), x->L);
                store2(AT(r, i, c), r->L, acc);
            }
        return (PyObject *)r;
    }
    for (Py_ssize_t i = 0; i < w->rows; i++)
        for (Py_ssize_t e = w->rstart[i]; e < w->rstart[i + 1]; e++) {
            Py_ssize_t j = w->rcol[e];
            int64_t s = w->rval[e];
            for (Py_ssize_t c = 0; c < x->cols; c++)
                addmul_1(AT(r, i, c), r->L, s, AT(x, j, c), x->L);
        }
    return (PyObject *)r;
}

static PyObject *weights_shape(Weights *w, void *unused)
{
    return Py_BuildValue("(nn)", w->rows, w->cols);
}

/* ---------------------------------------------------------------- module */

static PyMethodDef words_methods[] = {
    {"from_rationals", (PyCFunction)words_from_rationals, METH_VARARGS | METH_CLASS,
     "from_rationals(values, rows, cols, Q): the numerators of a rows x cols matrix of exact "
     "rationals over their least common denominator E (below 2^64), with a last row of E's."},
    {"tolist", (PyCFunction)words_tolist, METH_NOARGS,
     "The entries as Python ints, row-major."},
    {"bits", (PyCFunction)words_bits_py, METH_NOARGS,
     "An upper bound on the bit length of every entry's absolute value (exact for entries "
     ">= 0, at most one more for negative ones)."},
    {"max_blocks", (PyCFunction)words_max_blocks, METH_VARARGS,
     "max_blocks(k, n): rows [0, k n) as k blocks of n rows -> their entrywise max, then the "
     "remaining rows unchanged."},
    {"relu", (PyCFunction)words_relu, METH_NOARGS, "max(x, 0) entrywise."},
    {"scale", (PyCFunction)words_scale, METH_O, "s X for an int s in 64 bits."},
    {"add", (PyCFunction)words_add, METH_O, "X + Y for Y of the same shape."},
    {"hardmax_attention", (PyCFunction)words_hardmax_attention, METH_VARARGS,
     "hardmax_attention(heads, n) -> (A, L): L times the hardmax means of every head's value "
     "rows, per column (blocks of n tokens), and L, the lcm of the winner-set sizes."},
    {"block_columns", (PyCFunction)words_block_columns, METH_VARARGS,
     "block_columns(n, t): per block of n columns, its column t, or for t < 0 the block's "
     "sum."},
    {"unstack", (PyCFunction)words_unstack, METH_O,
     "unstack(n): n blocks of R rows -> R rows; column c n + t is column c of block t."},
    {"fractions", (PyCFunction)words_fractions, METH_NOARGS,
     "(numerators, denominators, small): every entry over the last row (one positive "
     "denominator per column) in lowest terms, row-major, and whether all are below 2^62."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef words_getset[] = {
    {"shape", (getter)words_shape, NULL, "(rows, cols)", NULL},
    {"width", (getter)words_width, NULL, "64-bit limbs per entry", NULL},
    {NULL},
};

static PyTypeObject WordsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exactmax.vectorized._fixedwidth.Words",
    .tp_basicsize = sizeof(Words),
    .tp_dealloc = (destructor)words_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Words(rows, cols, values): an exact integer matrix in fixed-width two's "
              "complement words (values: row-major Python ints).",
    .tp_methods = words_methods,
    .tp_getset = words_getset,
    .tp_new = words_tp_new,
};

static PyMethodDef weights_methods[] = {
    {"apply", (PyCFunction)weights_apply, METH_O, "W X, exactly."},
    {NULL, NULL, 0, NULL},
};

static PyObject *weights_nnz(Weights *w, void *unused)
{
    return PyLong_FromSsize_t(w->rstart[w->rows]);
}

static PyGetSetDef weights_getset[] = {
    {"shape", (getter)weights_shape, NULL, "(rows, cols)", NULL},
    {"nnz", (getter)weights_nnz, NULL, "the number of non-zero entries", NULL},
    {NULL},
};

static PyTypeObject WeightsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "exactmax.vectorized._fixedwidth.Weights",
    .tp_basicsize = sizeof(Weights),
    .tp_dealloc = (destructor)weights_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Weights(rows, cols, values): a sparse integer matrix with int64 entries.",
    .tp_methods = weights_methods,
    .tp_getset = weights_getset,
    .tp_new = weights_tp_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fixedwidth",
    "Exact integer matrices in fixed-width two's complement words.", -1, NULL,
};

PyMODINIT_FUNC PyInit__fixedwidth(void)
{
    if (PyType_Ready(&WordsType) < 0 || PyType_Ready(&WeightsType) < 0)
        return NULL;

    if (!GCD) {
        PyObject *math = PyImport_ImportModule("math");
        GCD = math ? PyObject_GetAttrString(math, "gcd") : NULL;
        Py_XDECREF(math);
        if (!GCD)
            return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "Words", (PyObject *)&WordsType) < 0 ||
        PyModule_AddObjectRef(m, "Weights", (PyObject *)&WeightsType) < 0 ||
        PyModule_AddIntConstant(m, "MAX_LIMBS", MAX_LIMBS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
