/*
 * leases.c: leases on named locks, as the holding backend sees them.
 *
 * A lease is an expiry time in the hold's slot entry (slots.h); the reaper
 * (reaper.c) ends the holder once it has passed.  Here: checking lease
 * arguments, dlock_renew, waking the reaper when a lease ends earlier than
 * it plans to wake, and refusing what a holder past its lease must not do.
 *
 * Invariant: a holder whose lease has run out is never told yes again: it
 * cannot renew, re-take the lock, or commit (or prepare) a transaction, even
 * if the reaper is late; and a renewal that races the expiry is undone and
 * reported as the expiry.
 *
 * Layer 3 of the map in dlock.h (mechanisms): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "entries.h"
#include "leases.h"
#include "name.h"
#include "slots.h"

PG_FUNCTION_INFO_V1(dlock_renew);
/* the 1.5 SQL's symbol (its lease_ms); the 1.4 name serves the 1.4 SQL */
PG_FUNCTION_INFO_V1(dlock_renew_1_5);
PG_FUNCTION_INFO_V1(dlock_renew_ms);

DlockReaperWake *dlock_reaper_wake = NULL;

Size
dlock_leases_shmem_size(void)
{
	return MAXALIGN(sizeof(DlockReaperWake));
}

/* At start-up, with AddinShmemInitLock held (shmem.c). */
void
dlock_leases_shmem_init(void)
{
	bool		found;

	dlock_reaper_wake = ShmemInitStruct("dlock reaper", dlock_leases_shmem_size(), &found);
	if (found)
		return;
	dlock_reaper_wake->procno = -1;
	pg_atomic_init_u64(&dlock_reaper_wake->wakeup, 0);
}

/*
 * A hold whose lease had run out, released (dlock_unlock, dlock_unlock_all)
 * in the current transaction: that transaction must not commit either.
 */
static TimestampTz released_expired_at = 0;
static char released_expired_name[DLOCK_NAME_MAX + 1];

/* (leases.h) The lock path looks further only when a lease exists. */
TimestampTz dlock_lease_min = 0;

/* A lease given to one of this backend's holds. */
void
dlock_lease_note(TimestampTz expires)
{
	if (dlock_lease_min == 0 || expires < dlock_lease_min)
		dlock_lease_min = expires;
}

/*
 * A session past the lease of a hold it still has takes nothing more: not
 * another name, not another mode (it is being ended; an acquisition now
 * could only end with it).  Cheap unless a lease has run out.  A hold whose
 * lease ran out but which the lock manager no longer has (released behind
 * dlock's back) refuses nothing, and keeps dlock_lease_min set, so that the
 * end of the transaction forgets it (dlock_lease_forget_stale_holds).
 */
void
dlock_lease_refuse_after_expiry(void)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next = 0;
	int			i;

	if (dlock_lease_min > now || dlock_my_slot == NULL)
		return;
	for (i = 0; i < dlock_my_slot->nused; i++)
	{
		DlockEntry *e = &dlock_my_slot->entries[i];

		if (!e->inuse || e->lease_expires == 0 || e->nsession + e->nxact == 0)
			continue;
		if (e->lease_expires <= now && dlock_entry_lock_held(e))
			dlock_lease_expired(dlock_stored_name(e->name, e->namelen), e->lease_expires);
		if (next == 0 || e->lease_expires < next)
			next = e->lease_expires;
	}
	dlock_lease_min = next;
}

/*
 * A lease, given as an interval (argument argno) or in milliseconds (argument
 * ms_argno, -1 for none), in microseconds, checked; -1 for none.
 */
int64
dlock_lease_arg(FunctionCallInfo fcinfo, int argno, int ms_argno)
{
	int64		lease_us = dlock_duration_arg(fcinfo, argno, ms_argno, "lease", -1);

	if (lease_us < 0)
		return -1;
	dlock_require_preload("Leases are kept in shared memory and enforced by a background worker.");
	if (lease_us < DLOCK_MIN_LEASE_US)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be at least %d milliseconds",
						(int) (DLOCK_MIN_LEASE_US / 1000)),
				 errdetail("The lease reaper does not enforce shorter leases.")));
	/* with a day to spare, so that adding it later cannot overflow */
	dlock_lease_end(GetCurrentTimestamp() + USECS_PER_DAY, lease_us);
	return lease_us;
}

