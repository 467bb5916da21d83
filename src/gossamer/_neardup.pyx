# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled block index of near-duplicate fingerprints (neardup.py says what it is): the
same answers as `NearDupIndexReference` (pure Python: the reference it is tested against,
tests/test_neardup_compiled.py), a lookup and an add in a few hundred nanoseconds rather
than ~4 µs. Built by `pip install -e .` (setup.py); docs/crawler.md, "Near-duplicates".

Each of the k+1 blocks has a table of 2**16 chain heads (2**w for a block of w < 16 bits),
indexed by the block's value or, for a block wider than 16 bits (k < 3), by its 16 bits
mixed from the whole value: a chain then holds pages whose block differs too. That changes
no answer: every page within k bits shares a block with the one looked up (pigeonhole), so
it is on that block's chain whatever else is, and each entry met is checked on its whole
fingerprint; the answer is the first page added among those within k bits, as the
reference's."""

from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport int32_t, uint64_t
from libc.string cimport memset

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define GS_POPCOUNT(x) __builtin_popcountll(x)
    #else
    static int GS_POPCOUNT(unsigned long long x) { int n = 0; while (x) { x &= x - 1; n++; } return n; }
    #endif
    """
    int GS_POPCOUNT(uint64_t) noexcept nogil

cdef enum:
    MAX_BLOCKS = 8
    TABLE_BITS = 16


cdef class NearDupIndex:
    """Fingerprints and their pages' URLs, indexed by k+1 blocks of bits (`distance` k)."""

    cdef readonly int distance
    cdef int blocks
    cdef int shifts[MAX_BLOCKS]
    cdef uint64_t masks[MAX_BLOCKS]  # the block's bits
    cdef int table_bits[MAX_BLOCKS]  # of its table's index
    cdef int32_t *heads[MAX_BLOCKS]
    cdef int32_t *nexts  # blocks links an entry: entry i's at i * blocks + b
    cdef uint64_t *fps
    cdef Py_ssize_t count, room
    cdef list urls

    def __cinit__(self, int distance=3):
        cdef int b, width, w
        if not 0 <= distance <= 7:
            raise ValueError(f"near-duplicate distance must be 0..7 bits, got {distance}")
        self.distance = distance
        self.blocks = distance + 1
        width = 64 // self.blocks
        self.urls = []
        for b in range(self.blocks):
            self.heads[b] = NULL
        for b in range(self.blocks):
            self.shifts[b] = b * width
            w = 64 - b * width if b == self.blocks - 1 else width
            self.masks[b] = (<uint64_t>-1) if w == 64 else ((<uint64_t>1) << w) - 1
            self.table_bits[b] = min(w, <int>TABLE_BITS)
            self.heads[b] = <int32_t *>PyMem_Realloc(NULL, sizeof(int32_t) << self.table_bits[b])
            if self.heads[b] == NULL:
                raise MemoryError()
            memset(self.heads[b], 0xFF, sizeof(int32_t) << self.table_bits[b])  # -1: empty

    def __dealloc__(self):
        cdef int b
        for b in range(self.blocks):
            PyMem_Free(self.heads[b])
        PyMem_Free(self.nexts)
        PyMem_Free(self.fps)

    cdef inline Py_ssize_t slot(self, uint64_t fp, int b) noexcept nogil:
        cdef uint64_t v = (fp >> self.shifts[b]) & self.masks[b]
        if self.masks[b] >> self.table_bits[b] == 0:  # the table has a slot a value
            return <Py_ssize_t>v
        v ^= v >> 29  # a block wider than the table: its 16 bits mixed from all of it
        v *= 0xBF58476D1CE4E5B9ULL
        return <Py_ssize_t>(v >> 48)

    def __len__(self):
        return self.count

    def find(self, uint64_t fp):
        """The URL of the first page added whose fingerprint is within `distance` bits of
        `fp`, or None."""
        cdef Py_ssize_t best = -1
        cdef int32_t i
        cdef int b
        for b in range(self.blocks):
            i = self.heads[b][self.slot(fp, b)]
            while i >= 0:  # newest first
                if GS_POPCOUNT(self.fps[i] ^ fp) <= self.distance and (best < 0 or i < best):
                    best = i
                i = self.nexts[<Py_ssize_t>i * self.blocks + b]
        return None if best < 0 else self.urls[best]

    def add(self, uint64_t fp, str url not None):
        cdef Py_ssize_t i = self.count, room, s
        cdef int b
        cdef void *grown
        if i >= 0x7FFFFFFF:
            raise OverflowError("more than 2**31 - 1 fingerprints")
        if i == self.room:
            room = max(1024, self.room * 2)
            grown = PyMem_Realloc(self.fps, room * sizeof(uint64_t))
            if grown == NULL:
                raise MemoryError()
            self.fps = <uint64_t *>grown
            grown = PyMem_Realloc(self.nexts, room * self.blocks * sizeof(int32_t))
            if grown == NULL:
                raise MemoryError()
            self.nexts = <int32_t *>grown
            self.room = room
        self.urls.append(url)
        self.fps[i] = fp
        for b in range(self.blocks):
            s = self.slot(fp, b)
            self.nexts[i * self.blocks + b] = self.heads[b][s]
            self.heads[b][s] = <int32_t>i
        self.count = i + 1
