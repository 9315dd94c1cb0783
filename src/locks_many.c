/*
 * locks_many.c: several names at once (1.5), dlock_try, dlock_lock and
 * their _xact forms given a text[], and dlock_unlock of a text[]; and
 * dlock_unlock_all.  Each name is taken by locks.c's path for one
 * (dlock_acquire_one).
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "fmgr.h"
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
#include "subxact.h"

PG_FUNCTION_INFO_V1(dlock_try_many);
PG_FUNCTION_INFO_V1(dlock_lock_many);
PG_FUNCTION_INFO_V1(dlock_try_xact_many);
PG_FUNCTION_INFO_V1(dlock_lock_xact_many);
PG_FUNCTION_INFO_V1(dlock_unlock_many);
PG_FUNCTION_INFO_V1(dlock_unlock_all);

/*
 * Several names at once (1.5): dlock_try, dlock_lock and their _xact forms
 * given a text[] take all of the names or none.  They are taken in key
 * order (dlock_names_arg), so two calls of these never wait for each other
 * in a circle; a timeout is the whole call's.  A name that is not granted
 * (busy, the deadline) or an error gives back what the call took: session
 * holds one by one (dlock_unlock_one), transaction holds with an internal
 * subtransaction that is rolled back, so that the lock manager and
 * dlock's transaction callbacks drop them as at any rollback.
 */
/*
 * Once all the names are granted: their lease, counted from now, and their
 * info, as one acquisition of each would have given them.  The markers are
 * the step that can fail (the lock table): taken first, and dropped again
 * if one cannot be, before any entry changes; the caller then gives back
 * what it took.  So a call told false or an error leaves the holds this
 * session had before it as they were (lease, info).
 */
static void
give_deferred(const DlockName *names, int n, const AcquireArgs *a)
{
	bool	   *took = palloc0(sizeof(bool) * n);
	volatile int i = 0;
	TimestampTz expires = 0;

	if (a->lease_us >= 0)
	{
		PG_TRY();
		{
			for (i = 0; i < n; i++)
			{
				DlockEntry *e = dlock_entry_at(dlock_entry_find(names[i].key, a->mode));

				if (e->nsession > 0 && !dlock_marker_held(names[i].key, a->mode))
				{
					dlock_marker_take(names[i].key, a->mode);
					took[i] = true;
				}
			}
		}
		PG_CATCH();
		{
			for (int j = 0; j < n; j++)
				if (took[j])
					dlock_marker_drop(names[j].key, a->mode);
			PG_RE_THROW();
		}
		PG_END_TRY();
		/* dlock_lease_arg() checked that this cannot overflow */
		expires = GetCurrentTimestamp() + a->lease_us;
		dlock_lease_note(expires);
	}
	for (i = 0; i < n; i++)
	{
		int			ref = dlock_entry_find(names[i].key, a->mode);
		DlockEntry *e = dlock_entry_at(ref);

		dlock_change_begin(ref);
		if (a->lease_us >= 0)
		{
			e->lease_us = a->lease_us;
			e->lease_expires = expires;
		}
		dlock_entry_set_info(e, &a->info);
		dlock_change_end(ref);
	}
	if (expires != 0)
		dlock_lease_wake_reaper(expires);
}

static bool
take_names(const DlockName *names, int n, bool xact, bool can_wait, const AcquireArgs *a,
		   volatile int *taken)
{
	AcquireArgs one = *a;
	TimestampTz deadline = a->timeout_us > 0 ? GetCurrentTimestamp() + a->timeout_us : 0;

	one.defer = true;
	for (int i = 0; i < n; i++)
	{
		/* what is left of the call's timeout; none left: try once */
		if (a->timeout_us > 0)
			one.timeout_us = Max(deadline - GetCurrentTimestamp(), 0);
		DLOCK_FAULT("lock.many");
		if (!dlock_acquire_one(&names[i], xact, can_wait, &one))
			return false;
		(*taken)++;
	}
	/* dlock.synchronous_grants: one confirmation after the last grant */
	if (unlikely(dlock_synchronous_grants))
		dlock_confirm_grant(names, n, dlock_confirm_deadline(deadline));
	if (a->lease_us >= 0 || a->info.given)
		give_deferred(names, n, a);
	return true;
}

