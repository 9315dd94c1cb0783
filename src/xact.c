/*
 * xact.c: transaction-scope holds and the transaction callbacks.
 *
 * The lock manager releases transaction-scope advisory locks at the end of
 * the transaction, and those of a subtransaction when it aborts; this file
 * follows it, so that the entries of those holds end at the same moment.  It
 * also runs the lease checks that must stop a commit or a PREPARE.
 *
 * Detached locks are not transaction-scope, but their acquisition is undone
 * if the transaction (or subtransaction) that made it rolls back
 * (detached_xact.c).
 *
 * Invariant: dlock_xact_holds (entries.h) lists exactly the
 * transaction-scope holds the lock manager has for this backend, each with
 * the subtransaction that owns it.
 *
 * Layer 5 of the map in dlock.h (transaction callbacks): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "access/xact.h"

#include "dlock.h"
#include "detached.h"
#include "entries.h"
#include "leases.h"
#include "locks.h"
#include "semaphore.h"
#include "stats.h"
#include "xact.h"

static void xact_callback(XactEvent event, void *arg);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);

static bool xact_callback_registered = false;

void
dlock_xact_setup(void)
{
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	xact_callback_registered = true;
}

/*
 * Make the transaction callback the first to run (PostgreSQL runs the last
 * registered first): an extension whose pre-commit step commits elsewhere
 * (postgres_fdw's remote transactions) and that the session began to use
 * after dlock then runs after dlock's refusal of a commit past a lease, and
 * not at all when dlock refuses.  Called at an explicit COMMIT (dlock.c):
 * deferred triggers and the like run between the COMMIT statement and the
 * pre-commit steps, and a lease can run out there.
 */
void
dlock_xact_callback_first(void)
{
	if (!xact_callback_registered)
		return;
	UnregisterXactCallback(xact_callback, NULL);
	RegisterXactCallback(xact_callback, NULL);
}

/*
 * A prepared transaction keeps its locks while the session goes on, so
 * dlock.max_held_locks (a session's bound) does not bound them.  The lock
 * table has room for max_locks_per_transaction locks per prepared
 * transaction (max_prepared_transactions is part of its size): no more
 * dlock locks than that may pass to one.
 */
static void
refuse_prepare_beyond_room(void)
{
	int			n = dlock_entry_nrefs();
	int			held = 0;
	int			ref;

	for (ref = 0; ref < n; ref++)
	{
		DlockEntry *e;

		if (ref < dlock_my_cap && ref >= dlock_my_slot->nused)
		{
			ref = dlock_my_cap - 1; /* the rest of the slot is unused */
			continue;
		}
		e = dlock_entry_at(ref);
		if (e->inuse && e->nxact > 0)
			held++;
	}
	if (held > max_locks_per_xact)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("cannot PREPARE a transaction that holds %d dlock locks", held),
				 errdetail("A prepared transaction keeps its locks after the session goes on; the lock table has room for max_locks_per_transaction (%d) locks per prepared transaction.",
						   max_locks_per_xact),
				 errhint("Take fewer named locks in a transaction that is to be prepared, or raise \"max_locks_per_transaction\".")));
}

/*
 * A transaction's hold taken with notify (1.7) would pass to the prepared
 * transaction, and its end would be announced at PREPARE, while the lock
 * is still held: refused, as a lease is; so is a raise (dlock_raise) in the
 * transaction, whose lock is a session lock that dlock gives back at its
 * end (locks.c).
 */
static void
refuse_prepare_announced(void)
{
	for (int i = 0; i < dlock_n_xact_holds; i++)
	{
		DlockEntry *e = dlock_entry_at(dlock_xact_holds[i].ref);

		if (dlock_xact_holds[i].own_release)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction that has raised lock \"%.*s\"",
							(int) e->namelen, e->name),
					 errdetail("A raise in a transaction is a session lock that dlock gives back when the transaction ends."),
					 errhint("Lower it first (dlock_lower).")));
		if (e->notify)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction that holds lock \"%.*s\" taken with notify",
							(int) e->namelen, e->name),
					 errdetail("A prepared transaction keeps its locks after the session goes on, and the end of this one could not be announced."),
					 errhint("Take the lock without notify in a transaction that is to be prepared.")));
	}
}

static void
xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			dlock_lease_refuse_commit(false);
			break;
		case XACT_EVENT_PRE_PREPARE:
			dlock_lease_refuse_commit(true);
			dlock_detached_refuse_prepare();
			/*
			 * Any hold with a lease, session scope too: the prepared
			 * transaction could be committed after the lease ran out and
			 * another holder took over, by anyone.
			 */
			dlock_lease_refuse_prepare();
			refuse_prepare_beyond_room();
			refuse_prepare_announced();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/*
			 * Interrupts are held off here; the lock manager releases the
			 * transaction's locks right after the callbacks.
			 */
			DLOCK_FAULT("xact.end");
			/* detached locks acquired in it: kept, or undone with it */
			dlock_detached_xact_end(event != XACT_EVENT_ABORT &&
									event != XACT_EVENT_PARALLEL_ABORT);
			dlock_lease_clear_release();
			while (dlock_n_xact_holds > 0)
				dlock_drop_xact_hold(dlock_n_xact_holds - 1);
			dlock_lease_clear_dropped();
			dlock_lease_forget_stale_holds();
			/* this transaction's lock statistics, into dlock_stats */
			dlock_stats_flush();
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

	if (event == SUBXACT_EVENT_ABORT_SUB)
		DLOCK_FAULT("subxact.end");
	if (event == SUBXACT_EVENT_COMMIT_SUB || event == SUBXACT_EVENT_ABORT_SUB)
		dlock_detached_subxact_end(event == SUBXACT_EVENT_COMMIT_SUB, mySubid, parentSubid);
	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		/* the lock manager hands the locks to the parent; so do we */
		for (i = 0; i < dlock_n_xact_holds; i++)
			if (dlock_xact_holds[i].subid == mySubid)
				dlock_xact_holds[i].subid = parentSubid;
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		/* the lock manager releases the locks of the subtransaction */
		for (i = dlock_n_xact_holds - 1; i >= 0; i--)
			if (dlock_xact_holds[i].subid == mySubid)
				dlock_drop_xact_hold(i);
	}
}
