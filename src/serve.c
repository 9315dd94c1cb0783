/*
 * serve.c: what both kinds of process that hold detached locks do (serve.h;
 * the lock holder: holder.c, a waiter: waiter.c): answer the requests of
 * the caller's side (request.c) in place, and run their loop.
 *
 * A sender that left its request while it was being worked on (ABANDONED;
 * protocol.h) is not told: what was done for it is undone, and the request
 * freed (dlock_serve_free).
 *
 * Layer 6 of the map in dlock.h (processes): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include <limits.h>
#include <signal.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "notify.h"
#include "serve.h"
#include "stats.h"

DlockRequest *dlock_serving = NULL;

/* how the next hold to end ends, for its event (notify.c): released unless said */
static int end_kind = DLOCK_EV_RELEASED;

void
dlock_serve_end_kind(int kind)
{
	end_kind = kind;
}

/*
 * A detached hold ended (released, expired, or its process exits): counted,
 * and announced if it was taken with notify.
 */
void
dlock_serve_hold_ended(const DlockHold *h)
{
	if (h->state == DLOCK_HOLD_HELD)
	{
		dlock_stats_count_counted(h->counted, h->dbid, h->key, h->mode, h->name, h->namelen,
								  DLOCK_STAT_RELEASED, GetCurrentTimestamp() - h->since,
								  h->limit_role);
		if (end_kind >= 0)
			dlock_announce_hold(h, end_kind);
	}
	end_kind = DLOCK_EV_RELEASED;
}

/*
 * A hold's end has come (its lease, or the minimum hold of one released
 * before it): logged, and a lease's expiry noted and counted.  The caller
 * releases it.
 */
void
dlock_serve_hold_expired(const DlockHold *h, const char *who)
{
	if (h->released)
	{
		ereport(LOG,
				(errmsg("minimum hold of detached lock \"%.*s\" ended, released it",
						(int) h->namelen, h->name),
				 errdetail("It was released before its minimum hold ended at %s; fencing token " INT64_FORMAT ", acquired by role \"%s\", held by the %s.",
						   timestamptz_to_str(h->min_until), h->token, h->rolname, who)));
		return;
	}
	ereport(LOG,
			(errmsg("lease of detached lock \"%.*s\" expired, released it",
					(int) h->namelen, h->name),
			 errdetail("The lease expired at %s; fencing token " INT64_FORMAT ", acquired by role \"%s\", held by the %s.",
					   timestamptz_to_str(h->lease_expires), h->token, h->rolname, who)));
	dlock_expiry_note(h);
	end_kind = DLOCK_EV_LEASE_EXPIRED;
}

/*
 * A new hold's times, by the process that holds it, granted now: its
 * minimum hold ends at now + the min_hold asked for, and it ends at the
 * later of that and its lease's end.  (Inside the hold's change window.)
 */
void
dlock_serve_hold_times(DlockHold *h, TimestampTz now, int64 lease_us)
{
	h->since = now;
	h->released = false;
	h->min_until = h->min_hold_us > 0 ? now + h->min_hold_us : 0;
	h->lease_expires = Max(now + lease_us, h->min_until);
}

/*
 * A release asked of hold h (checked) before its minimum hold ends: it is
 * kept until then, no longer extendable or releasable, and the release
 * answered as done.  false if it may go now (the caller releases it).
 */
bool
dlock_serve_release_later(DlockRequest *r, DlockHold *h, TimestampTz now)
{
	TimestampTz old = h->lease_expires;

	if (h->min_until <= now || r->op == DLOCK_OP_FORCE_RELEASE)
		return false;
	DLOCK_FAULT("serve.release_later");
	dlock_hold_begin(h);
	h->released = true;
	h->lease_expires = h->min_until;
	dlock_hold_end(h);
	if (!dlock_serve_reply(r, DLOCK_RES_OK))
	{
		/*
		 * Its sender left (a cancel): it was told an error, so the lock is
		 * still its own, to extend or release again, as an abandoned
		 * extension is taken back.
		 */
		dlock_hold_begin(h);
		h->released = false;
		h->lease_expires = old;
		dlock_hold_end(h);
		dlock_serve_free(r);
	}
	return true;
}

/*
 * An operator's override of hold h (checked; the caller releases it next and
 * answers): logged here, by the process that releases it, so that an
 * override whose caller left (a cancel) is logged too; and counted in
 * dlock_stats.
 */
void
dlock_serve_forced(DlockRequest *r, const DlockHold *h, TimestampTz now)
{
	DLOCK_FAULT("serve.force_release");
	r->caller[sizeof(r->caller) - 1] = '\0';
	ereport(LOG,
			(errmsg("detached lock \"%.*s\" was force-released by role %s",
					(int) h->namelen, h->name, r->caller),
			 h->min_until > now ?
			 errdetail("Fencing token " INT64_FORMAT ", acquired by role \"%s\", in its minimum hold until %s.",
					   h->token, h->rolname, timestamptz_to_str(h->min_until)) :
			 errdetail("Fencing token " INT64_FORMAT ", acquired by role \"%s\".",
					   h->token, h->rolname)));
	dlock_stats_count_counted(h->counted, h->dbid, h->key, h->mode, h->name, h->namelen,
							  DLOCK_STAT_FORCED, 0, h->limit_role);
	end_kind = DLOCK_EV_FORCED;
}

