/*
 * reaper.c: the lease reaper, a background worker.
 *
 * It sleeps until the earliest lease expiry in any slot (a backend that sets
 * an earlier one sets its latch), then ends each holder whose lease ran out
 * and that the lock manager confirms still holds the lock:
 *
 *  - session scope: the session is terminated (as pg_terminate_backend);
 *  - transaction scope only: the transaction is cancelled (as
 *    pg_cancel_backend); if the lock is still held DLOCK_CANCEL_GRACE_US
 *    later (the backend is idle in transaction, or swallowed the cancel),
 *    the session is terminated.
 *
 * Postgres frees the lock as the holder ends, so there is never a second
 * holder while the first one can still commit.
 *
 * It also starts fencing tokens as soon as the server is a primary (at start,
 * and within a second of a promotion), so that the token file holds the
 * timeline the server writes on even if no lock is ever taken (tokens.c).
 *
 * Layer 6 of the map in dlock.h (processes): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include <signal.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "leases.h"
#include "notify.h"
#include "slots.h"
#include "stats.h"
#include "tokens.h"
#include "workers.h"

/*
 * A transaction-scope holder whose lease ran out is first cancelled; if it
 * still holds the lock this long afterwards (idle in transaction, or it
 * swallowed the cancel), its session is terminated.
 */
#define DLOCK_CANCEL_GRACE_US ((int64) 1000 * 1000)

/*
 * A slot whose owner does not finish a change within about 5 ms (a process
 * stopped inside its change window) is read again 10 ms later: meanwhile
 * the reaper goes on with the other slots, so one stopped process never
 * holds up the leases of everyone else.
 */
#define SLOT_READ_LIMIT 5000
#define SLOT_RETRY_US	10000

/* What the reaper last did about one hold, identified by token and start. */
typedef struct ReaperAction
{
	int			pid;
	int64		token;
	TimestampTz since;
	int			stage;			/* 0 nothing, 1 cancelled, 2 terminated */
	TimestampTz when;
} ReaperAction;

static ReaperAction *actions;

static void
reaper_exit(int code, Datum arg)
{
	dlock_reaper_wake->procno = -1;
}

/* Does the lock manager say pid holds the advisory lock (key, subid) in lockmode? */
static bool
lock_held(LockData *ld, int pid, Oid dbid, int64 key, uint16 subid, LOCKMODE lockmode)
{
	LOCKMASK	bit = LOCKBIT_ON(lockmode);
	int			i;

	for (i = 0; i < ld->nelements; i++)
	{
		LockInstanceData *l = &ld->locks[i];

		if (l->pid == pid &&
			l->locktag.locktag_type == LOCKTAG_ADVISORY &&
			l->locktag.locktag_field1 == dbid &&
			l->locktag.locktag_field2 == (uint32) ((uint64) key >> 32) &&
			l->locktag.locktag_field3 == (uint32) key &&
			l->locktag.locktag_field4 == subid &&
			(l->holdMask & bit) != 0)
			return true;
	}
	return false;
}

/*
 * What the lease of entry e of process pid is enforced on: 2 its session
 * (a session hold whose lease marker is held: dlock's own hold, not a lock
 * of the same key taken afresh after DISCARD ALL or
 * pg_advisory_unlock_all), 1 its transaction, 0 nothing (the lock is gone).
 */
static int
victim_scope(LockData *ld, int pid, Oid dbid, const DlockEntry *e)
{
	if (!lock_held(ld, pid, dbid, e->key, dlock_permit_subid(e->permit), DlockLockMode(e->mode)))
		return 0;
	if (e->nsession > 0 &&
		lock_held(ld, pid, dbid, e->key, DLOCK_MARKER_SUBID(e->mode), DLOCK_MARKER_MODE))
		return 2;
	return e->nxact > 0 ? 1 : 0;
}

static DlockSlot *recheck;
static LockData *fresh_ld;		/* the snapshot for the re-checks */
static TimestampTz fresh_at;	/* when it was taken */

/* A snapshot of the lock manager for the re-checks, at most a millisecond old. */
static LockData *
fresh_lock_data(void)
{
	TimestampTz now = GetCurrentTimestamp();

	if (fresh_ld == NULL || now - fresh_at > 1000)
	{
		if (fresh_ld != NULL)
		{
			pfree(fresh_ld->locks);
			pfree(fresh_ld);
		}
		fresh_ld = GetLockStatusData();
		fresh_at = GetCurrentTimestamp();
	}
	return fresh_ld;
}

