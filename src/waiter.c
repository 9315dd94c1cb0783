/*
 * waiter.c: a waiter, the process that waits for and then holds one
 * detached lock that had to wait (holder.c says why; the caller's side:
 * detached_wait.c).
 *
 * It takes a private "ticket" lock, then waits in the lock manager's queue
 * for the named lock, while the caller waits for the ticket: the deadlock
 * detector sees caller -> waiter -> holders of the lock.  Once granted, it
 * hands the lock over (its token) through its waiter block (protocol.h,
 * DlockWaiter.tstate) and keeps that one lock and nothing else until it is
 * released or its lease runs out, then exits.
 *
 * Layer 6 of the map in dlock.h (processes): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include <limits.h>
#include <signal.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "name.h"
#include "notify.h"
#include "semaphore.h"
#include "serve.h"
#include "tokens.h"
#include "workers.h"

static DlockWaiter *my_waiter = NULL;
static uint64 my_ticket = 0;
static bool my_error_saved = false;	/* w->error says why we end */
static bool my_lock_ended = false;	/* released (a release, its lease) */

/*
 * Answer every request still addressed to this process with "not held":
 * it is about to exit, and whatever it held goes with it.
 */
static void
waiter_refuse_requests(DlockRequest *r)
{
	dlock_serve_reply_only(r, DLOCK_RES_NOT_HELD);
}

/*
 * A lock the caller never took (it gave up: ABANDONED; or this process ends
 * before the hand-over, other than by a release or its lease) was never
 * counted as acquired (the caller counted its cancel, timeout, deadlock or
 * error): nor is its end.
 */
static void
waiter_uncount_if_abandoned(void)
{
	uint32		st = dlock_waiter_state(my_waiter, my_ticket);

	if ((st == DLOCK_W_ABANDONED || st == DLOCK_W_CLAIMED || st == DLOCK_W_WAITING ||
		 (st == DLOCK_W_GRANTED && !my_lock_ended)) &&
		my_waiter->hold.counted)
	{
		dlock_hold_begin(&my_waiter->hold);
		my_waiter->hold.counted = false;
		dlock_hold_end(&my_waiter->hold);
	}
}

/*
 * Before the exit releases our lock (ShutdownPostgres runs after this):
 * the end of a hold taken with notify, announced while it is still held.
 */
static void
waiter_exit_announce(int code, Datum arg)
{
	DlockWaiter *w = my_waiter;

	if (w != NULL && !my_lock_ended && w->hold.state == DLOCK_HOLD_HELD &&
		dlock_waiter_state(w, my_ticket) != DLOCK_W_FREE)
		dlock_announce_hold(&w->hold, DLOCK_EV_ENDED);
}

static void
waiter_exit(int code, Datum arg)
{
	DlockWaiter *w = my_waiter;

	/* out of a semaphore's line; what we held is free: its waiters' turn */
	dlock_permit_queue_leave();
	dlock_permit_wake_all();
	if (w == NULL)
		return;
	/* the lock manager released our locks before this runs */
	if (dlock_waiter_state(w, my_ticket) == DLOCK_W_FREE)
		return;					/* not ours any more */
	if (w->hold.state != DLOCK_HOLD_FREE)
	{
		waiter_uncount_if_abandoned();
		/* (its end announced by waiter_exit_announce) */
		dlock_serve_end_kind(DLOCK_EV_NONE);
		dlock_serve_hold_ended(&w->hold);
		dlock_hold_begin(&w->hold);
		w->hold.state = DLOCK_HOLD_FREE;
		dlock_hold_end(&w->hold);
	}

	/*
	 * Answer what was asked of us, then say we are gone: a sender that sees
	 * us gone finds its answer written, or knows none will come.
	 */
	dlock_serve_requests(waiter_refuse_requests, waiter_refuse_requests);
	pg_memory_barrier();
	w->worker_pid = 0;
	for (;;)
	{
		uint32		st = dlock_waiter_state(w, my_ticket);
		uint32		to;

		switch (st)
		{
			case DLOCK_W_HELD:
			case DLOCK_W_UNDO:
			case DLOCK_W_ABANDONED:
				to = DLOCK_W_FREE;	/* ours to free */
				break;
			case DLOCK_W_GRANTED:
				if (my_lock_ended)
				{
					to = DLOCK_W_ORPHANED;	/* the caller frees it */
					break;
				}
				/* gone with the lock before the caller took it: an error */
				pg_fallthrough;
			case DLOCK_W_CLAIMED:
			case DLOCK_W_WAITING:
				/* gone before a result: terminated, shut down, an error */
				w->result = DLOCK_RES_ERROR;
				if (!my_error_saved)
					dlock_error_set(&w->error, ERRCODE_ADMIN_SHUTDOWN,
									"the dlock waiter process exited while waiting", NULL, NULL);
				pg_write_barrier();
				to = DLOCK_W_ENDED;
				break;
			default:
				return;			/* ENDED, ORPHANED, FREE: the caller's */
		}
		if (dlock_waiter_move(w, my_ticket, st, to))
		{
			if (to != DLOCK_W_FREE)
				SetLatch(&GetPGProcByNumber(w->caller_procno)->procLatch);
			return;
		}
	}
}

