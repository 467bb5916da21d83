# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled SimHash of a text (parse/simhash.py says what it is): the same 64-bit value as
`simhash_text_reference` (numpy: the reference it is tested against,
tests/parse/test_simhash_compiled.py) for every text, without numpy and without encoding the
text. Built by `pip install -e .` (setup.py); docs/crawler.md, "Near-duplicates".

The str's code points are read in place (1, 2 or 4 bytes each, as CPython stores them) and
the UTF-8 the reference reads is computed only where it is needed: its length (one pass, the
MIN_TEXT and MAX_TEXT rules) and each word's window, the 8 bytes of UTF-8 from the space
before the word (a load when the 8 code points are ASCII). The bottom-k sample: a shingle
is a candidate unless SAMPLE smaller ones were seen before; a buffer of candidates, when
full, is cut to its SAMPLE smallest (quickselect), and so is the last. Nothing branches on
a value (a space, a shingle) where that branch would be mispredicted once a word. The bits
are counted in byte lanes as the reference does. uint64 arithmetic wraps around (mod 2**64),
as numpy's does."""

from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from *:
    """
    #if PY_VERSION_HEX < 0x030C0000
    #define GS_UNICODE_READY(o) PyUnicode_READY(o)
    #else
    #define GS_UNICODE_READY(o) 0
    #endif
    #define GS_K1 0xBF58476D1CE4E5B9ULL
    #define GS_K2 0x94D049BB133111EBULL
    #define GS_LOW_BITS 0x0101010101010101ULL
    /* 64 code points' spaces as the bits of a word, 8 or 16 at a time (SSE2, every x86-64:
       a loop would take ~8 instructions a code point); and a window of 8 ASCII code points as
       its 8 bytes (x86 is little-endian). Elsewhere, or with -DGS_NO_SIMD, loops (the same as
       the ones for 4-byte code points). */
    #if (defined(__x86_64__) || defined(_M_X64)) && !defined(GS_NO_SIMD)
    #include <emmintrin.h>
    #include <string.h>
    static inline uint64_t gs_spaces_1(const uint8_t *d) {
        const __m128i space = _mm_set1_epi8(32);
        uint64_t m = 0;
        for (int k = 0; k < 4; k++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(d + 16 * k));
            m |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, space)) << (16 * k);
        }
        return m;
    }
    static inline uint64_t gs_spaces_2(const uint16_t *d) {
        const __m128i space = _mm_set1_epi16(32);
        uint64_t m = 0;
        for (int k = 0; k < 4; k++) {
            __m128i a = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(d + 16 * k)), space);
            __m128i b = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(d + 16 * k + 8)), space);
            m |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_packs_epi16(a, b)) << (16 * k);
        }
        return m;
    }
    static inline int gs_ascii_1(const uint8_t *d, uint64_t *w) {
        memcpy(w, d, 8);
        return (*w & 0x8080808080808080ULL) == 0;
    }
    static inline int gs_ascii_2(const uint16_t *d, uint64_t *w) {
        __m128i v = _mm_loadu_si128((const __m128i *)d);
        __m128i high = _mm_and_si128(v, _mm_set1_epi16((short)0xFF80));
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(high, _mm_setzero_si128())) != 0xFFFF)
            return 0;
        *w = (uint64_t)_mm_cvtsi128_si64(_mm_packus_epi16(v, v));
        return 1;
    }
    #else
    #define GS_SPACES(d) uint64_t m = 0; \
        for (int k = 0; k < 64; k++) m |= (uint64_t)(d[k] == 32) << k; \
        return m;
    #define GS_ASCII(d, w) unsigned any = 0; uint64_t v = 0; \
        for (int k = 0; k < 8; k++) { any |= d[k]; v |= (uint64_t)d[k] << (8 * k); } \
        *w = v; \
        return any < 0x80;
    static inline uint64_t gs_spaces_1(const uint8_t *d) { GS_SPACES(d) }
    static inline uint64_t gs_spaces_2(const uint16_t *d) { GS_SPACES(d) }
    static inline int gs_ascii_1(const uint8_t *d, uint64_t *w) { GS_ASCII(d, w) }
    static inline int gs_ascii_2(const uint16_t *d, uint64_t *w) { GS_ASCII(d, w) }
    #endif
    #if defined(__GNUC__) || defined(__clang__)
    #define GS_CTZ(x) __builtin_ctzll(x)
    #else
    static int GS_CTZ(unsigned long long x) { int n = 0; while (!(x & 1)) { x >>= 1; n++; } return n; }
    #endif
    """
    int GS_UNICODE_READY(object) except -1
    int PyUnicode_KIND(object)
    void *PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    uint64_t GS_K1
    uint64_t GS_K2
    uint64_t GS_LOW_BITS
    int GS_CTZ(uint64_t) noexcept nogil
    uint64_t gs_spaces_1(const uint8_t *) noexcept nogil
    uint64_t gs_spaces_2(const uint16_t *) noexcept nogil
    bint gs_ascii_1(const uint8_t *, uint64_t *) noexcept nogil
    bint gs_ascii_2(const uint16_t *, uint64_t *) noexcept nogil