/*
 * Mark a request answered and wake its sender if it sleeps; false if its
 * sender left it meanwhile (ABANDONED; protocol.h), when the caller undoes what
 * it did for it and then frees it (request_free).  On Linux the sender
 * sleeps on the state word itself (a futex): a wake-up is one system call,
 * where setting a sleeping process's latch sends it a signal, which costs
 * several times as much and was most of a detached lock's cost.
 */
static bool
request_done(DlockRequest *r)
{
	uint32		expected = DLOCK_REQ_WORKING;

	if (!pg_atomic_compare_exchange_u32(&r->state, &expected, DLOCK_REQ_DONE))
		return false;
#ifdef __linux__
	if (pg_atomic_read_u32(&r->sleeping) != 0)
		(void) syscall(SYS_futex, &r->state.value, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#else
	SetLatch(&GetPGProcByNumber(r->caller_procno)->procLatch);
#endif
	return true;
}

/* A request its sender left, undone: free for the sender's next one. */
void
dlock_serve_free(DlockRequest *r)
{
	pg_atomic_write_u32(&r->state, DLOCK_REQ_IDLE);
}

/* Answer a request and wake its sender; false if the sender left it. */
bool
dlock_serve_reply(DlockRequest *r, int result)
{
	r->result = result;
	pg_write_barrier();
	return request_done(r);
}

/* Answer a request that changed nothing (freed if its sender left it). */
void
dlock_serve_reply_only(DlockRequest *r, int result)
{
	if (!dlock_serve_reply(r, result))
		dlock_serve_free(r);
}

/*
 * Checks common to extend and release of hold h (held by this
 * process): is it the hold named, may the caller act on it, is its lease
 * still running?  DLOCK_RES_OK if the operation may go on.
 */
int
dlock_serve_check_hold(DlockRequest *r, const DlockHold *h, TimestampTz now)
{
	bool		force = r->op == DLOCK_OP_FORCE_RELEASE;

	if (h->state != DLOCK_HOLD_HELD || h->token != r->hold.token ||
		h->key != r->hold.key || h->dbid != r->hold.dbid)
		return DLOCK_RES_NOT_HELD;
	/*
	 * Released early, kept for its minimum hold: not held with the token any
	 * more, and the answer says until when it is kept.  An override ends it.
	 */
	if (h->released && !force)
	{
		/* (its minimum hold over, not yet let go: released, no more) */
		if (h->lease_expires > now)
			r->expires = h->min_until;
		return DLOCK_RES_NOT_HELD;
	}
	if (h->role != r->hold.role && !r->superuser && !force)
	{
		strlcpy(r->holder_role, h->rolname, NAMEDATALEN);
		return DLOCK_RES_NOT_YOURS;
	}
	if (h->lease_expires <= now)
	{
		/* released early, its minimum hold over: released, not run out */
		if (h->released)
			return DLOCK_RES_NOT_HELD;
		r->expires = h->lease_expires;
		return DLOCK_RES_EXPIRED;
	}
	return DLOCK_RES_OK;
}

/*
 * Extend hold h (held by this process) as r asks, and answer; false if its
 * sender left meanwhile, when the lease it was not told of is taken back.
 */
bool
dlock_serve_extend_hold(DlockRequest *r, DlockHold *h, TimestampTz now)
{
	TimestampTz old = h->lease_expires;
	uint16		old_infolen = h->infolen;
	char		old_info[DLOCK_INFO_MAX];

	if (r->set_info)
		memcpy(old_info, h->info, old_infolen);
	dlock_hold_begin(h);
	h->lease_expires = Max(now + r->lease_us, h->min_until);
	if (r->set_info)
	{
		memcpy(h->info, r->hold.info, r->hold.infolen);
		h->infolen = r->hold.infolen;
	}
	dlock_hold_end(h);
	r->expires = h->lease_expires;
	if (dlock_serve_reply(r, DLOCK_RES_OK))
		return true;
	dlock_hold_begin(h);
	h->lease_expires = old;
	if (r->set_info)
	{
		memcpy(h->info, old_info, old_infolen);
		h->infolen = old_infolen;
	}
	dlock_hold_end(h);
	dlock_serve_free(r);
	return false;
}

/* Serve the requests addressed to this process; true if there were any. */
bool
dlock_serve_requests(void (*acquire) (DlockRequest *), void (*other) (DlockRequest *))
{
	bool		any = false;
	uint32		pending = DLOCK_REQ_PENDING;
	int			i;

	for (i = 0; i < dlock_detached->nrequests; i++)
	{
		DlockRequest *r = dlock_request(i);

		if (pg_atomic_read_u32(&r->state) != DLOCK_REQ_PENDING)
			continue;
		/* the request's fields are read after its state said pending */
		pg_read_barrier();
		if (r->target_pid != MyProcPid)
			continue;
		/* claimed, unless its sender took it back (a cancel) */
		if (!pg_atomic_compare_exchange_u32(&r->state, &pending, DLOCK_REQ_WORKING))
		{
			pending = DLOCK_REQ_PENDING;
			continue;
		}
		pg_memory_barrier();
		if (r->target_pid != MyProcPid)
		{
			uint32		working = DLOCK_REQ_WORKING;

			/*
			 * Taken back and sent again, to another process, between our
			 * look and our claim: give it back, and wake the one it is for.
			 */
			if (!pg_atomic_compare_exchange_u32(&r->state, &working, DLOCK_REQ_PENDING))
				dlock_serve_free(r);	/* left by its sender meanwhile */
			else
				SetLatch(&GetPGProcByNumber(r->target_procno)->procLatch);
			continue;
		}
		any = true;
		dlock_serving = r;
		DLOCK_FAULT("holder.claimed");
		if (r->op == DLOCK_OP_ACQUIRE && acquire != NULL)
			acquire(r);
		else if (r->op == DLOCK_OP_ACQUIRE)
			dlock_serve_reply_only(r, DLOCK_RES_BUSY);
		else
			other(r);
		dlock_serving = NULL;
	}
	return any;
}

/*
 * Under a steady stream of requests (the last one came less than
 * DLOCK_POLL_US before this one), keep looking for the next one, for up to
 * DLOCK_POLL_US of quiet, before going to sleep.  A client that takes and
 * releases detached locks in a loop sends its next request within tens of
 * microseconds; caught while polling, it costs no wake-up, where waking a
 * sleeping process (a signal) costs more than the rest of the request on a
 * busy machine.  Requests further apart find the holder asleep, so it only
 * polls while there is work coming (doc/detached.md).
 */
#define DLOCK_POLL_US 100

static instr_time last_request;

/* Serve what is there; note when, if anything was. */
static bool
serve_noting(void (*acquire) (DlockRequest *), void (*other) (DlockRequest *),
			 bool *busy)
{
	instr_time	now,
				gap;

	if (!dlock_serve_requests(acquire, other))
		return false;
	INSTR_TIME_SET_CURRENT(now);
	gap = now;
	INSTR_TIME_SUBTRACT(gap, last_request);
	*busy = INSTR_TIME_GET_MICROSEC(gap) < DLOCK_POLL_US;
	last_request = now;
	return true;
}

/*
 * One poll lasts at most DLOCK_POLL_MAX_US, and ends at once for an
 * interrupt, a reload or a lease to enforce (at *next_expiry): the main loop
 * does those.
 */
#define DLOCK_POLL_MAX_US 1000

void
dlock_serve_and_poll(void (*acquire) (DlockRequest *), void (*other) (DlockRequest *),
					 const TimestampTz *next_expiry)
{
	bool		busy = false;
	instr_time	start,
				now;

	if (!serve_noting(acquire, other, &busy) || !busy)
		return;
	INSTR_TIME_SET_CURRENT(start);
	for (;;)
	{
		for (int i = 0; i < 16; i++)
			pg_spin_delay();
		if (InterruptPending || ConfigReloadPending ||
			(*next_expiry != PG_INT64_MAX && *next_expiry <= GetCurrentTimestamp()))
			return;
		if (!serve_noting(acquire, other, &busy))
		{
			INSTR_TIME_SET_CURRENT(now);
			INSTR_TIME_SUBTRACT(now, last_request);
			if (INSTR_TIME_GET_MICROSEC(now) >= DLOCK_POLL_US)
				return;
		}
		INSTR_TIME_SET_CURRENT(now);
		INSTR_TIME_SUBTRACT(now, start);
		if (INSTR_TIME_GET_MICROSEC(now) >= DLOCK_POLL_MAX_US)
			return;
	}
}

void
dlock_serve_signals(void)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	/* a cancel must never make a holder drop what it holds */
	pqsignal(SIGINT, PG_SIG_IGN);
	BackgroundWorkerUnblockSignals();
	/* a connection to no database: only so that pg_stat_activity shows it */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
}

/* The start of each round of a holding process's loop. */
void
dlock_serve_loop_top(void)
{
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

void
dlock_serve_wait(TimestampTz until)
{
	long		sleep_ms = 60 * 1000L;
	TimestampTz now = GetCurrentTimestamp();

	if (until != PG_INT64_MAX)
		sleep_ms = until <= now ? 0 : Min(sleep_ms, (long) ((until - now + 999) / 1000));
	if (sleep_ms > 0)
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
}
