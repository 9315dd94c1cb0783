/*
 * detached.c: detached locks, the caller's side (the SQL functions
 * dlock_acquire, dlock_extend and dlock_release) and the request protocol
 * to the processes that hold them (holder.c).
 *
 * A request is one DlockRequest per backend in shared memory: the backend
 * fills it in, marks it pending and sets the latch of the process it asks;
 * that process answers in place and wakes the backend.  The backend waits
 * for the answer interruptibly: a cancel or terminate takes back a request
 * nobody has claimed yet, or leaves one being worked on, and the process
 * asked then undoes what it did for it (dlock.h, DlockRequest.state), so a
 * caller never keeps a lock it was told it did not get, and no call waits
 * on a stalled lock holder.
 *
 * An acquisition is undone if the transaction (or subtransaction) that made
 * it rolls back.  The undo never waits: it marks the hold (its fate word, or
 * its waiter block) and wakes the process that holds it, which releases it.
 *
 * A waited acquisition (timeout > 0, lock busy) starts a waiter process and
 * waits for its ticket lock in the lock manager, interruptibly: a cancel, a
 * statement_timeout, a deadlock found from this side or a lost client
 * connection makes this backend give the acquisition up, and the waiter
 * releases whatever it got.
 */
#include "postgres.h"

#include <limits.h>
#include <signal.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

#include "access/xact.h"
#include "access/xlog.h"
#include "common/ip.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "dlock.h"

PG_FUNCTION_INFO_V1(dlock_acquire);
PG_FUNCTION_INFO_V1(dlock_extend);
PG_FUNCTION_INFO_V1(dlock_release);

/* A consistent copy of a detached hold (its change counter: dlock.h). */
void
dlock_read_hold(DlockHold *src, DlockHold *copy)
{
	int			tries = 0;

	for (;;)
	{
		uint32		before = dlock_read_begin(&src->changecount, &tries);

		memcpy((char *) copy + sizeof(pg_atomic_uint32),
			   (char *) src + sizeof(pg_atomic_uint32),
			   sizeof(DlockHold) - sizeof(pg_atomic_uint32));
		if (dlock_read_done(&src->changecount, before))
			return;
	}
}

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

static bool
undo_pending(int i)
{
	uint32		st = dlock_waiter_state(dlock_waiter(pending_undos[i].index),
										pending_undos[i].ticket);

	return st == DLOCK_W_UNDO || st == DLOCK_W_ABANDONED;
}

/* Note a waiter to be waited for; those already done make room first. */
static void
note_pending_undo(int index, uint64 ticket)
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
static int	n_acquired = 0;
static int	max_acquired = 0;

/* a waited acquisition in progress: the waiter block, or -1 */
static int	waiting_index = -1;
static bool exit_hook_set = false;

static void detached_exit(int code, Datum arg);