/*
 * Right before a signal: does the lock manager still say the process holds
 * the hold, in the same scope, and is slot i, read after that, still the
 * same process (pid and generation) with the same hold (key, mode, token,
 * start), expired?  In that order: a hold released and taken afresh in
 * between shows a new token.  A snapshot of the lock manager serves the
 * re-checks of at most a millisecond (each slot is read after it).  What is
 * left is that millisecond, the time from the slot's read to kill(), and a
 * release whose record the holder has not yet written (doc/functions.md "Leases").
 * 1: yes; 0: no; -1: cannot tell yet (the slot's owner is inside a change).
 */
static int
still_victim(int i, const DlockSlot *copy, const DlockEntry *e, int scope, TimestampTz now)
{
	LockData   *ld;
	int			j;

	DLOCK_FAULT("reaper.recheck");
	ld = fresh_lock_data();
	pg_memory_barrier();
	if (!dlock_slot_read(dlock_slot(i), recheck, SLOT_READ_LIMIT))
		return -1;
	if (recheck->pid != copy->pid || recheck->generation != copy->generation)
		return 0;
	for (j = 0; j < recheck->nused; j++)
	{
		const DlockEntry *r = &recheck->entries[j];

		if (r->inuse && r->key == e->key && r->mode == e->mode && r->token == e->token &&
			r->since == e->since && r->lease_expires != 0 && r->lease_expires <= now)
			break;
	}
	if (j == recheck->nused)
		return 0;
	return victim_scope(ld, copy->pid, copy->dbid, &recheck->entries[j]) == scope ? 1 : 0;
}

static void
signal_backend(int pid, int sig)
{
	/* the whole process group first, as pg_signal_backend() does */
#ifdef HAVE_SETSID
	if (kill(-pid, sig) == 0)
		return;
#endif
	if (kill(pid, sig) != 0)
		ereport(LOG,
				(errmsg("could not send signal to process %d: %m", pid)));
}

/* Act on an expired hold; returns when to look at it again. */
static TimestampTz
enforce(int i, const DlockSlot *copy, const DlockEntry *e, bool session,
		TimestampTz now)
{
	int			scope = session ? 2 : 1;
	ReaperAction *a = &actions[i];
	char	   *name = pnstrdup(e->name, e->namelen);
	const char *expired = timestamptz_to_str(e->lease_expires);

	if (a->pid != copy->pid || a->token != e->token || a->since != e->since)
	{
		a->pid = copy->pid;
		a->token = e->token;
		a->since = e->since;
		a->stage = 0;
	}

	/* the pid alone is not enough: is it still the same hold, expired and held? */
	if (a->stage == 0 || (a->stage == 1 && session) ||
		now - a->when >= DLOCK_CANCEL_GRACE_US)
	{
		int			victim = still_victim(i, copy, e, scope, now);

		if (victim < 0)
			return now + SLOT_RETRY_US;
		if (victim == 0)
		{
			a->pid = 0;
			return now + DLOCK_CANCEL_GRACE_US;
		}
	}
	/*
	 * Nothing between the re-check and the signal: the log line (a write
	 * that can block) and the count (a lock of the statistics) come after.
	 */
	if (a->stage == 0 || (a->stage == 1 && session))
	{
		bool		first = a->stage == 0;

		signal_backend(copy->pid, session ? SIGTERM : SIGINT);
		if (session)
			ereport(LOG,
					(errmsg("lease of lock \"%s\" expired, terminating process %d",
							name, copy->pid),
					 errdetail("The lease expired at %s; the lock is held at session level.",
							   expired)));
		else
			ereport(LOG,
					(errmsg("lease of lock \"%s\" expired, canceling the transaction of process %d",
							name, copy->pid),
					 errdetail("The lease expired at %s; the lock is held at transaction level.",
							   expired)));
		if (first)
			dlock_stats_count_counted(e->counted, copy->dbid, e->key, e->mode, e->name,
									  e->namelen, DLOCK_STAT_EXPIRED, 0, InvalidOid);
		a->stage = session ? 2 : 1;
		a->when = now;
	}
	else if (now - a->when >= DLOCK_CANCEL_GRACE_US)
	{
		signal_backend(copy->pid, SIGTERM);
		if (a->stage == 1)
			ereport(LOG,
					(errmsg("lease of lock \"%s\" expired, terminating process %d",
							name, copy->pid),
					 errdetail("The lease expired at %s; the process still held the lock %d ms after its transaction was canceled.",
							   expired, (int) (DLOCK_CANCEL_GRACE_US / 1000))));
		a->stage = 2;
		a->when = now;
	}
	return a->when + DLOCK_CANCEL_GRACE_US;
}

