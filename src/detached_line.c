/*
 * detached_line.c: a detached acquisition, the caller's side (the lock
 * holder's: holder.c): the lock holder is asked for it without waiting; if
 * it is busy and the call may wait, the caller lines up for the name, and
 * the first in line waits through a waiter process (detached_wait.c).
 *
 * The line (dlock.h DLOCK_SUBID_LINE) is a lock each caller waits for in
 * its own backend, in the lock manager's queue: first come, first served,
 * cancellable, within the call's timeout, and seen by the deadlock
 * detector.  Only the first in line (who holds it) has a waiter process;
 * it passes the line on once its waiter was granted the lock (or it gave
 * up), so a name waited for by any number of callers in exclusive mode
 * takes at most two background workers: the waiter of the lock granted
 * last, and the first in line's.  While anyone is in line, a call that does
 * not wait is refused and one that waits lines up behind them, as the lock
 * manager does with its own queue.  The first in line asks the lock holder
 * again (the lock may be free, or shared with those before it) before it
 * starts a waiter.
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "confirm.h"
#include "dlock.h"
#include "detached_caller.h"
#include "locks.h"
#include "stats.h"

/* this backend's turn in a line: its bucket (counted there), or -1 */
static int	line_bucket = -1;
static bool line_first = false; /* first in line: the line lock held */
static LOCKTAG line_tag;
static LOCKMODE line_mode;

/* line_enter's answers */
#define LINE_FIRST		0		/* first at once: nobody was in line */
#define LINE_WAITED		1		/* first, after those before */
#define LINE_TIMEOUT	2		/* the deadline passed in line */

/* This backend's place in line (indexed like its request). */
static DlockLine *
my_line(void)
{
	return dlock_line(dlock_request_procno());
}

/* Not shown in line any more. */
static void
line_unshow(void)
{
	DlockLine  *l = my_line();

	if (l->pid == 0)
		return;
	dlock_hold_begin(&l->hold);
	l->hold.state = DLOCK_HOLD_FREE;
	dlock_hold_end(&l->hold);
	l->pid = 0;
}

/*
 * The turn ends: the line passes to the next (the lock manager wakes it),
 * and this backend is no longer counted in it.  Nothing here can fail.
 */
static void
line_leave(void)
{
	if (line_bucket < 0)
		return;
	if (line_first)
		LockRelease(&line_tag, line_mode, true);
	line_first = false;
	line_unshow();
	pg_atomic_fetch_sub_u32(&dlock_detached->in_line[line_bucket], 1);
	line_bucket = -1;
}

/*
 * Is anyone in line for h's name?  Looked at only where the bucket counts
 * someone: the line in share mode, which a caller in line (waiting for it,
 * or first and holding it) keeps us from.
 */