static void
reserve_acquired(void)
{
	if (!exit_hook_set)
	{
		before_shmem_exit(detached_exit, (Datum) 0);
		exit_hook_set = true;
	}
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

static DlockRequest *
my_request(void)
{
	int			procno = GetNumberFromPGProc(MyProc);

	if (procno >= dlock_shared->nslots)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("detached locks cannot be used from this kind of process")));
	return dlock_request(procno);
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
			note_pending_undo(a->index, a->use);
		}
	}
	else
	{
		uint64		expected = DLOCK_FATE_PACK(a->use, DLOCK_FATE_HELD);

		if (pg_atomic_compare_exchange_u64(dlock_hold_fate(a->index), &expected,
										   DLOCK_FATE_PACK(a->use, DLOCK_FATE_UNDO)))
		{
			int			procno = dlock_shared->holder_procno;

			pg_atomic_fetch_add_u32(&dlock_shared->undo_requests, 1);
			if (dlock_shared->holder_pid != 0 && procno >= 0)
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

/* ---- requests ---- */

/* Is the process a request went to still there? */
static bool
target_alive(int pid)
{
	int			i;

	if (pid <= 0)
		return false;
	if (pid == dlock_shared->holder_pid)
		return true;
	for (i = 0; i < dlock_shared->nwaiters; i++)
		if (dlock_waiter(i)->worker_pid == pid)
			return true;
	return false;
}

/* Will the next CHECK_FOR_INTERRUPTS end this call (a cancel, a terminate)? */
static bool
call_interrupted(void)
{
	return InterruptPending && INTERRUPTS_CAN_BE_PROCESSED() &&
		(QueryCancelPending || ProcDiePending || ClientConnectionLost);
}

/*
 * Wait for the answer (see the top of the file).  On Linux the wait is on
 * the request's state word (a futex, woken by dlock_request_done), elsewhere
 * on this backend's latch.  A signal ends the wait early; so does a timeout
 * of 100 ms, to see whether the process asked is still there.
 */
static bool
wait_answer(DlockRequest *r)
{
#ifdef __linux__
	struct timespec ts = {0, 100 * 1000 * 1000};
	uint32		st;

	pg_atomic_write_u32(&r->sleeping, 1);
	pg_memory_barrier();
	st = pg_atomic_read_u32(&r->state);
	if (st != DLOCK_REQ_DONE && !call_interrupted())
		(void) syscall(SYS_futex, &r->state.value, FUTEX_WAIT, st, &ts, NULL, 0);
	pg_atomic_write_u32(&r->sleeping, 0);
	if (!PostmasterIsAlive())
		proc_exit(1);
#else
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 100L, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
#endif
	return pg_atomic_read_u32(&r->state) == DLOCK_REQ_DONE;
}

/* a request of this backend's not yet taken back: for the error and exit paths */
static bool request_outstanding = false;

/*
 * This backend leaves its request, whatever state it is in: one nobody
 * claimed is taken back, one being worked on is left to its process to undo
 * (ABANDONED), and an acquisition answered but not taken is undone (its
 * fate word) and the request freed.
 */
static void
abandon_request(DlockRequest *r)
{
	request_outstanding = false;
	for (;;)
	{
		uint32		expected = DLOCK_REQ_PENDING;

		if (pg_atomic_compare_exchange_u32(&r->state, &expected, DLOCK_REQ_IDLE))
			return;
		expected = DLOCK_REQ_WORKING;
		if (pg_atomic_compare_exchange_u32(&r->state, &expected, DLOCK_REQ_ABANDONED))
			return;
		if (expected == DLOCK_REQ_DONE)
			break;
		if (expected == DLOCK_REQ_IDLE || expected == DLOCK_REQ_ABANDONED)
			return;
		/* PENDING again (a process gave back a claim): try again */
	}
	pg_read_barrier();
	if (r->op == DLOCK_OP_ACQUIRE && r->result == DLOCK_RES_OK)
	{
		uint64		held = DLOCK_FATE_PACK(r->hold_use, DLOCK_FATE_HELD);

		if (pg_atomic_compare_exchange_u64(dlock_hold_fate(r->hold_index), &held,
										   DLOCK_FATE_PACK(r->hold_use, DLOCK_FATE_UNDO_QUIET)))
		{
			pg_atomic_fetch_add_u32(&dlock_shared->undo_requests, 1);
			if (dlock_shared->holder_pid != 0 && dlock_shared->holder_procno >= 0)
				SetLatch(&GetPGProcByNumber(dlock_shared->holder_procno)->procLatch);
		}
	}
	pg_atomic_write_u32(&r->state, DLOCK_REQ_IDLE);
}

/* Process the interrupt that ended a request; it raises an error. */
static void
leave_request(void)
{
	request_outstanding = false;
	CHECK_FOR_INTERRUPTS();
	ereport(ERROR,
			(errcode(ERRCODE_QUERY_CANCELED),
			 errmsg("canceling statement due to user request")));
}

/*
 * A request this backend left behind (ABANDONED, or taken back while the
 * process asked was on it) is still being worked on: wait, interruptibly,
 * until it is free again, or its process is gone.
 */
static bool
wait_request_idle(DlockRequest *r, TimestampTz deadline)
{
	while (pg_atomic_read_u32(&r->state) != DLOCK_REQ_IDLE)
	{
		if (deadline != 0 && GetCurrentTimestamp() >= deadline)
			return false;
		/* answered, and never taken (an earlier user of this slot died) */
		if (pg_atomic_read_u32(&r->state) == DLOCK_REQ_DONE)
		{
			abandon_request(r);
			continue;
		}
		if (!target_alive(r->target_pid))
		{
			pg_atomic_write_u32(&r->state, DLOCK_REQ_IDLE);
			break;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/*
 * This backend's request, free to be filled in (nothing of it may be
 * written before: a request it left behind may still be read); false if
 * deadline (0: none) passed first.
 */
static bool
idle_request(DlockRequest **rp, TimestampTz deadline)
{
	if (!exit_hook_set)
	{
		before_shmem_exit(detached_exit, (Datum) 0);
		exit_hook_set = true;
	}
	*rp = my_request();
	return wait_request_idle(*rp, deadline);
}

/*
 * Ask and wait for the answer; false if deadline (0: none) passed first.  A
 * cancel or terminate, or the deadline, ends the wait: a request not yet
 * claimed is taken back, one being worked on is left to the process asked,
 * which undoes it (DlockRequest.state).  If the process asked exits first,
 * the answer is an error: whatever it held went with it.  The request came
 * from idle_request.
 */
static bool
send_request(DlockRequest *r, int target_pid, int target_procno, TimestampTz deadline)
{
	Assert(pg_atomic_read_u32(&r->state) == DLOCK_REQ_IDLE);
	r->target_pid = target_pid;
	r->target_procno = target_procno;
	r->caller_procno = GetNumberFromPGProc(MyProc);
	r->result = DLOCK_RES_ERROR;
	r->hold_index = -1;
	r->hold_use = 0;
	pg_write_barrier();
	pg_atomic_write_u32(&r->state, DLOCK_REQ_PENDING);
	request_outstanding = true;
	SetLatch(&GetPGProcByNumber(target_procno)->procLatch);
	PG_TRY();
	{
		DLOCK_FAULT("detached.sent");
	}
	PG_CATCH();
	{
		abandon_request(r);
		PG_RE_THROW();
	}
	PG_END_TRY();
	for (;;)
	{
		uint32		expected;

		if (pg_atomic_read_u32(&r->state) == DLOCK_REQ_DONE)
			break;
		if (call_interrupted())
		{
			expected = DLOCK_REQ_PENDING;
			if (pg_atomic_compare_exchange_u32(&r->state, &expected, DLOCK_REQ_IDLE))
				leave_request();
			expected = DLOCK_REQ_WORKING;
			if (pg_atomic_compare_exchange_u32(&r->state, &expected, DLOCK_REQ_ABANDONED))
				leave_request();
			continue;			/* answered meanwhile */
		}
		if (deadline != 0 && GetCurrentTimestamp() >= deadline)
		{
			/* taken back, or left to its process, which undoes it */
			abandon_request(r);
			return false;
		}
		if (wait_answer(r))
			break;
		if (!target_alive(target_pid))
		{
			pg_memory_barrier();
			if (pg_atomic_read_u32(&r->state) == DLOCK_REQ_DONE)
				break;			/* it answered, then exited */

			/*
			 * Gone without an answer, and with it whatever it held: a lock
			 * to extend or release is not held; one to take was not taken.
			 */
			if (r->op == DLOCK_OP_ACQUIRE)
			{
				r->result = DLOCK_RES_ERROR;
				dlock_error_set(&r->error, ERRCODE_ADMIN_SHUTDOWN,
								"the dlock lock holder process exited", NULL, NULL);
			}
			else
				r->result = DLOCK_RES_NOT_HELD;
			break;
		}
	}
	pg_read_barrier();
	pg_atomic_write_u32(&r->state, DLOCK_REQ_IDLE);
	request_outstanding = false;
#ifndef __linux__
	/* whatever else set the latch meanwhile still finds it set */
	SetLatch(MyLatch);
#endif
	return true;
}

/* The lock holder's pid and procno, waiting a little for it after a start. */
static int
holder_pid(int *procno, const DlockName *name)
{
	int			tries;

	for (tries = 0;; tries++)
	{
		int			pid = dlock_shared->holder_pid;

		pg_read_barrier();
		if (pid != 0)
		{
			*procno = dlock_shared->holder_procno;
			return pid;
		}
		if (dlock_shared->max_holds == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot acquire detached lock \"%s\": detached locks are turned off",
							dlock_display_name(name)),
					 errhint("Set \"dlock.max_detached_locks\" above 0 and restart the server.")));
		if (tries >= 100)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot acquire detached lock \"%s\": the dlock lock holder process is not running",
							dlock_display_name(name)),
					 errhint("It starts with the server; the server log says why it did not.")));
		CHECK_FOR_INTERRUPTS();
		pg_usleep(100 * 1000L);
	}
}

