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
    #include <string.h>
    /* 8 bytes as a little-endian word */
    static inline uint64_t gs_load8(const uint8_t *d) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        uint64_t w;
        memcpy(&w, d, 8);
        return w;
    #else
        uint64_t w = 0;
        for (int k = 0; k < 8; k++) w |= (uint64_t)d[k] << (8 * k);
        return w;
    #endif
    }
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
    uint64_t gs_load8(const uint8_t *) noexcept nogil

cdef extern from *:
    """
    /* A <body>'s text read from lexbor's DOM (selectolax's parser) without a Python str: the
       UTF-8 of " ".join(t.strip() for t in its text nodes), as selectolax's
       `text(separator=" ", strip=True)` builds it, into one buffer (at most its `limit`
       bytes, MAX_TEXT: the fingerprint reads no more). lexbor's nodes as selectolax's lexbor.pxd
       declares them (lxb_dom_node_t, lxb_dom_character_data_t), only read. */
    typedef struct gs_lxb_node {
        void *events;
        uintptr_t local_name;  /* the tag id; a text node's is LXB_TAG__TEXT */
        uintptr_t prefix;
        uintptr_t ns;
        void *owner_document;
        struct gs_lxb_node *next, *prev, *parent, *first_child, *last_child;
        void *user;
        int type;
    } gs_lxb_node;
    typedef struct { gs_lxb_node node; const uint8_t *data; size_t length; } gs_lxb_text;
    #define GS_LXB_TAG_TEXT 2

    typedef struct { uint8_t *data; size_t size, cap, limit; size_t parts; int full; } gs_buf;

    /* the length of the code point at d[0:n] (n > 0) with its value in *cp, or 0 where
       CPython's strict UTF-8 decoder would fail (overlong, surrogate, above U+10FFFF,
       truncated) */
    static inline int gs_utf8(const uint8_t *d, size_t n, uint32_t *cp) {
        uint8_t c = d[0];
        if (c < 0x80) { *cp = c; return 1; }
        if (c < 0xC2) return 0;
        if (c < 0xE0) {
            if (n < 2 || (d[1] & 0xC0) != 0x80) return 0;
            *cp = ((uint32_t)(c & 0x1F) << 6) | (d[1] & 0x3F);
            return 2;
        }
        if (c < 0xF0) {
            if (n < 3 || (d[1] & 0xC0) != 0x80 || (d[2] & 0xC0) != 0x80) return 0;
            if ((c == 0xE0 && d[1] < 0xA0) || (c == 0xED && d[1] >= 0xA0)) return 0;
            *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(d[1] & 0x3F) << 6) | (d[2] & 0x3F);
            return 3;
        }
        if (c < 0xF5) {
            if (n < 4 || (d[1] & 0xC0) != 0x80 || (d[2] & 0xC0) != 0x80
                || (d[3] & 0xC0) != 0x80) return 0;
            if ((c == 0xF0 && d[1] < 0x90) || (c == 0xF4 && d[1] >= 0x90)) return 0;
            *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(d[1] & 0x3F) << 12)
                | ((uint32_t)(d[2] & 0x3F) << 6) | (d[3] & 0x3F);
            return 4;
        }
        return 0;
    }

    /* str.isspace(): what str.strip() removes */
    static inline int gs_is_space(uint32_t c) {
        if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
        return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A)
            || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
    }

    static int gs_put(gs_buf *b, const uint8_t *d, size_t n) {
        if (b->size + n >= b->limit) {
            n = b->limit - b->size;
            b->full = 1;
        }
        if (b->size + n > b->cap) {
            size_t cap = b->cap ? b->cap : 16384;
            while (cap < b->size + n) cap *= 2;
            uint8_t *data = (uint8_t *)PyMem_Realloc(b->data, cap);
            if (data == NULL) return -2;
            b->data = data;
            b->cap = cap;
        }
        memcpy(b->data + b->size, d, n);
        b->size += n;
        return 0;
    }

    /* one text node's data: -1 where it is not valid UTF-8 (selectolax's decoder would put
       U+FFFD in), -2 out of memory, else 0 */
    static int gs_add_text(gs_buf *b, const uint8_t *d, size_t n) {
        size_t i = 0, first, last;
        uint32_t cp;
        int k;
        while (i < n) {  /* valid? 8 ASCII bytes at a time */
            if (i + 8 <= n && (gs_load8(d + i) & 0x8080808080808080ULL) == 0) { i += 8; continue; }
            if (d[i] < 0x80) { i++; continue; }
            k = gs_utf8(d + i, n - i, &cp);
            if (!k) return -1;
            i += k;
        }
        first = 0;  /* stripped: d[first:last] */
        while (first < n) {
            k = gs_utf8(d + first, n - first, &cp);
            if (!gs_is_space(cp)) break;
            first += k;
        }
        last = n;
        while (last > first) {
            i = last - 1;
            while ((d[i] & 0xC0) == 0x80) i--;  /* the last code point's first byte */
            gs_utf8(d + i, last - i, &cp);
            if (!gs_is_space(cp)) break;
            last = i;
        }
        if (b->parts++ && gs_put(b, (const uint8_t *)" ", 1)) return -2;
        if (b->full) return 0;
        return gs_put(b, d + first, last - first);
    }

    /* the walk of lexbor's lxb_dom_node_simple_walk (the order of selectolax's text()):
       every node below `root`, depth first; 0, -1 or -2 as gs_add_text */
    static int gs_body_text(const gs_lxb_node *root, gs_buf *b) {
        const gs_lxb_node *node = root->first_child;
        int r;
        while (node != NULL) {
            if (node->local_name == GS_LXB_TAG_TEXT) {
                const gs_lxb_text *t = (const gs_lxb_text *)node;
                if (t->data != NULL) {
                    r = gs_add_text(b, t->data, t->length);
                    if (r) return r;
                    if (b->full) return 0;
                }
            }
            if (node->first_child != NULL) {
                node = node->first_child;
            } else {
                while (node != root && node->next == NULL) node = node->parent;
                if (node == root) break;
                node = node->next;
            }
        }
        return 0;
    }
    """
    ctypedef struct gs_lxb_node:
        pass
    ctypedef struct gs_buf:
        uint8_t *data
        size_t size
        size_t cap
        size_t limit
        size_t parts
        int full
    int gs_body_text(const gs_lxb_node *, gs_buf *) noexcept
    void PyMem_Free(void *)


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


