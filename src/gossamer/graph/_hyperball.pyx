# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""HyperBall's compiled steps (graph/_distances.py says what HyperBall is): the initial
counters, one iteration of the counters, and the HLL estimates of the counters that changed,
single-threaded, with the same registers and the same float32 estimates as the numpy
reference (`hyperball_reference`, `_Estimator`; tests/graph/test_hyperball_compiled.py).
Built by `pip install -e .` (setup.py); docs/graph.md, "Distances: exact and estimated".

The counters are rows of m uint8 registers, C-contiguous. An iteration walks the CSR
out-lists in node order: a node none of whose out-neighbours changed at the last iteration is
skipped (it cannot change); the others take the register-wise max of their own row and their
out-neighbours' rows (a byte loop that gcc -O3 turns into 16-byte `pmaxub`s; the rows a few
arcs ahead prefetched) into a second buffer; those that changed are listed in node order and
copied back once every node was read (synchronous, as the reference). The estimate follows
the reference's arithmetic operation by operation (float32 sums in the same order, the same
lookup tables passed in from numpy; no -ffast-math), so its values are the same bits."""

from libc.string cimport memset
from libc.stdint cimport int8_t, int64_t, uint8_t, uint64_t

cdef extern from *:
    """
    #include <string.h>
    /* The counters read at an iteration are random rows of (n + 1) m bytes, mostly not in
       any cache: the row of the arc GH_AHEAD arcs ahead is prefetched. Measured on 1M nodes /
       8M arcs, m = 32 (all iterations): 0.55-0.95 s at 32 ahead, 0.75-1.6 at 16, 1.3-1.5
       without (load 1-3). */
    #ifndef GH_AHEAD
    #define GH_AHEAD 32
    #endif
    /* acc = max(acc, row) over m bytes; the constant-m cases let gcc unroll the vector loop */
    static inline void gh_max_any(uint8_t *restrict acc, const uint8_t *restrict row, Py_ssize_t m) {
        for (Py_ssize_t i = 0; i < m; i++) acc[i] = acc[i] > row[i] ? acc[i] : row[i];
    }
    static inline void gh_max(uint8_t *restrict acc, const uint8_t *restrict row, Py_ssize_t m) {
        if (m == 32) gh_max_any(acc, row, 32);
        else if (m == 64) gh_max_any(acc, row, 64);
        else gh_max_any(acc, row, m);
    }
    /* One iteration. cur: (n + 1) x m counters, read only until every node is done; nxt: the
       new rows of the nodes that changed; changed: n + 1 flags of the last iteration's changes
       (changed[n] = 0), replaced by this one's; moved: the nodes that changed, in order.
       Returns their count. */
    static Py_ssize_t gh_iterate(uint8_t *cur, uint8_t *nxt, Py_ssize_t n, Py_ssize_t m,
                                 const int64_t *indptr, const int64_t *indices,
                                 uint8_t *changed, int64_t *moved) {
        Py_ssize_t count = 0;
        int64_t nnz = n ? indptr[n] : 0;
        for (Py_ssize_t v = 0; v < n; v++) {
            int64_t e = indptr[v], end = indptr[v + 1];
            while (e < end && !changed[indices[e]]) e++;
            if (e == end) continue;  /* no out-neighbour changed: v cannot */
            uint8_t *acc = nxt + v * m;
            const uint8_t *own = cur + v * m;
            memcpy(acc, own, (size_t)m);
            /* the neighbours before e did not change: they are in own already */
            for (; e < end; e++) {
                if (e + GH_AHEAD < nnz) __builtin_prefetch(cur + indices[e + GH_AHEAD] * m);
                gh_max(acc, cur + indices[e] * m, m);
            }
            if (memcmp(acc, own, (size_t)m) != 0) moved[count++] = v;
        }
        memset(changed, 0, (size_t)n + 1);
        for (Py_ssize_t k = 0; k < count; k++) {
            int64_t v = moved[k];
            memcpy(cur + v * m, nxt + v * m, (size_t)m);
            changed[v] = 1;
        }
        return count;
    }
    /* The estimates of one counter, as _Estimator computes them: out[0] with every register,
       out[1 + g] without group g. pair_powers / pair_zeros: 2^-a + 2^-b and the empty count
       of the register pair (a, b) read as a little-endian uint16; scale: alpha s^2 and
       bound: 2.5 s of each column's size s; linear: (groups + 1) x (m + 1), linear counting's
       estimate for each column and count of empty registers. */
    static void gh_estimate(const uint8_t *regs, Py_ssize_t m, int groups,
                            const float *pair_powers, const int8_t *pair_zeros,
                            const float *scale, const double *bound, const float *linear,
                            float *group_sums, float *out) {
        Py_ssize_t per = m / (2 * groups);
        int g, small = 0;
        for (g = 0; g < groups; g++) {
            const uint8_t *r = regs + 2 * per * g;
            float s = pair_powers[r[0] | (r[1] << 8)];
            for (Py_ssize_t k = 1; k < per; k++) s += pair_powers[r[2 * k] | (r[2 * k + 1] << 8)];
            group_sums[g] = s;
        }
        float total = group_sums[0];
        for (g = 1; g < groups; g++) total += group_sums[g];
        out[0] = scale[0] / total;
        for (g = 0; g < groups; g++) out[1 + g] = scale[1 + g] / (total - group_sums[g]);
        for (g = 0; g <= groups; g++) small |= (double)out[g] <= bound[g];
        if (!small) return;
        Py_ssize_t zeros[groups], all = 0;
        for (g = 0; g < groups; g++) {
            const uint8_t *r = regs + 2 * per * g;
            Py_ssize_t z = 0;
            for (Py_ssize_t k = 0; k < per; k++) z += pair_zeros[r[2 * k] | (r[2 * k + 1] << 8)];
            zeros[g] = z;
            all += z;
        }
        for (g = 0; g <= groups; g++) {
            Py_ssize_t z = g == 0 ? all : all - zeros[g - 1];
            if ((double)out[g] <= bound[g] && z > 0) out[g] = linear[g * (m + 1) + z];
        }
    }
    /* Each node's counter holding the node itself (_initial_registers): h = splitmix64(v ^
       salt); register h mod m gets 1 + the trailing zeros of h >> p (64 - p + 1 if none);
       the rest stay as they are (zero). */
    static void gh_initial(uint8_t *regs, Py_ssize_t n, int p, uint64_t salt) {
        Py_ssize_t m = (Py_ssize_t)1 << p;
        for (Py_ssize_t v = 0; v < n; v++) {
            uint64_t z = ((uint64_t)v ^ salt) + 0x9E3779B97F4A7C15ULL;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
            z ^= z >> 31;
            uint64_t rest = z >> p;
            regs[v * m + (Py_ssize_t)(z & (uint64_t)(m - 1))] =
                (uint8_t)((rest ? __builtin_ctzll(rest) : 64 - p) + 1);
        }
    }
    """
    void gh_initial(uint8_t *regs, Py_ssize_t n, int p, uint64_t salt) noexcept nogil
    Py_ssize_t gh_iterate(uint8_t *cur, uint8_t *nxt, Py_ssize_t n, Py_ssize_t m,
                          const int64_t *indptr, const int64_t *indices,
                          uint8_t *changed, int64_t *moved) noexcept nogil
    void gh_estimate(const uint8_t *regs, Py_ssize_t m, int groups,
                     const float *pair_powers, const int8_t *pair_zeros,
                     const float *scale, const double *bound, const float *linear,
                     float *group_sums, float *out) noexcept nogil


def iterate(
    uint8_t[:, ::1] registers,
    uint8_t[:, ::1] scratch,
    const int64_t[::1] indptr,
    const int64_t[::1] indices,
    uint8_t[::1] changed,
    int64_t[::1] moved,
):
    """One iteration in place: `registers` ((n + 1) x m, row n empty) become the register-wise
    max of each node's counter and its out-neighbours'; `changed` (n + 1 flags) says which
    counters changed at the last iteration and then at this one; `moved[:count]` lists them
    in node order. `scratch`: the registers' shape. Returns count. The caller checks the CSR
    once (indptr non-decreasing, every index in [0, n)): it is not checked here again on every
    iteration."""
    cdef Py_ssize_t n = registers.shape[0] - 1, m = registers.shape[1], count
    if n < 0 or scratch.shape[0] != n + 1 or scratch.shape[1] != m:
        raise ValueError("registers and scratch must both be (n + 1) x m")
    if indptr.shape[0] != n + 1 or changed.shape[0] != n + 1 or moved.shape[0] < n:
        raise ValueError("indptr and changed need n + 1 entries, moved n")
    if n and (indptr[0] != 0 or indptr[n] != indices.shape[0]):
        raise ValueError("indptr does not span indices")
    with nogil:
        count = gh_iterate(&registers[0, 0], &scratch[0, 0], n, m, &indptr[0] if n else NULL,
                           &indices[0] if indices.shape[0] else NULL, &changed[0], &moved[0] if n else NULL)
    return count


def initial(uint8_t[:, ::1] registers, int p, uint64_t salt):
    """Rows 0 .. n - 1 of `registers` ((n + 1) x 2**p) as `_initial_registers(n, p, seed)`
    gives them, `salt` being splitmix64(seed); row n emptied."""
    cdef Py_ssize_t n = registers.shape[0] - 1
    if n < 0 or not 0 < p < 32 or registers.shape[1] != 1 << p:
        raise ValueError("registers must be (n + 1) x 2**p")
    with nogil:
        memset(&registers[0, 0], 0, (n + 1) * registers.shape[1])
        gh_initial(&registers[0, 0], n, p, salt)


def estimate(
    const uint8_t[:, ::1] registers,
    const int64_t[::1] rows,
    float[:, ::1] out,
    double[::1] change,
    int groups,
    const float[::1] pair_powers,
    const int8_t[::1] pair_zeros,
    const float[::1] scale,
    const double[::1] bound,
    const float[:, ::1] linear,
):
    """The estimates of the counters `registers[rows]` into `out[rows]` (out: one row of
    groups + 1 per counter), with the tables of an `_Estimator` (its docstring and
    gh_estimate's comment say what they hold); `change` (groups + 1) becomes the sum of the
    new estimates minus the old ones (each difference in float32, added in float64 in the
    order of `rows`, as `_add_changes` adds them)."""
    cdef Py_ssize_t m = registers.shape[1], k, count = rows.shape[0], total = registers.shape[0]
    cdef Py_ssize_t j, cols = groups + 1
    cdef float sums[256]
    cdef float new[257]
    cdef float *old
    if groups < 1 or groups > 256 or m % (2 * groups) or out.shape[0] > total or out.shape[1] != cols:
        raise ValueError("out must be (rows of registers) x (groups + 1), m a multiple of 2 groups")
    if change.shape[0] != cols:
        raise ValueError("change needs groups + 1 entries")
    if pair_powers.shape[0] != 1 << 16 or pair_zeros.shape[0] != 1 << 16:
        raise ValueError("pair tables of 65536 entries")
    if scale.shape[0] != groups + 1 or bound.shape[0] != groups + 1:
        raise ValueError("scale and bound need groups + 1 entries")
    if linear.shape[0] != groups + 1 or linear.shape[1] != m + 1:
        raise ValueError("linear must be (groups + 1) x (m + 1)")
    for k in range(count):
        if not 0 <= rows[k] < out.shape[0]:
            raise ValueError("a row out of range")
    with nogil:
        for j in range(cols):
            change[j] = 0.0
        for k in range(count):
            gh_estimate(&registers[rows[k], 0], m, groups, &pair_powers[0], &pair_zeros[0],
                        &scale[0], &bound[0], &linear[0, 0], sums, new)
            old = &out[rows[k], 0]
            for j in range(cols):
                change[j] += <double>(new[j] - old[j])
                old[j] = new[j]
