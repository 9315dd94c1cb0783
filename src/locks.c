/*
 * locks.c: taking and releasing named locks.
 *
 * Each call hashes the name to a key and goes straight to the lock manager
 * (LockAcquire / LockRelease on the advisory tag of that key), exactly like
 * pg_advisory_lock(bigint).  Around that, the backend keeps its bookkeeping
 * of what it holds, by (key, mode):
 *
 *  - in its slot of shared memory, when the library is preloaded and the
 *    slot has room: readable by the dlock_locks view and the lease reaper;
 *  - otherwise in backend-local "overflow" entries: the lock works, it just
 *    has no name in the view and cannot have a lease.
 *
 * The bookkeeping never decides anything: whether a lock is held is the lock
 * manager's answer.  Entries are written only after the lock manager said
 * yes, with everything that could fail (allocation, argument checks, room for
 * a lease) done before asking, so an error never leaves half a record.
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "common/int.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "dlock.h"

PG_FUNCTION_INFO_V1(dlock_try);
PG_FUNCTION_INFO_V1(dlock_lock);
PG_FUNCTION_INFO_V1(dlock_try_xact);
PG_FUNCTION_INFO_V1(dlock_lock_xact);
PG_FUNCTION_INFO_V1(dlock_unlock);
PG_FUNCTION_INFO_V1(dlock_unlock_all);
PG_FUNCTION_INFO_V1(dlock_renew);
PG_FUNCTION_INFO_V1(dlock_token);

/*
 * An entry reference: 0 .. my_cap-1 are the entries of this backend's
 * shared slot, my_cap and up are overflow entries.
 */
static bool ready = false;
static DlockSlot *my_slot = NULL;
static int	my_cap = 0;
static DlockEntry *overflow = NULL;
static int	n_overflow = 0;
static int	max_overflow = 0;

/* Transaction-scope holds, with the subtransaction that took each. */
typedef struct XactHold
{
	int			ref;
	SubTransactionId subid;
} XactHold;

static XactHold *xact_holds = NULL;
static int	n_xact_holds = 0;
static int	max_xact_holds = 0;

/*
 * A hold whose lease had run out, released (dlock_unlock, dlock_unlock_all)
 * in the current transaction: that transaction must not commit either.
 */
static TimestampTz released_expired_at = 0;
static char released_expired_name[DLOCK_NAME_MAX + 1];

static void xact_callback(XactEvent event, void *arg);
static bool sweep_stale_entries(void);
static void forget_stale_session_hold(int ref);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);

static inline DlockEntry *
entry_at(int ref)
{
	return ref < my_cap ? &my_slot->entries[ref] : &overflow[ref - my_cap];
}

/* Bracket every change to a shared entry, so that readers see none torn. */
static inline void
change_begin(int ref)
{
	if (ref < my_cap)
	{
		pg_atomic_write_u32(&my_slot->changecount,
							pg_atomic_read_u32(&my_slot->changecount) + 1);
		pg_write_barrier();
	}
}

static inline void
change_end(int ref)
{
	if (ref < my_cap)
	{
		pg_write_barrier();
		pg_atomic_write_u32(&my_slot->changecount,
							pg_atomic_read_u32(&my_slot->changecount) + 1);
	}
}

static void
backend_init(void)
{
	if (likely(ready))
		return;
	if (dlock_shared != NULL && MyProc != NULL &&
		MyProc->pgprocno < dlock_shared->nslots)
	{
		my_slot = dlock_slot(MyProc->pgprocno);
		my_cap = dlock_shared->entries_per_slot;
		change_begin(0);
		my_slot->pid = MyProcPid;
		my_slot->dbid = MyDatabaseId;
		my_slot->nused = 0;
		for (int i = 0; i < my_cap; i++)
			my_slot->entries[i].inuse = 0;
		change_end(0);
		on_shmem_exit(dlock_backend_exit, (Datum) 0);
	}
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	ready = true;
}