/* The error caught, copied into cxt; a cancel with it is spent. */
static ErrorData *
caught_error(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	QueryCancelPending = false;
	return edata;
}

/* Wait in the queue; the result, as for the caller (DLOCK_RES_*). */
static int
waiter_wait(DlockWaiter *w, const LOCKTAG *tag, LOCKMODE lockmode)
{
	volatile int result = DLOCK_RES_OK;
	MemoryContext cxt = CurrentMemoryContext;

	/* the timeout counts from the call, not from our start */
	if (w->deadline != 0)
	{
		TimestampTz now = GetCurrentTimestamp();

		/* past it already (a slow start): one try, without waiting */
		if (w->deadline <= now)
			return dlock_lock_acquire_ext(tag, lockmode, true, true, false, NULL) == LOCKACQUIRE_OK ?
				DLOCK_RES_OK : DLOCK_RES_TIMEOUT;
		LockTimeout = (int) Min((w->deadline - now + 999) / 1000, (int64) INT_MAX);
	}
	else
		LockTimeout = 0;
	DeadlockTimeout = w->deadlock_timeout_ms;
	PG_TRY();
	{
		(void) LockAcquire(tag, lockmode, true, false);
	}
	PG_CATCH();
	{
		ErrorData  *edata = caught_error(cxt);

		/* a grant that raced the timeout is kept (LockErrorCleanup) */
		if (dlock_lock_held_by_me(tag, lockmode))
			result = DLOCK_RES_OK;
		else if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE && w->deadline != 0)
			result = DLOCK_RES_TIMEOUT;
		else
		{
			result = DLOCK_RES_ERROR;
			dlock_error_save(&w->error, edata);
		}
		FreeErrorData(edata);
	}
	PG_END_TRY();
	LockTimeout = 0;
	return result;
}

/*
 * Wait for a semaphore's permit (semaphore.c): in line in the name's
 * turnstile, then first in line until a permit is free; the result as
 * waiter_wait's, and on DLOCK_RES_OK the permit taken and its tag.
 */
static int
waiter_wait_permit(DlockWaiter *w, LOCKTAG *tag, int *permit)
{
	LOCKTAG		turnstile;
	volatile int result;
	volatile int p = 0;
	MemoryContext cxt = CurrentMemoryContext;

	dlock_set_turnstile_tag(&turnstile, w->hold.dbid, w->hold.key);
	dlock_permit_queue_enter(w->hold.dbid, w->hold.key);
	result = waiter_wait(w, &turnstile, ExclusiveLock);
	if (result == DLOCK_RES_OK)
	{
		PG_TRY();
		{
			DLOCK_FAULT("waiter.head");
			p = dlock_permit_head(w->hold.dbid, w->hold.key, w->hold.permits, true,
								  w->deadline, false);
		}
		PG_CATCH();
		{
			ErrorData  *edata = caught_error(cxt);

			result = DLOCK_RES_ERROR;
			dlock_error_save(&w->error, edata);
			FreeErrorData(edata);
		}
		PG_END_TRY();
		LockRelease(&turnstile, ExclusiveLock, true);
		if (result == DLOCK_RES_OK && p == 0)
			result = DLOCK_RES_TIMEOUT;
	}
	dlock_permit_queue_leave();
	*permit = p;
	if (p > 0)
		dlock_set_permit_tag(tag, w->hold.dbid, w->hold.key, p);
	return result;
}

/* Release the lock this waiter holds (granted). */
static void
waiter_release(void)
{
	DlockHold  *h = &my_waiter->hold;
	LOCKTAG		tag;

	/* counted first: the next holder may look at dlock_stats at once */
	dlock_serve_hold_ended(h);
	dlock_hold_locktag(&tag, h);
	LockRelease(&tag, DlockLockMode(h->mode), true);
	dlock_permit_released(h->dbid, h->key);
	my_lock_ended = true;
	dlock_hold_begin(h);
	h->state = DLOCK_HOLD_FREE;
	dlock_hold_end(h);
}