void
dlock_reaper_main(Datum arg)
{
	MemoryContext cxt;
	DlockSlot  *copy;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("dlock lease reaper");

	cxt = AllocSetContextCreate(TopMemoryContext, "dlock reaper",
								ALLOCSET_DEFAULT_SIZES);
	copy = MemoryContextAlloc(TopMemoryContext, dlock_slots->slot_size);
	recheck = MemoryContextAlloc(TopMemoryContext, dlock_slots->slot_size);
	actions = MemoryContextAllocZero(TopMemoryContext,
									 sizeof(ReaperAction) * dlock_slots->nslots);
	on_shmem_exit(reaper_exit, (Datum) 0);
	dlock_reaper_wake->procno = GetNumberFromPGProc(MyProc);

	for (;;)
	{
		TimestampTz now;
		TimestampTz next = PG_INT64_MAX;
		LockData   *ld = NULL;
		long		sleep_ms;
		int			i;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/* from here until we publish "next", every new lease wakes us */
		pg_atomic_write_u64(&dlock_reaper_wake->wakeup, 0);
		pg_memory_barrier();

		MemoryContextReset(cxt);
		MemoryContextSwitchTo(cxt);
		fresh_ld = NULL;

		/* a primary: tokens (and the token file) on its timeline */
		dlock_tokens_prepare();
		now = GetCurrentTimestamp();
		for (i = 0; i < dlock_slots->nslots; i++)
		{
			DlockSlot  *slot = dlock_slot(i);
			const DlockEntry *victim = NULL;
			bool		session = false;
			int			scope;
			int			j;

			if (slot->pid == 0)
			{
				actions[i].pid = 0;
				continue;
			}
			if (!dlock_slot_read(slot, copy, SLOT_READ_LIMIT))
			{
				next = Min(next, now + SLOT_RETRY_US);
				continue;
			}
			for (j = 0; j < copy->nused; j++)
			{
				const DlockEntry *e = &copy->entries[j];

				if (!e->inuse || e->lease_expires == 0 ||
					e->nsession + e->nxact == 0)
					continue;
				if (e->lease_expires > now)
				{
					next = Min(next, e->lease_expires);
					continue;
				}
				if (ld == NULL)
					ld = GetLockStatusData();
				scope = victim_scope(ld, copy->pid, copy->dbid, e);
				if (scope == 0)
					continue;
				if (victim == NULL || (scope == 2 && !session))
				{
					victim = e;
					session = scope == 2;
				}
			}
			if (victim == NULL)
				actions[i].pid = 0;
			else
				next = Min(next, enforce(i, copy, victim, session, now));
		}
		MemoryContextSwitchTo(TopMemoryContext);
		/* a database whose events (notify.c) wait without a notifier */
		next = Min(next, dlock_notify_start_wanted(now));

		pg_atomic_write_u64(&dlock_reaper_wake->wakeup, (uint64) next);
		pg_memory_barrier();

		/*
		 * Sleep until the next expiry; a minute at most, as a safety net, and
		 * a second on a standby, to start tokens soon after a promotion.
		 */
		if (next == PG_INT64_MAX)
			sleep_ms = RecoveryInProgress() ? 1000 : 60 * 1000;
		else
		{
			now = GetCurrentTimestamp();
			sleep_ms = next <= now ? 0 : (long) ((next - now + 999) / 1000);
			sleep_ms = Min(sleep_ms, RecoveryInProgress() ? 1000 : 60 * 1000);
		}
		if (sleep_ms > 0)
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 sleep_ms, PG_WAIT_EXTENSION);
	}
}
