/* CRC32C (Castagnoli) of a batch, folded with 512-bit carry-less multiplies (VPCLMULQDQ).
 *
 * The crc32c package's SSE4.2 loop is bound by the CRC32 instruction, 8 bytes a cycle at best; it
 * was about a quarter of a columnar decode of 1000 records of 100 bytes (bench/results_notes.md,
 * "Codec design measurements"). Here four 64-byte accumulators fold 256 bytes an iteration, the
 * CRC32 instruction finishes the last 16 folded bytes and the tail. CPUs without AVX-512F and
 * VPCLMULQDQ (or an OS that does not save their state), and other compilers and architectures,
 * report kc_crc32c_usable() == 0 and the callers keep the package.
 *
 * The fold: with f(M) the CRC register after M from a zero register (no inversions), a 64-bit
 * chunk v followed by k zero bytes has f(v || 0^k) == f(clmul(v, g(k))) as 16 little-endian bytes,
 * where g(k) is x^(8k - 33) mod P bit-reflected in 32 bits; a 16-byte lane (lo, hi) moves d bytes
 * ahead as clmul(lo, g(d + 8)) ^ clmul(hi, g(d)). Constants computed (and the whole scheme checked
 * against the package) by tests/unit/codec/test_crc32c_fold.py.
 */
#ifndef KAFKA_CORE_CRC32C_H
#define KAFKA_CORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(KAFKA_CORE_NO_VPCLMUL)
#define KC_CRC_FOLD 1
#include <immintrin.h>

/* g(d + 8) in the low quadword, g(d) in the high one: what a lane is multiplied by to move d bytes. */
#define KC_K(lo, hi) _mm512_broadcast_i32x4(_mm_set_epi64x((long long)(hi), (long long)(lo)))

__attribute__((target("avx512f,vpclmulqdq")))
static inline __m512i kc_fold512(__m512i acc, __m512i k, __m512i data) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00),
                                     _mm512_clmulepi64_epi128(acc, k, 0x11), data, 0x96);
}

__attribute__((target("pclmul,sse4.2")))
static inline __m128i kc_fold128(__m128i lane, uint32_t k_lo, uint32_t k_hi) {
    __m128i k = _mm_set_epi64x((long long)k_hi, (long long)k_lo);
    return _mm_xor_si128(_mm_clmulepi64_si128(lane, k, 0x00), _mm_clmulepi64_si128(lane, k, 0x11));
}

__attribute__((target("sse4.2")))
static inline uint32_t kc_crc32c_tail(uint32_t c, const uint8_t* p, size_t n) {
    uint64_t word;
    while (n >= 8) {
        memcpy(&word, p, 8);
        c = (uint32_t)_mm_crc32_u64(c, word);
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8(c, *p++);
    return c;
}

/* The standard CRC32C of p[0:n] continued from `crc` (as crc32c.crc32c(data, crc)). */
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))
static uint32_t kc_crc32c_fold(uint32_t crc, const uint8_t* p, size_t n) {
    uint32_t c = ~crc;
    if (n < 256) return ~kc_crc32c_tail(c, p, n);
    const __m512i k256 = KC_K(0xdcb17aa4u, 0xb9e02b86u);
    __m512i a0 = _mm512_xor_si512(_mm512_loadu_si512((const void*)p), _mm512_castsi128_si512(_mm_cvtsi32_si128((int)c)));
    __m512i a1 = _mm512_loadu_si512((const void*)(p + 64));
    __m512i a2 = _mm512_loadu_si512((const void*)(p + 128));
    __m512i a3 = _mm512_loadu_si512((const void*)(p + 192));
    p += 256;
    n -= 256;
    while (n >= 256) {
        a0 = kc_fold512(a0, k256, _mm512_loadu_si512((const void*)p));
        a1 = kc_fold512(a1, k256, _mm512_loadu_si512((const void*)(p + 64)));
        a2 = kc_fold512(a2, k256, _mm512_loadu_si512((const void*)(p + 128)));
        a3 = kc_fold512(a3, k256, _mm512_loadu_si512((const void*)(p + 192)));
        p += 256;
        n -= 256;
    }
    /* the four accumulators onto the last one's 64 bytes, then its four lanes onto the last lane */
    a3 = kc_fold512(a0, KC_K(0xa87ab8a8u, 0xab7aff2au), a3);
    a3 = kc_fold512(a1, KC_K(0x6992cea2u, 0x0d3b6092u), a3);
    a3 = kc_fold512(a2, KC_K(0x740eef02u, 0x9e4addf8u), a3);
    __m128i r = _mm512_extracti32x4_epi32(a3, 3);
    r = _mm_xor_si128(r, kc_fold128(_mm512_extracti32x4_epi32(a3, 0), 0x1c291d04u, 0xddc0152bu));
    r = _mm_xor_si128(r, kc_fold128(_mm512_extracti32x4_epi32(a3, 1), 0x3da6d0cbu, 0xba4fc28eu));
    r = _mm_xor_si128(r, kc_fold128(_mm512_extracti32x4_epi32(a3, 2), 0xf20c0dfeu, 0x493c7d27u));
    c = (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(r));
    c = (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(r, 1));
    return ~kc_crc32c_tail(c, p, n);
}

static int kc_crc32c_state = -1; /* -1 unknown, 0 no, 1 yes; set once (the GIL is held) */

static int kc_crc32c_usable(void) {
    if (kc_crc32c_state < 0) {
        __builtin_cpu_init();
        kc_crc32c_state = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
                          __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
    }
    return kc_crc32c_state;
}

static uint32_t kc_crc32c(uint32_t crc, const uint8_t* p, size_t n) { return kc_crc32c_fold(crc, p, n); }

#else
#define KC_CRC_FOLD 0
static int kc_crc32c_usable(void) { return 0; }
static uint32_t kc_crc32c(uint32_t crc, const uint8_t* p, size_t n) {
    (void)p;
    (void)n;
    return crc; /* never called: kc_crc32c_usable() is 0 */
}
#endif

#endif
