/*
 * changecount.c: the readers' side of the change counter (changecount.h).
 *
 * A reader retries while the writer is in the middle of a change.  The
 * writer's changes are a few stores, so this rarely loops; if the writer is
 * descheduled or stopped in between, the reader sleeps a little between
 * tries and can be cancelled.
 *
 * Layer 1 of the map in dlock.h (the ground): calls no other file of
 * dlock's.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "changecount.h"

/*
 * The start of a consistent read of what changecount guards: waits while
 * the writer is inside (backing off, and taking interrupts, if that lasts)
 * and returns the counter to compare with after the copy.
 */
uint32
dlock_read_begin(pg_atomic_uint32 *changecount, int *tries)
{
	uint32		before;

	(void) dlock_read_begin_within(changecount, tries, 0, &before);
	return before;
}

/*
 * The same, giving up (false) once *tries reaches limit (> 0; 0: never)
 * while a writer keeps the counter odd: every thousandth try sleeps a
 * millisecond, so 5000 is about 5 ms of a writer that does not finish (a
 * process stopped inside its change window).
 */
bool
dlock_read_begin_within(pg_atomic_uint32 *changecount, int *tries, int limit,
						uint32 *before)
{
	for (;;)
	{
		*before = pg_atomic_read_u32(changecount);

		if (++*tries % 1000 == 0)
		{
			CHECK_FOR_INTERRUPTS();
			pg_usleep(1000L);
		}
		if ((*before & 1) == 0)
		{
			pg_read_barrier();
			return true;
		}
		if (limit > 0 && *tries >= limit)
			return false;
		pg_spin_delay();
	}
}
