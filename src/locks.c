/*
 * locks.c: taking and releasing one named lock, the fast path (the SQL
 * entry points dlock_try, dlock_lock, their _xact forms and dlock_unlock).
 * Waiting is lock_wait.c's; several names at once, and dlock_unlock_all,
 * locks_many.c's.
 *
 * Each call hashes the name to a key and goes straight to the lock manager
 * (LockAcquire / LockRelease on the advisory tag of that key), exactly like
 * pg_advisory_lock(bigint).  Around that, the backend keeps its bookkeeping
 * of what it holds, by (key, mode), in its entries (entries.c).
 *
 * Invariant: the bookkeeping never decides anything; whether a lock is held
 * is the lock manager's answer.  Entries are written only after the lock
 * manager said yes, with everything that could fail (allocation, argument
 * checks, room for a lease) done before asking, so an error never leaves
 * half a record.  Between the grant and the record, whatever can still fail
 * (drawing a token, a cancel or terminate that came meanwhile) runs where an
 * error gives this call's grant back before it reaches the caller: a caller
 * told "error" holds nothing it was not told of.
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "confirm.h"
#include "dlock.h"
#include "entries.h"
#include "leases.h"
#include "locks.h"
#include "name.h"
#include "notify.h"
#include "semaphore.h"
#include "stats.h"
#include "tokens.h"

PG_FUNCTION_INFO_V1(dlock_try);
PG_FUNCTION_INFO_V1(dlock_lock);
PG_FUNCTION_INFO_V1(dlock_try_xact);
PG_FUNCTION_INFO_V1(dlock_lock_xact);
/* the 1.5 SQL's symbols (its _ms arguments); the 1.4 names serve the 1.4 SQL */
PG_FUNCTION_INFO_V1(dlock_try_1_5);
PG_FUNCTION_INFO_V1(dlock_lock_1_5);
PG_FUNCTION_INFO_V1(dlock_try_xact_1_5);
PG_FUNCTION_INFO_V1(dlock_lock_xact_1_5);
/* the positional forms for clients (1.6): every argument, durations in ms */
PG_FUNCTION_INFO_V1(dlock_try_ms);
PG_FUNCTION_INFO_V1(dlock_lock_ms);
PG_FUNCTION_INFO_V1(dlock_try_xact_ms);
PG_FUNCTION_INFO_V1(dlock_lock_xact_ms);
PG_FUNCTION_INFO_V1(dlock_unlock);

bool		dlock_allow_standby_locks = false;

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
 * Code running as another role (name.h dlock_foreign_code) and a lease on
 * one hold: a lease covers every hold of its (name, mode), so another
 * role's hold must never come under one, where its release would be up to
 * code this session does not run.
 */
static void
refuse_foreign_with_lease(const DlockName *name, bool lease_given)
{
	if (lease_given)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot give lock \"%s\" a lease", dlock_display_name(name)),
				 errdetail("Code running as another role in this session (a SECURITY DEFINER function, or a security-restricted operation) holds the lock too; the lease would end the session over that hold."),
				 errhint("Release the lock until this session no longer holds it, then take it with the lease.")));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("cannot take lock \"%s\" from code running as another role in this session",
					dlock_display_name(name)),
			 errdetail("This session holds the lock with a lease; a hold taken here would keep it, and the session would be ended when the lease runs out."),
			 errhint("Take the lock in code that runs as the session's user, or use pg_advisory_lock.")));
}

/*
 * This session holds permit held of the name, which is not what the call
 * asks for (permits: the call's N; 0: the name's own lock).
 */
static void
refuse_other_permit(const DlockName *name, int held, int permits)
{
	if (permits == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lock \"%s\" is held by this session as permit %d of a semaphore",
						dlock_display_name(name), held),
				 errdetail("A call without permits asks for the name's own lock, and a session holds one permit of a name at most."),
				 errhint("Take it again with permits => %d or more, or release the permit first (dlock_unlock).",
						 held)));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("lock \"%s\" is held by this session as permit %d, not one of permits 1 to %d",
					dlock_display_name(name), held, permits),
			 errdetail("A session holds one permit of a name at most."),
			 errhint("Take it again with permits => %d or more, or release the permit first (dlock_unlock).",
					 held)));
}

/*
 * Does this grant start a new hold?  fresh: the lock manager granted a new
 * hold (not one this backend already had in this mode), so whatever the
 * entry says is stale.
 */
