/*
 * locks.h: what locks.c (the fast path: one name taken, one released),
 * lock_wait.c (waiting in the lock manager's queue, for a lock or a
 * semaphore's permit) and locks_many.c (several names at once) share, and
 * dlock.allow_standby_locks, the one setting they own.
 */
#ifndef DLOCK_LOCKS_H
#define DLOCK_LOCKS_H

#include "fmgr.h"
#include "storage/lock.h"
#include "utils/timestamp.h"

#include "entries.h"
#include "name.h"

extern bool dlock_allow_standby_locks;

/*
 * What an acquisition asks for besides the name: the arguments of all four
 * acquire functions (the _ms arguments and info since 1.5), the same for one
 * name or several:
 *   dlock_try[_xact](name(s), shared, lease, lease_ms, info, permits)
 *   dlock_lock[_xact](name(s), timeout, shared, lease, timeout_ms, lease_ms, info, permits)
 * (permits: one name only); and the positional forms for clients (1.6):
 *   dlock_try[_xact]_ms(name, shared, lease_ms, info, permits)
 *   dlock_lock[_xact]_ms(name, timeout_ms, shared, lease_ms, info, permits)
 */
typedef struct AcquireArgs
{
	int64		timeout_us;		/* -1: no limit; 0: do not wait */
	uint8		mode;
	int64		lease_us;		/* -1: none */
	DlockInfo	info;
	int			permits;		/* a semaphore's (> 1); 0: a lock */
	bool		defer;			/* several names: the lease and info are given
								 * once all are granted (give_deferred) */
	bool		notify;			/* announce its events (notify.c, 1.7) */
	bool		own_release;	/* a raise in a transaction (dlock_raise): a
								 * session lock in the lock manager, recorded
								 * as a transaction hold that dlock gives back
								 * (entries.h DlockXactHold) */
	int64		waited_before_us;	/* update mode: the wait for its gate, for
									 * the statistics; -1: none */
} AcquireArgs;

/* locks.c */
extern void dlock_acquire_args(FunctionCallInfo fcinfo, bool can_wait, AcquireArgs *a);
extern bool dlock_acquire_one(const DlockName *name, bool xact, bool can_wait,
							  const AcquireArgs *a);
extern bool dlock_unlock_one(const DlockName *name, uint8 mode);
extern bool dlock_release_session_hold(const LOCKTAG *tag, uint8 mode);
extern void dlock_drop_xact_hold(int i);
extern bool dlock_xact_hold_release(int ref);

/* lock_wait.c */
extern void dlock_set_waiting(int ref, const DlockName *name, uint8 mode, uint8 what,
							  const DlockInfo *info);
extern void dlock_count_wait_end(const DlockName *name, uint8 mode, int event,
								 TimestampTz start);
extern LockAcquireResult dlock_wait_for_lock(const LOCKTAG *tag, LOCKMODE lockmode, bool xact,
											 bool session, int64 timeout_us, int ref,
											 const DlockName *name, uint8 mode,
											 TimestampTz start, const DlockInfo *info);
extern LockAcquireResult dlock_take_permit(const DlockName *name, int ref, bool xact,
										   bool can_wait, const AcquireArgs *a, int *permit,
										   int64 *waited_us);

#endif							/* DLOCK_LOCKS_H */