/* take_names as a subtransaction's step (dlock_in_subxact) */
typedef struct TakeNames
{
	const DlockName *names;
	int			n;
	bool		can_wait;
	const AcquireArgs *a;
	int			taken;
} TakeNames;

static bool
take_names_step(void *arg)
{
	TakeNames  *t = (TakeNames *) arg;

	return take_names(t->names, t->n, true, t->can_wait, t->a, &t->taken);
}

static bool
acquire_many(FunctionCallInfo fcinfo, bool xact, bool can_wait)
{
	DlockName  *names;
	int			n;
	AcquireArgs a;
	volatile int taken = 0;
	volatile bool ok;

	n = dlock_names_arg(fcinfo, 0, &names);
	dlock_acquire_args(fcinfo, can_wait, &a);
	if (xact)
	{
		TakeNames	t = {names, n, can_wait, &a, 0};

		return dlock_in_subxact(take_names_step, &t);
	}
	PG_TRY();
	{
		ok = take_names(names, n, false, can_wait, &a, &taken);
		if (!ok)
			while (taken > 0)
				(void) dlock_unlock_one(&names[--taken], a.mode);
	}
	PG_CATCH();
	{
		while (taken > 0)
			(void) dlock_unlock_one(&names[--taken], a.mode);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return ok;
}

Datum
dlock_try_many(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire_many(fcinfo, false, false));
}

Datum
dlock_lock_many(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire_many(fcinfo, false, true));
}

Datum
dlock_try_xact_many(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire_many(fcinfo, true, false));
}

Datum
dlock_lock_xact_many(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(acquire_many(fcinfo, true, true));
}

/* dlock_unlock(names text[], shared): each name once; true if every one was held */
Datum
dlock_unlock_many(PG_FUNCTION_ARGS)
{
	DlockName  *names;
	int			n;
	uint8		mode;
	bool		all = true;

	n = dlock_names_arg(fcinfo, 0, &names);
	mode = dlock_bool_arg(fcinfo, 1, "shared") ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
	dlock_backend_init();
	for (int i = 0; i < n; i++)
		all &= dlock_unlock_one(&names[i], mode);
	PG_RETURN_BOOL(all);
}

/* dlock_unlock_all(): every session-scope dlock lock; returns how many */
Datum
dlock_unlock_all(PG_FUNCTION_ARGS)
{
	int			count = 0;
	int			n;
	int			ref;

	dlock_backend_init();
	n = dlock_entry_nrefs();
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
		dlock_entry_drop_stale_session(ref);
		if (!e->inuse || e->nsession == 0)
			continue;
		if (!dlock_entry_lock_held(e))
		{
			dlock_entry_forget_stale(ref);
			continue;
		}
		dlock_lease_note_release(e);
		/* a hold taken with notify: its end announced while it is held (notify.c) */
		if (unlikely(e->notify) && e->nxact == 0)
			dlock_announce_entry(e, DLOCK_EV_RELEASED, DLOCK_EV_SESSION);
		dlock_set_permit_tag(&tag, MyDatabaseId, e->key, e->permit);
		while (e->nsession > 0)
		{
			if (!dlock_release_session_hold(&tag, e->mode))
				break;
			dlock_permit_tag_released(&tag);
			released = true;
			dlock_change_begin(ref);
			e->nsession--;
			dlock_change_end(ref);
		}
		if (released)
			count++;
		dlock_entry_end_session(ref);
		if (released && !e->inuse)
			dlock_stats_hold_ended(e);
	}
	PG_RETURN_INT32(count);
}