static bool
grant_starts_hold(const DlockEntry *e, bool fresh)
{
	return fresh || !e->inuse || (e->nsession == 0 && e->nxact == 0);
}

/*
 * Record a grant; token: the new hold's (drawn by the caller when
 * grant_starts_hold); info: the caller's, if it gave one (else a new hold
 * has none, and a hold taken again keeps its own).  Cannot fail.
 */
static pg_attribute_always_inline void
record_grant(int ref, DlockEntry *e, const DlockName *name, uint8 mode, bool xact, bool start,
			 int64 token, int64 lease_us, const DlockInfo *info, int permit, int permits,
			 bool foreign, TimestampTz at, bool precise, bool own_release)
{
	TimestampTz expires = 0;

	/* at: the precise clock with a lease; dlock_lease_arg() checked the sum */
	if (lease_us >= 0)
		expires = at + lease_us;
	dlock_change_begin(ref);
	if (start)
	{
		dlock_entry_start(ref, name, mode, at);
		e->token = token;
		e->permit = (uint16) permit;
		e->permits = (uint16) permits;
		e->precise = precise;
		/* its end is counted if its start is (dlock.track_stats may change) */
		e->counted = dlock_stats_tracking();
	}
	e->waiting = DLOCK_WAIT_NONE;
	if (xact)
	{
		e->nxact++;
		dlock_xact_hold_add(ref, own_release);
	}
	else
		e->nsession++;
	if (lease_us >= 0)
	{
		e->lease_us = lease_us;
		e->lease_expires = expires;
	}
	dlock_entry_set_info(e, info);
	if (unlikely(foreign))
		e->foreign = 1;
	dlock_change_end(ref);
	if (expires != 0)
		dlock_lease_note(expires);
	if (expires != 0)
		dlock_lease_wake_reaper(expires);
}
/*
 * The steps between the lock manager's grant and the record that can still
 * fail: a cancel or terminate that came with the grant, a lease of this
 * session's that ran out during the wait, drawing the new hold's token
 * (taken: one drawn already, for dlock_token_next_finish, or -1), and the
 * synchronous standbys' confirmation (dlock.synchronous_grants).  If one
 * fails, this call's grant is given back before the error reaches the
 * caller.  Returns the token (0 when the hold is not new).  (A function of
 * its own, so that nothing in the caller is clobbered.)
 */