static bool
line_taken(const DlockHold *h)
{
	LOCKTAG		tag;

	if (pg_atomic_read_u32(&dlock_detached->in_line[dlock_line_bucket(h->dbid, h->key)]) == 0)
		return false;
	dlock_set_line_tag(&tag, h->dbid, h->key);
	if (LockAcquire(&tag, ShareLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, ShareLock, true);
	return false;
}

/*
 * Line up for h's name until first in line, or the deadline (0: none):
 * LINE_FIRST, LINE_WAITED or LINE_TIMEOUT (out of line again).  The wait is
 * the lock manager's, with the call's deadline, not lock_timeout; an error
 * (a cancel, statement_timeout, a deadlock) leaves the line and is counted.
 */
static pg_noinline int
line_enter(const DlockName *name, const DlockHold *h, TimestampTz deadline,
		   TimestampTz start)
{
	DlockLine  *l = my_line();
	int			saved_lock_timeout = LockTimeout;
	volatile LockAcquireResult res = LOCKACQUIRE_NOT_AVAIL;
	volatile bool first = false;

	line_leave();				/* a turn an error left (never expected) */
	dlock_set_line_tag(&line_tag, h->dbid, h->key);
	line_mode = DLOCK_LINE_MODE(h->mode);
	line_bucket = dlock_line_bucket(h->dbid, h->key);
	/* a full barrier: a caller that looks after this looks at the line */
	pg_atomic_fetch_add_u32(&dlock_detached->in_line[line_bucket], 1);
	PG_TRY();
	{
		DLOCK_FAULT("detached.line");
		/* (a full lock table raises here: out of line again, below) */
		if (LockAcquire(&line_tag, line_mode, true, true) != LOCKACQUIRE_NOT_AVAIL)
			first = true;
		else
		{
			TimestampTz now = GetCurrentTimestamp();

			/* shown as waiting for the lock, by this backend, while in line */
			dlock_hold_begin(&l->hold);
			dlock_hold_copy(&l->hold, h);
			l->hold.state = DLOCK_HOLD_WAITING;
			l->hold.since = now;
			l->hold.token = 0;
			dlock_hold_end(&l->hold);
			l->pid = MyProcPid;

			/* the deadline may be spent already (a slow holder, earlier names) */
			if (deadline == 0 || deadline > now)
			{
				LockTimeout = 0;
				dlock_client_check_on();
				res = dlock_wait_for_lock(&line_tag, line_mode, false, true,
										  deadline == 0 ? -1 : deadline - now, -1, name,
										  h->mode, start, NULL);
				dlock_client_check_off();
				LockTimeout = saved_lock_timeout;
			}
		}
	}
	PG_CATCH();
	{
		dlock_client_check_off();
		LockTimeout = saved_lock_timeout;
		line_leave();
		dlock_acquired_count(h, dlock_stat_wait_error(geterrcode()),
							 GetCurrentTimestamp() - start);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (first)
	{
		line_first = true;
		return LINE_FIRST;
	}
	line_unshow();
	if (res == LOCKACQUIRE_NOT_AVAIL)
	{
		line_leave();
		return LINE_TIMEOUT;
	}
	line_first = true;
	return LINE_WAITED;
}

/*
 * Does this session hold h's name in shared mode itself, and wait for a
 * shared lock of it?  Then its waiter goes to the lock's queue without
 * lining up: there the deadlock detector lets it pass an exclusive waiter
 * that waits for this session (as it lets a session that reads already read
 * again), where a wait in line behind that exclusive one would be a
 * deadlock.
 */
static bool
reads_already(const DlockHold *h)
{
	LOCKTAG		tag;

	if (h->mode != DLOCK_SHARED || h->permits > 1)
		return false;
	dlock_set_permit_tag(&tag, h->dbid, h->key, 0);
	return dlock_lock_held_by_me(&tag, ShareLock);
}

/* ask_to_acquire's answers */
#define ASKED_OK		0
#define ASKED_BUSY		1
#define ASKED_TIMEOUT	2

/*
 * Ask the lock holder (pid, procno) for h without waiting: ASKED_OK with
 * *token (recorded with the transaction, counted), ASKED_BUSY (not
 * counted: the caller's next step is), or ASKED_TIMEOUT (it did not answer
 * before the deadline: counted).  Its refusals are errors.
 */
static int
ask_to_acquire(const DlockName *name, const DlockHold *h, int64 lease_us, int pid,
			   int procno, TimestampTz deadline, TimestampTz start, int64 *token)
{
	DlockRequest *r;

	if (!dlock_request_idle(&r, deadline))
	{
		dlock_acquired_count(h, DLOCK_STAT_TIMEOUT, GetCurrentTimestamp() - start);
		return ASKED_TIMEOUT;
	}
	r->op = DLOCK_OP_ACQUIRE;
	r->lease_us = lease_us;
	dlock_hold_copy(&r->hold, h);
	if (!dlock_request_send(r, pid, procno, deadline))
	{
		dlock_acquired_count(h, DLOCK_STAT_TIMEOUT, GetCurrentTimestamp() - start);
		return ASKED_TIMEOUT;
	}
	switch (r->result)
	{
		case DLOCK_RES_OK:
			dlock_acquired_record(false, r->hold_index, r->hold_use);
			dlock_acquired_count(h, DLOCK_STAT_ACQUIRED, -1);
			/* from here, an error (a cancel) undoes it with the transaction */
			DLOCK_FAULT("detached.recorded");
			*token = r->token;
			return ASKED_OK;
		case DLOCK_RES_BUSY:
			return ASKED_BUSY;
		case DLOCK_RES_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("cannot acquire detached lock \"%s\": the lock holder holds dlock.max_detached_locks (%d) locks",
							dlock_display_name(name), dlock_detached->max_holds),
					 errhint("Release detached locks that are no longer needed, or raise \"dlock.max_detached_locks\" (a restart).")));
			break;
		case DLOCK_RES_ROLE_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("cannot acquire detached lock \"%s\": role \"%s\" holds dlock.max_detached_locks_per_role (%d) locks",
							dlock_display_name(name), GetUserNameFromId(h->limit_role, false),
							(int) r->token),
					 errdetail("The lock holder keeps room for other roles' detached locks; they count against the session's user, whatever SET ROLE says, or against the role whose SECURITY DEFINER function or security-restricted operation takes them."),
					 errhint("Release detached locks that are no longer needed, or raise \"dlock.max_detached_locks_per_role\" (in postgresql.conf, then a reload).")));
			break;
		case DLOCK_RES_NO_TOKEN:
			dlock_wait_no_token_error(name, r->token);
			break;
		default:
			dlock_error_raise(&r->error);
	}
	return ASKED_BUSY;			/* not reached */
}