/* At backend exit: the lock manager releases the locks, we forget them. */
void
dlock_backend_exit(int code, Datum arg)
{
	(void) code;
	(void) arg;
	if (my_slot == NULL)
		return;
	change_begin(0);
	my_slot->nused = 0;
	my_slot->pid = 0;
	change_end(0);
	my_slot = NULL;
	my_cap = 0;
}

static int
find_entry(int64 key, uint8 mode)
{
	int			i;

	if (my_slot != NULL)
	{
		for (i = 0; i < my_slot->nused; i++)
		{
			DlockEntry *e = &my_slot->entries[i];

			if (e->inuse && e->key == key && e->mode == mode)
				return i;
		}
	}
	for (i = 0; i < n_overflow; i++)
	{
		DlockEntry *e = &overflow[i];

		if (e->inuse && e->key == key && e->mode == mode)
			return my_cap + i;
	}
	return -1;
}

static char *
display_name(const DlockName *name)
{
	return text_to_cstring(name->arg);
}

/*
 * The entry to use for (key, mode): the existing one, or a free one (not yet
 * marked in use).  Allocation happens here, before any lock is taken.
 */
static int
entry_for(const DlockName *name, uint8 mode, bool need_shared)
{
	int			ref = find_entry(name->key, mode);
	int			i;

	if (ref >= 0)
	{
		if (need_shared && ref >= my_cap)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("cannot give lock \"%s\" a lease: it is held beyond dlock.max_locks_per_session (%d)",
							display_name(name), my_cap),
					 errhint("Release it and take it again once fewer named locks are held, or raise dlock.max_locks_per_session.")));
		return ref;
	}
	for (i = 0; i < my_cap; i++)
		if (!my_slot->entries[i].inuse)
			return i;
	/*
	 * Full: drop holds released behind dlock's back, then look again.  This
	 * costs a lock-table lookup per entry, paid only by sessions beyond
	 * dlock.max_locks_per_session.
	 */
	if (my_cap > 0 && sweep_stale_entries())
		for (i = 0; i < my_cap; i++)
			if (!my_slot->entries[i].inuse)
				return i;
	if (need_shared)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("cannot give lock \"%s\" a lease: this session already holds %d named locks",
						display_name(name), my_cap),
				 errhint("Release some named locks, or raise dlock.max_locks_per_session.")));
	for (i = 0; i < n_overflow; i++)
		if (!overflow[i].inuse)
			return my_cap + i;
	if (n_overflow == max_overflow)
	{
		int			newmax = Max(8, max_overflow * 2);

		if (overflow == NULL)
			overflow = MemoryContextAllocZero(TopMemoryContext,
											  sizeof(DlockEntry) * newmax);
		else
		{
			overflow = repalloc(overflow, sizeof(DlockEntry) * newmax);
			memset(&overflow[max_overflow], 0,
				   sizeof(DlockEntry) * (newmax - max_overflow));
		}
		max_overflow = newmax;
	}
	return my_cap + n_overflow++;
}

static void
reserve_xact_hold(void)
{
	if (n_xact_holds < max_xact_holds)
		return;
	if (xact_holds == NULL)
	{
		max_xact_holds = 16;
		xact_holds = MemoryContextAlloc(TopMemoryContext,
										sizeof(XactHold) * max_xact_holds);
	}
	else
	{
		xact_holds = repalloc(xact_holds, sizeof(XactHold) * max_xact_holds * 2);
		max_xact_holds *= 2;
	}
}

/* Forget an entry that no longer holds or awaits anything. */
static void
entry_free_if_unused(int ref)
{
	DlockEntry *e = entry_at(ref);

	if (e->nsession > 0 || e->nxact > 0 || e->waiting != DLOCK_WAIT_NONE)
		return;
	e->inuse = 0;
	e->lease_expires = 0;
	if (ref < my_cap)
	{
		while (my_slot->nused > 0 && !my_slot->entries[my_slot->nused - 1].inuse)
			my_slot->nused--;
	}
}