/*
 * At every transaction's end: forget session holds with a lease that the
 * lock manager no longer has (released behind dlock's back), so that an
 * expired lease seen at the next commit is one of a hold that was live in
 * that transaction.  Only entries with a lease cost a lookup.
 */
void
dlock_lease_forget_stale_holds(void)
{
	int			i;

	if (dlock_my_slot == NULL || dlock_lease_min == 0)
		return;
	for (i = 0; i < dlock_my_slot->nused; i++)
	{
		DlockEntry *e = &dlock_my_slot->entries[i];

		if (e->inuse && e->lease_expires != 0 && e->nsession > 0 && e->nxact == 0 &&
			!dlock_entry_lock_held(e))
			dlock_entry_forget_stale(i);
	}
}

/* PREPARE TRANSACTION is refused while this session has a hold with a lease. */
void
dlock_lease_refuse_prepare(void)
{
	int			i;

	if (dlock_my_slot == NULL)
		return;
	for (i = 0; i < dlock_my_slot->nused; i++)
	{
		DlockEntry *e = &dlock_my_slot->entries[i];

		if (e->inuse && e->lease_expires != 0 && e->nsession + e->nxact > 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction while this session holds a dlock lock with a lease"),
					 errdetail("A prepared transaction could be committed after the lease of lock \"%s\" ran out, by any session.",
							   dlock_stored_name(e->name, e->namelen)),
					 errhint("Release the lock, or take it without a lease, before PREPARE TRANSACTION.")));
	}
}

/*
 * A transaction hold whose lease had run out, dropped with a subtransaction
 * in the current transaction (a cancel the reaper sent, caught by a
 * PL/pgSQL block with an EXCEPTION clause and raised again): the cancel's
 * report comes after it (dlock_lease_explain).
 */
static TimestampTz dropped_expires = 0;
static char dropped_name[DLOCK_NAME_MAX];
static int	dropped_len = 0;

void
dlock_lease_note_dropped(const DlockEntry *e)
{
	if (e->lease_expires == 0 || e->lease_expires > GetCurrentTimestamp())
		return;
	dropped_expires = e->lease_expires;
	dropped_len = Min(e->namelen, DLOCK_NAME_MAX);
	memcpy(dropped_name, e->name, dropped_len);
}

/* At the end of each transaction (after its reports). */
void
dlock_lease_clear_dropped(void)
{
	dropped_expires = 0;
}

/*
 * The reaper ends a session whose lease ran out as pg_terminate_backend does
 * (SIGTERM), and cancels the statement of a transaction whose transaction
 * lock's lease ran out as pg_cancel_backend does (SIGINT); PostgreSQL reports
 * those as "terminating connection due to administrator command" (57P01) and
 * "canceling statement due to user request" (57014).  Called (emit_log_hook,
 * dlock.c) with each report of this backend before it is logged and sent to
 * the client: if it is one of those two, and this backend holds a lock whose
 * lease ran out (for the cancel: a transaction lock, the only kind whose
 * lease the reaper enforces by a cancel), the report says so instead, with
 * dlock's SQLSTATE, the lock's name and when its lease ran out.
 *
 * It runs inside error reporting: it raises nothing, reads no catalog, and
 * allocates only a few strings in the current (error) context.  Costs a
 * comparison for every other report: dlock_lease_min is 0 in a backend
 * without leases.
 */