cdef struct Sampler:
    # the bottom-k sample of a text's shingles: `words` windows seen, the last one `prev`;
    # `count` candidates in `sample`, none above `top`
    uint64_t prev
    uint64_t top
    Py_ssize_t words
    Py_ssize_t count
    uint64_t sample[C_BUFFER]


cdef inline void sampler_start(Sampler *s) noexcept nogil:
    s.prev = 0
    s.top = <uint64_t>-1
    s.words = 0
    s.count = 0


cdef inline void sampler_add(Sampler *s, uint64_t cur) noexcept nogil:
    """A word's window: with the word before it, a shingle, kept if it may be among the
    SAMPLE smallest (bottom-k): not above the largest of the SAMPLE smallest kept when the
    buffer was last full (its `top`)."""
    cdef uint64_t h
    cdef Py_ssize_t j
    if s.words:
        h = s.prev * GS_K1 + cur
        s.sample[s.count] = h
        s.count += h <= s.top
        if s.count == C_BUFFER:
            select_smallest(s.sample, s.count, C_SAMPLE)
            s.count = C_SAMPLE
            s.top = s.sample[0]
            for j in range(1, C_SAMPLE):
                s.top = max(s.top, s.sample[j])
    s.prev = cur
    s.words += 1


cdef object sampler_result(Sampler *s):
    """The fingerprint of the sample (None for a text of MIN_WORDS words or fewer)."""
    cdef uint64_t lanes[8]
    cdef uint64_t result = 0, h
    cdef Py_ssize_t i
    cdef int k, m
    if s.words <= C_MIN_WORDS:
        return None
    if s.count > C_SAMPLE:
        select_smallest(s.sample, s.count, C_SAMPLE)
        s.count = C_SAMPLE
    for k in range(8):
        lanes[k] = 0
    for i in range(s.count):
        h = s.sample[i]
        h ^= h >> 32
        h *= GS_K2
        h ^= h >> 32
        for k in range(8):  # byte m of lanes[k]: the count of bit 8m + k (at most 255)
            lanes[k] += (h >> k) & GS_LOW_BITS
    for k in range(8):
        for m in range(8):
            if <Py_ssize_t>((lanes[k] >> (8 * m)) & 0xFF) > s.count // 2:
                result |= (<uint64_t>1) << (8 * m + k)
    return result