/* ... and leave; waiter_exit frees the block, or leaves it to the caller. */
static void
waiter_release_and_leave(void)
{
	waiter_uncount_if_abandoned();
	waiter_release();
	proc_exit(0);
}

static void
waiter_extend_release(DlockRequest *r)
{
	DlockHold  *h = &my_waiter->hold;
	TimestampTz now = GetCurrentTimestamp();
	uint32		st = dlock_waiter_state(my_waiter, my_ticket);
	int			res;

	/*
	 * An acquisition rolled back (or given up) since the loop looked: its
	 * token holds nothing, as in the lock holder (holder_undo); the loop
	 * releases it next.
	 */
	if (st == DLOCK_W_ABANDONED || st == DLOCK_W_UNDO)
	{
		dlock_serve_reply_only(r, DLOCK_RES_NOT_HELD);
		return;
	}
	res = dlock_serve_check_hold(r, h, now);
	if (res == DLOCK_RES_OK && r->op == DLOCK_OP_EXTEND)
	{
		(void) dlock_serve_extend_hold(r, h, now);
		return;
	}
	if (res == DLOCK_RES_EXPIRED)
		dlock_serve_hold_expired(h, "waiter process");
	/* released before its minimum hold ends: held until then */
	if (res == DLOCK_RES_OK && dlock_serve_release_later(r, h, now))
		return;
	if (res == DLOCK_RES_OK || res == DLOCK_RES_EXPIRED)
	{
		if (res == DLOCK_RES_OK && r->op == DLOCK_OP_FORCE_RELEASE)
			dlock_serve_forced(r, h, now);
		/* release before answering: the caller may take it again at once */
		waiter_release();
		dlock_serve_reply_only(r, res);
		proc_exit(0);
	}
	dlock_serve_reply_only(r, res);
}

/* The end of a wait that got nothing: tell the caller, who frees the block. */
static void
waiter_not_granted(DlockWaiter *w, const LOCKTAG *ticket_tag, int result, int64 token)
{
	dlock_hold_begin(&w->hold);
	w->hold.state = DLOCK_HOLD_FREE;
	w->hold.token = token;
	dlock_hold_end(&w->hold);
	w->result = result;
	pg_write_barrier();
	/* whatever the outcome of this, the block is no longer ours to touch */
	(void) dlock_waiter_move(w, my_ticket, DLOCK_W_WAITING, DLOCK_W_ENDED);
	my_waiter = NULL;
	/* abandoned meanwhile: free it ourselves */
	(void) dlock_waiter_move(w, my_ticket, DLOCK_W_ABANDONED, DLOCK_W_FREE);
	LockRelease(ticket_tag, ExclusiveLock, true);
	proc_exit(0);
}

