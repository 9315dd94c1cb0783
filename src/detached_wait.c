/*
 * detached_wait.c: a waited detached acquisition, the caller's side (the
 * waiter's: waiter.c): the first in the name's line (detached_line.c)
 * starts a waiter process and waits for its ticket lock in the lock
 * manager, interruptibly: a cancel, a statement_timeout, a deadlock found
 * from this side or a lost client connection makes this backend give the
 * acquisition up, and the waiter releases whatever it got.
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "confirm.h"
#include "dlock.h"
#include "detached_caller.h"
#include "stats.h"
#include "tokens.h"

int			dlock_max_detached_waiters_per_role = -1;

/* a waited acquisition in progress: the waiter block, or -1 */
static int	waiting_index = -1;
static uint64 waiting_ticket = 0;
static BackgroundWorkerHandle *waiting_handle = NULL;


/*
 * The caller gives up waiting (an error, or this backend exits): the waiter
 * lets go of what it has or gets, and whoever is last frees the block.
 */
static void
abandon(int index, uint64 ticket)
{
	DlockWaiter *w = dlock_waiter(index);

	for (;;)
	{
		uint32		st = dlock_waiter_state(w, ticket);
		int			pid;
		int			procno;

		/* the pid that goes with that state (written before it) */
		pg_read_barrier();
		pid = w->worker_pid;
		procno = w->worker_procno;

		if (st == DLOCK_W_ENDED || st == DLOCK_W_ORPHANED)
		{
			/* the worker is done with it */
			if (dlock_waiter_move(w, ticket, st, DLOCK_W_FREE))
				break;
			continue;
		}
		if (st == DLOCK_W_STARTING)
		{
			/*
			 * Not yet running: the block is free at once, and a worker that
			 * starts later finds its ticket gone and leaves it alone.  The
			 * postmaster is asked not to start it (it may be slow to).
			 */
			if (!dlock_waiter_move(w, ticket, DLOCK_W_STARTING, DLOCK_W_FREE))
				continue;
			if (waiting_handle != NULL)
				TerminateBackgroundWorker(waiting_handle);
			break;
		}
		if (st != DLOCK_W_CLAIMED && st != DLOCK_W_WAITING && st != DLOCK_W_GRANTED)
			break;				/* FREE: not ours any more */
		if (!dlock_waiter_move(w, ticket, st, DLOCK_W_ABANDONED))
			continue;
		/* it lets go of whatever it got on its own time: the next try waits */
		dlock_acquired_note_undo(index, ticket);
		if (st == DLOCK_W_WAITING && pid != 0)
			kill(pid, SIGINT);	/* out of the queue */
		else if (st == DLOCK_W_GRANTED && pid != 0)
			SetLatch(&GetPGProcByNumber(procno)->procLatch);
		/* CLAIMED: it finds out before it joins the queue */
		break;
	}
}

/* dlock.max_detached_waiters_per_role as it applies: -1 is half of the slots. */
static int
role_waiters_limit(void)
{
	return dlock_limit_or_half(dlock_max_detached_waiters_per_role, dlock_detached->nwaiters);
}

/*
 * Block w, just claimed, for role: within the role's bound?  The role is
 * published before the count (a full barrier between), so of two claims of
 * one role at the same time at least one sees the other: the bound is never
 * exceeded (both may back off).
 */
static bool
within_role_waiters(DlockWaiter *w, Oid role)
{
	int			n = 0;
	int			i;

	w->claim_role = role;
	pg_memory_barrier();
	for (i = 0; i < dlock_detached->nwaiters; i++)
	{
		DlockWaiter *o = dlock_waiter(i);

		if (DLOCK_W_STATE(pg_atomic_read_u64(&o->tstate)) != DLOCK_W_FREE &&
			o->claim_role == role)
			n++;
	}
	return n <= role_waiters_limit();
}