static pg_noinline int64
after_grant_guarded(const LOCKTAG *tag, LOCKMODE lockmode, bool xact, int ref,
					const DlockName *name, uint8 mode, bool start, bool marker, int64 taken,
					TimestampTz confirm_by)
{
	volatile int64 token = 0;
	volatile bool took_marker = false;

	PG_TRY();
	{
		DLOCK_FAULT("lock.granted");
		/* a lease of this session's that ran out while we waited */
		if (unlikely(dlock_lease_min != 0))
			dlock_lease_refuse_after_expiry();
		if (start)
			token = dlock_token_next_finish(taken);
		/* a session hold with a lease: its marker (dlock.h) */
		if (marker && !dlock_marker_held(name->key, mode))
		{
			dlock_marker_take(name->key, mode);
			took_marker = true;
		}
		/* a "yes" waits for the synchronous standbys (confirm.c) */
		if (confirm_by >= 0)
			dlock_confirm_grant(name, 1, confirm_by);
		DLOCK_FAULT("lock.ready");
		/* a cancel or terminate that came meanwhile: this call fails */
		CHECK_FOR_INTERRUPTS();
	}
	PG_CATCH();
	{
		/* one grant of this call: the count the lock manager added */
		LockRelease(tag, lockmode, !xact);
		dlock_permit_tag_released(tag);
		if (took_marker)
			dlock_marker_drop(name->key, mode);
		dlock_set_waiting(ref, name, mode, DLOCK_WAIT_NONE, NULL);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return token;
}

/*
 * after_grant_guarded where nothing can fail, the usual case: no interrupt
 * pending, no lease of this session's, no marker to take, no grant to
 * confirm (dlock.synchronous_grants), and a token below the reserved
 * ceiling; then no PG_TRY is needed.  (The fault build
 * always takes the guarded way, where its fault points are.)
 */
static pg_attribute_always_inline int64
after_grant(const LOCKTAG *tag, LOCKMODE lockmode, bool xact, int ref,
			const DlockName *name, uint8 mode, bool start, bool marker, TimestampTz confirm_by)
{
	int64		taken = -1;

#ifndef DLOCK_FAULTS
	if (likely(!InterruptPending && dlock_lease_min == 0 && !marker && confirm_by < 0))
	{
		if (!start)
			return 0;
		if (likely(dlock_token_next_nofail(&taken)))
			return taken;
	}
#endif
	return after_grant_guarded(tag, lockmode, xact, ref, name, mode, start, marker, taken, confirm_by);
}
static const DlockInfo no_info = {false, NULL, 0};

/*
 * A grant with notify => true (1.7): the hold's events are announced from
 * now on, a new hold's grant at once.
 */
static pg_noinline void
announce_grant(int ref, bool start, bool xact)
{
	DlockEntry *e = dlock_entry_at(ref);

	dlock_change_begin(ref);
	e->notify = 1;
	dlock_change_end(ref);
	if (start)
		dlock_announce_entry(e, DLOCK_EV_GRANTED, xact ? DLOCK_EV_XACT : DLOCK_EV_SESSION);
}

static pg_attribute_always_inline void
acquire_args(FunctionCallInfo fcinfo, bool can_wait, bool ms, AcquireArgs *a)
{
	int			arg = 1;

	a->timeout_us = 0;
	a->defer = false;
	a->notify = false;
	a->own_release = false;
	a->waited_before_us = -1;
	/* the one-argument forms: a lock, exclusive, no lease, no info */
	if (likely(!ms && PG_NARGS() == 1))
	{
		if (can_wait)
			a->timeout_us = -1;
		a->mode = DLOCK_EXCLUSIVE;
		a->lease_us = -1;
		a->info = no_info;
		a->permits = 0;
		return;
	}
	if (ms)
	{
		/* (name, [timeout_ms,] shared, lease_ms, info, permits); NULL: not given */
		if (can_wait)
			a->timeout_us = dlock_timeout_arg(fcinfo, DLOCK_NO_ARG, arg++, -1);
		a->mode = dlock_bool_arg(fcinfo, arg++, "shared") ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
		a->lease_us = dlock_lease_arg(fcinfo, DLOCK_NO_ARG, arg++);
		dlock_entry_info_arg(fcinfo, arg++, &a->info);
		a->permits = dlock_permits_arg(fcinfo, arg, a->mode == DLOCK_SHARED);
	}
	else
	{
		if (can_wait)
			a->timeout_us = dlock_timeout_arg(fcinfo, arg++, 4, -1);
		/* shared, or (1.7) the mode in words, the last argument */
		a->mode = dlock_mode_arg(fcinfo, arg++, can_wait ? 8 : 6);
		a->lease_us = dlock_lease_arg(fcinfo, arg, can_wait ? 5 : 3);
		dlock_entry_info_arg(fcinfo, can_wait ? 6 : 4, &a->info);
		a->permits = dlock_permits_arg(fcinfo, can_wait ? 7 : 5, a->mode == DLOCK_SHARED);
		if (unlikely(a->mode == DLOCK_UPDATE && a->permits > 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a semaphore's permits cannot be taken in update mode"),
					 errhint("Leave out \"permits\", or take a permit without a mode.")));
		/* (1.7) announce what happens to the hold: its last argument */
		a->notify = dlock_notify_arg(fcinfo, can_wait ? 9 : 7);
	}
	/* what can end this session, or speak for it: only from its own code */
	if (unlikely(a->lease_us >= 0 || a->info.given))
		dlock_check_own_session(a->lease_us >= 0);
}

/* acquire_args for the calls on several names (locks_many.c) */
void
dlock_acquire_args(FunctionCallInfo fcinfo, bool can_wait, AcquireArgs *a)
{
	acquire_args(fcinfo, can_wait, false, a);
}
/* Take one name as a asks (a->timeout_us: this name's); false if not granted. */
static pg_attribute_always_inline bool
acquire_name(const DlockName *namep, bool xact, bool can_wait, const AcquireArgs *a)
{
	DlockName	name = *namep;
	int64		timeout_us = a->timeout_us;
	int64		lease_us = a->defer ? -1 : a->lease_us;
	const DlockInfo *infop = a->defer ? &no_info : &a->info;
	uint8		mode = a->mode;
	LOCKMODE	lockmode;
	LOCKTAG		tag;
	int			ref;
	LockAcquireResult res;
	int64		waited_us = -1;
	bool		start_hold;
	bool		need_marker;
	DlockEntry *e;
	int64		token;
	int			permit;
	bool		live;
	TimestampTz confirm_by;
	bool		foreign = dlock_foreign_code();
	TimestampTz at;
	bool		precise;
	/* the lock manager's scope: a raise in a transaction takes a session lock */
	bool		lm_session = !xact || a->own_release;

	if (unlikely(RecoveryInProgress()) && !dlock_allow_standby_locks)
		refuse_on_standby(&name);

	dlock_backend_init();
	lockmode = DlockLockMode(mode);
	/* room for a lease or info, deferred or not, before anything is taken */
	ref = dlock_entry_for(&name, mode, a->lease_us >= 0 ? DLOCK_NEED_LEASE :
						  a->info.given ? DLOCK_NEED_INFO : DLOCK_NEED_NONE);
	/* (where it is stays put until the next dlock_entry_for) */
	e = dlock_entry_at(ref);
	if (xact)
		dlock_xact_hold_reserve();
	if (unlikely(e->lease_expires != 0))
		dlock_entry_drop_stale_session_slow(ref);
	/* a session past a lease takes nothing more (it is being ended) */
	if (unlikely(dlock_lease_min != 0))
		dlock_lease_refuse_after_expiry();

	/* a hold whose lease ran out: taking it again must not bring it back */
	if (dlock_lease_ran_out(e))
		dlock_lease_expired(dlock_display_name(&name), e->lease_expires);

	/*
	 * A name this session holds in this mode is taken again as it is held,
	 * where that is what the call asks for: a plain call re-enters the
	 * name's own lock (permit 1 is that lock), a call with permits => N a
	 * permit of 1..N (the name's own lock is permit 1).  A session holds one
	 * permit of a name at most, so a permit outside what the call asks for
	 * is an error, never a "yes" for something else.  What the entry says is
	 * believed only where the lock manager confirms it: a session hold
	 * released behind dlock's back (pg_advisory_unlock_all, DISCARD ALL) is
	 * forgotten first.  (A plain call on a plain entry asks the lock manager
	 * anyway: its answer tells a new hold from a re-entry.)
	 */
	live = e->inuse && (e->nsession > 0 || e->nxact > 0);
	if (unlikely(live && (e->permit != 0 || a->permits > 0)) && e->nxact == 0 &&
		!dlock_entry_lock_held(e))
	{
		dlock_entry_forget_stale(ref);
		live = false;
	}
	/* another role's hold never comes under a lease (refuse_foreign_with_lease) */
	if (unlikely(live && ((foreign && e->lease_expires != 0) ||
						  (a->lease_us >= 0 && e->foreign))))
		refuse_foreign_with_lease(&name, !foreign);
	permit = 0;
	if (unlikely(live && e->permit != 0))
	{
		permit = e->permit;
		if ((a->permits == 0 && permit > 1) || (a->permits > 0 && permit > a->permits))
			refuse_other_permit(&name, permit, a->permits);
	}
	else if (unlikely(a->permits > 0) && !live)
	{
		if (dlock_take_permit(&name, ref, xact, can_wait, a, &permit, &waited_us) ==
			LOCKACQUIRE_NOT_AVAIL)
			return false;
		dlock_set_permit_tag(&tag, MyDatabaseId, name.key, permit);
		res = LOCKACQUIRE_OK;
		goto granted;
	}
	if (likely(permit == 0))
		dlock_set_locktag(&tag, name.key);
	else
		dlock_set_permit_tag(&tag, MyDatabaseId, name.key, permit);
	res = LockAcquire(&tag, lockmode, lm_session, true);
	if (res == LOCKACQUIRE_NOT_AVAIL)
	{
		TimestampTz start;

		dlock_entry_forget_stale(ref);
		if (!can_wait || timeout_us == 0)
		{
			dlock_stats_count(MyDatabaseId, name.key, mode, name.utf8, name.len,
							  DLOCK_STAT_BUSY, 0, 0, 0);
			return false;
		}
		start = GetCurrentTimestamp();
		res = dlock_wait_for_lock(&tag, lockmode, xact, lm_session, timeout_us, ref, &name, mode, start,
							&a->info);
		if (res == LOCKACQUIRE_NOT_AVAIL)
		{
			dlock_count_wait_end(&name, mode, DLOCK_STAT_TIMEOUT, start);
			return false;
		}
		waited_us = Max(GetCurrentTimestamp() - start, 0);
	}
granted:
	start_hold = grant_starts_hold(e, res == LOCKACQUIRE_OK);
	/*
	 * With dlock.synchronous_grants, the grant is answered once the
	 * synchronous standbys confirm it (after_grant_guarded), within what is
	 * left of the call's timeout; several names confirm once, at the end
	 * (locks_many.c).
	 */
	confirm_by = -1;
	if (unlikely(dlock_synchronous_grants) && !a->defer)
		confirm_by = timeout_us > 0 ?
			dlock_confirm_deadline(GetCurrentTimestamp() + timeout_us - Max(waited_us, 0)) : 0;

	/*
	 * When a new hold began, and the time of this acquisition for the
	 * statistics: the cheap clock of the lock path (entries.h), or the
	 * precise time of the grant after a wait, or with a lease (which runs
	 * from it, and whose hold the reaper tells by it).  A re-entry without
	 * statistics needs no time.
	 */
	precise = waited_us >= 0 || a->lease_us >= 0;
	at = precise ? GetCurrentTimestamp() :
		(start_hold || dlock_stats_tracking()) ? dlock_hold_time() : 0;

	/*
	 * The lease marker (dlock.h) is held exactly while the entry has session
	 * holds and a lease, whichever call brought either.
	 */
	need_marker = ((start_hold ? 0 : e->nsession) + (xact ? 0 : 1)) > 0 &&
		(lease_us >= 0 || (!start_hold && e->lease_expires != 0));
	token = after_grant(&tag, lockmode, !lm_session, ref, &name, mode, start_hold, need_marker, confirm_by);
	/* a confirmed grant: its time (and its lease) is the answer's */
	if (unlikely(confirm_by >= 0) && precise)
		at = GetCurrentTimestamp();
	/* a new hold without one, where an old one left its marker */
	if (unlikely(start_hold && !need_marker && e->lease_expires != 0))
		dlock_marker_drop(name.key, mode);
	record_grant(ref, e, &name, mode, xact, start_hold, token, lease_us, infop, permit,
				 a->permits, foreign, at, precise, a->own_release);
	if (unlikely(a->notify))
		announce_grant(ref, start_hold, xact);
	if (dlock_stats_tracking())
		dlock_stats_acquired(name.key, mode, name.utf8, name.len,
							 xact ? DLOCK_SCOPE_XACT : DLOCK_SCOPE_SESSION,
							 unlikely(a->waited_before_us >= 0) ?
							 a->waited_before_us + Max(waited_us, 0) : waited_us, at);
	return true;
}

/*
 * Update mode (1.7, dlock.h): the name's update gate first, waiting for it
 * as for the name (the entry shows the wait), then the name's key in
 * ShareLock, within what is left of the timeout.  The gate is given back
 * with any failure to take the name, an error too: a caller told "no" or
 * "error" keeps nothing.
 */
static pg_noinline bool
acquire_update(const DlockName *name, bool xact, bool can_wait, const AcquireArgs *a)
{
	LOCKTAG		gate;
	LockAcquireResult res;
	AcquireArgs b = *a;
	volatile bool ok = false;

	if (unlikely(RecoveryInProgress()) && !dlock_allow_standby_locks)
		refuse_on_standby(name);
	dlock_backend_init();
	dlock_set_update_tag(&gate, MyDatabaseId, name->key);
	res = LockAcquire(&gate, DLOCK_UPDATE_MODE, !xact, true);
	if (res == LOCKACQUIRE_NOT_AVAIL)
	{
		TimestampTz start;
		int			ref;

		if (!can_wait || a->timeout_us == 0)
		{
			dlock_stats_count(MyDatabaseId, name->key, DLOCK_UPDATE, name->utf8, name->len,
							  DLOCK_STAT_BUSY, 0, 0, 0);
			return false;
		}
		ref = dlock_entry_for(name, DLOCK_UPDATE, a->lease_us >= 0 ? DLOCK_NEED_LEASE :
							  a->info.given ? DLOCK_NEED_INFO : DLOCK_NEED_NONE);
		/* an update hold of ours would have re-entered its gate: it is gone */
		dlock_entry_forget_stale(ref);
		start = GetCurrentTimestamp();
		res = dlock_wait_for_lock(&gate, DLOCK_UPDATE_MODE, xact, !xact, a->timeout_us, ref,
								  name, DLOCK_UPDATE, start, &a->info);
		if (res == LOCKACQUIRE_NOT_AVAIL)
		{
			dlock_count_wait_end(name, DLOCK_UPDATE, DLOCK_STAT_TIMEOUT, start);
			return false;
		}
		/* the gate is ours: the wait for the name, if any, shows itself */
		dlock_set_waiting(ref, name, DLOCK_UPDATE, DLOCK_WAIT_NONE, NULL);
		b.waited_before_us = Max(GetCurrentTimestamp() - start, 0);
		if (a->timeout_us > 0)
			b.timeout_us = Max(a->timeout_us - b.waited_before_us, 0);
	}
	PG_TRY();
	{
		DLOCK_FAULT("update.gate");
		ok = acquire_name(name, xact, can_wait, &b);
	}
	PG_CATCH();
	{
		LockRelease(&gate, DLOCK_UPDATE_MODE, !xact);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!ok)
		LockRelease(&gate, DLOCK_UPDATE_MODE, !xact);
	return ok;
}

/* acquire_name, or acquire_update in update mode */
static pg_attribute_always_inline bool
acquire_in_mode(const DlockName *name, bool xact, bool can_wait, const AcquireArgs *a)
{
	if (unlikely(a->mode == DLOCK_UPDATE))
		return acquire_update(name, xact, can_wait, a);
	return acquire_name(name, xact, can_wait, a);
}

/* acquire_in_mode for the calls on several names (locks_many.c) */
bool
dlock_acquire_one(const DlockName *name, bool xact, bool can_wait, const AcquireArgs *a)
{
	return acquire_in_mode(name, xact, can_wait, a);
}

/*
 * One name (the hot path: no allocation, one call into the lock manager);
 * ms: the arguments of the positional forms for clients (dlock_try_ms, ...).
 */
static pg_attribute_always_inline bool
acquire(FunctionCallInfo fcinfo, bool xact, bool can_wait, bool ms)
{
	DlockName	name;
	AcquireArgs a;

	dlock_name_arg(fcinfo, 0, &name);
	acquire_args(fcinfo, can_wait, ms, &a);
	return acquire_in_mode(&name, xact, can_wait, &a);
}

Datum
dlock_try(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, false, false, false));
}