/* ---- errors raised in a holding process ---- */

void
dlock_error_set(DlockError *e, int sqlerrcode, const char *message,
				const char *detail, const char *hint)
{
	e->sqlerrcode = sqlerrcode;
	strlcpy(e->message, message ? message : "", sizeof(e->message));
	strlcpy(e->detail, detail ? detail : "", sizeof(e->detail));
	strlcpy(e->hint, hint ? hint : "", sizeof(e->hint));
}

void
dlock_error_save(DlockError *e, const ErrorData *edata)
{
	dlock_error_set(e, edata->sqlerrcode, edata->message, edata->detail, edata->hint);
}

/* Raise, in the caller, an error a holding process ran into. */
static void
raise_error(const DlockError *e)
{
	ereport(ERROR,
			(errcode(e->sqlerrcode),
			 errmsg_internal("%s", e->message),
			 e->detail[0] ? errdetail_internal("%s", e->detail) : 0,
			 e->hint[0] ? errhint("%s", e->hint) : 0));
}

/* ---- dlock_acquire ---- */

static void
no_token_error(const DlockName *name, int64 token)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot acquire detached lock \"%s\": no fencing token can be given",
					dlock_display_name(name)),
			 dlock_no_token_detail(token)));
}

static void
record_acquired(bool waiter, int index, uint64 use)
{
	Acquired   *a = &acquired[n_acquired++];

	a->waiter = waiter;
	a->index = index;
	a->use = use;
	a->subid = GetCurrentSubTransactionId();
}