/*
 * Acquire h (lease_us; timeout_us: -1 no limit, 0 do not wait) from the
 * lock holder (pid, procno): at once, else in line and through a waiter.
 * The token, or 0 if not acquired (busy, or the deadline).
 */
/*
 * First in line (line: LINE_FIRST or LINE_WAITED; asked: the lock holder
 * was asked before the line): ask it again where that may help, else wait
 * through a waiter; the line is passed on however this ends.  The token,
 * or 0.  (Not inlined: its PG_TRY would make gcc fear for the caller's
 * variables.)
 */
static pg_noinline int64
take_first(const DlockName *name, const DlockHold *h, int64 lease_us, int pid, int procno,
		   TimestampTz deadline, TimestampTz start, int line, bool asked)
{
	volatile int64 token = 0;

	PG_TRY();
	{
		int64		t = 0;
		int			a = ASKED_BUSY;

		DLOCK_FAULT("detached.first");
		/* after others (or not asked yet): free now, or shared with them? */
		if (line == LINE_WAITED || !asked)
			a = ask_to_acquire(name, h, lease_us, pid, procno, deadline, start, &t);
		if (a == ASKED_BUSY)
			t = dlock_wait_acquire(name, h, deadline, lease_us, start);
		token = t;
	}
	PG_CATCH();
	{
		line_leave();
		PG_RE_THROW();
	}
	PG_END_TRY();
	line_leave();
	return token;
}

int64
dlock_detached_take(const DlockName *name, const DlockHold *h, int64 lease_us,
					int64 timeout_us, int pid, int procno, TimestampTz start)
{
	TimestampTz deadline = timeout_us > 0 ? start + timeout_us : 0;
	bool		asked = false;
	bool		reader = timeout_us != 0 && reads_already(h);
	int			line;

	/* the holder may be slow to answer: the timeout bounds that too */
	dlock_acquired_wait_undos(deadline);
	/* those in line go first: a try is refused, a wait lines up behind them */
	if (reader || !line_taken(h))
	{
		int64		t = 0;

		switch (ask_to_acquire(name, h, lease_us, pid, procno, deadline, start, &t))
		{
			case ASKED_OK:
				return t;
			case ASKED_TIMEOUT:
				return 0;
		}
		asked = true;
	}
	if (timeout_us == 0)
	{
		dlock_acquired_count(h, DLOCK_STAT_BUSY, 0);
		return 0;
	}
	if (reader)
		return dlock_wait_acquire(name, h, deadline, lease_us, start);
	line = line_enter(name, h, deadline, start);
	if (line == LINE_TIMEOUT)
	{
		dlock_acquired_count(h, DLOCK_STAT_TIMEOUT, GetCurrentTimestamp() - start);
		return 0;
	}
	return take_first(name, h, lease_us, pid, procno, deadline, start, line, asked);
}

/*
 * At exit (detached.c): out of line.  The lock manager releases the line
 * itself, as it releases every session lock at exit.
 */
void
dlock_line_exit(void)
{
	line_first = false;
	line_leave();
}