Datum
dlock_lock(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, false, true, false));
}

Datum
dlock_try_xact(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, true, false, false));
}

Datum
dlock_lock_xact(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, true, true, false));
}

Datum
dlock_try_1_5(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, false, false, false));
}

Datum
dlock_lock_1_5(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, false, true, false));
}

Datum
dlock_try_xact_1_5(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, true, false, false));
}

Datum
dlock_lock_xact_1_5(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, true, true, false));
}

Datum
dlock_try_ms(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, false, false, true));
}

Datum
dlock_lock_ms(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, false, true, true));
}

Datum
dlock_try_xact_ms(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, true, false, true));
}

Datum
dlock_lock_xact_ms(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire(fcinfo, true, true, true));
}

/*
 * One session hold in update mode (dlock.h): its gate (false, with the lock
 * manager's WARNING in update's words, if the session holds none at
 * session level), then its RowShareLock on the key.  No raw call releases
 * one without the other.
 */
static pg_noinline bool
release_update(const LOCKTAG *tag)
{
	LOCKTAG		gate;

	dlock_set_update_tag(&gate, tag->locktag_field1,
						 (int64) (((uint64) tag->locktag_field2 << 32) | tag->locktag_field3));
	if (!dlock_lock_held_by_me(&gate, DLOCK_UPDATE_MODE))
	{
		/* as the lock manager says it, in the mode the caller gave */
		elog(WARNING, "you don't own a lock of type %s", "update");
		return false;
	}
	if (!LockRelease(&gate, DLOCK_UPDATE_MODE, true))
		return false;
	if (dlock_lock_held_by_me(tag, DlockLockMode(DLOCK_UPDATE)))
		LockRelease(tag, DlockLockMode(DLOCK_UPDATE), true);
	return true;
}