/* Count an event of a detached acquisition of name (in this database). */
static void
count_detached(const DlockHold *h, int event, int64 us)
{
	if (event >= 0 && h->counted)
		dlock_stats_count(h->dbid, h->key, h->mode, h->name, h->namelen,
						  (DlockStatEvent) event, DLOCK_SCOPE_DETACHED, us, 0);
}

/* the waited acquisition in progress (for giving it up) */
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
		note_pending_undo(index, ticket);
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
	return dlock_limit_or_half(dlock_max_detached_waiters_per_role, dlock_shared->nwaiters);
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
	for (i = 0; i < dlock_shared->nwaiters; i++)
	{
		DlockWaiter *o = dlock_waiter(i);

		if (DLOCK_W_STATE(pg_atomic_read_u64(&o->tstate)) != DLOCK_W_FREE &&
			o->claim_role == role)
			n++;
	}
	return n <= role_waiters_limit();
}

/*
 * At exit: a waited acquisition in progress is given up, and acquisitions
 * of a transaction that did not commit are undone (a FATAL can land inside
 * the abort that would have undone them).
 */
static void
detached_exit(int code, Datum arg)
{
	if (request_outstanding)
		abandon_request(my_request());
	if (waiting_index >= 0)
		abandon(waiting_index, waiting_ticket);
	waiting_index = -1;
	while (n_acquired > 0)
		undo_acquired(n_acquired - 1);
}

/*
 * A free waiter block, claimed for ticket; -1 if none.  (Not inlined into
 * acquire_waiting, whose PG_TRY gcc would then warn about.)
 */
static pg_noinline int
claim_waiter(uint64 ticket)
{
	int			i;

	for (i = 0; i < dlock_shared->nwaiters; i++)
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
			 errdetail("A detached lock that has to wait is waited for and then held by a background worker of its own; all %d (max_worker_processes) are in use.",
					   max_worker_processes),
			 errhint("Raise max_worker_processes (a restart), or retry later with timeout => '0'.")));
}