cdef object fingerprint(const code_t *d, Py_ssize_t length):
    cdef Py_ssize_t i, j, start, size = 0, acc = 0, end
    cdef uint64_t spaces
    cdef Sampler s
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
    sampler_start(&s)
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
            sampler_add(&s, window(d, i, length))
    return sampler_result(&s)


cdef object fingerprint_utf8(const uint8_t *raw, Py_ssize_t size):
    """The fingerprint of a text given as its UTF-8 (the reference's bytes: no code point
    to encode, a window is the 8 bytes from a space)."""
    cdef Py_ssize_t i, start, end
    cdef uint64_t spaces
    cdef Sampler s
    size = min(size, <Py_ssize_t>C_MAX_TEXT)
    if size < C_MIN_TEXT:
        return None
    end = size - 8  # the spaces before it have a window of 8 bytes
    sampler_start(&s)
    for start in range(0, end, 64):
        if end - start < 64:
            spaces = spaces_of(raw, start, end - start)
        else:
            spaces = gs_spaces_1(raw + start)
        while spaces:
            i = start + GS_CTZ(spaces)
            spaces &= spaces - 1
            sampler_add(&s, gs_load8(raw + i))
    return sampler_result(&s)


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


cdef int _body_text(object node, gs_buf *b) except -2:
    """`node`'s text into `b` (see gs_body_text): 0, or -1 where it is not valid UTF-8."""
    cdef size_t address
    cdef int r
    b.data = NULL  # (first: the caller frees it, whatever is raised below)
    b.size = b.cap = b.parts = 0
    b.limit = C_MAX_TEXT
    b.full = 0
    address = node.mem_id  # selectolax's node: its lxb_dom_node_t's address
    if address == 0:
        raise ValueError("not a parsed node")
    r = gs_body_text(<const gs_lxb_node *>address, b)
    if r == -2:
        raise MemoryError()
    return r


def node_text_utf8(node not None):
    """The UTF-8 of `node.text(separator=" ", strip=True)` (at most MAX_TEXT bytes) for a
    selectolax LexborNode, read from lexbor's nodes, or None where a text node is not valid
    UTF-8 (its text then has U+FFFD in it). Only with lexbor's layout of `LAYOUT`: tests."""
    cdef gs_buf b
    try:
        if _body_text(node, &b) < 0:
            return None
        return (<char *>b.data)[:b.size] if b.size else b""
    finally:
        PyMem_Free(b.data)


def simhash_node(node not None):
    """The same as `simhash_text(node.text(separator=" ", strip=True))` for a selectolax
    LexborNode, without building the str: its text nodes' UTF-8 read from lexbor's nodes.
    Only where parse/simhash.py has checked lexbor's layout (`LAYOUT`)."""
    cdef gs_buf b
    try:
        if _body_text(node, &b) < 0:  # U+FFFD for its bad bytes: selectolax's own text
            return simhash_text(node.text(separator=" ", strip=True))
        return fingerprint_utf8(b.data, <Py_ssize_t>b.size)
    finally:
        PyMem_Free(b.data)


#: the lexbor major version whose node layout gs_lxb_node copies (selectolax's lexbor.pxd)
LAYOUT = 3
