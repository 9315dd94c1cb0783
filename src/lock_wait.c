/*
 * lock_wait.c: waiting in the lock manager's queue, for a named lock (with
 * a timeout of the call's own, the lock timer's expiry turned into "not
 * available") or for a permit of a semaphore (in line in the name's
 * turnstile, then first in line until a permit is free); the entry shows
 * the wait meanwhile (dlock_set_waiting).  What locks.c's fast path calls
 * when the lock manager cannot grant at once.
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include <signal.h>
#include <unistd.h>

#include "dlock.h"
#include "entries.h"
#include "locks.h"
#include "name.h"
#include "semaphore.h"
#include "stats.h"

/*
 * Mark the entry waiting (what: DLOCK_WAIT_*) or not; a wait that starts it
 * shows the caller's info (a candidate's word, while it waits in the queue).
 */
void
dlock_set_waiting(int ref, const DlockName *name, uint8 mode, uint8 what, const DlockInfo *info)
{
	DlockEntry *e = dlock_entry_at(ref);

	dlock_change_begin(ref);
	if (what != DLOCK_WAIT_NONE && !e->inuse)
	{
		dlock_entry_start(ref, name, mode, GetCurrentTimestamp());
		dlock_entry_set_info(e, info);
	}
	e->waiting = what;
	if (what == DLOCK_WAIT_NONE)
		dlock_entry_free_if_unused(ref);
	dlock_change_end(ref);
}

/*
 * A name fit to stand in a report's DETAIL between quotes: nothing that
 * could pass for another line or end the quotes (a name is the caller's
 * own text).
 */
static bool
plain_name(const char *name)
{
	for (const unsigned char *c = (const unsigned char *) name; *c; c++)
	{
		if (*c < 0x20 || *c == '"' || *c == '\\' || *c == 0x7f)
			return false;
		/* U+0085, and U+2028 to U+202E, U+2066 to U+2069 (line breaks, bidi) */
		if ((c[0] == 0xc2 && c[1] == 0x85) ||
			(c[0] == 0xe2 && c[1] == 0x80 && c[2] >= 0xa8 && c[2] <= 0xae) ||
			(c[0] == 0xe2 && c[1] == 0x81 && c[2] >= 0xa6 && c[2] <= 0xa9))
			return false;
	}
	return true;
}

/* The name of key in this database as this backend knows it, or NULL. */
static char *
known_name(int64 key, const DlockName *waited)
{
	char	   *name = NULL;
	int			i;

	if (key == waited->key)
		name = dlock_name_for_report(waited->utf8, waited->len);
	else if (dlock_my_slot != NULL)
	{
		for (i = 0; i < dlock_my_slot->nused && name == NULL; i++)
		{
			const DlockEntry *e = &dlock_my_slot->entries[i];

			if (e->inuse && e->key == key)
				name = dlock_name_for_report(e->name, e->namelen);
		}
	}
	return name != NULL && plain_name(name) ? name : NULL;
}

/* Reads "[d,d,d,d]" (decimal digits only) at p into v; the length read, or 0. */
static int
lock_numbers(const char *p, uint32 *v)
{
	const char *c = p;

	if (*c++ != '[')
		return 0;
	for (int i = 0; i < 4; i++)
	{
		uint64		n = 0;
		int			digits = 0;

		while (*c >= '0' && *c <= '9' && digits < 10)
		{
			n = n * 10 + (uint64) (*c++ - '0');
			digits++;
		}
		if (digits == 0 || n > PG_UINT32_MAX || *c++ != (i < 3 ? ',' : ']'))
			return 0;
		v[i] = (uint32) n;
	}
	return (int) (c - p);
}

/*
 * A deadlock's DETAIL, with each of dlock's locks this backend knows the
 * name of (the one it waited for, and those it holds) named beside
 * PostgreSQL's four numbers.  Linear in the text; reads nothing but it.
 */