/* (Re)start an entry as a new hold of name, or as a wait for it. */
static void
entry_start(int ref, const DlockName *name, uint8 mode)
{
	DlockEntry *e = entry_at(ref);

	e->key = name->key;
	e->mode = mode;
	e->namelen = name->len;
	memcpy(e->name, name->utf8, name->len);
	e->nsession = 0;
	e->nxact = 0;
	e->waiting = DLOCK_WAIT_NONE;
	e->token = 0;
	e->lease_expires = 0;
	e->lease_us = 0;
	e->since = GetCurrentTimestamp();
	e->inuse = 1;
	if (ref < my_cap && ref >= my_slot->nused)
		my_slot->nused = ref + 1;
}

static void
wake_reaper(TimestampTz expires)
{
	uint64		w;
	int			p;

	pg_memory_barrier();
	w = pg_atomic_read_u64(&dlock_shared->reaper_wakeup);
	p = dlock_shared->reaper_pgprocno;
	if ((w == 0 || (uint64) expires < w) && p >= 0)
		SetLatch(&ProcGlobal->allProcs[p].procLatch);
}

/*
 * Record a grant.  fresh: the lock manager granted a new hold (not one this
 * backend already had in this mode), so whatever the entry says is stale.
 */
static void
record_grant(int ref, const DlockName *name, uint8 mode, bool xact, bool fresh,
			 int64 lease_us)
{
	DlockEntry *e = entry_at(ref);
	TimestampTz expires = 0;

	bool		start = fresh || !e->inuse || (e->nsession == 0 && e->nxact == 0);
	int64		token = 0;

	/* lease_arg() checked that this cannot overflow */
	if (lease_us >= 0)
		expires = GetCurrentTimestamp() + lease_us;
	/* before change_begin: it may write the token file, and readers wait */
	if (start)
		token = (int64) dlock_next_token();
	change_begin(ref);
	if (start)
	{
		entry_start(ref, name, mode);
		e->token = token;
	}
	e->waiting = DLOCK_WAIT_NONE;
	if (xact)
	{
		e->nxact++;
		xact_holds[n_xact_holds].ref = ref;
		xact_holds[n_xact_holds].subid = GetCurrentSubTransactionId();
		n_xact_holds++;
	}
	else
		e->nsession++;
	if (lease_us >= 0)
	{
		e->lease_us = lease_us;
		e->lease_expires = expires;
	}
	change_end(ref);
	if (expires != 0)
		wake_reaper(expires);
}

/*
 * The lock manager said "not available" for a mode this backend supposedly
 * held at session level: it was released behind dlock's back (for example
 * by pg_advisory_unlock_all() or DISCARD ALL).  Transaction-scope holds can
 * only end with their (sub)transaction, which the callbacks below follow.
 */
static void
forget_stale_session_hold(int ref)
{
	DlockEntry *e = entry_at(ref);

	if (!e->inuse || e->nsession == 0)
		return;
	change_begin(ref);
	e->nsession = 0;
	entry_free_if_unused(ref);
	change_end(ref);
}

/* Does the lock manager still have the lock of this entry (any scope)? */
static bool
entry_lock_held(const DlockEntry *e)
{
	LOCKTAG		tag;

	dlock_set_locktag(&tag, e->key);
	return LockHeldByMe(&tag, DlockLockMode(e->mode));
}

/* A live hold whose lease has run out: it is being taken away. */
static bool
lease_ran_out(const DlockEntry *e)
{
	return e->inuse && e->lease_expires != 0 && e->nsession + e->nxact > 0 &&
		e->lease_expires <= GetCurrentTimestamp() && entry_lock_held(e);
}

/*
 * Forget every session hold in the shared slot that the lock manager no
 * longer has; true if that freed an entry.
 */
static bool
sweep_stale_entries(void)
{
	bool		freed = false;
	int			i;

	for (i = 0; i < my_slot->nused; i++)
	{
		DlockEntry *e = &my_slot->entries[i];

		if (!e->inuse || e->nsession == 0 || e->nxact > 0 ||
			e->waiting != DLOCK_WAIT_NONE)
			continue;
		if (!entry_lock_held(e))
		{
			forget_stale_session_hold(i);
			freed = true;
		}
	}
	return freed;
}

