/*
 * sha256.c: SHA-256 (FIPS 180-4) for short inputs.
 *
 * dlock hashes a lock name of at most DLOCK_NAME_MAX bytes on every call, so
 * this is a plain one-shot routine with no allocation, no resource-owner
 * bookkeeping and no library dispatch.  Its output is checked against the
 * standard test vectors in sql/dlock_key.sql.
 *
 * On x86-64 processors with the SHA extensions (most made since 2017), the
 * compression function uses them: a lock name that misses the key cache
 * then costs about a quarter of the portable code.  Which one runs is
 * decided once per backend, by CPUID and by checking that both give the
 * same digest for a test input; the portable one is the fallback everywhere.
 *
 * Layer 1 of the map in dlock.h (the ground): calls no other file of
 * dlock's.
 */
#include "postgres.h"

#include "dlock.h"
#include "sha256.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DLOCK_SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32 sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void
sha256_block(uint32 h[8], const uint8 *p)
{
	uint32		w[64];
	uint32		a, b, c, d, e, f, g, hh;
	int			i;

	for (i = 0; i < 16; i++)
		w[i] = ((uint32) p[4 * i] << 24) | ((uint32) p[4 * i + 1] << 16) |
			((uint32) p[4 * i + 2] << 8) | (uint32) p[4 * i + 3];
	for (i = 16; i < 64; i++)
	{
		uint32		s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32		s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}

	a = h[0];
	b = h[1];
	c = h[2];
	d = h[3];
	e = h[4];
	f = h[5];
	g = h[6];
	hh = h[7];
	for (i = 0; i < 64; i++)
	{
		uint32		S1 = ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25);
		uint32		ch = (e & f) ^ (~e & g);
		uint32		t1 = hh + S1 + ch + sha256_k[i] + w[i];
		uint32		S0 = ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22);
		uint32		maj = (a & b) ^ (a & c) ^ (b & c);
		uint32		t2 = S0 + maj;

		hh = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
	h[5] += f;
	h[6] += g;
	h[7] += hh;
}

typedef void (*sha256_block_fn) (uint32 h[8], const uint8 *p);

#ifdef DLOCK_SHA_NI
/*
 * The compression function with the SHA extensions.  They keep the state as
 * two vectors, (A, B, E, F) and (C, D, G, H); each sha256rnds2 does two
 * rounds, and sha256msg1 / sha256msg2 compute the message schedule four
 * words at a time: W[4g .. 4g+3] from the four vectors before it.
 */
__attribute__((target("sha,sse4.1,ssse3")))
static void
sha256_block_ni(uint32 h[8], const uint8 *p)
{
	const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
	__m128i		abef,
				cdgh,
				abef0,
				cdgh0,
				t;
	__m128i		m[4];
	int			g;

	/* (A B C D), (E F G H) -> (A B E F), (C D G H), lanes high to low */
	t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *) &h[0]), 0xB1);
	cdgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *) &h[4]), 0x1B);
	abef = _mm_alignr_epi8(t, cdgh, 8);
	cdgh = _mm_blend_epi16(cdgh, t, 0xF0);
	abef0 = abef;
	cdgh0 = cdgh;

	for (g = 0; g < 16; g++)
	{
		__m128i		w;

		if (g < 4)
			m[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *) (p + 16 * g)), bswap);
		else
		{
			/* m[g % 4] holds W[4g-16 ..]; the three after it follow */
			__m128i		prev1 = m[(g + 3) % 4],
						prev2 = m[(g + 2) % 4],
						prev3 = m[(g + 1) % 4];

			w = _mm_sha256msg1_epu32(m[g % 4], prev3);
			w = _mm_add_epi32(w, _mm_alignr_epi8(prev1, prev2, 4));
			m[g % 4] = _mm_sha256msg2_epu32(w, prev1);
		}
		w = _mm_add_epi32(m[g % 4], _mm_loadu_si128((const __m128i *) &sha256_k[4 * g]));
		cdgh = _mm_sha256rnds2_epu32(cdgh, abef, w);
		abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(w, 0x0E));
	}
	abef = _mm_add_epi32(abef, abef0);
	cdgh = _mm_add_epi32(cdgh, cdgh0);

	/* back to (A B C D), (E F G H) */
	t = _mm_shuffle_epi32(abef, 0x1B);
	cdgh = _mm_shuffle_epi32(cdgh, 0xB1);
	_mm_storeu_si128((__m128i *) &h[0], _mm_blend_epi16(t, cdgh, 0xF0));
	_mm_storeu_si128((__m128i *) &h[4], _mm_alignr_epi8(cdgh, t, 8));
}

static bool
cpu_has_sha_ni(void)
{
	unsigned int a,
				b,
				c,
				d;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1))
		return false;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	return (b & (1u << 29)) != 0;	/* SHA */
}
#endif

static void sha256_block_pick(uint32 h[8], const uint8 *p);

static sha256_block_fn sha256_compress = sha256_block_pick;

/* First call in this backend: choose, and check the choice on a test block. */
static void
sha256_block_pick(uint32 h[8], const uint8 *p)
{
	sha256_compress = sha256_block;
#ifdef DLOCK_SHA_NI
	if (cpu_has_sha_ni())
	{
		uint32		x[8],
					y[8];
		uint8		blk[64];
		int			i;

		for (i = 0; i < 64; i++)
			blk[i] = (uint8) (i * 37 + 11);
		for (i = 0; i < 8; i++)
			x[i] = y[i] = sha256_k[i * 7];
		sha256_block(x, blk);
		sha256_block_ni(y, blk);
		if (memcmp(x, y, sizeof(x)) == 0)
			sha256_compress = sha256_block_ni;
	}
#endif
	sha256_compress(h, p);
}

void
dlock_sha256(const uint8 *data, size_t len, uint8 out[32])
{
	uint32		h[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
	};
	uint8		tail[128];
	size_t		full = len & ~(size_t) 63;
	size_t		rest = len - full;
	size_t		taillen;
	uint64		bits = (uint64) len * 8;
	size_t		i;

	for (i = 0; i < full; i += 64)
		sha256_compress(h, data + i);

	/* the last partial block, the 0x80 marker, zeros and the bit length */
	taillen = (rest + 1 + 8 <= 64) ? 64 : 128;
	memcpy(tail, data + full, rest);
	tail[rest] = 0x80;
	memset(tail + rest + 1, 0, taillen - rest - 1);
	for (i = 0; i < 8; i++)
		tail[taillen - 1 - i] = (uint8) (bits >> (8 * i));
	sha256_compress(h, tail);
	if (taillen == 128)
		sha256_compress(h, tail + 64);

	for (i = 0; i < 8; i++)
	{
		out[4 * i] = (uint8) (h[i] >> 24);
		out[4 * i + 1] = (uint8) (h[i] >> 16);
		out[4 * i + 2] = (uint8) (h[i] >> 8);
		out[4 * i + 3] = (uint8) h[i];
	}
}