void
dlock_lease_explain(ErrorData *edata)
{
	static const char *const terminated = "terminating connection due to administrator command";
	static const char *const canceled = "canceling statement due to user request";
	const DlockEntry *found = NULL;
	TimestampTz now;
	bool		session;
	char	   *name;
	const char *when;
	int			i;

	if ((dlock_lease_min == 0 && dropped_expires == 0) || dlock_my_slot == NULL ||
		edata->message_id == NULL)
		return;
	if (edata->elevel == FATAL && edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN &&
		strcmp(edata->message_id, terminated) == 0)
		session = true;
	else if (edata->elevel == ERROR && edata->sqlerrcode == ERRCODE_QUERY_CANCELED &&
			 strcmp(edata->message_id, canceled) == 0)
		session = false;
	else
		return;
	now = GetCurrentTimestamp();
	if (dlock_lease_min > now && dropped_expires == 0)
		return;
	/*
	 * A hold the reaper acts on: expired, and still held (the lock manager's
	 * local table: a lookup that neither allocates nor raises).  A cancel is
	 * for a transaction hold whose session part, if any, is not dlock's
	 * (its lease marker gone: released behind dlock's back), as the reaper
	 * decides (victim_scope, reaper.c).
	 */
	for (i = 0; i < dlock_my_slot->nused; i++)
	{
		const DlockEntry *e = &dlock_my_slot->entries[i];

		if (!e->inuse || e->lease_expires == 0 || e->lease_expires > now ||
			e->nsession + e->nxact == 0 || !dlock_entry_lock_held(e))
			continue;
		if (!session && (e->nxact == 0 || (e->nsession > 0 && dlock_marker_held(e->key, e->mode))))
			continue;
		if (found == NULL || e->lease_expires < found->lease_expires)
			found = e;
	}
	if (found != NULL)
	{
		name = dlock_name_for_report(found->name, found->namelen);
		when = timestamptz_to_str(found->lease_expires);
	}
	else if (!session && dropped_expires != 0)
	{
		/* its hold went with a subtransaction the cancel rolled back */
		name = dlock_name_for_report(dropped_name, dropped_len);
		when = timestamptz_to_str(dropped_expires);
	}
	else
		return;
	if (session)
	{
		edata->sqlerrcode = DLOCK_ERRCODE_LEASE_SESSION;
		edata->message_id = "terminating connection because the lease of lock \"%s\" ran out";
		edata->message = psprintf("terminating connection because the lease of lock \"%s\" ran out",
								  name);
		edata->detail = psprintf("The lease ran out at %s without a renewal; the server ends a session "
								 "that holds a lock past its lease, so that others can have it.",
								 when);
	}
	else
	{
		edata->sqlerrcode = DLOCK_ERRCODE_LEASE_XACT;
		edata->message_id = "canceling statement because the lease of lock \"%s\" ran out";
		edata->message = psprintf("canceling statement because the lease of lock \"%s\" ran out",
								  name);
		edata->detail = psprintf("The lease ran out at %s without a renewal; the transaction that holds "
								 "the lock must end (its session is ended if it still holds the lock a "
								 "second later).",
								 when);
	}
	edata->hint = pstrdup("Treat the lock as lost since then: a fenced resource refuses its token. "
						  "Renew a lease well before it runs out (dlock_renew).");
	/* the log's own DETAIL (19: who sent the signal), after dlock's */
	if (edata->detail_log != NULL)
		edata->detail_log = psprintf("%s %s", edata->detail, edata->detail_log);
}

/* A live hold whose lease has run out: it is being taken away. */
bool
dlock_lease_ran_out(const DlockEntry *e)
{
	return e->inuse && e->lease_expires != 0 && e->nsession + e->nxact > 0 &&
		e->lease_expires <= GetCurrentTimestamp() && dlock_entry_lock_held(e);
}

/* The error for a hold whose lease has run out. */
void
dlock_lease_expired(const char *name, TimestampTz expired)
{
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("lease of lock \"%s\" has expired", name),
			 errdetail("The lease expired at %s; the lock is being taken away from this session.",
					   timestamptz_to_str(expired))));
}

/* How a hold whose lease ran out stands at a commit (refuse_commit). */
#define EXPIRED_RELEASED	0	/* released in this transaction (after its
								 * lease ran out, or behind dlock's back, when
								 * nobody knows) */
#define EXPIRED_XACT		1	/* held by this transaction only */
#define EXPIRED_SESSION		2	/* held at session level */

static void
refuse_commit(const char *utf8name, int len, TimestampTz expired, bool prepare,
			  int how)
{
	char	   *name = dlock_stored_name(utf8name, len);
	const char *at = timestamptz_to_str(expired);

	if (how != EXPIRED_RELEASED)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 prepare ?
				 errmsg("cannot prepare a transaction after the lease of lock \"%s\" expired", name) :
				 errmsg("cannot commit after the lease of lock \"%s\" expired", name),
				 errdetail("The lease expired at %s; the lock is being taken away from this session.", at),
				 how == EXPIRED_SESSION ?
				 errhint("Roll back. The session is ended unless it releases the lock first (dlock_unlock); the transaction that releases it cannot commit either.") :
				 errhint("Roll back: that releases the lock.")));
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 prepare ?
			 errmsg("cannot prepare a transaction after the lease of lock \"%s\" expired", name) :
			 errmsg("cannot commit after the lease of lock \"%s\" expired", name),
			 errdetail("The lease expired at %s; the lock was released in this transaction.", at),
			 errhint("Roll back. The next transaction of this session can commit.")));
}