static void
sleep_on_latch(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/*
 * Wait for the lock through a waiter process (holder.c).  Returns the token,
 * or 0 when the deadline (0: none) passed.
 */
static int64
acquire_waiting(const DlockName *name, const DlockHold *tmpl, TimestampTz deadline,
				int64 lease_us)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	DlockWaiter *w;
	int			index;
	uint64		ticket;
	LOCKTAG		ticket_tag;
	int			saved_lock_timeout = LockTimeout;
	volatile bool check_client = false;
	volatile bool timed_out = false;
	uint32		st;
	int64		token;
	TimestampTz start = GetCurrentTimestamp();

	/* a wait an error left behind (never expected): given up first */
	if (waiting_index >= 0)
	{
		abandon(waiting_index, waiting_ticket);
		waiting_index = -1;
	}
	ticket = pg_atomic_fetch_add_u64(&dlock_shared->ticket_next, 1);
	index = claim_waiter(ticket);
	if (index < 0)
		no_worker_error(name);
	w = dlock_waiter(index);
	if (!within_role_waiters(w, tmpl->limit_role))
	{
		(void) dlock_waiter_move(w, ticket, DLOCK_W_STARTING, DLOCK_W_FREE);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("cannot wait for detached lock \"%s\": role \"%s\" has dlock.max_detached_waiters_per_role (%d) waited detached locks",
						dlock_display_name(name), GetUserNameFromId(tmpl->limit_role, false),
						role_waiters_limit()),
				 errdetail("Each waited detached lock takes a background worker slot until it is released; they count against the session's user, whatever role is set."),
				 errhint("Release waited detached locks that are no longer needed, retry with timeout => '0', or raise \"dlock.max_detached_waiters_per_role\" (in postgresql.conf, then a reload).")));
	}
	w->caller_pid = MyProcPid;
	w->caller_procno = GetNumberFromPGProc(MyProc);
	w->worker_pid = 0;
	w->deadline = deadline;
	w->deadlock_timeout_ms = DeadlockTimeout;
	w->lease_us = lease_us;
	w->result = DLOCK_RES_ERROR;
	dlock_error_set(&w->error, ERRCODE_INTERNAL_ERROR, "", NULL, NULL);
	dlock_hold_begin(&w->hold);
	memcpy((char *) &w->hold + sizeof(pg_atomic_uint32),
		   (const char *) tmpl + sizeof(pg_atomic_uint32),
		   sizeof(DlockHold) - sizeof(pg_atomic_uint32));
	w->hold.state = DLOCK_HOLD_FREE;
	w->hold.token = 0;
	dlock_hold_end(&w->hold);
	pg_write_barrier();

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "dlock");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "dlock_waiter_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "dlock waiter for process %d", MyProcPid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "dlock waiter");
	worker.bgw_main_arg = Int32GetDatum(index);
	memcpy(worker.bgw_extra, &ticket, sizeof(ticket));
	worker.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		(void) dlock_waiter_move(w, ticket, DLOCK_W_STARTING, DLOCK_W_FREE);
		no_worker_error(name);
	}

	waiting_index = index;
	waiting_ticket = ticket;
	waiting_handle = handle;
	PG_TRY();
	{
		DLOCK_FAULT("detached.waiting");
		/* until the waiter holds the ticket and is in the queue */
		while ((st = dlock_waiter_state(w, ticket)) == DLOCK_W_STARTING ||
			   st == DLOCK_W_CLAIMED)
		{
			pid_t		pid;

			if (GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED &&
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
			sleep_on_latch(10L);
		}

		if (!timed_out)
		{
			/*
			 * Wait for the ticket: in the lock manager, so that a deadlock through
			 * this session's own locks is found, and a cancel or statement_timeout
			 * ends the wait.  The deadline is the waiter's, not lock_timeout.  A
			 * client that goes away is noticed within a second.
			 */
			SET_LOCKTAG_ADVISORY(ticket_tag, tmpl->dbid, (uint32) (ticket >> 32),
								 (uint32) ticket, 3);
			LockTimeout = 0;
			if (client_connection_check_interval == 0 && MyProcPort != NULL)
			{
				check_client = true;
				client_connection_check_interval = 1000;
				enable_timeout_after(CLIENT_CONNECTION_CHECK_TIMEOUT, 1000);
			}
			(void) LockAcquire(&ticket_tag, ExclusiveLock, false, false);
			LockRelease(&ticket_tag, ExclusiveLock, false);
			if (check_client)
			{
				client_connection_check_interval = 0;
				disable_timeout(CLIENT_CONNECTION_CHECK_TIMEOUT, false);
			}
			LockTimeout = saved_lock_timeout;

			/* a waiter that died after letting go of the ticket: its last word */
			while ((st = dlock_waiter_state(w, ticket)) == DLOCK_W_WAITING)
				sleep_on_latch(10L);
			DLOCK_FAULT("detached.ticket");
		}
	}
	PG_CATCH();
	{
		LockTimeout = saved_lock_timeout;
		if (check_client)
		{
			client_connection_check_interval = 0;
			disable_timeout(CLIENT_CONNECTION_CHECK_TIMEOUT, false);
		}
		/* (still set meanwhile: a FATAL inside has detached_exit finish it) */
		abandon(index, ticket);
		waiting_index = -1;
		count_detached(tmpl, dlock_stat_wait_error(geterrcode()),
					   GetCurrentTimestamp() - start);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (timed_out)
	{
		/* given up: whatever the worker gets later is not kept */
		abandon(index, ticket);
		waiting_index = -1;
		count_detached(tmpl, DLOCK_STAT_TIMEOUT, GetCurrentTimestamp() - start);
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
			record_acquired(true, index, ticket);
			count_detached(tmpl, DLOCK_STAT_ACQUIRED, Max(GetCurrentTimestamp() - start, 0));
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
			count_detached(tmpl, DLOCK_STAT_ACQUIRED, Max(GetCurrentTimestamp() - start, 0));
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
		count_detached(tmpl, result == DLOCK_RES_TIMEOUT ? DLOCK_STAT_TIMEOUT :
					   result == DLOCK_RES_ERROR ? dlock_stat_wait_error(error.sqlerrcode) : -1,
					   GetCurrentTimestamp() - start);
		if (result == DLOCK_RES_TIMEOUT)
			return 0;
		if (result == DLOCK_RES_NO_TOKEN)
			no_token_error(name, token);
		raise_error(&error);
	}
	return 0;					/* not reached */
}

/*
 * Before an acquisition: the locks this session's given-up waited
 * acquisitions (rolled back, cancelled, timed out) left to their waiters to
 * release are released (interruptibly; up to deadline, 0: none), so that a
 * new try of the same name does not meet the old hold.  (The lock holder
 * does its undos, and frees an abandoned request, before it serves the
 * session's next request.)
 */
static void
wait_pending_undos(TimestampTz deadline)
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
		sleep_on_latch(1L);
	}
}