void
dlock_waiter_main(Datum arg)
{
	int			index = DatumGetInt32(arg);
	DlockWaiter *w = dlock_waiter(index);
	LOCKTAG		ticket_tag;
	LOCKTAG		tag;
	LOCKMODE	lockmode;
	int			result;
	int			permit = 0;
	volatile int64 token = 0;
	sigjmp_buf	local_sigjmp_buf;

	memcpy(&my_ticket, MyBgworkerEntry->bgw_extra, sizeof(my_ticket));

	/*
	 * Claim the block for our ticket before touching it: a caller that gave
	 * up before we started freed it (it may be another acquisition's now).
	 */
	if (!dlock_waiter_move(w, my_ticket, DLOCK_W_STARTING, DLOCK_W_CLAIMED))
		proc_exit(0);

	/* from here on, however we exit, waiter_exit settles the block */
	my_waiter = w;
	on_shmem_exit(waiter_exit, (Datum) 0);

	/*
	 * An error (never expected: out of memory, a fault point) ends this
	 * process, and reaches the caller as it was, not as a shutdown.
	 */
	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		/* (not once the block went to the caller: it may be reused) */
		if (my_waiter != NULL)
		{
			dlock_error_save(&w->error, edata);
			my_error_saved = true;
		}
		proc_exit(1);
	}
	PG_exception_stack = &local_sigjmp_buf;
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	pqsignal(SIGINT, StatementCancelHandler);	/* the caller gave up */
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	/* after the connection: runs before its ShutdownPostgres releases our lock */
	before_shmem_exit(waiter_exit_announce, (Datum) 0);
	pgstat_report_appname("dlock waiter");

	w->worker_procno = GetNumberFromPGProc(MyProc);
	w->worker_pid = MyProcPid;
	DLOCK_FAULT("waiter.claimed");

	/* the ticket the caller waits for: ours alone, so granted at once */
	dlock_ticket_locktag(&ticket_tag, w->hold.dbid, my_ticket);
	if (dlock_lock_acquire_ext(&ticket_tag, ExclusiveLock, true, true, false, NULL) !=
		LOCKACQUIRE_OK)
	{
		/* the only way: the lock table is full */
		dlock_error_set(&w->error, ERRCODE_OUT_OF_MEMORY, "out of shared memory", NULL,
						"You might need to increase \"max_locks_per_transaction\".");
		w->result = DLOCK_RES_ERROR;
		pg_write_barrier();
		if (dlock_waiter_move(w, my_ticket, DLOCK_W_CLAIMED, DLOCK_W_ENDED))
			SetLatch(&GetPGProcByNumber(w->caller_procno)->procLatch);
		my_waiter = NULL;
		(void) dlock_waiter_move(w, my_ticket, DLOCK_W_ABANDONED, DLOCK_W_FREE);
		proc_exit(0);
	}

	dlock_hold_locktag(&tag, &w->hold);
	lockmode = DlockLockMode(w->hold.mode);
	dlock_hold_begin(&w->hold);
	w->hold.since = GetCurrentTimestamp();
	w->hold.state = DLOCK_HOLD_WAITING;
	dlock_hold_end(&w->hold);
	if (!dlock_waiter_move(w, my_ticket, DLOCK_W_CLAIMED, DLOCK_W_WAITING))
		proc_exit(0);			/* abandoned meanwhile: waiter_exit frees it */
	SetLatch(&GetPGProcByNumber(w->caller_procno)->procLatch);

	if (w->hold.permits > 1)
		result = waiter_wait_permit(w, &tag, &permit);
	else
		result = waiter_wait(w, &tag, lockmode);
	if (result == DLOCK_RES_OK)
	{
		DLOCK_FAULT("waiter.granted");
		token = dlock_token_next();
		if (token <= 0)
		{
			LockRelease(&tag, lockmode, true);
			dlock_permit_released(w->hold.dbid, w->hold.key);
			result = DLOCK_RES_NO_TOKEN;
		}
	}
	if (result != DLOCK_RES_OK)
		waiter_not_granted(w, &ticket_tag, result, token);

	dlock_hold_begin(&w->hold);
	w->hold.token = token;
	w->hold.permit = (uint16) permit;
	dlock_serve_hold_times(&w->hold, GetCurrentTimestamp(), w->lease_us);
	w->hold.state = DLOCK_HOLD_HELD;
	dlock_hold_end(&w->hold);
	dlock_announce_hold(&w->hold, DLOCK_EV_GRANTED);
	w->result = DLOCK_RES_OK;
	pg_write_barrier();
	DLOCK_FAULT("waiter.published");
	/* a terminate or cancel that came meanwhile: ends this before the hand-over */
	CHECK_FOR_INTERRUPTS();
	if (!dlock_waiter_move(w, my_ticket, DLOCK_W_WAITING, DLOCK_W_GRANTED))
		waiter_release_and_leave();	/* abandoned: what we got goes with us */

	/* the caller wakes up and reads the token */
	LockRelease(&ticket_tag, ExclusiveLock, true);

	/* hold it, now immune to cancels, until released or expired */
	pqsignal(SIGINT, PG_SIG_IGN);
	QueryCancelPending = false;
	for (;;)
	{
		uint32		st;

		dlock_serve_loop_top();
		DLOCK_FAULT("waiter.holding");

		/*
		 * The caller gave up after all (an error before it took the lock),
		 * or the transaction that took it rolled back.
		 */
		st = dlock_waiter_state(w, my_ticket);
		if (st == DLOCK_W_ABANDONED || st == DLOCK_W_UNDO)
			waiter_release_and_leave();
		dlock_serve_requests(NULL, waiter_extend_release);
		if (w->hold.lease_expires <= GetCurrentTimestamp())
		{
			dlock_serve_hold_expired(&w->hold, "waiter process");
			waiter_release_and_leave();
		}
		dlock_serve_wait(w->hold.lease_expires);
	}
}