void
dlock_lease_wake_reaper(TimestampTz expires)
{
	uint64		w;
	int			p;

	pg_memory_barrier();
	w = pg_atomic_read_u64(&dlock_reaper_wake->wakeup);
	p = dlock_reaper_wake->procno;
	if ((w == 0 || (uint64) expires < w) && p >= 0)
		SetLatch(&GetPGProcByNumber(p)->procLatch);
}

/* Remember a release of a hold whose lease has run out (see above). */
void
dlock_lease_note_release(const DlockEntry *e)
{
	if (e->lease_expires == 0 || released_expired_at != 0 ||
		e->lease_expires > GetCurrentTimestamp())
		return;
	released_expired_at = e->lease_expires;
	memcpy(released_expired_name, e->name, e->namelen);
	released_expired_name[e->namelen] = '\0';
}

/* At every transaction's end: the release noted above is forgotten. */
void
dlock_lease_clear_release(void)
{
	released_expired_at = 0;
}

/*
 * At commit: no hold of this session may have a lease that has run out.  The
 * reaper is ending this session or transaction, and a stale holder must not
 * commit anything meanwhile, however late the reaper is.
 */
void
dlock_lease_refuse_commit(bool prepare)
{
	int			i;

	/*
	 * Not while the session exits (the reaper ended it, or it is going
	 * anyway): the transactions PostgreSQL runs then, such as the one that
	 * drops temporary tables, commit nothing of the holder's work.
	 */
	if (proc_exit_inprogress)
		return;
	if (released_expired_at != 0)
		refuse_commit(released_expired_name, strlen(released_expired_name),
					  released_expired_at, prepare, EXPIRED_RELEASED);
	if (dlock_my_slot == NULL)
		return;
	/*
	 * Whether or not the lock manager still has it: a hold released behind
	 * dlock's back in this transaction (pg_advisory_unlock_all) was held in
	 * it (those released earlier were forgotten at the end of theirs).
	 */
	for (i = 0; i < dlock_my_slot->nused; i++)
	{
		DlockEntry *e = &dlock_my_slot->entries[i];

		if (e->inuse && e->lease_expires != 0 && e->nsession + e->nxact > 0 &&
			e->lease_expires <= GetCurrentTimestamp())
			refuse_commit(e->name, e->namelen, e->lease_expires, prepare,
						  !dlock_entry_lock_held(e) ? EXPIRED_RELEASED :
						  e->nsession > 0 ? EXPIRED_SESSION : EXPIRED_XACT);
	}
}

/*
 * The lease markers of the session holds among refs (dlock.h); took[i]
 * says which this call took.  If one cannot be taken (the lock table is
 * full), those taken here are dropped again before the error goes on.
 */