/* The timeout ran out before the lock holder answered (the call returns NULL). */
static void
detached_timed_out(const DlockHold *h, TimestampTz start)
{
	count_detached(h, DLOCK_STAT_TIMEOUT, GetCurrentTimestamp() - start);
}

/* dlock_acquire(name, lease, timeout, shared) -> token, or NULL */
Datum
dlock_acquire(PG_FUNCTION_ARGS)
{
	DlockName	name;
	int64		lease_us;
	int64		timeout_us = 0;
	bool		shared;
	DlockRequest *r;
	DlockHold	req;
	DlockHold  *h;
	int			pid;
	int			procno;
	int64		token;
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline;

	dlock_name_arg(fcinfo, 0, &name);
	if (PG_NARGS() < 2 || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a detached lock needs a lease"),
				 errhint("Pass one, as in dlock_acquire('%s', '30s'); extend it with dlock_extend while the work goes on.",
						 dlock_display_name(&name))));
	lease_us = dlock_lease_arg(fcinfo, 1);
	if (lease_us > DLOCK_DETACHED_MAX_LEASE_US)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease of a detached lock must be at most 1 day"),
				 errhint("Take a shorter lease and extend it with dlock_extend while the work goes on.")));
	if (PG_NARGS() > 2)
		timeout_us = dlock_timeout_arg(fcinfo, 2);
	shared = PG_NARGS() > 3 ? dlock_bool_arg(fcinfo, 3, "shared") : false;
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot acquire lock \"%s\" during recovery", dlock_display_name(&name)),
				 errdetail("This server is a standby: detached locks are held on the primary only."),
				 errhint("Take the lock on the primary.")));
	dlock_backend_init();
	pid = holder_pid(&procno, &name);
	reserve_acquired();

	/* the hold asked for, filled in before the request is free to write */
	h = &req;
	memset(h, 0, sizeof(*h));
	h->state = DLOCK_HOLD_FREE;
	h->mode = shared ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
	h->namelen = name.len;
	memcpy(h->name, name.utf8, name.len);
	h->dbid = MyDatabaseId;
	h->key = name.key;
	h->role = GetUserId();
	h->limit_role = GetSessionUserId();
	strlcpy(h->rolname, GetUserNameFromId(h->role, false), NAMEDATALEN);
	strlcpy(h->appname, application_name ? application_name : "", NAMEDATALEN);
	dlock_client_address(MyBEEntry, h->client);
	h->token = 0;
	/* its end and expiry are counted by the holding process if this is */
	h->counted = dlock_stats_tracking();

	/* the holder may be slow to answer: the timeout bounds that too */
	deadline = timeout_us > 0 ? start + timeout_us : 0;
	wait_pending_undos(deadline);
	if (!idle_request(&r, deadline))
	{
		detached_timed_out(h, start);
		PG_RETURN_NULL();
	}
	r->op = DLOCK_OP_ACQUIRE;
	r->lease_us = lease_us;
	memcpy((char *) &r->hold + sizeof(pg_atomic_uint32), (char *) h + sizeof(pg_atomic_uint32),
		   sizeof(DlockHold) - sizeof(pg_atomic_uint32));
	if (!send_request(r, pid, procno, deadline))
	{
		detached_timed_out(h, start);
		PG_RETURN_NULL();
	}
	switch (r->result)
	{
		case DLOCK_RES_OK:
			record_acquired(false, r->hold_index, r->hold_use);
			count_detached(h, DLOCK_STAT_ACQUIRED, -1);
			/* from here, an error (a cancel) undoes it with the transaction */
			DLOCK_FAULT("detached.recorded");
			PG_RETURN_INT64(r->token);
		case DLOCK_RES_BUSY:
			if (timeout_us == 0)
			{
				count_detached(h, DLOCK_STAT_BUSY, 0);
				PG_RETURN_NULL();
			}
			token = acquire_waiting(&name, h, timeout_us < 0 ? 0 : start + timeout_us,
									lease_us);
			if (token == 0)
				PG_RETURN_NULL();
			PG_RETURN_INT64(token);
		case DLOCK_RES_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("cannot acquire detached lock \"%s\": the lock holder holds dlock.max_detached_locks (%d) locks",
							dlock_display_name(&name), dlock_shared->max_holds),
					 errhint("Release detached locks that are no longer needed, or raise \"dlock.max_detached_locks\" (a restart).")));
			break;
		case DLOCK_RES_ROLE_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("cannot acquire detached lock \"%s\": role \"%s\" holds dlock.max_detached_locks_per_role (%d) locks",
							dlock_display_name(&name), GetUserNameFromId(h->limit_role, false),
							(int) r->token),
					 errdetail("The lock holder keeps room for other roles' detached locks; they count against the session's user, whatever role is set."),
					 errhint("Release detached locks that are no longer needed, or raise \"dlock.max_detached_locks_per_role\" (in postgresql.conf, then a reload).")));
			break;
		case DLOCK_RES_NO_TOKEN:
			no_token_error(&name, r->token);
			break;
		default:
			raise_error(&r->error);
	}
	PG_RETURN_NULL();			/* not reached */
}