static char *
name_locks(const char *text, const DlockName *waited)
{
	static const char mark[] = "advisory lock ";
	StringInfoData buf;
	const char *p = text;
	const char *at;

	initStringInfo(&buf);
	while ((at = strstr(p, mark)) != NULL)
	{
		uint32		v[4];
		int			len;
		char	   *name = NULL;

		at += sizeof(mark) - 1;
		appendBinaryStringInfo(&buf, p, (int) (at - p));
		p = at;
		len = lock_numbers(at, v);
		if (len == 0)
			continue;
		appendBinaryStringInfo(&buf, at, len);
		p = at + len;
		if (v[0] == MyDatabaseId)
			name = known_name((int64) (((uint64) v[1] << 32) | (uint64) v[2]), waited);
		if (name == NULL)
			continue;
		if (v[3] == DLOCK_SUBID_KEY)
			appendStringInfo(&buf, " (dlock lock \"%s\")", name);
		else if (v[3] == DLOCK_SUBID_UPDATE)
			appendStringInfo(&buf, " (dlock lock \"%s\" in update mode)", name);
		else if (v[3] == DLOCK_SUBID_LINE)
			appendStringInfo(&buf, " (the line of detached lock \"%s\")", name);
		else if (v[3] == DLOCK_SUBID_TURNSTILE)
			appendStringInfo(&buf, " (the line of semaphore \"%s\")", name);
		else if (v[3] > DLOCK_SUBID_TURNSTILE + 1 && v[3] <= DLOCK_SUBID_TURNSTILE + DLOCK_PERMITS_MAX)
			appendStringInfo(&buf, " (permit %u of semaphore \"%s\")", v[3] - DLOCK_SUBID_TURNSTILE, name);
	}
	appendStringInfoString(&buf, p);
	return buf.data;
}

/*
 * A deadlock found while this backend waited for waited: PostgreSQL names
 * each lock of the cycle by four numbers ("advisory lock
 * [16384,2017062713,1524364846,1]"); those this backend knows get their
 * names beside them, in the client's DETAIL and in the log's, whose query
 * lines after it are left as they are.
 */
static void
name_deadlock(ErrorData *edata, const DlockName *waited)
{
	size_t		n;
	char	   *named;

	if (edata->detail == NULL)
		return;
	n = strlen(edata->detail);
	named = name_locks(edata->detail, waited);
	if (edata->detail_log != NULL && strncmp(edata->detail_log, edata->detail, n) == 0)
		edata->detail_log = psprintf("%s%s", named, edata->detail_log + n);
	edata->detail = named;
}

/* Release a session lock the caller is not to keep, if the lock manager has it. */
static void
release_if_held(const LOCKTAG *tag, LOCKMODE lockmode, bool xact)
{
	if (!xact && dlock_lock_held_by_me(tag, lockmode))
	{
		LockRelease(tag, lockmode, true);
		dlock_permit_tag_released(tag);
	}
}

/*
 * While a timed wait runs, SIGINT is looked at before PostgreSQL's handler
 * has it: the lock timer's expiry is a SIGINT the process sends itself (so
 * is statement_timeout's), while a cancel from the client, from
 * pg_cancel_backend or from the lease reaper comes from another process.
 * Only a cancel of the first kind may be dropped after a grant that raced
 * the deadline.  Two system calls per timed wait, none on the way to an
 * immediate grant.
 */
static struct sigaction saved_sigint;
static volatile sig_atomic_t foreign_sigint = false;
static bool watching_sigint = false;

static void
watch_sigint_handler(int signo, siginfo_t *info, void *context)
{
	if (info == NULL || info->si_pid != MyProcPid)
		foreign_sigint = true;
	if (saved_sigint.sa_flags & SA_SIGINFO)
		saved_sigint.sa_sigaction(signo, info, context);
	else if (saved_sigint.sa_handler != SIG_IGN && saved_sigint.sa_handler != SIG_DFL)
		saved_sigint.sa_handler(signo);
}

static void
watch_sigint(void)
{
	struct sigaction act;

	if (watching_sigint)
		return;
	memset(&act, 0, sizeof(act));
	act.sa_sigaction = watch_sigint_handler;
	act.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&act.sa_mask);
	foreign_sigint = false;
	if (sigaction(SIGINT, &act, &saved_sigint) == 0)
		watching_sigint = true;
}

static void
unwatch_sigint(void)
{
	if (watching_sigint)
		(void) sigaction(SIGINT, &saved_sigint, NULL);
	watching_sigint = false;
}

/*
 * The lock timer fired after the grant: drop the cancel it queued, unless a
 * cancel from another process came too, or the statement's own timeout.
 * SIGINT is blocked meanwhile, so that a cancel cannot slip in between.
 */
