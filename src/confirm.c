/*
 * confirm.c: dlock.synchronous_grants.
 *
 * A primary that has been replaced does not know it until its HA manager
 * demotes it: one stopped (SIGSTOP, a frozen VM) while another member was
 * promoted goes on granting locks to its clients for a moment when it
 * resumes, with tokens of its old timeline that a fenced resource refuses,
 * but a "yes" all the same.  Under synchronous replication a commit there
 * cannot complete: the standby it waits for is now the new primary, or
 * follows it.  With this setting on, a grant waits in the same way before it
 * is answered: the granting backend writes a WAL record after the grant and
 * waits until the synchronous standbys have flushed it.  A replaced primary
 * then answers no one; its HA manager ends the waiting sessions as it
 * demotes it, and their grants go with them.
 *
 * Only a "yes" waits (a grant, or a re-entry), never the lock path without
 * the setting; without synchronous_standby_names (or WAL senders) nothing
 * waits, as no commit does.  A call with a timeout waits within it, then
 * fails (55P03); a cancel or terminate during the wait fails the call, and
 * a client that went away ends the session.  The caller gives the grant
 * back (locks.c: after_grant_guarded; several names: all of them; a
 * detached lock: undone with the transaction), and counts a lease from the
 * answer.
 *
 * Layer 3 of the map in dlock.h (mechanisms): calls only files listed
 * before it there.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/pg_control.h"
#include "miscadmin.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "tcop/tcopprot.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "confirm.h"
#include "fault.h"
#include "leases.h"

bool		dlock_synchronous_grants = false;

/* the longest sleep between two looks (a waiting commit costs none) */
#define CONFIRM_MAX_SLEEP_MS 20

/*
 * A grant that came at the end of its call's timeout still has this long
 * to be confirmed: a healthy standby answers in a round trip, and a grant
 * given just before the deadline should not turn into an error for that.
 */
#define CONFIRM_MIN_WAIT_US USECS_PER_SEC

static bool
confirmed(XLogRecPtr lsn)
{
	bool		done;

	/* as a commit: no WAL senders, no wait (SyncRepRequested) */
	if (max_wal_senders == 0)
		return true;
	LWLockAcquire(SyncRepLock, LW_SHARED);
	done = !dlock_sync_standbys_defined(WalSndCtl) ||
		(lsn != InvalidXLogRecPtr && WalSndCtl->lsn[SYNC_REP_WAIT_FLUSH] >= lsn);
	LWLockRelease(SyncRepLock);
	return done;
}

typedef struct ConfirmWhat
{
	const DlockName *names;
	int			n;
} ConfirmWhat;

static void
confirm_context(void *arg)
{
	const ConfirmWhat *w = (const ConfirmWhat *) arg;

	if (w->n == 1)
		errcontext("waiting for the synchronous standbys to confirm the grant of lock \"%s\" "
				   "(dlock.synchronous_grants)", dlock_display_name(&w->names[0]));
	else
		errcontext("waiting for the synchronous standbys to confirm the grant of locks \"%s\" and %d more "
				   "(dlock.synchronous_grants)", dlock_display_name(&w->names[0]), w->n - 1);
}

/*
 * Look until lsn is confirmed: after 1, 2, 4 ... 20 ms (the standbys'
 * walsenders release commits through a queue that is not ours to join).
 */
static void
confirm_wait(XLogRecPtr lsn, TimestampTz deadline)
{
	long		sleep_ms = 1;

	while (!confirmed(lsn))
	{
		TimestampTz now;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		sleep_ms = Min(sleep_ms * 2, CONFIRM_MAX_SLEEP_MS);
		now = GetCurrentTimestamp();
		if (deadline != 0 && now >= deadline && !confirmed(lsn))
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("the synchronous standbys did not confirm the grant within the call's timeout"),
					 errdetail("The lock was granted and given back: with \"dlock.synchronous_grants\" on, "
							   "a lock is granted once a synchronous standby has WAL written after the grant."),
					 errhint("See pg_stat_replication: a primary whose synchronous standbys do not answer "
							 "(they are down, or one of them was promoted) grants nothing.")));
	}
}

/* confirm_wait with the client checked (a function of its own for PG_TRY) */
static pg_noinline void
confirm_wait_checked(XLogRecPtr lsn, TimestampTz deadline)
{
	dlock_client_check_on();
	PG_TRY();
	{
		confirm_wait(lsn, deadline);
	}
	PG_FINALLY();
	{
		dlock_client_check_off();
	}
	PG_END_TRY();
}

/*
 * The deadline of a confirmation for a call whose own deadline is
 * call_deadline (0: none, and none for the confirmation either): that, or
 * CONFIRM_MIN_WAIT_US from now if that is later.
 */
TimestampTz
dlock_confirm_deadline(TimestampTz call_deadline)
{
	if (call_deadline == 0)
		return 0;
	return Max(call_deadline, GetCurrentTimestamp() + CONFIRM_MIN_WAIT_US);
}

/*
 * Wait until the synchronous standbys have WAL written after the grant of
 * names[0..n-1]; until deadline if not 0 (the call's timeout), then an
 * ERROR (55P03).  An ERROR (a cancel, statement_timeout, a lease of this
 * session's that ran out) or FATAL (a terminate, the client gone) if the
 * wait is ended otherwise.
 */
void
dlock_confirm_grant(const DlockName *names, int n, TimestampTz deadline)
{
	ErrorContextCallback cb;
	ConfirmWhat what = {names, n};
	XLogRecPtr	lsn;
	int64		key = names[0].key;

	/* a standby-local lock (dlock.allow_standby_locks): no WAL to wait for */
	if (RecoveryInProgress())
		return;
	cb.callback = confirm_context;
	cb.arg = &what;
	cb.previous = error_context_stack;
	error_context_stack = &cb;
	DLOCK_FAULT("grant.confirm");
	if (!confirmed(InvalidXLogRecPtr))
	{
		/* WAL after the grant: a key, to say what it was for */
		XLogBeginInsert();
		XLogRegisterData((char *) &key, sizeof(key));
		lsn = XLogInsert(RM_XLOG_ID, XLOG_NOOP);
		XLogFlush(lsn);
		confirm_wait_checked(lsn, deadline);
	}
	/*
	 * a cancel or terminate that came meanwhile, or a lease of this
	 * session's that ran out (it takes nothing more): the call fails
	 */
	CHECK_FOR_INTERRUPTS();
	if (unlikely(dlock_lease_min != 0))
		dlock_lease_refuse_after_expiry();
	error_context_stack = cb.previous;
}

/*
 * While a call waits (a detached lock's caller in line or for its ticket,
 * a grant for the synchronous standbys), a client that went away is
 * noticed within a second, as client_connection_check_interval would
 * notice it: on if it is off.
 */
static bool client_checked = false;

void
dlock_client_check_on(void)
{
	if (client_connection_check_interval == 0 && MyProcPort != NULL)
	{
		client_checked = true;
		client_connection_check_interval = 1000;
		enable_timeout_after(CLIENT_CONNECTION_CHECK_TIMEOUT, 1000);
	}
}

void
dlock_client_check_off(void)
{
	if (client_checked)
	{
		client_connection_check_interval = 0;
		disable_timeout(CLIENT_CONNECTION_CHECK_TIMEOUT, false);
	}
	client_checked = false;
}
