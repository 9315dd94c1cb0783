/*
 * tokens.h: fencing tokens (tokens.c): the counter in shared memory, the
 * file that keeps its ceiling, and why a hold has none.
 */
#ifndef DLOCK_TOKENS_H
#define DLOCK_TOKENS_H

/* Tokens are reserved on disk in blocks of dlock.token_reserve, by default: */
#define DLOCK_TOKEN_RESERVE_DEFAULT 1000000

extern int	dlock_token_reserve;

extern Size dlock_tokens_shmem_size(void);
extern void dlock_tokens_shmem_request(void);
extern void dlock_tokens_shmem_init(void);

/* The token of a new hold: positive, or <= 0 (none), which says why. */
extern int64 dlock_token_next(void);
extern bool dlock_token_next_nofail(int64 *taken);
extern int64 dlock_token_next_finish(int64 taken);
extern void dlock_tokens_prepare(void);
extern int	dlock_token_none_detail(int64 token);

#endif							/* DLOCK_TOKENS_H */