/*
 * Release one session hold of name in mode, as pg_advisory_unlock does
 * (false, with the lock manager's WARNING, if there is none).  Raises no
 * error: it also gives back what a call on several names took.
 */
static pg_attribute_always_inline bool
unlock_name(const DlockName *namep, uint8 mode)
{
	DlockName	name = *namep;
	LOCKTAG		tag;
	int			ref;
	DlockEntry *e;
	bool		released;

	/*
	 * A semaphore's permit, if the session holds the name as one; a permit
	 * the lock manager no longer has at session level (released behind
	 * dlock's back) is forgotten first, and the name's own lock released as
	 * pg_advisory_unlock would.
	 */
	ref = dlock_entry_find(name.key, mode);
	e = ref >= 0 ? dlock_entry_at(ref) : NULL;
	if (unlikely(e != NULL && e->permit != 0) && e->nsession > 0 && e->nxact == 0 &&
		!dlock_entry_lock_held(e))
	{
		dlock_entry_forget_stale(ref);
		ref = dlock_entry_find(name.key, mode);
		e = ref >= 0 ? dlock_entry_at(ref) : NULL;
	}
	if (likely(e == NULL || e->permit == 0))
		dlock_set_locktag(&tag, name.key);
	else
		dlock_set_permit_tag(&tag, MyDatabaseId, name.key, e->permit);
	/*
	 * The end of a hold taken with notify is announced while it is still
	 * held (notify.c), so that the next holder's grant is not announced
	 * first.
	 */
	if (unlikely(e != NULL && e->notify) && e->nsession == 1 && e->nxact == 0 &&
		dlock_entry_lock_held(e))
		dlock_announce_entry(e, DLOCK_EV_RELEASED, DLOCK_EV_SESSION);
	if (unlikely(e != NULL && e->nsession == 0 && e->nxact > 0))
	{
		/*
		 * The name held in this mode by the transaction only: its lock is
		 * not the session's to release (a raise's is a session lock that
		 * dlock gives back itself).  As the lock manager says it.
		 */
		elog(WARNING, "you don't own a lock of type %s",
			 mode == DLOCK_UPDATE ? "update" : GetLockmodeName(DEFAULT_LOCKMETHOD, DlockLockMode(mode)));
		released = false;
	}
	else if (likely(mode != DLOCK_UPDATE))
		released = LockRelease(&tag, DlockLockMode(mode), true);
	else if (e != NULL && e->nsession > 0)
		released = release_update(&tag);
	else
	{
		/* no session hold: as the lock manager says it */
		elog(WARNING, "you don't own a lock of type %s", "update");
		released = false;
	}
	if (released)
		dlock_permit_tag_released(&tag);
	/* nothing below raises: only a signal, a stall or a death can land here */
	DLOCK_FAULT("lock.release");
	if (e != NULL)
	{
		if (released)
			dlock_lease_note_release(e);
		if (e->lease_expires != 0 && (!released || e->nsession <= 1))
			dlock_marker_drop(e->key, e->mode);
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
	return released;
}

/* One session hold's lock (or locks, in update mode) given back; false if none. */
bool
dlock_release_session_hold(const LOCKTAG *tag, uint8 mode)
{
	if (likely(mode != DLOCK_UPDATE))
		return LockRelease(tag, DlockLockMode(mode), true);
	return release_update(tag);
}

/* unlock_name for the calls on several names (locks_many.c) */
bool
dlock_unlock_one(const DlockName *name, uint8 mode)
{
	return unlock_name(name, mode);
}

/* dlock_unlock(name, shared): like pg_advisory_unlock, session scope only */
Datum
dlock_unlock(PG_FUNCTION_ARGS)
{
	DlockName	name;
	uint8		mode;

	dlock_name_arg(fcinfo, 0, &name);
	mode = dlock_mode_arg(fcinfo, 1, 2);
	dlock_backend_init();
	PG_RETURN_BOOL(unlock_name(&name, mode));
}

/*
 * Is the session-level lock of a raise in a transaction (own_release) of
 * entry ref still there?  pg_advisory_unlock_all() in the transaction takes
 * it behind dlock's back, and a session hold of the name taken after that
 * must not be given back in its place.  The session's count of the lock
 * (read from the lock manager's local lock, found by a re-entry that cannot
 * wait: the lock is ours) covers the entry's session holds and every raise
 * still recorded; one that went behind dlock's back is short of that.
 */
static bool
raise_still_held(int ref, const DlockEntry *e, const LOCKTAG *tag)
{
	LOCKMODE	lockmode = DlockLockMode(e->mode);
	LOCALLOCK  *ll = NULL;
	int64		session = 0;
	int			raises = 0;

	if (!dlock_lock_held_by_me(tag, lockmode) ||
		dlock_lock_acquire_ext(tag, lockmode, true, true, true, &ll) == LOCKACQUIRE_NOT_AVAIL ||
		ll == NULL)
		return false;
	for (int j = 0; j < ll->numLockOwners; j++)
		if (ll->lockOwners[j].owner == NULL)
			session += ll->lockOwners[j].nLocks;
	LockRelease(tag, lockmode, true);	/* the re-entry's */
	session--;
	for (int j = 0; j < dlock_n_xact_holds; j++)
		if (dlock_xact_holds[j].ref == ref && dlock_xact_holds[j].own_release)
			raises++;
	return session >= e->nsession + raises;
}

/*
 * The end of transaction-scope hold i (entries.h dlock_xact_holds), at the
 * end of its (sub)transaction (xact.c) or released early (dlock_lower).
 * The hold's end is counted in dlock_stats when its entry is freed: also at
 * PREPARE, where the lock passes to the prepared transaction
 * (doc/monitoring.md).
 */
void
dlock_drop_xact_hold(int i)
{
	int			ref = dlock_xact_holds[i].ref;
	DlockEntry *e = dlock_entry_at(ref);
	bool		own = dlock_xact_holds[i].own_release;
	bool		ends;

	/*
	 * A raise whose entry is no longer its hold's (its lock went behind
	 * dlock's back, and the entry began another hold since, or another
	 * name's): only its record goes.
	 */
	if (unlikely(own) && (!e->inuse || e->mode != DLOCK_EXCLUSIVE || e->nxact == 0 ||
						  e->token != dlock_xact_holds[i].token))
	{
		dlock_xact_holds[i] = dlock_xact_holds[--dlock_n_xact_holds];
		return;
	}
	/* the hold ends here: announced while it is still held (notify.c) */
	ends = e->nxact == 1 && e->nsession == 0 && e->waiting == DLOCK_WAIT_NONE;
	if (unlikely(e->notify) && ends)
		dlock_announce_entry(e, e->lease_expires != 0 && e->lease_expires <= GetCurrentTimestamp() ?
							 DLOCK_EV_LEASE_EXPIRED : DLOCK_EV_RELEASED, DLOCK_EV_XACT);
	/* a raise's session lock: given back here (dlock_raise), if it is still there */
	if (unlikely(own))
	{
		LOCKTAG		tag;

		dlock_set_locktag(&tag, e->key);
		if (raise_still_held(ref, e, &tag))
			LockRelease(&tag, DlockLockMode(e->mode), true);
		/* nothing below raises: only a signal, a stall or a death can land here */
		DLOCK_FAULT("update.lower");
	}
	/* its waiters wake once the lock manager has released it */
	dlock_permit_wake_at_end(MyDatabaseId, e->key);
	if (unlikely(e->lease_expires != 0))
		dlock_lease_note_dropped(e);
	dlock_change_begin(ref);
	if (e->nxact > 0)
		e->nxact--;
	dlock_entry_free_if_unused(ref);
	dlock_change_end(ref);
	if (!e->inuse)
		dlock_stats_hold_ended(e);
	dlock_xact_holds[i] = dlock_xact_holds[--dlock_n_xact_holds];
}

/*
 * Release early the latest raise (dlock_raise in a transaction) of entry
 * ref: its lock is a session lock (own_release), given back by
 * dlock_drop_xact_hold (dlock_lower, 1.7).  false if there is none.
 */
bool
dlock_xact_hold_release(int ref)
{
	int			latest = -1;

	/*
	 * The latest is of the innermost subtransaction (their ids grow): the
	 * array is in no order (dlock_drop_xact_hold fills a gap with its last).
	 * A raise of an enclosing one stays for a ROLLBACK TO to keep.
	 */
	for (int i = 0; i < dlock_n_xact_holds; i++)
		if (dlock_xact_holds[i].ref == ref && dlock_xact_holds[i].own_release &&
			(latest < 0 || dlock_xact_holds[i].subid > dlock_xact_holds[latest].subid))
			latest = i;
	if (latest < 0)
		return false;
	dlock_drop_xact_hold(latest);
	return true;
}