static void
set_waiting(int ref, const DlockName *name, uint8 mode, uint8 what)
{
	DlockEntry *e = entry_at(ref);

	change_begin(ref);
	if (what != DLOCK_WAIT_NONE && !e->inuse)
		entry_start(ref, name, mode);
	e->waiting = what;
	if (what == DLOCK_WAIT_NONE)
		entry_free_if_unused(ref);
	change_end(ref);
}

/*
 * Wait in the lock manager's queue.  With a timeout, lock_timeout is set to
 * it for this one wait and its expiry is turned into "not available"; any
 * other error (deadlock, cancel, statement_timeout) goes to the caller.
 */
static LockAcquireResult
wait_for_lock(const LOCKTAG *tag, LOCKMODE lockmode, bool xact, int64 timeout_us,
			  int ref, const DlockName *name, uint8 mode)
{
	volatile LockAcquireResult res = LOCKACQUIRE_NOT_AVAIL;
	int			saved_timeout = LockTimeout;
	MemoryContext cxt = CurrentMemoryContext;
	bool		stmt_armed = get_timeout_active(STATEMENT_TIMEOUT);
	TimestampTz stmt_deadline = get_timeout_finish_time(STATEMENT_TIMEOUT);

	set_waiting(ref, name, mode, xact ? DLOCK_WAIT_XACT : DLOCK_WAIT_SESSION);
	PG_TRY();
	{
		if (timeout_us >= 0)
			LockTimeout = (int) ((timeout_us + 999) / 1000);
		res = LockAcquire(tag, lockmode, !xact, false);
		LockTimeout = saved_timeout;

		/*
		 * Our deadline passed after the grant but before the lock manager
		 * disarmed the timer: the lock is ours, and the cancel the timer
		 * queued is not meant for anyone (unless the statement's own timeout
		 * has fired too).
		 */
		if (timeout_us >= 0 && get_timeout_indicator(LOCK_TIMEOUT, true))
		{
			QueryCancelPending = false;
			/* unless the statement's timeout has come too, now or just now */
			if (get_timeout_indicator(STATEMENT_TIMEOUT, false))
			{
				QueryCancelPending = true;
				InterruptPending = true;
			}
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		LockTimeout = saved_timeout;
		set_waiting(ref, name, mode, DLOCK_WAIT_NONE);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (timeout_us < 0 || edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
		{
			/*
			 * A cancel, a timeout or a signal can be handled right after the
			 * lock manager granted the lock (LockErrorCleanup keeps a grant
			 * it finds).  The caller sees an error, so it must not hold the
			 * lock: a transaction-scope lock goes with the abort, a session
			 * one would outlive it, unrecorded.
			 */
			if (!xact && LockHeldByMe(tag, lockmode))
				LockRelease(tag, lockmode, true);
			FreeErrorData(edata);
			PG_RE_THROW();
		}
		FreeErrorData(edata);
		FlushErrorState();

		/*
		 * Our deadline, and the statement's came too: the lock manager
		 * reports only the earlier (ours, on a tie) and clears both, and
		 * returning false would let the statement run on without its
		 * statement_timeout.
		 */
		if (stmt_armed && GetCurrentTimestamp() >= stmt_deadline)
		{
			if (!xact && LockHeldByMe(tag, lockmode))
				LockRelease(tag, lockmode, true);
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceling statement due to statement timeout")));
		}

		/*
		 * Our deadline.  The lock manager has already taken us out of the
		 * queue (LockErrorCleanup); if it granted the lock in that same
		 * instant, the lock is ours, and we say so.
		 */
		res = LockHeldByMe(tag, lockmode) ? LOCKACQUIRE_OK : LOCKACQUIRE_NOT_AVAIL;
	}
	PG_END_TRY();

	return res;
}

static void
require_preload(const char *what)
{
	if (dlock_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s need dlock in shared_preload_libraries", what),
				 errhint("Add dlock to shared_preload_libraries in postgresql.conf and restart the server.")));
}

static int64
lease_arg(FunctionCallInfo fcinfo, int argno)
{
	int64		lease_us = dlock_interval_arg(fcinfo, argno, "lease");

	if (lease_us < 0)
		return -1;
	require_preload("leases");
	if (lease_us < DLOCK_MIN_LEASE_US)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be at least %d milliseconds",
						(int) (DLOCK_MIN_LEASE_US / 1000)),
				 errdetail("The lease reaper does not enforce shorter leases.")));
	/* with a day to spare, so that adding it later cannot overflow */
	(void) dlock_lease_end(GetCurrentTimestamp() + USECS_PER_DAY, lease_us);
	return lease_us;
}