/* ---- dlock_extend, dlock_release ---- */

/*
 * Send an extend or release of (name, token) to the process that holds it.
 * false if no process holds a detached lock with that token.
 */
static bool
ask_holder(DlockRequest **rp, const DlockName *name, int64 token, int op,
		   int64 lease_us)
{
	DlockRequest *r;
	int			pid = 0;
	int			procno = -1;
	int			i;

	(void) idle_request(rp, 0);
	r = *rp;
	r->op = op;
	r->lease_us = lease_us;
	r->hold.dbid = MyDatabaseId;
	r->hold.key = name->key;
	r->hold.token = token;
	r->hold.role = GetUserId();
	r->superuser = superuser();
	r->holder_role[0] = '\0';
	r->expires = 0;
	/* a lock that had to wait is held by its waiter; the others by the holder */
	for (i = 0; i < dlock_shared->nwaiters; i++)
	{
		DlockWaiter *w = dlock_waiter(i);
		uint32		st = DLOCK_W_STATE(pg_atomic_read_u64(&w->tstate));
		int			wpid;
		int			wprocno;

		pg_read_barrier();
		wpid = w->worker_pid;
		wprocno = w->worker_procno;
		/*
		 * WAITING too: a waiter shows its hold as held, with its token,
		 * just before it says GRANTED, and answers once it has.
		 */
		if ((st == DLOCK_W_WAITING || st == DLOCK_W_GRANTED || st == DLOCK_W_HELD ||
			 st == DLOCK_W_UNDO) &&
			w->hold.token == token && token > 0 && wpid != 0)
		{
			pid = wpid;
			procno = wprocno;
			break;
		}
	}
	if (pid == 0)
	{
		pid = dlock_shared->holder_pid;
		procno = dlock_shared->holder_procno;
	}
	if (pid == 0)
	{
		r->result = DLOCK_RES_NOT_HELD;
		return false;
	}
	(void) send_request(r, pid, procno, 0);
	return true;
}

