/*
 * locks.c: taking, waiting for and releasing named locks (the SQL entry
 * points dlock_try, dlock_lock, their _xact forms, dlock_unlock and
 * dlock_unlock_all).
 *
 * Each call hashes the name to a key and goes straight to the lock manager
 * (LockAcquire / LockRelease on the advisory tag of that key), exactly like
 * pg_advisory_lock(bigint).  Around that, the backend keeps its bookkeeping
 * of what it holds, by (key, mode), in its entries (slots.c).
 *
 * Invariant: the bookkeeping never decides anything; whether a lock is held
 * is the lock manager's answer.  Entries are written only after the lock
 * manager said yes, with everything that could fail (allocation, argument
 * checks, room for a lease) done before asking, so an error never leaves
 * half a record.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "dlock.h"

PG_FUNCTION_INFO_V1(dlock_try);
PG_FUNCTION_INFO_V1(dlock_lock);
PG_FUNCTION_INFO_V1(dlock_try_xact);
PG_FUNCTION_INFO_V1(dlock_lock_xact);
PG_FUNCTION_INFO_V1(dlock_unlock);
PG_FUNCTION_INFO_V1(dlock_unlock_all);

char *
dlock_display_name(const DlockName *name)
{
	return text_to_cstring(name->arg);
}

void
dlock_not_held(const DlockName *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("lock \"%s\" is not held by this session", dlock_display_name(name))));
}

/*
 * On a hot standby, a lock excludes only the standby's own sessions: nobody
 * who takes it on the primary.  Refused unless dlock.allow_standby_locks.
 */
static void
refuse_on_standby(const DlockName *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
			 errmsg("cannot acquire lock \"%s\" during recovery", dlock_display_name(name)),
			 errdetail("This server is a standby: a lock taken here does not exclude sessions on the primary."),
			 errhint("Take the lock on the primary, or set \"dlock.allow_standby_locks\" to on for locks that exclude only other sessions of this standby.")));
}

/*
 * Record a grant.  fresh: the lock manager granted a new hold (not one this
 * backend already had in this mode), so whatever the entry says is stale.
 */
static void
record_grant(int ref, const DlockName *name, uint8 mode, bool xact, bool fresh,
			 int64 lease_us)
{
	DlockEntry *e = dlock_entry_at(ref);
	TimestampTz expires = 0;
	bool		start = fresh || !e->inuse || (e->nsession == 0 && e->nxact == 0);
	int64		token = 0;

	/* dlock_lease_arg() checked that this cannot overflow */
	if (lease_us >= 0)
		expires = GetCurrentTimestamp() + lease_us;
	/* before the change window: it may write the token file */
	if (start)
		token = dlock_next_token();
	dlock_change_begin(ref);
	if (start)
	{
		dlock_entry_start(ref, name, mode);
		e->token = token;
		/* its end is counted if its start is (dlock.track_stats may change) */
		e->counted = dlock_stats_tracking();
	}
	e->waiting = DLOCK_WAIT_NONE;
	if (xact)
	{
		e->nxact++;
		dlock_add_xact_hold(ref);
	}
	else
		e->nsession++;
	if (lease_us >= 0)
	{
		e->lease_us = lease_us;
		e->lease_expires = expires;
	}
	dlock_change_end(ref);
	if (expires != 0)
		dlock_wake_reaper(expires);
}

static void
set_waiting(int ref, const DlockName *name, uint8 mode, uint8 what)
{
	DlockEntry *e = dlock_entry_at(ref);

	dlock_change_begin(ref);
	if (what != DLOCK_WAIT_NONE && !e->inuse)
		dlock_entry_start(ref, name, mode);
	e->waiting = what;
	if (what == DLOCK_WAIT_NONE)
		dlock_entry_free_if_unused(ref);
	dlock_change_end(ref);
}