# the values of parse/simhash.py (a test compares them)
cdef enum:
    C_MIN_TEXT = 64
    C_MIN_WORDS = 8
    C_MAX_TEXT = 1 << 20
    C_SAMPLE = 160
    C_BUFFER = 4 * C_SAMPLE  # candidates for the sample

MIN_TEXT = C_MIN_TEXT
MIN_WORDS = C_MIN_WORDS
MAX_TEXT = C_MAX_TEXT
SAMPLE = C_SAMPLE

ctypedef fused code_t:
    uint8_t
    uint16_t
    uint32_t


cdef inline Py_ssize_t utf8_size(uint32_t c) noexcept nogil:
    # surrogates (surrogatepass) are 3 bytes as any other code point below 0x10000
    return 1 + (c >= 0x80) + (c >= 0x800) + (c >= 0x10000)


cdef uint64_t window(const code_t *d, Py_ssize_t i, Py_ssize_t length) noexcept nogil:
    """The first 8 bytes of the UTF-8 of d[i:], little-endian (byte k in bits 8k…8k+7); the
    caller guarantees that there are 8."""
    cdef uint64_t w = 0
    cdef uint32_t c, any_ = 0
    cdef int k, shift = 0
    cdef uint8_t b[4]
    cdef Py_ssize_t n
    if code_t is uint8_t:
        if i + 8 <= length and gs_ascii_1(d + i, &w):
            return w
    elif code_t is uint16_t:
        if i + 8 <= length and gs_ascii_2(d + i, &w):
            return w
    elif i + 8 <= length:
        for k in range(8):
            any_ |= d[i + k]
        if any_ < 0x80:  # 8 ASCII code points: 8 bytes
            for k in range(8):
                w |= (<uint64_t>d[i + k]) << (8 * k)
            return w
    w = 0
    while shift < 64:
        c = d[i]
        i += 1
        if c < 0x80:
            b[0] = <uint8_t>c
            n = 1
        elif c < 0x800:
            b[0] = <uint8_t>(0xC0 | (c >> 6))
            b[1] = <uint8_t>(0x80 | (c & 0x3F))
            n = 2
        elif c < 0x10000:
            b[0] = <uint8_t>(0xE0 | (c >> 12))
            b[1] = <uint8_t>(0x80 | ((c >> 6) & 0x3F))
            b[2] = <uint8_t>(0x80 | (c & 0x3F))
            n = 3
        else:
            b[0] = <uint8_t>(0xF0 | (c >> 18))
            b[1] = <uint8_t>(0x80 | ((c >> 12) & 0x3F))
            b[2] = <uint8_t>(0x80 | ((c >> 6) & 0x3F))
            b[3] = <uint8_t>(0x80 | (c & 0x3F))
            n = 4
        for k in range(n):
            if shift == 64:
                break
            w |= (<uint64_t>b[k]) << shift
            shift += 8
    return w


cdef Py_ssize_t utf8_length(const code_t *d, Py_ssize_t length) noexcept nogil:
    # summed in 16 bits over 16,384 code points at a time: 8 of them a vector instruction
    cdef Py_ssize_t size = length, start, i
    cdef uint16_t extra
    for start in range(0, length, 16384):
        extra = 0
        for i in range(start, min(start + 16384, length)):
            extra += (d[i] >= 0x80) + (d[i] >= 0x800) + (d[i] >= 0x10000)
        size += extra
    return size


cdef inline uint64_t spaces_of(const code_t *d, Py_ssize_t start, Py_ssize_t n) noexcept nogil:
    # the spaces of d[start:start + n] (n <= 64) as the bits of a word
    cdef uint64_t spaces = 0
    cdef Py_ssize_t k
    for k in range(n):
        spaces |= (<uint64_t>(d[start + k] == 32)) << k
    return spaces