static void
drop_lock_timer_cancel(void)
{
	sigset_t	block,
				old;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &old);
	if (!foreign_sigint)
	{
		QueryCancelPending = false;
		/* unless the statement's timeout has come too, now or just now */
		if (get_timeout_indicator(STATEMENT_TIMEOUT, false))
		{
			QueryCancelPending = true;
			InterruptPending = true;
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* Count a wait that ended without the lock (event -1: not counted). */
void
dlock_count_wait_end(const DlockName *name, uint8 mode, int event, TimestampTz start)
{
	if (event >= 0)
		dlock_stats_count(MyDatabaseId, name->key, mode, name->utf8, name->len,
						  (DlockStatEvent) event, 0, GetCurrentTimestamp() - start, 0);
}

/* The same, for a wait of an entry (ref >= 0); a caller without one counts its own. */
static void
count_entry_wait_end(int ref, const DlockName *name, uint8 mode, int event, TimestampTz start)
{
	if (ref >= 0)
		dlock_count_wait_end(name, mode, event, start);
}

/*
 * Wait in the lock manager's queue.  With a timeout, lock_timeout is set to
 * it for this one wait and its expiry is turned into "not available"; any
 * other error (deadlock, cancel, statement_timeout) goes to the caller.
 * The entry ref shows the wait, and an end without the lock is counted;
 * ref -1: neither (a caller in the line of a detached lock, which has its
 * own record and counts the whole acquisition).
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
LockAcquireResult
dlock_wait_for_lock(const LOCKTAG *tag, LOCKMODE lockmode, bool xact, bool session, int64 timeout_us,
			  int ref, const DlockName *name, uint8 mode, TimestampTz start,
			  const DlockInfo *info)
{
	volatile LockAcquireResult res = LOCKACQUIRE_NOT_AVAIL;
	int			saved_timeout = LockTimeout;
	MemoryContext cxt = CurrentMemoryContext;
	bool		stmt_armed = get_timeout_active(STATEMENT_TIMEOUT);
	TimestampTz stmt_deadline = get_timeout_finish_time(STATEMENT_TIMEOUT);

	if (ref >= 0)
		dlock_set_waiting(ref, name, mode, xact ? DLOCK_WAIT_XACT : DLOCK_WAIT_SESSION, info);
	if (timeout_us >= 0)
		watch_sigint();
	PG_TRY();
	{
		DLOCK_FAULT("lock.wait");
		/* (at least 1 ms: lock_timeout 0 would be no limit at all) */
		if (timeout_us >= 0)
			LockTimeout = (int) Max((timeout_us + 999) / 1000, 1);
		res = LockAcquire(tag, lockmode, session, false);
		LockTimeout = saved_timeout;

		/*
		 * Our deadline passed after the grant but before the lock manager
		 * disarmed the timer: the lock is ours, and the cancel the timer
		 * queued is not meant for anyone (unless a real cancel or the
		 * statement's own timeout came too).
		 */
		if (timeout_us >= 0 && get_timeout_indicator(LOCK_TIMEOUT, true))
			drop_lock_timer_cancel();
		unwatch_sigint();
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		foreign = foreign_sigint;

		unwatch_sigint();
		LockTimeout = saved_timeout;
		if (ref >= 0)
			dlock_set_waiting(ref, name, mode, DLOCK_WAIT_NONE, NULL);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();

		/*
		 * Our deadline and a cancel from elsewhere in one instant: the lock
		 * manager reports the deadline, and the cancel must not be lost.
		 */
		if (timeout_us >= 0 && edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE && foreign)
		{
			FreeErrorData(edata);
			FlushErrorState();
			release_if_held(tag, lockmode, !session);
			count_entry_wait_end(ref, name, mode, DLOCK_STAT_CANCEL, start);
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceling statement due to user request")));
		}
		if (timeout_us < 0 || edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
		{
			/*
			 * A cancel, a timeout or a signal can be handled right after the
			 * lock manager granted the lock (LockErrorCleanup keeps a grant
			 * it finds).  The caller sees an error, so it must not hold the
			 * lock: a transaction-scope lock goes with the abort, a session
			 * one would outlive it, unrecorded.
			 */
			release_if_held(tag, lockmode, !session);
			count_entry_wait_end(ref, name, mode, dlock_stat_wait_error(edata->sqlerrcode), start);
			if (edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED)
			{
				/* the same error, with dlock's names in its DETAIL */
				name_deadlock(edata, name);
				FlushErrorState();
				ReThrowError(edata);
			}
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
			release_if_held(tag, lockmode, !session);
			count_entry_wait_end(ref, name, mode, DLOCK_STAT_CANCEL, start);
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
 * Wait for a permit of a semaphore (semaphore.c): in line in the name's
 * turnstile (a wait in the lock manager's queue, as for a lock), then,
 * first in line, until a permit is free.  The permit, or 0 at the timeout;
 * an error leaves no permit and no place in line.
 */
static int
wait_for_permit(const DlockName *name, int ref, bool xact, const AcquireArgs *a,
				TimestampTz start)
{
	LOCKTAG		turnstile;
	volatile int permit = 0;
	volatile bool head = false;
	volatile TimestampTz deadline = a->timeout_us > 0 ? start + a->timeout_us : 0;
	volatile bool by_lock_timeout = false;

	/*
	 * Without a timeout, lock_timeout bounds the whole wait, as it bounds
	 * the wait in line (a lock wait): the first in line's too, from the
	 * call's start, with its usual error.
	 */
	if (a->timeout_us < 0 && LockTimeout > 0)
	{
		deadline = start + (int64) LockTimeout * 1000;
		by_lock_timeout = true;
	}
	dlock_set_turnstile_tag(&turnstile, MyDatabaseId, name->key);
	dlock_permit_queue_enter(MyDatabaseId, name->key);
	PG_TRY();
	{
		if (dlock_wait_for_lock(&turnstile, ExclusiveLock, xact, true, a->timeout_us, ref, name,
						  DLOCK_EXCLUSIVE, start, &a->info) != LOCKACQUIRE_NOT_AVAIL)
		{
			head = true;
			DLOCK_FAULT("permit.head");
			permit = dlock_permit_head(MyDatabaseId, name->key, a->permits, !xact, deadline,
									   true);
			if (permit == 0 && by_lock_timeout)
				ereport(ERROR,
						(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
						 errmsg("canceling statement due to lock timeout")));
			head = false;
			LockRelease(&turnstile, ExclusiveLock, true);
		}
	}
	PG_CATCH();
	{
		/* (a wait for the turnstile that failed cleaned up after itself) */
		if (head)
		{
			LockRelease(&turnstile, ExclusiveLock, true);
			dlock_set_waiting(ref, name, DLOCK_EXCLUSIVE, DLOCK_WAIT_NONE, NULL);
			dlock_count_wait_end(name, DLOCK_EXCLUSIVE, dlock_stat_wait_error(geterrcode()), start);
		}
		dlock_permit_queue_leave();
		PG_RE_THROW();
	}
	PG_END_TRY();
	dlock_permit_queue_leave();
	return permit;
}

/*
 * Take a permit of a semaphore: one free now if nobody is in line, else
 * (a call that waits) its turn.  LOCKACQUIRE_OK with *permit, or
 * LOCKACQUIRE_NOT_AVAIL (busy, or the timeout: counted).
 */
LockAcquireResult
dlock_take_permit(const DlockName *name, int ref, bool xact, bool can_wait, const AcquireArgs *a,
			int *permit, int64 *waited_us)
{
	TimestampTz start;
	int			p;

	p = dlock_permit_take(MyDatabaseId, name->key, a->permits, !xact, NULL, NULL);
	if (p > 0)
	{
		*permit = p;
		return LOCKACQUIRE_OK;
	}
	if (!can_wait || a->timeout_us == 0)
	{
		dlock_stats_count(MyDatabaseId, name->key, DLOCK_EXCLUSIVE, name->utf8, name->len,
						  DLOCK_STAT_BUSY, 0, 0, 0);
		return LOCKACQUIRE_NOT_AVAIL;
	}
	start = GetCurrentTimestamp();
	p = wait_for_permit(name, ref, xact, a, start);
	if (p == 0)
	{
		dlock_set_waiting(ref, name, DLOCK_EXCLUSIVE, DLOCK_WAIT_NONE, NULL);
		dlock_count_wait_end(name, DLOCK_EXCLUSIVE, DLOCK_STAT_TIMEOUT, start);
		return LOCKACQUIRE_NOT_AVAIL;
	}
	*waited_us = Max(GetCurrentTimestamp() - start, 0);
	*permit = p;
	return LOCKACQUIRE_OK;
}