/* Release a session lock the caller is not to keep, if the lock manager has it. */
static void
release_if_held(const LOCKTAG *tag, LOCKMODE lockmode, bool xact)
{
	if (!xact && dlock_lock_held_by_me(tag, lockmode))
		LockRelease(tag, lockmode, true);
}

/* Count a wait that ended without the lock (event -1: not counted). */
static void
count_wait_end(const DlockName *name, uint8 mode, int event, TimestampTz start)
{
	if (event >= 0)
		dlock_stats_count(MyDatabaseId, name->key, mode, name->utf8, name->len,
						  (DlockStatEvent) event, 0, GetCurrentTimestamp() - start, 0);
}

/*
 * Wait in the lock manager's queue.  With a timeout, lock_timeout is set to
 * it for this one wait and its expiry is turned into "not available"; any
 * other error (deadlock, cancel, statement_timeout) goes to the caller.
 *
 * Why catching the lock-timeout error here, without a subtransaction, is
 * safe on 15, 17 and 18 alike: the error is raised by ProcessInterrupts
 * (the CHECK_FOR_INTERRUPTS in ProcSleep's latch wait), and only after
 * LockErrorCleanup has run.  That took this process off the lock's wait
 * queue under the partition lock (or kept a grant that raced in), cleared
 * proc.c's lockAwaited (18: ResetAwaitedLock; on 15 and 17 lock.c's
 * awaitedLock stays set but is only read after the next WaitOnLock sets it)
 * and disabled the lock timer, and it released the partition
 * lock again.  While ProcSleep waits it holds no LWLock, buffer pin or other
 * resource that an abort would have to give back, and WaitOnLock's own
 * PG_CATCH only resets the process title before re-throwing.  What is left
 * is a LOCALLOCK with no holds, which the next LockAcquire of the same tag
 * reuses and LockReleaseAll drops at the end of the transaction: the state
 * a savepoint rollback after a lock timeout leaves as well.  The error data
 * itself is copied and flushed in the caller's memory context.
 */
