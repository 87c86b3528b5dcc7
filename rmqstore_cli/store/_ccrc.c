/* CRC-32 of the reflected polynomial 0xEDB88320: zlib's crc32, which the broker stores as
 * BODYCRC (UtilAll#crc32, java.util.zip.CRC32). Slicing-by-8 tables everywhere; on x86-64
 * CPUs with carry-less multiply, 16 bytes at a time by folding (Intel, "Fast CRC Computation
 * for Generic Polynomials Using PCLMULQDQ"; the reflected constants of 0xEDB88320 as zlib-ng
 * and Chromium's zlib use them), four 128-bit remainders at once; with VPCLMULQDQ and
 * AVX-512, four 512-bit ones (256 bytes a step), so that a 16 KiB body costs no more here
 * than in zlib-ng and every body's CRC is taken in the C loop that reads its record.
 *
 * A fold constant for a distance of D bits is (x^(D+32) mod P, x^(D-32) mod P), each
 * bit-reflected and shifted left by one: the low half multiplies a remainder's low 64 bits,
 * the high half its high 64 bits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_ccrc.h"

static uint32_t crc_table[8][256];

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ ((c & 1) ? 0xEDB88320u : 0);
        crc_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xFF];
}

/* Whether the environment variable is set and neither empty nor "0". */
static int env_set(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_CLMUL_CRC 1
#define CLMUL_TARGET "pclmul,sse4.1"
#define WIDE_TARGET "pclmul,sse4.1,avx512f,avx512vl,vpclmulqdq"
/* 0, 1 or 2 (rmq_crc_clmul): asked once at import. */
static int clmul_level;

/* distances 512 and 128 bits (four 128-bit remainders a step; one) */
#define K512 _mm_set_epi64x(0x01c6e41596, 0x0154442bd4)
#define K128 _mm_set_epi64x(0x00ccaa009e, 0x01751997d0)
/* 2048 bits: four 512-bit remainders a step */
#define K2048 _mm_set_epi64x(0x01322d1430, 0x011542778a)

/* d + the 128-bit remainder x carried forward by the distance of k. */
__attribute__((target(CLMUL_TARGET), always_inline)) static inline __m128i fold16(__m128i x, __m128i k, __m128i d)
{
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), d);
}

static inline __m128i load16(const uint8_t *p)
{
    return _mm_loadu_si128((const __m128i *)p);
}

/* The remainder x of what came before p, then the n bytes at p (a multiple of 16) 16 at a
 * time; then 128 bits to 64, and Barrett's reduction to the 32-bit state. */
__attribute__((target(CLMUL_TARGET), always_inline)) static inline uint32_t fold_finish(__m128i x, const uint8_t *p,
                                                                                        int64_t n)
{
    const __m128i k128 = K128, k5k0 = _mm_set_epi64x(0, 0x0163cd6124);
    const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641), low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    for (; n >= 16; p += 16, n -= 16)
        x = fold16(x, k128, load16(p));
    __m128i y = _mm_clmulepi64_si128(x, k128, 0x10);
    x = _mm_xor_si128(_mm_srli_si128(x, 8), y);
    y = _mm_srli_si128(x, 4);
    x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, low32), k5k0, 0x00), y);
    y = _mm_clmulepi64_si128(_mm_and_si128(x, low32), poly, 0x10);
    y = _mm_clmulepi64_si128(_mm_and_si128(y, low32), poly, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x, y), 1);
}

/* CRC-32 state c (pre-inverted) over n bytes, n >= 64 and a multiple of 16: four 128-bit
 * remainders 64 bytes a step, folded into one. Reads exactly [p, p + n). */
__attribute__((target(CLMUL_TARGET))) static uint32_t crc32_clmul(const uint8_t *p, int64_t n, uint32_t c)
{
    const __m128i k512 = K512, k128 = K128;
    __m128i x[4];
    for (int j = 0; j < 4; j++)
        x[j] = load16(p + 16 * j);
    x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128((int)c));
    for (p += 64, n -= 64; n >= 64; p += 64, n -= 64)
        for (int j = 0; j < 4; j++)
            x[j] = fold16(x[j], k512, load16(p + 16 * j));
    for (int j = 1; j < 4; j++)
        x[0] = fold16(x[0], k128, x[j]);
    return fold_finish(x[0], p, n);
}

/* d + the four 128-bit remainders of z, each carried forward by the distance of k. */
__attribute__((target(WIDE_TARGET), always_inline)) static inline __m512i fold64(__m512i z, __m512i k, __m512i d)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, k, 0x00), _mm512_clmulepi64_epi128(z, k, 0x11), d,
                                     0x96);
}

/* crc32_clmul for n >= 256: four 512-bit remainders 256 bytes a step, folded into one, then
 * its four 128-bit lanes into one. */
__attribute__((target(WIDE_TARGET))) static uint32_t crc32_clmul_wide(const uint8_t *p, int64_t n, uint32_t c)
{
    const __m512i k2048 = _mm512_broadcast_i32x4(K2048), k512 = _mm512_broadcast_i32x4(K512);
    const __m128i k128 = K128;
    __m512i z[4];
    for (int j = 0; j < 4; j++)
        z[j] = _mm512_loadu_si512(p + 64 * j);
    z[0] = _mm512_xor_si512(z[0], _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128((int)c), 0));
    for (p += 256, n -= 256; n >= 256; p += 256, n -= 256)
        for (int j = 0; j < 4; j++)
            z[j] = fold64(z[j], k2048, _mm512_loadu_si512(p + 64 * j));
    for (int j = 1; j < 4; j++)
        z[0] = fold64(z[0], k512, z[j]);
    for (; n >= 64; p += 64, n -= 64)
        z[0] = fold64(z[0], k512, _mm512_loadu_si512(p));
    __m128i x = _mm512_extracti32x4_epi32(z[0], 0);
    x = fold16(x, k128, _mm512_extracti32x4_epi32(z[0], 1));
    x = fold16(x, k128, _mm512_extracti32x4_epi32(z[0], 2));
    return fold_finish(fold16(x, k128, _mm512_extracti32x4_epi32(z[0], 3)), p, n);
}
#endif

void rmq_crc_init(void)
{
    table_init();
#ifdef HAVE_CLMUL_CRC
    __builtin_cpu_init();
    if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1") && !env_set("RMQSTORE_NO_CLMUL"))
        clmul_level = 1 + (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                           __builtin_cpu_supports("vpclmulqdq") && !env_set("RMQSTORE_NO_VPCLMUL"));
#endif
}

int rmq_crc_clmul(void)
{
#ifdef HAVE_CLMUL_CRC
    return clmul_level;
#else
    return 0;
#endif
}

uint32_t rmq_crc32(const uint8_t *p, int64_t n)
{
    uint32_t c = 0xFFFFFFFFu;
#ifdef HAVE_CLMUL_CRC
    if (clmul_level && n >= 64) {
        int64_t chunk = n & ~(int64_t)15;
        c = clmul_level > 1 && chunk >= 256 ? crc32_clmul_wide(p, chunk, c) : crc32_clmul(p, chunk, c);
        p += chunk;
        n -= chunk;
    }
#endif
    for (; n >= 8; p += 8, n -= 8) {
        c ^= (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        c = crc_table[7][c & 0xFF] ^ crc_table[6][(c >> 8) & 0xFF] ^ crc_table[5][(c >> 16) & 0xFF] ^
            crc_table[4][c >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    for (; n > 0; p++, n--)
        c = crc_table[0][(c ^ *p) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}