/* The error for a hold whose lease has run out: it is being taken away. */
static void
lease_expired(const char *name, TimestampTz expired, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("%slease of lock \"%s\" expired at %s",
					what, name, timestamptz_to_str(expired)),
			 errdetail("The lock is being taken away from this session.")));
}

/*
 * All four acquire functions:
 *   dlock_try[_xact](name, shared, lease)
 *   dlock_lock[_xact](name, timeout, shared, lease)
 */
static bool
acquire(FunctionCallInfo fcinfo, bool xact, bool can_wait)
{
	DlockName	name;
	int			arg = 1;
	int64		timeout_us = 0;
	bool		shared;
	int64		lease_us;
	uint8		mode;
	LOCKMODE	lockmode;
	LOCKTAG		tag;
	int			ref;
	LockAcquireResult res;

	dlock_name_arg(fcinfo, 0, &name);
	if (can_wait)
	{
		timeout_us = dlock_interval_arg(fcinfo, arg++, "timeout");
		if (timeout_us > (int64) INT_MAX * 1000)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("timeout is out of range"),
					 errdetail("The longest timeout is %d milliseconds (about 24 days); NULL waits without a limit.",
							   INT_MAX)));
	}
	shared = dlock_bool_arg(fcinfo, arg++, "shared");
	lease_us = lease_arg(fcinfo, arg++);

	backend_init();
	mode = shared ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
	lockmode = DlockLockMode(mode);
	ref = entry_for(&name, mode, lease_us >= 0);
	if (xact)
		reserve_xact_hold();

	dlock_set_locktag(&tag, name.key);
	/* a hold whose lease ran out: taking it again must not bring it back */
	if (lease_ran_out(entry_at(ref)))
		lease_expired(display_name(&name), entry_at(ref)->lease_expires, "");
	res = LockAcquire(&tag, lockmode, !xact, true);
	if (res == LOCKACQUIRE_NOT_AVAIL)
	{
		forget_stale_session_hold(ref);
		if (!can_wait || timeout_us == 0)
			return false;
		res = wait_for_lock(&tag, lockmode, xact, timeout_us, ref, &name, mode);
		if (res == LOCKACQUIRE_NOT_AVAIL)
			return false;
	}
	record_grant(ref, &name, mode, xact, res == LOCKACQUIRE_OK, lease_us);
	return true;
}

Datum
dlock_try(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, false, false));
}

Datum
dlock_lock(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, false, true));
}

Datum
dlock_try_xact(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, true, false));
}

Datum
dlock_lock_xact(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, true, true));
}

/* Remember a release of a hold whose lease has run out (see above). */
static void
note_release(const DlockEntry *e)
{
	if (e->lease_expires == 0 || released_expired_at != 0 ||
		e->lease_expires > GetCurrentTimestamp())
		return;
	released_expired_at = e->lease_expires;
	memcpy(released_expired_name, e->name, e->namelen);
	released_expired_name[e->namelen] = '\0';
}

/* dlock_unlock(name, shared): like pg_advisory_unlock, session scope only */
Datum
dlock_unlock(PG_FUNCTION_ARGS)
{
	DlockName	name;
	uint8		mode;
	LOCKTAG		tag;
	int			ref;
	bool		released;

	dlock_name_arg(fcinfo, 0, &name);
	mode = dlock_bool_arg(fcinfo, 1, "shared") ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
	backend_init();

	dlock_set_locktag(&tag, name.key);
	released = LockRelease(&tag, DlockLockMode(mode), true);
	ref = find_entry(name.key, mode);
	if (ref >= 0)
	{
		DlockEntry *e = entry_at(ref);

		if (released)
			note_release(e);
		change_begin(ref);
		if (!released)
			e->nsession = 0;	/* stale: not held at session level */
		else if (e->nsession > 0)
			e->nsession--;
		entry_free_if_unused(ref);
		change_end(ref);
	}
	PG_RETURN_BOOL(released);
}