static void
check_token_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("token must not be null"),
				 errhint("Pass the token dlock_acquire returned.")));
}

/* dlock_extend(name, token, lease) -> the new expiry */
Datum
dlock_extend(PG_FUNCTION_ARGS)
{
	DlockName	name;
	int64		token;
	int64		lease_us;
	DlockRequest *r;
	TimestampTz expired;

	dlock_name_arg(fcinfo, 0, &name);
	check_token_arg(fcinfo, 1);
	token = PG_GETARG_INT64(1);
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease must not be null"),
				 errhint("Pass the new lease, counted from now, as in dlock_extend('%s', %lld, '30s').",
						 dlock_display_name(&name), (long long) token)));
	lease_us = dlock_lease_arg(fcinfo, 2);
	if (lease_us > DLOCK_DETACHED_MAX_LEASE_US)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease of a detached lock must be at most 1 day"),
				 errhint("Extend it again before it runs out.")));
	dlock_backend_init();
	(void) ask_holder(&r, &name, token, DLOCK_OP_EXTEND, lease_us);
	switch (r->result)
	{
		case DLOCK_RES_OK:
			PG_RETURN_TIMESTAMPTZ(r->expires);
		case DLOCK_RES_EXPIRED:
			expired = r->expires;
			break;
		case DLOCK_RES_NOT_YOURS:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("cannot extend detached lock \"%s\": it was acquired by role \"%s\"",
							dlock_display_name(&name), r->holder_role),
					 errdetail("Only the role that acquired a detached lock, or a superuser, can extend or release it.")));
			break;
		case DLOCK_RES_NOT_HELD:
			if (dlock_find_expiry(MyDatabaseId, name.key, token, &expired))
				break;
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("detached lock \"%s\" is not held with token " INT64_FORMAT,
							dlock_display_name(&name), token),
					 errdetail("It was released, or its lease ran out, or the token is another lock's.")));
			break;
		default:
			raise_error(&r->error);
	}
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("lease of lock \"%s\" has expired", dlock_display_name(&name)),
			 errdetail("The lease expired at %s; the server released the lock.",
					   timestamptz_to_str(expired)),
			 errhint("Acquire it again; work done under token " INT64_FORMAT " may have to be checked.",
					 token)));
	PG_RETURN_NULL();			/* not reached */
}

/* dlock_release(name, token) -> released? */
Datum
dlock_release(PG_FUNCTION_ARGS)
{
	DlockName	name;
	int64		token;
	DlockRequest *r;
	TimestampTz expired;

	dlock_name_arg(fcinfo, 0, &name);
	check_token_arg(fcinfo, 1);
	token = PG_GETARG_INT64(1);
	dlock_require_preload("Detached locks are held by a background worker.");
	dlock_backend_init();
	(void) ask_holder(&r, &name, token, DLOCK_OP_RELEASE, 0);
	switch (r->result)
	{
		case DLOCK_RES_OK:
			PG_RETURN_BOOL(true);
		case DLOCK_RES_EXPIRED:
			ereport(WARNING,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("lease of lock \"%s\" has expired", dlock_display_name(&name)),
					 errdetail("The lease expired at %s; the server released the lock.",
							   timestamptz_to_str(r->expires))));
			break;
		case DLOCK_RES_NOT_YOURS:
			ereport(WARNING,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("cannot release detached lock \"%s\": it was acquired by role \"%s\"",
							dlock_display_name(&name), r->holder_role),
					 errdetail("Only the role that acquired a detached lock, or a superuser, can extend or release it.")));
			break;
		case DLOCK_RES_NOT_HELD:
			if (dlock_find_expiry(MyDatabaseId, name.key, token, &expired))
				ereport(WARNING,
						(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
						 errmsg("lease of lock \"%s\" has expired", dlock_display_name(&name)),
						 errdetail("The lease expired at %s; the server released the lock.",
								   timestamptz_to_str(expired))));
			else
				ereport(WARNING,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("detached lock \"%s\" is not held with token " INT64_FORMAT,
								dlock_display_name(&name), token)));
			break;
		default:
			raise_error(&r->error);
	}
	PG_RETURN_BOOL(false);
}