static void
role_waiters_error(const DlockName *name, const DlockHold *tmpl)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("cannot wait for detached lock \"%s\": role \"%s\" has dlock.max_detached_waiters_per_role (%d) waited detached locks",
					dlock_display_name(name), GetUserNameFromId(tmpl->limit_role, false),
					role_waiters_limit()),
			 errdetail("The first in line for each name takes a background worker slot, and so does each detached lock that had to wait, until it ends (a lock released before its minimum hold ends then); they count against the session's user, whatever SET ROLE says, or against the role whose SECURITY DEFINER function or security-restricted operation takes them."),
			 errhint("Release waited detached locks that are no longer needed, retry with timeout => '0', or raise \"dlock.max_detached_waiters_per_role\" (in postgresql.conf, then a reload).")));
}

/*
 * A free waiter block, claimed for ticket; -1 if none.  (Not inlined into
 * acquire_waiting, whose PG_TRY gcc would then warn about.)
 */
static pg_noinline int
claim_waiter(uint64 ticket)
{
	int			i;

	for (i = 0; i < dlock_detached->nwaiters; i++)
	{
		DlockWaiter *w = dlock_waiter(i);
		uint64		v = pg_atomic_read_u64(&w->tstate);

		if (DLOCK_W_STATE(v) == DLOCK_W_FREE &&
			pg_atomic_compare_exchange_u64(&w->tstate, &v, DLOCK_W_PACK(ticket, DLOCK_W_STARTING)))
			return i;
	}
	return -1;
}

static void
no_worker_error(const DlockName *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("cannot wait for detached lock \"%s\": no background worker slot is free",
					dlock_display_name(name)),
			 errdetail("The first in line for a detached lock waits through a background worker of its own, which then holds the lock; all %d (max_worker_processes) are in use.",
					   max_worker_processes),
			 errhint("Raise max_worker_processes (a restart), or retry later with timeout => '0'.")));
}

void
dlock_wait_no_token_error(const DlockName *name, int64 token)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot acquire detached lock \"%s\": no fencing token can be given",
					dlock_display_name(name)),
			 dlock_token_none_detail(token)));
}

/*
 * How long the first in line waits for a background worker slot before it
 * says none is free (53000): long enough for the slot of a worker that just
 * ended to be free again.
 */
#define DLOCK_WORKER_GRACE_MS 1000

/* Block w, just claimed, filled in for its worker (before it is started). */
static void
waiter_fill(DlockWaiter *w, const DlockHold *tmpl, TimestampTz deadline, int64 lease_us)
{
	w->caller_pid = MyProcPid;
	w->caller_procno = GetNumberFromPGProc(MyProc);
	w->worker_pid = 0;
	w->deadline = deadline;
	w->deadlock_timeout_ms = DeadlockTimeout;
	w->lease_us = lease_us;
	w->result = DLOCK_RES_ERROR;
	dlock_error_set(&w->error, ERRCODE_INTERNAL_ERROR, "", NULL, NULL);
	dlock_hold_begin(&w->hold);
	dlock_hold_copy(&w->hold, tmpl);
	w->hold.state = DLOCK_HOLD_FREE;
	w->hold.token = 0;
	dlock_hold_end(&w->hold);
	pg_write_barrier();
}

/* The background worker of waiter block index, for ticket. */
static void
waiter_describe(BackgroundWorker *worker, int index, uint64 ticket)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_ConsistentState;
	worker->bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "dlock");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "dlock_waiter_main");
	snprintf(worker->bgw_name, BGW_MAXLEN, "dlock waiter for process %d", MyProcPid);
	snprintf(worker->bgw_type, BGW_MAXLEN, "dlock waiter");
	worker->bgw_main_arg = Int32GetDatum(index);
	memcpy(worker->bgw_extra, &ticket, sizeof(ticket));
	worker->bgw_notify_pid = MyProcPid;
}

/*
 * Claim a waiter block for ticket and start its worker: the block's index
 * (waiting_index, waiting_ticket and waiting_handle set), or -1 when the
 * deadline (0: none) passed first (counted as a timeout).  When no block or
 * no background worker slot is free it looks again every 10 ms, for
 * DLOCK_WORKER_GRACE_MS, then raises 53000.  An error (a cancel in that
 * wait) is counted, and a block claimed when it came is given up.
 */
