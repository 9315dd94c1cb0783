/*
 * request.c: a request to a process that holds detached locks, the
 * caller's side (the holding side: serve.c).
 *
 * A request is one DlockRequest per backend in shared memory: the backend
 * fills it in, marks it pending and sets the latch of the process it asks;
 * that process answers in place and wakes the backend.  The backend waits
 * for the answer interruptibly: a cancel or terminate takes back a request
 * nobody has claimed yet, or leaves one being worked on, and the process
 * asked then undoes what it did for it (protocol.h, DlockRequest.state), so
 * a caller never keeps a lock it was told it did not get, and no call waits
 * on a stalled lock holder.
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include <limits.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "detached_caller.h"

/* This backend's index among the requests (and places in line). */
int
dlock_request_procno(void)
{
	int			procno = GetNumberFromPGProc(MyProc);

	if (procno >= dlock_detached->nrequests)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("detached locks cannot be used from this kind of process")));
	return procno;
}

static DlockRequest *
my_request(void)
{
	return dlock_request(dlock_request_procno());
}

/* Is the process a request went to still there? */
static bool
target_alive(int pid)
{
	int			i;

	if (pid <= 0)
		return false;
	if (pid == dlock_detached->holder_pid)
		return true;
	for (i = 0; i < dlock_detached->nwaiters; i++)
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
			pg_atomic_fetch_add_u32(&dlock_detached->undo_requests, 1);
			if (dlock_detached->holder_pid != 0 && dlock_detached->holder_procno >= 0)
				SetLatch(&GetPGProcByNumber(dlock_detached->holder_procno)->procLatch);
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
bool
dlock_request_idle(DlockRequest **rp, TimestampTz deadline)
{
	*rp = my_request();
	return wait_request_idle(*rp, deadline);
}

/*
 * Ask and wait for the answer; false if deadline (0: none) passed first.  A
 * cancel or terminate, or the deadline, ends the wait: a request not yet
 * claimed is taken back, one being worked on is left to the process asked,
 * which undoes it (DlockRequest.state).  If the process asked exits first,
 * the answer is an error: whatever it held went with it.  The request came
 * from dlock_request_idle.
 */
bool
dlock_request_send(DlockRequest *r, int target_pid, int target_procno, TimestampTz deadline)
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
			{
				r->result = DLOCK_RES_NOT_HELD;
				r->expires = 0; /* (nothing is kept: no minimum hold) */
			}
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

/* Raise, in the caller, an error a holding process ran into. */
void
dlock_error_raise(const DlockError *e)
{
	ereport(ERROR,
			(errcode(e->sqlerrcode),
			 errmsg_internal("%s", e->message),
			 e->detail[0] ? errdetail_internal("%s", e->detail) : 0,
			 e->hint[0] ? errhint("%s", e->hint) : 0));
}

void
dlock_request_sleep(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/* At exit (detached.c): a request still out is left as a cancel leaves it. */
void
dlock_request_exit(void)
{
	if (request_outstanding)
		abandon_request(my_request());
}