cdef Py_ssize_t partition(uint64_t *a, Py_ssize_t lo, Py_ssize_t hi, uint64_t pivot,
                          bint equal) noexcept nogil:
    """Moves a[lo:hi]'s values below `pivot` (or equal to it, with `equal`) to its start; returns
    where the others start. Without a branch on the values (Lomuto's, swapping every value):
    a branch would be mispredicted for every other value of a random sample."""
    cdef Py_ssize_t j
    cdef uint64_t v
    for j in range(lo, hi):
        v = a[j]
        a[j] = a[lo]
        a[lo] = v
        lo += (v < pivot) | (equal & (v == pivot))
    return lo


cdef void select_smallest(uint64_t *a, Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    """Moves the k smallest of a[:n] (0 < k <= n) to a[:k], in any order (quickselect)."""
    cdef Py_ssize_t lo = 0, hi = n, p, q
    cdef uint64_t x, y, z, pivot
    while True:
        x, y, z = a[lo], a[(lo + hi) // 2], a[hi - 1]  # the median of three: the pivot
        pivot = max(min(x, y), min(max(x, y), z))
        p = partition(a, lo, hi, pivot, False)  # a[lo:p] < pivot <= a[p:hi]
        if p >= k:
            if p == k:
                return
            hi = p  # (p < hi: the pivot is not below itself)
        else:
            q = partition(a, p, hi, pivot, True)  # a[p:q] == pivot < a[q:hi]; q > p
            if q >= k:
                return
            lo = q


cdef object fingerprint(const code_t *d, Py_ssize_t length):
    cdef Py_ssize_t i, j, start, size = 0, acc = 0, end, words = 0, count = 0
    cdef uint64_t prev = 0, cur, s, h, spaces, top = <uint64_t>-1
    cdef uint64_t sample[C_BUFFER]
    cdef uint64_t lanes[8]
    cdef uint64_t result = 0
    cdef int k, m
    size = utf8_length(d, length)
    if size < C_MIN_TEXT:
        return None
    # the code points d[:end] start at a byte < the (truncated) UTF-8's length - 8: the words
    # after the spaces among them have windows
    if size > C_MAX_TEXT:
        end = 0
        while acc < C_MAX_TEXT - 8:
            acc += utf8_size(d[end])
            end += 1
    else:
        j = length
        while acc < 9:
            j -= 1
            acc += utf8_size(d[j])
        end = j + 1
    # the spaces of 64 code points at a time as the bits of a word, without a branch (one per
    # space would cost a mispredicted branch a word: most of the time), then one by one
    for start in range(0, end, 64):
        if end - start < 64:
            spaces = spaces_of(d, start, min(64, end - start))
        elif code_t is uint8_t:
            spaces = gs_spaces_1(d + start)
        elif code_t is uint16_t:
            spaces = gs_spaces_2(d + start)
        else:
            spaces = spaces_of(d, start, 64)
        while spaces:
            i = start + GS_CTZ(spaces)
            spaces &= spaces - 1
            cur = window(d, i, length)
            if words:
                # a shingle: a word's window and the next's, kept if it may be among the
                # SAMPLE smallest (bottom-k): not above the largest of the SAMPLE smallest
                # kept when the buffer was last full (its `top`)
                s = prev * GS_K1 + cur
                sample[count] = s
                count += s <= top
                if count == C_BUFFER:
                    select_smallest(sample, count, C_SAMPLE)
                    count = C_SAMPLE
                    top = sample[0]
                    for j in range(1, C_SAMPLE):
                        top = max(top, sample[j])
            prev = cur
            words += 1
    if words <= C_MIN_WORDS:
        return None
    if count > C_SAMPLE:
        select_smallest(sample, count, C_SAMPLE)
        count = C_SAMPLE
    for k in range(8):
        lanes[k] = 0
    for i in range(count):
        h = sample[i]
        h ^= h >> 32
        h *= GS_K2
        h ^= h >> 32
        for k in range(8):  # byte m of lanes[k]: the count of bit 8m + k (at most 255)
            lanes[k] += (h >> k) & GS_LOW_BITS
    for k in range(8):
        for m in range(8):
            if <Py_ssize_t>((lanes[k] >> (8 * m)) & 0xFF) > count // 2:
                result |= (<uint64_t>1) << (8 * m + k)
    return result


def simhash_text(str text not None):
    """The 64-bit SimHash of `text`'s shingles, or None for a text of fewer than MIN_TEXT bytes
    or MIN_WORDS words: parse/simhash.py."""
    GS_UNICODE_READY(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t length = PyUnicode_GET_LENGTH(text)
    if kind == 1:
        return fingerprint(<const uint8_t *>data, length)
    if kind == 2:
        return fingerprint(<const uint16_t *>data, length)
    return fingerprint(<const uint32_t *>data, length)