/* dlock_unlock_all(): every session-scope dlock lock; returns how many */
Datum
dlock_unlock_all(PG_FUNCTION_ARGS)
{
	int			count = 0;
	int			n;
	int			ref;

	(void) fcinfo;
	backend_init();
	n = my_cap + n_overflow;
	for (ref = 0; ref < n; ref++)
	{
		DlockEntry *e = entry_at(ref);
		LOCKTAG		tag;
		bool		released = false;

		if (ref < my_cap && ref >= my_slot->nused)
		{
			ref = my_cap - 1;	/* the rest of the slot is unused */
			continue;
		}
		if (!e->inuse || e->nsession == 0)
			continue;
		dlock_set_locktag(&tag, e->key);
		if (!LockHeldByMe(&tag, DlockLockMode(e->mode)))
		{
			forget_stale_session_hold(ref);
			continue;
		}
		note_release(e);
		while (e->nsession > 0)
		{
			if (!LockRelease(&tag, DlockLockMode(e->mode), true))
				break;
			released = true;
			change_begin(ref);
			e->nsession--;
			change_end(ref);
		}
		if (released)
			count++;
		change_begin(ref);
		e->nsession = 0;
		entry_free_if_unused(ref);
		change_end(ref);
	}
	PG_RETURN_INT32(count);
}

/*
 * This session's live entries for name, exclusive first.  An entry whose
 * lock the lock manager no longer has is stale and is dropped here.
 */
static int
held_entries(const DlockName *name, int refs[2])
{
	int			n = 0;
	uint8		mode;
	LOCKTAG		tag;

	dlock_set_locktag(&tag, name->key);
	for (mode = DLOCK_EXCLUSIVE; mode <= DLOCK_SHARED; mode++)
	{
		int			ref = find_entry(name->key, mode);
		DlockEntry *e;

		if (ref < 0)
			continue;
		e = entry_at(ref);
		if (e->nsession + e->nxact == 0)
			continue;
		if (!LockHeldByMe(&tag, DlockLockMode(mode)))
		{
			forget_stale_session_hold(ref);
			continue;
		}
		refs[n++] = ref;
	}
	return n;
}

static void
not_held(const DlockName *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("lock \"%s\" is not held by this session", display_name(name))));
}

/* dlock_renew(name, lease): push the lease of this session's hold out */
Datum
dlock_renew(PG_FUNCTION_ARGS)
{
	DlockName	name;
	int64		lease_us;
	int			refs[2];
	int			n;
	int			i;
	TimestampTz now;
	TimestampTz expires = 0;
	TimestampTz old_expires[2];
	int64		old_us[2];

	dlock_name_arg(fcinfo, 0, &name);
	lease_us = lease_arg(fcinfo, 1);
	require_preload("leases");
	backend_init();

	n = held_entries(&name, refs);
	if (n == 0)
		not_held(&name);
	now = GetCurrentTimestamp();
	for (i = 0; i < n; i++)
	{
		DlockEntry *e = entry_at(refs[i]);

		if (e->lease_expires != 0 && e->lease_expires <= now)
			lease_expired(display_name(&name), e->lease_expires, "");
		if (lease_us < 0 && e->lease_us == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock \"%s\" has no lease to renew", display_name(&name)),
					 errhint("Pass a lease, as in dlock_renew('%s', '30s').", display_name(&name))));
		if (refs[i] >= my_cap)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("cannot give lock \"%s\" a lease: it is held beyond dlock.max_locks_per_session (%d)",
							display_name(&name), my_cap)));
	}
	for (i = 0; i < n; i++)
	{
		DlockEntry *e = entry_at(refs[i]);
		int64		len = lease_us >= 0 ? lease_us : e->lease_us;

		old_expires[i] = e->lease_expires;
		old_us[i] = e->lease_us;
		expires = dlock_lease_end(now, len);
		change_begin(refs[i]);
		e->lease_us = len;
		e->lease_expires = expires;
		change_end(refs[i]);
	}

	/*
	 * If an old lease ran out while we were at it, the reaper may have seen
	 * it expired and be ending this session already: put it back and fail,
	 * so that the caller is never told yes while being taken away.
	 */
	now = GetCurrentTimestamp();
	for (i = 0; i < n; i++)
		if (old_expires[i] != 0 && old_expires[i] <= now)
		{
			for (int j = 0; j < n; j++)
			{
				DlockEntry *e = entry_at(refs[j]);

				change_begin(refs[j]);
				e->lease_us = old_us[j];
				e->lease_expires = old_expires[j];
				change_end(refs[j]);
			}
			wake_reaper(old_expires[i]);
			lease_expired(display_name(&name), old_expires[i], "");
		}
	wake_reaper(expires);
	PG_RETURN_TIMESTAMPTZ(expires);
}

