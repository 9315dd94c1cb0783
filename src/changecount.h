/*
 * changecount.h: the change counter, which guards shared memory that one
 * process writes and others copy (a backend's slot, a detached hold).
 *
 * The counter is odd while the writer is inside.  A change is a few stores
 * with nothing in between that can fail, inside a critical section: an
 * error there would leave the counter odd and every reader spinning.  A
 * reader copies between dlock_read_begin and dlock_read_done, and copies
 * again until the counter did not move (changecount.c).
 */
#ifndef DLOCK_CHANGECOUNT_H
#define DLOCK_CHANGECOUNT_H

#include "miscadmin.h"
#include "port/atomics.h"

extern uint32 dlock_read_begin(pg_atomic_uint32 *changecount, int *tries);
extern bool dlock_read_begin_within(pg_atomic_uint32 *changecount, int *tries, int limit,
									uint32 *before);

static inline bool
dlock_read_done(pg_atomic_uint32 *changecount, uint32 before)
{
	pg_read_barrier();
	return pg_atomic_read_u32(changecount) == before;
}

static inline void
dlock_count_begin(pg_atomic_uint32 *changecount)
{
	uint32		c = pg_atomic_read_u32(changecount);

	START_CRIT_SECTION();
	Assert((c & 1) == 0);
	pg_atomic_write_u32(changecount, c + 1);
	pg_write_barrier();
}

static inline void
dlock_count_end(pg_atomic_uint32 *changecount)
{
	uint32		c = pg_atomic_read_u32(changecount);

	Assert((c & 1) == 1);
	pg_write_barrier();
	pg_atomic_write_u32(changecount, c + 1);
	END_CRIT_SECTION();
}

#endif							/* DLOCK_CHANGECOUNT_H */
