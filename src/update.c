/*
 * update.c: update mode's raise and lower (1.7): dlock_raise, dlock_lower.
 *
 * A hold in update mode (dlock.h) shares the name with shared holders and
 * excludes every other update and exclusive holder.  Raising it takes an
 * exclusive hold of the name over it, in its scope: that waits only for the
 * shared holders to leave (no other updater can hold the name), and new
 * shared requests queue behind it in the lock manager.  Lowering releases
 * that exclusive hold, and the update hold goes on.  Both are the calls of
 * locks.c, with the scope taken from the update hold.
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "fmgr.h"

#include "dlock.h"
#include "entries.h"
#include "locks.h"
#include "name.h"

PG_FUNCTION_INFO_V1(dlock_raise);
PG_FUNCTION_INFO_V1(dlock_lower);

/* This session's live entry of name in mode (a stale one is dropped); NULL if none. */
static DlockEntry *
held_entry(const DlockName *name, uint8 mode, int *refp)
{
	int			refs[DLOCK_MODES];
	int			n = dlock_entries_held(name, refs);
	int			i;

	for (i = 0; i < n; i++)
	{
		DlockEntry *e = dlock_entry_at(refs[i]);

		if (e->mode == mode)
		{
			*refp = refs[i];
			return e;
		}
	}
	return NULL;
}

/* The update hold of name that dlock_raise and dlock_lower act on. */
static DlockEntry *
update_hold(const DlockName *name, const char *what)
{
	int			ref;
	DlockEntry *e = held_entry(name, DLOCK_UPDATE, &ref);

	if (e == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot %s lock \"%s\": this session does not hold it in update mode",
						what, dlock_display_name(name)),
				 errhint("Take it with mode => 'update' first; two shared holders that both raise would wait for each other.")));
	return e;
}

/*
 * dlock_raise(name, timeout, timeout_ms): the exclusive hold over this
 * session's update hold, in its scope (session if it has a session hold);
 * true when taken, false at the timeout (NULL: no limit).
 */
Datum
dlock_raise(PG_FUNCTION_ARGS)
{
	DlockName	name;
	AcquireArgs a;
	DlockEntry *e;

	dlock_name_arg(fcinfo, 0, &name);
	memset(&a, 0, sizeof(a));
	a.timeout_us = dlock_timeout_arg(fcinfo, 1, 2, -1);
	a.mode = DLOCK_EXCLUSIVE;
	a.lease_us = -1;
	a.waited_before_us = -1;
	dlock_backend_init();
	e = update_hold(&name, "raise");
	/* in a transaction: a session lock that dlock gives back at its end */
	a.own_release = e->nsession == 0;
	PG_RETURN_BOOL(dlock_acquire_one(&name, e->nsession == 0, true, &a));
}

/*
 * dlock_lower(name): one exclusive hold of the name released where this
 * session also holds it in update mode, which goes on: a session hold
 * first, else the latest raise in the transaction (locks.c
 * dlock_xact_hold_release).  false, with a WARNING, if there is none.
 */
Datum
dlock_lower(PG_FUNCTION_ARGS)
{
	DlockName	name;
	DlockEntry *u;
	DlockEntry *x;
	int			ref;

	dlock_name_arg(fcinfo, 0, &name);
	dlock_backend_init();
	u = update_hold(&name, "lower");
	x = held_entry(&name, DLOCK_EXCLUSIVE, &ref);
	/* in the scope of the update hold, as dlock_raise raised it */
	if (u->nsession > 0)
	{
		if (x != NULL && x->nsession > 0)
			PG_RETURN_BOOL(dlock_unlock_one(&name, DLOCK_EXCLUSIVE));
	}
	/* a raise in a transaction: not a plain dlock_lock_xact of the name */
	else if (x != NULL && dlock_xact_hold_release(ref))
		PG_RETURN_BOOL(true);
	ereport(WARNING,
			(errcode(ERRCODE_WARNING),
			 errmsg("lock \"%s\" is not raised", dlock_display_name(&name))));
	PG_RETURN_BOOL(false);
}
