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
	dlock_shared->reaper_procno = -1;
}

/* Does the lock manager say pid holds this lock? */
static bool
still_held(LockData *ld, int pid, Oid dbid, const DlockEntry *e)
{
	LOCKMASK	bit = LOCKBIT_ON(DlockLockMode(e->mode));
	int			i;

	for (i = 0; i < ld->nelements; i++)
	{
		LockInstanceData *l = &ld->locks[i];

		if (l->pid == pid &&
			l->locktag.locktag_type == LOCKTAG_ADVISORY &&
			l->locktag.locktag_field1 == dbid &&
			l->locktag.locktag_field2 == (uint32) ((uint64) e->key >> 32) &&
			l->locktag.locktag_field3 == (uint32) e->key &&
			l->locktag.locktag_field4 == 1 &&
			(l->holdMask & bit) != 0)
			return true;
	}
	return false;
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

	if (a->stage == 0)
		dlock_stats_count_counted(e->counted, copy->dbid, e->key, e->mode, e->name,
								  e->namelen, DLOCK_STAT_EXPIRED, 0);
	if (a->stage == 0 || (a->stage == 1 && session))
	{
		if (session)
		{
			ereport(LOG,
					(errmsg("lease of lock \"%s\" expired, terminating process %d",
							name, copy->pid),
					 errdetail("The lease expired at %s; the lock is held at session level.",
							   expired)));
			signal_backend(copy->pid, SIGTERM);
			a->stage = 2;
		}
		else
		{
			ereport(LOG,
					(errmsg("lease of lock \"%s\" expired, canceling the transaction of process %d",
							name, copy->pid),
					 errdetail("The lease expired at %s; the lock is held at transaction level.",
							   expired)));
			signal_backend(copy->pid, SIGINT);
			a->stage = 1;
		}
		a->when = now;
	}
	else if (now - a->when >= DLOCK_CANCEL_GRACE_US)
	{
		if (a->stage == 1)
			ereport(LOG,
					(errmsg("lease of lock \"%s\" expired, terminating process %d",
							name, copy->pid),
					 errdetail("The lease expired at %s; the process still held the lock %d ms after its transaction was canceled.",
							   expired, (int) (DLOCK_CANCEL_GRACE_US / 1000))));
		signal_backend(copy->pid, SIGTERM);
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
	copy = MemoryContextAlloc(TopMemoryContext, dlock_shared->slot_size);
	actions = MemoryContextAllocZero(TopMemoryContext,
									 sizeof(ReaperAction) * dlock_shared->nslots);
	on_shmem_exit(reaper_exit, (Datum) 0);
	dlock_shared->reaper_procno = GetNumberFromPGProc(MyProc);

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
		pg_atomic_write_u64(&dlock_shared->reaper_wakeup, 0);
		pg_memory_barrier();

		MemoryContextReset(cxt);
		MemoryContextSwitchTo(cxt);

		/* a primary: tokens (and the token file) on its timeline */
		dlock_tokens_prepare();
		now = GetCurrentTimestamp();
		for (i = 0; i < dlock_shared->nslots; i++)
		{
			DlockSlot  *slot = dlock_slot(i);
			const DlockEntry *victim = NULL;
			bool		session = false;
			int			j;

			if (slot->pid == 0)
			{
				actions[i].pid = 0;
				continue;
			}
			dlock_read_slot(slot, copy);
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
				if (!still_held(ld, copy->pid, copy->dbid, e))
					continue;
				if (victim == NULL || (e->nsession > 0 && !session))
				{
					victim = e;
					session = e->nsession > 0;
				}
			}
			if (victim == NULL)
				actions[i].pid = 0;
			else
				next = Min(next, enforce(i, copy, victim, session, now));
		}
		MemoryContextSwitchTo(TopMemoryContext);

		pg_atomic_write_u64(&dlock_shared->reaper_wakeup, (uint64) next);
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