static LockAcquireResult
wait_for_lock(const LOCKTAG *tag, LOCKMODE lockmode, bool xact, int64 timeout_us,
			  int ref, const DlockName *name, uint8 mode, TimestampTz start)
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
			release_if_held(tag, lockmode, xact);
			count_wait_end(name, mode, dlock_stat_wait_error(edata->sqlerrcode), start);
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
			release_if_held(tag, lockmode, xact);
			count_wait_end(name, mode, DLOCK_STAT_CANCEL, start);
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceling statement due to statement timeout")));
		}

		/*
		 * Our deadline.  The lock manager has already taken us out of the
		 * queue (LockErrorCleanup); if it granted the lock in that same
		 * instant, the lock is ours, and we say so.
		 */
		res = dlock_lock_held_by_me(tag, lockmode) ? LOCKACQUIRE_OK : LOCKACQUIRE_NOT_AVAIL;
	}
	PG_END_TRY();

	return res;
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
	int64		waited_us = -1;

	dlock_name_arg(fcinfo, 0, &name);
	if (can_wait)
	{
		timeout_us = dlock_timeout_arg(fcinfo, arg++);
	}
	shared = dlock_bool_arg(fcinfo, arg++, "shared");
	lease_us = dlock_lease_arg(fcinfo, arg++);
	if (unlikely(RecoveryInProgress()) && !dlock_allow_standby_locks)
		refuse_on_standby(&name);

	dlock_backend_init();
	mode = shared ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
	lockmode = DlockLockMode(mode);
	ref = dlock_entry_for(&name, mode, lease_us >= 0);
	if (xact)
		dlock_reserve_xact_hold();

	dlock_set_locktag(&tag, name.key);
	/* a hold whose lease ran out: taking it again must not bring it back */
	if (dlock_lease_ran_out(dlock_entry_at(ref)))
		dlock_lease_expired(dlock_display_name(&name), dlock_entry_at(ref)->lease_expires);
	res = LockAcquire(&tag, lockmode, !xact, true);
	if (res == LOCKACQUIRE_NOT_AVAIL)
	{
		TimestampTz start;

		dlock_forget_stale_session_hold(ref);
		if (!can_wait || timeout_us == 0)
		{
			dlock_stats_count(MyDatabaseId, name.key, mode, name.utf8, name.len,
							  DLOCK_STAT_BUSY, 0, 0, 0);
			return false;
		}
		start = GetCurrentTimestamp();
		res = wait_for_lock(&tag, lockmode, xact, timeout_us, ref, &name, mode, start);
		if (res == LOCKACQUIRE_NOT_AVAIL)
		{
			count_wait_end(&name, mode, DLOCK_STAT_TIMEOUT, start);
			return false;
		}
		waited_us = Max(GetCurrentTimestamp() - start, 0);
	}
	record_grant(ref, &name, mode, xact, res == LOCKACQUIRE_OK, lease_us);
	/* a new hold started at its grant: that is the time of this acquisition */
	dlock_stats_count(MyDatabaseId, name.key, mode, name.utf8, name.len,
					  DLOCK_STAT_ACQUIRED, xact ? DLOCK_SCOPE_XACT : DLOCK_SCOPE_SESSION,
					  waited_us, res == LOCKACQUIRE_OK ? dlock_entry_at(ref)->since : 0);
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
	dlock_backend_init();

	dlock_set_locktag(&tag, name.key);
	released = LockRelease(&tag, DlockLockMode(mode), true);
	ref = dlock_find_entry(name.key, mode);
	if (ref >= 0)
	{
		DlockEntry *e = dlock_entry_at(ref);

		if (released)
			dlock_note_release(e);
		dlock_change_begin(ref);
		if (!released)
			e->nsession = 0;	/* stale: not held at session level */
		else if (e->nsession > 0)
			e->nsession--;
		dlock_entry_free_if_unused(ref);
		dlock_change_end(ref);
		if (released && !e->inuse)
			dlock_stats_hold_ended(e);
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

	dlock_backend_init();
	n = dlock_nrefs();
	for (ref = 0; ref < n; ref++)
	{
		DlockEntry *e = dlock_entry_at(ref);
		LOCKTAG		tag;
		bool		released = false;

		if (ref < dlock_my_cap && ref >= dlock_my_slot->nused)
		{
			ref = dlock_my_cap - 1; /* the rest of the slot is unused */
			continue;
		}
		if (!e->inuse || e->nsession == 0)
			continue;
		if (!dlock_entry_lock_held(e))
		{
			dlock_forget_stale_session_hold(ref);
			continue;
		}
		dlock_note_release(e);
		dlock_set_locktag(&tag, e->key);
		while (e->nsession > 0)
		{
			if (!LockRelease(&tag, DlockLockMode(e->mode), true))
				break;
			released = true;
			dlock_change_begin(ref);
			e->nsession--;
			dlock_change_end(ref);
		}
		if (released)
			count++;
		dlock_change_begin(ref);
		e->nsession = 0;
		dlock_entry_free_if_unused(ref);
		dlock_change_end(ref);
		if (released && !e->inuse)
			dlock_stats_hold_ended(e);
	}
	PG_RETURN_INT32(count);
}

/*
 * This session's live entries for name, exclusive first.  An entry whose
 * lock the lock manager no longer has is stale and is dropped here.
 */
int
dlock_held_entries(const DlockName *name, int refs[2])
{
	int			n = 0;
	uint8		mode;

	for (mode = DLOCK_EXCLUSIVE; mode <= DLOCK_SHARED; mode++)
	{
		int			ref = dlock_find_entry(name->key, mode);
		DlockEntry *e;

		if (ref < 0)
			continue;
		e = dlock_entry_at(ref);
		if (e->nsession + e->nxact == 0)
			continue;
		if (!dlock_entry_lock_held(e))
		{
			dlock_forget_stale_session_hold(ref);
			continue;
		}
		refs[n++] = ref;
	}
	return n;
}