static pg_noinline int
start_waiter(const DlockName *name, const DlockHold *tmpl, TimestampTz deadline,
			 int64 lease_us, TimestampTz start, uint64 ticket)
{
	volatile TimestampTz grace_end = 0;
	volatile int index = -1;

	PG_TRY();
	{
		for (;;)
		{
			BackgroundWorker worker;
			BackgroundWorkerHandle *handle;
			TimestampTz now;
			TimestampTz until;

			index = claim_waiter(ticket);
			if (index >= 0)
			{
				DlockWaiter *w = dlock_waiter(index);

				if (!within_role_waiters(w, tmpl->limit_role))
				{
					(void) dlock_waiter_move(w, ticket, DLOCK_W_STARTING, DLOCK_W_FREE);
					index = -1;
					role_waiters_error(name, tmpl);
				}
				waiter_fill(w, tmpl, deadline, lease_us);
				waiter_describe(&worker, index, ticket);
				/* set first: an error in the registration gives the block up */
				waiting_index = index;
				waiting_ticket = ticket;
				waiting_handle = NULL;
				if (RegisterDynamicBackgroundWorker(&worker, &handle))
				{
					waiting_handle = handle;
					break;
				}
				waiting_index = -1;
				(void) dlock_waiter_move(w, ticket, DLOCK_W_STARTING, DLOCK_W_FREE);
				index = -1;
			}

			/*
			 * None free.  A worker that just ended (the waiter of the lock
			 * granted before, in a line that moves fast) frees its slot only
			 * once the postmaster has noticed: a moment.  Meanwhile the
			 * call's deadline counts, and a cancel ends the wait.
			 */
			now = GetCurrentTimestamp();
			if (deadline != 0 && now >= deadline)
			{
				dlock_acquired_count(tmpl, DLOCK_STAT_TIMEOUT, now - start);
				return -1;
			}
			if (grace_end == 0)
				grace_end = now + (int64) DLOCK_WORKER_GRACE_MS * 1000;
			else if (now >= grace_end)
				no_worker_error(name);
			until = deadline != 0 ? Min(deadline, grace_end) : grace_end;
			dlock_request_sleep(Max(Min((until - now + 999) / 1000, 10L), 1L));
		}
	}
	PG_CATCH();
	{
		if (waiting_index >= 0)
		{
			abandon(waiting_index, waiting_ticket);
			waiting_index = -1;
		}
		dlock_acquired_count(tmpl, dlock_stat_wait_error(geterrcode()),
							 GetCurrentTimestamp() - start);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return index;
}

/*
 * Wait for the lock through a waiter process (waiter.c).  Returns the token,
 * or 0 when the deadline (0: none) passed.
 */
int64
dlock_wait_acquire(const DlockName *name, const DlockHold *tmpl, TimestampTz deadline,
				   int64 lease_us, TimestampTz start)
{
	DlockWaiter *w;
	int			index;
	uint64		ticket;
	LOCKTAG		ticket_tag;
	int			saved_lock_timeout = LockTimeout;
	volatile bool timed_out = false;
	uint32		st;
	int64		token;

	/* a wait an error left behind (never expected): given up first */
	if (waiting_index >= 0)
	{
		abandon(waiting_index, waiting_ticket);
		waiting_index = -1;
	}
	ticket = pg_atomic_fetch_add_u64(&dlock_detached->ticket_next, 1);
	index = start_waiter(name, tmpl, deadline, lease_us, start, ticket);
	if (index < 0)
		return 0;				/* the deadline, counted */
	w = dlock_waiter(index);
	PG_TRY();
	{
		DLOCK_FAULT("detached.waiting");
		/* until the waiter holds the ticket and is in the queue */
		while ((st = dlock_waiter_state(w, ticket)) == DLOCK_W_STARTING ||
			   st == DLOCK_W_CLAIMED)
		{
			pid_t		pid;

			if (GetBackgroundWorkerPid(waiting_handle, &pid) == BGWH_STOPPED &&
				dlock_waiter_move(w, ticket, DLOCK_W_STARTING, DLOCK_W_FREE))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						 errmsg("cannot wait for detached lock \"%s\": its background worker did not start",
								dlock_display_name(name)),
						 errhint("The server log says why.")));
			/* the deadline, while the postmaster or the worker is slow to start */
			if (deadline != 0 && GetCurrentTimestamp() >= deadline)
			{
				timed_out = true;
				break;
			}
			dlock_request_sleep(10L);
		}

		if (!timed_out)
		{
			/*
			 * Wait for the ticket: in the lock manager, so that a deadlock through
			 * this session's own locks is found, and a cancel or statement_timeout
			 * ends the wait.  The deadline is the waiter's, not lock_timeout.  A
			 * client that goes away is noticed within a second.
			 */
			dlock_ticket_locktag(&ticket_tag, tmpl->dbid, ticket);
			LockTimeout = 0;
			dlock_client_check_on();
			(void) LockAcquire(&ticket_tag, ExclusiveLock, false, false);
			LockRelease(&ticket_tag, ExclusiveLock, false);
			dlock_client_check_off();
			LockTimeout = saved_lock_timeout;

			/* a waiter that died after letting go of the ticket: its last word */
			while ((st = dlock_waiter_state(w, ticket)) == DLOCK_W_WAITING)
				dlock_request_sleep(10L);
			DLOCK_FAULT("detached.ticket");
		}
	}
	PG_CATCH();
	{
		LockTimeout = saved_lock_timeout;
		dlock_client_check_off();
		/* (still set meanwhile: a FATAL inside has dlock_wait_exit finish it) */
		abandon(index, ticket);
		waiting_index = -1;
		dlock_acquired_count(tmpl, dlock_stat_wait_error(geterrcode()),
							 GetCurrentTimestamp() - start);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (timed_out)
	{
		/* given up: whatever the worker gets later is not kept */
		abandon(index, ticket);
		waiting_index = -1;
		dlock_acquired_count(tmpl, DLOCK_STAT_TIMEOUT, GetCurrentTimestamp() - start);
		return 0;
	}
	waiting_index = -1;

	for (;;)
	{
		st = dlock_waiter_state(w, ticket);
		pg_read_barrier();
		token = w->hold.token;
		if (st == DLOCK_W_GRANTED)
		{
			/* take it; from here the waiter frees the block when it ends */
			if (!dlock_waiter_move(w, ticket, DLOCK_W_GRANTED, DLOCK_W_HELD))
				continue;
			dlock_acquired_record(true, index, ticket);
			dlock_acquired_count(tmpl, DLOCK_STAT_ACQUIRED, Max(GetCurrentTimestamp() - start, 0));
			return token;
		}
		if (st == DLOCK_W_ORPHANED)
		{
			/*
			 * Granted, and ended before we took it (its lease ran out, or
			 * someone released it with the token from dlock_locks): the
			 * acquisition happened, the lock is gone.
			 */
			(void) dlock_waiter_move(w, ticket, DLOCK_W_ORPHANED, DLOCK_W_FREE);
			dlock_acquired_count(tmpl, DLOCK_STAT_ACQUIRED, Max(GetCurrentTimestamp() - start, 0));
			return token;
		}
		break;
	}
	if (st != DLOCK_W_ENDED)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("the dlock waiter for lock \"%s\" ended without a result",
						dlock_display_name(name))));

	/* not granted: the block is ours to free, after reading why */
	{
		int			result = w->result;
		DlockError	error = w->error;

		(void) dlock_waiter_move(w, ticket, DLOCK_W_ENDED, DLOCK_W_FREE);
		dlock_acquired_count(tmpl, result == DLOCK_RES_TIMEOUT ? DLOCK_STAT_TIMEOUT :
							 result == DLOCK_RES_ERROR ? dlock_stat_wait_error(error.sqlerrcode) : -1,
							 GetCurrentTimestamp() - start);
		if (result == DLOCK_RES_TIMEOUT)
			return 0;
		if (result == DLOCK_RES_NO_TOKEN)
			dlock_wait_no_token_error(name, token);
		dlock_error_raise(&error);
	}
	return 0;					/* not reached */
}

/* At exit (detached.c): a waited acquisition in progress is given up. */
void
dlock_wait_exit(void)
{
	if (waiting_index >= 0)
		abandon(waiting_index, waiting_ticket);
	waiting_index = -1;
}
