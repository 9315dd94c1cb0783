/* sha256.h: SHA-256 (FIPS 180-4), for the keys of names (sha256.c). */
#ifndef DLOCK_SHA256_H
#define DLOCK_SHA256_H

extern void dlock_sha256(const uint8 *data, size_t len, uint8 out[32]);

#endif							/* DLOCK_SHA256_H */
