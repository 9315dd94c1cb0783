/*
 * semaphore.h: semaphores, a name that up to N hold at once (semaphore.c).
 */
#ifndef DLOCK_SEMAPHORE_H
#define DLOCK_SEMAPHORE_H

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/lock.h"

/* the part of shared memory (shmem.c) */
extern Size dlock_permits_shmem_size(void);
extern void dlock_permits_shmem_init(void);

/* A permit the caller already holds for another owner (the lock holder). */
typedef bool (*DlockPermitSkip) (void *arg, int permit);

extern int	dlock_permit_take(Oid dbid, int64 key, int permits, bool session,
							  DlockPermitSkip skip, void *arg);
extern void dlock_permit_queue_enter(Oid dbid, int64 key);
extern void dlock_permit_queue_leave(void);
extern int	dlock_permit_head(Oid dbid, int64 key, int permits, bool session,
							  TimestampTz deadline, bool detect);

/* wake-ups: a name's lock or permit was released, now or at the transaction's end */
extern void dlock_permit_wake_at_end(Oid dbid, int64 key);
extern void dlock_permit_wake_all(void);
extern void dlock_permits_backend_setup(void);
extern int	dlock_permit_in_line(void);

/*
 * Buckets of names (semaphore.c): the callers in line for a name of the
 * bucket, and the condition variable its first in line sleeps on.
 */
#define DLOCK_PERMIT_BUCKETS 128

typedef struct DlockPermitBucket
{
	pg_atomic_uint32 waiters;
	ConditionVariable cv;
} DlockPermitBucket;

extern DlockPermitBucket *dlock_permit_buckets;

static inline int
dlock_permit_bucket_of(Oid dbid, int64 key)
{
	/* keys are SHA-256 bits already */
	return (int) (((uint32) key ^ (uint32) dbid) % DLOCK_PERMIT_BUCKETS);
}

/*
 * After a lock or permit of a name was released: wake its waiters, if the
 * name may have any.  Where none wait, one read (the unlock path calls it
 * for every name), and nothing without shared memory.  No barrier of its
 * own: the lock manager's release ended with one (LWLockRelease's atomic
 * operation), which pairs with the one of dlock_permit_queue_enter.
 */
static inline void
dlock_permit_released(Oid dbid, int64 key)
{
	DlockPermitBucket *b;

	if (unlikely(dlock_permit_buckets == NULL))
		return;
	b = &dlock_permit_buckets[dlock_permit_bucket_of(dbid, key)];
	if (unlikely(pg_atomic_read_u32(&b->waiters) > 0))
		ConditionVariableBroadcast(&b->cv);
}

/* The same, for the lock of tag (a name's lock, permit or turnstile). */
static inline void
dlock_permit_tag_released(const LOCKTAG *tag)
{
	dlock_permit_released(tag->locktag_field1,
						  (int64) (((uint64) tag->locktag_field2 << 32) | tag->locktag_field3));
}

#endif							/* DLOCK_SEMAPHORE_H */