static void
take_markers(const DlockName *name, const int *refs, int n, bool *took)
{
	volatile int i = 0;

	PG_TRY();
	{
		for (i = 0; i < n; i++)
		{
			DlockEntry *e = dlock_entry_at(refs[i]);

			if (e->nsession > 0 && !dlock_marker_held(name->key, e->mode))
			{
				dlock_marker_take(name->key, e->mode);
				took[i] = true;
			}
		}
		DLOCK_FAULT("renew.marked");
	}
	PG_CATCH();
	{
		for (int j = 0; j < n; j++)
			if (took[j])
				dlock_marker_drop(name->key, dlock_entry_at(refs[j])->mode);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * dlock_renew(name, lease, lease_ms, info): push the lease of this session's
 * hold out (NULL: by the length it had), and set its info if given.  A hold
 * without a lease and no lease given: only the info, if given (the result
 * is then NULL), else an error.  With ms: dlock_renew_ms(name, lease_ms,
 * info), the positional form for clients (1.6).
 */
static Datum
renew(FunctionCallInfo fcinfo, bool ms)
{
	DlockName	name;
	int64		lease_us;
	DlockInfo	info;
	int			refs[DLOCK_MODES];
	int			lease_refs[DLOCK_MODES] = {0};
	int			n;
	int			nlease = 0;
	int			i;
	TimestampTz now;
	TimestampTz expires = 0;
	TimestampTz old_expires[DLOCK_MODES];
	int64		old_us[DLOCK_MODES];
	bool		took[DLOCK_MODES] = {false};

	dlock_name_arg(fcinfo, 0, &name);
	lease_us = ms ? dlock_lease_arg(fcinfo, DLOCK_NO_ARG, 1) : dlock_lease_arg(fcinfo, 1, 2);
	dlock_entry_info_arg(fcinfo, ms ? 2 : 3, &info);
	dlock_require_preload("Leases are kept in shared memory and enforced by a background worker.");
	/* a renewal sets a lease, or info: only from the session's own code */
	dlock_check_own_session(lease_us >= 0 || !info.given);
	dlock_backend_init();

	n = dlock_entries_held(&name, refs);
	if (n == 0)
		dlock_entries_not_held(&name);
	now = GetCurrentTimestamp();
	for (i = 0; i < n; i++)
	{
		DlockEntry *e = dlock_entry_at(refs[i]);

		if (e->lease_expires != 0 && e->lease_expires <= now)
			dlock_lease_expired(dlock_display_name(&name), e->lease_expires);
		if (lease_us < 0 && e->lease_us == 0 && !info.given)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock \"%s\" has no lease to renew", dlock_display_name(&name)),
					 errhint("Pass a lease, as in dlock_renew('%s', '30s').", dlock_display_name(&name))));
		if (refs[i] >= dlock_my_cap)
			dlock_entry_refuse_shared(&name, lease_us >= 0 || e->lease_us != 0 ?
									  DLOCK_NEED_LEASE : DLOCK_NEED_INFO, true);
		/* a lease never comes over a hold of another role's code (locks.c) */
		if (e->foreign && (lease_us >= 0 || e->lease_us != 0))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("cannot give lock \"%s\" a lease", dlock_display_name(&name)),
					 errdetail("Code running as another role in this session (a SECURITY DEFINER function, or a security-restricted operation) holds the lock too; the lease would end the session over that hold."),
					 errhint("Release the lock until this session no longer holds it, then take it with the lease.")));
		/* the holds that get a lease: every one if one is given */
		if (lease_us >= 0 || e->lease_us != 0)
			lease_refs[nlease++] = refs[i];
	}
	/* a session hold's lease marker (dlock.h), before any lease is shown */
	take_markers(&name, lease_refs, nlease, took);
	for (i = 0; i < nlease; i++)
	{
		DlockEntry *e = dlock_entry_at(lease_refs[i]);
		int64		len = lease_us >= 0 ? lease_us : e->lease_us;

		old_expires[i] = e->lease_expires;
		old_us[i] = e->lease_us;
		expires = dlock_lease_end(now, len);
		dlock_lease_note(expires);
		dlock_change_begin(lease_refs[i]);
		e->lease_us = len;
		e->lease_expires = expires;
		dlock_change_end(lease_refs[i]);
	}

	/*
	 * If an old lease ran out while we were at it, the reaper may have seen
	 * it expired and be ending this session already: put it back and fail,
	 * so that the caller is never told yes while being taken away.
	 */
	now = GetCurrentTimestamp();
	for (i = 0; i < nlease; i++)
		if (old_expires[i] != 0 && old_expires[i] <= now)
		{
			for (int j = 0; j < nlease; j++)
			{
				DlockEntry *e = dlock_entry_at(lease_refs[j]);

				dlock_change_begin(lease_refs[j]);
				e->lease_us = old_us[j];
				e->lease_expires = old_expires[j];
				dlock_change_end(lease_refs[j]);
				/* a hold that had no lease has no marker again */
				if (took[j])
					dlock_marker_drop(name.key, e->mode);
			}
			dlock_lease_wake_reaper(old_expires[i]);
			dlock_lease_expired(dlock_display_name(&name), old_expires[i]);
		}
	/* the info last: a call that fails changes nothing */
	for (i = 0; info.given && i < n; i++)
	{
		dlock_change_begin(refs[i]);
		dlock_entry_set_info(dlock_entry_at(refs[i]), &info);
		dlock_change_end(refs[i]);
	}
	if (nlease == 0)
		PG_RETURN_NULL();
	dlock_lease_wake_reaper(expires);
	PG_RETURN_TIMESTAMPTZ(expires);
}

Datum
dlock_renew(PG_FUNCTION_ARGS)
{
	return renew(fcinfo, false);
}

Datum
dlock_renew_1_5(PG_FUNCTION_ARGS)
{
	return renew(fcinfo, false);
}

Datum
dlock_renew_ms(PG_FUNCTION_ARGS)
{
	return renew(fcinfo, true);
}