/* dlock_token(name): the fencing token of this session's hold of name */
Datum
dlock_token(PG_FUNCTION_ARGS)
{
	DlockName	name;
	int			refs[2];
	DlockEntry *e;

	dlock_name_arg(fcinfo, 0, &name);
	require_preload("fencing tokens");
	backend_init();
	if (held_entries(&name, refs) == 0)
		not_held(&name);
	e = entry_at(refs[0]);
	if (e->token == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lock \"%s\" has no fencing token", display_name(&name)),
				 errdetail("dlock could not reserve tokens in \"%s\"; the server log says why.",
						   DLOCK_TOKEN_FILE)));
	PG_RETURN_INT64(e->token);
}

/* ---- transaction ends ---- */

static void
drop_xact_hold(int i)
{
	int			ref = xact_holds[i].ref;
	DlockEntry *e = entry_at(ref);

	change_begin(ref);
	if (e->nxact > 0)
		e->nxact--;
	entry_free_if_unused(ref);
	change_end(ref);
	xact_holds[i] = xact_holds[--n_xact_holds];
}

/*
 * At commit: no hold of this session may have a lease that has run out.  The
 * reaper is ending this session or transaction, and a stale holder must not
 * commit anything meanwhile, however late the reaper is.
 */
static void
refuse_commit_after_expiry(void)
{
	int			i;

	if (released_expired_at != 0)
		lease_expired(pg_any_to_server(released_expired_name,
									   strlen(released_expired_name), PG_UTF8),
					  released_expired_at, "cannot commit: the ");
	if (my_slot == NULL)
		return;
	for (i = 0; i < my_slot->nused; i++)
	{
		DlockEntry *e = &my_slot->entries[i];

		if (lease_ran_out(e))
			lease_expired(pg_any_to_server(pnstrdup(e->name, e->namelen), e->namelen, PG_UTF8),
						  e->lease_expires, "cannot commit: the ");
	}
}

static void
xact_callback(XactEvent event, void *arg)
{
	int			i;

	(void) arg;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			refuse_commit_after_expiry();
			break;
		case XACT_EVENT_PRE_PREPARE:
			refuse_commit_after_expiry();
			for (i = 0; i < n_xact_holds; i++)
				if (entry_at(xact_holds[i].ref)->lease_expires != 0)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot PREPARE a transaction that holds a dlock lock with a lease"),
							 errdetail("A prepared transaction has no session the lease reaper could end.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			released_expired_at = 0;
			while (n_xact_holds > 0)
				drop_xact_hold(n_xact_holds - 1);
			break;
		default:
			break;
	}
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	int			i;

	(void) arg;
	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		/* the lock manager hands the locks to the parent; so do we */
		for (i = 0; i < n_xact_holds; i++)
			if (xact_holds[i].subid == mySubid)
				xact_holds[i].subid = parentSubid;
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		/* the lock manager releases the locks of the subtransaction */
		for (i = n_xact_holds - 1; i >= 0; i--)
			if (xact_holds[i].subid == mySubid)
				drop_xact_hold(i);
	}
}
