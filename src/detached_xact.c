/*
 * detached_xact.c: the detached locks the current transaction acquired.
 *
 * An acquisition is undone if the transaction (or subtransaction) that made
 * it rolls back.  The undo never waits: it marks the hold (its fate word, or
 * its waiter block) and wakes the process that holds it, which releases it.
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "access/xact.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "detached_caller.h"
#include "stats.h"

/* ---- detached locks acquired by the current transaction ---- */

/*
 * Until the transaction that acquired a detached lock commits, the lock is
 * released if it rolls back (to a savepoint before the call, too).
 */
typedef struct Acquired
{
	int			index;			/* the holder's hold, or the waiter block */
	uint64		use;			/* the hold's use, or the waiter's ticket */
	bool		waiter;
	SubTransactionId subid;
} Acquired;

static Acquired *acquired = NULL;

/*
 * Waited acquisitions this session gave up (rolled back: UNDO; cancelled or
 * timed out: ABANDONED) whose waiter has not yet been seen to let go: this
 * session's next dlock_acquire waits for them (a waiter releases on its own
 * time), so that a new try never meets the old hold.
 */
#define MAX_PENDING_UNDOS 64
static struct
{
	int			index;
	uint64		ticket;
}			pending_undos[MAX_PENDING_UNDOS];
static int	n_pending_undos = 0;

static int	n_acquired = 0;
static int	max_acquired = 0;

static bool
undo_pending(int i)
{
	uint32		st = dlock_waiter_state(dlock_waiter(pending_undos[i].index),
										pending_undos[i].ticket);

	return st == DLOCK_W_UNDO || st == DLOCK_W_ABANDONED;
}

/* Note a waiter to be waited for; those already done make room first. */
void
dlock_acquired_note_undo(int index, uint64 ticket)
{
	int			i;

	if (n_pending_undos == MAX_PENDING_UNDOS)
		for (i = n_pending_undos - 1; i >= 0; i--)
			if (!undo_pending(i))
				pending_undos[i] = pending_undos[--n_pending_undos];
	/* (64 waiters stalled at once: the next try may meet the 65th) */
	if (n_pending_undos < MAX_PENDING_UNDOS)
	{
		pending_undos[n_pending_undos].index = index;
		pending_undos[n_pending_undos].ticket = ticket;
		n_pending_undos++;
	}
}

void
dlock_acquired_reserve(void)
{
	if (n_acquired < max_acquired)
		return;
	if (acquired == NULL)
	{
		max_acquired = 8;
		acquired = MemoryContextAlloc(TopMemoryContext, sizeof(Acquired) * max_acquired);
	}
	else
	{
		acquired = repalloc(acquired, sizeof(Acquired) * max_acquired * 2);
		max_acquired *= 2;
	}
}

/*
 * Undo acquisition i: have the process that holds it release it.  Cannot
 * fail, and never waits (it runs while the transaction aborts): a hold that
 * ended or was used again since is left alone.
 */
static void
undo_acquired(int i)
{
	Acquired   *a = &acquired[i];

	DLOCK_FAULT("detached.undo");
	if (a->waiter)
	{
		DlockWaiter *w = dlock_waiter(a->index);

		if (dlock_waiter_move(w, a->use, DLOCK_W_HELD, DLOCK_W_UNDO))
		{
			int			procno = w->worker_procno;

			SetLatch(&GetPGProcByNumber(procno)->procLatch);
			dlock_acquired_note_undo(a->index, a->use);
		}
	}
	else
	{
		uint64		expected = DLOCK_FATE_PACK(a->use, DLOCK_FATE_HELD);

		if (pg_atomic_compare_exchange_u64(dlock_hold_fate(a->index), &expected,
										   DLOCK_FATE_PACK(a->use, DLOCK_FATE_UNDO)))
		{
			int			procno = dlock_detached->holder_procno;

			pg_atomic_fetch_add_u32(&dlock_detached->undo_requests, 1);
			if (dlock_detached->holder_pid != 0 && procno >= 0)
				SetLatch(&GetPGProcByNumber(procno)->procLatch);
		}
	}
	acquired[i] = acquired[--n_acquired];
}

/*
 * A prepared transaction can still be rolled back, by anyone, later: an
 * acquisition in it would have to be undone then, with nobody to do it.
 */
void
dlock_detached_refuse_prepare(void)
{
	if (n_acquired > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that acquired a detached lock"),
				 errdetail("A detached lock is undone if the transaction that acquired it rolls back, which a prepared transaction cannot arrange."),
				 errhint("Acquire it in a transaction of its own.")));
}

void
dlock_detached_xact_end(bool commit)
{
	if (!commit)
		while (n_acquired > 0)
			undo_acquired(n_acquired - 1);
	n_acquired = 0;
}

void
dlock_detached_subxact_end(bool commit, SubTransactionId mySubid,
						   SubTransactionId parentSubid)
{
	int			i;

	for (i = n_acquired - 1; i >= 0; i--)
	{
		if (acquired[i].subid != mySubid)
			continue;
		if (commit)
			acquired[i].subid = parentSubid;
		else
			undo_acquired(i);
	}
}

void
dlock_acquired_record(bool waiter, int index, uint64 use)
{
	Acquired   *a = &acquired[n_acquired++];

	a->waiter = waiter;
	a->index = index;
	a->use = use;
	a->subid = GetCurrentSubTransactionId();
}

/* Count an event of a detached acquisition of name (in this database). */
void
dlock_acquired_count(const DlockHold *h, int event, int64 us)
{
	if (event >= 0 && h->counted)
		dlock_stats_count(h->dbid, h->key, h->mode, h->name, h->namelen,
						  (DlockStatEvent) event, DLOCK_SCOPE_DETACHED, us, 0);
}

/*
 * Before an acquisition: the locks this session's given-up waited
 * acquisitions (rolled back, cancelled, timed out) left to their waiters to
 * release are released (interruptibly; up to deadline, 0: none), so that a
 * new try of the same name does not meet the old hold.  (The lock holder
 * does its undos, and frees an abandoned request, before it serves the
 * session's next request.)
 */
void
dlock_acquired_wait_undos(TimestampTz deadline)
{
	while (n_pending_undos > 0)
	{
		int			i = n_pending_undos - 1;

		if (!undo_pending(i))
		{
			n_pending_undos--;
			continue;
		}
		if (deadline != 0 && GetCurrentTimestamp() >= deadline)
			return;
		dlock_request_sleep(1L);
	}
}

/* At exit (detached.c): acquisitions of a transaction that did not commit. */
void
dlock_acquired_exit(void)
{
	while (n_acquired > 0)
		undo_acquired(n_acquired - 1);
}
