/*
 * protocol.c: the detached-lock protocol's part of shared memory, and what
 * both of its sides use (protocol.h): consistent copies of holds, errors
 * carried from a holding process to its caller, lease expiries remembered.
 *
 * Layer 3 of the map in dlock.h (mechanisms): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/shmem.h"
#include "utils/builtins.h"

#include "dlock.h"
#include "protocol.h"
#include "semaphore.h"
#include "slots.h"
#include "stats.h"

DlockDetachedShared *dlock_detached = NULL;
int			dlock_max_detached_locks = 1000;

static Size
layout(Size *requests_off, Size *lines_off, Size *holds_off, Size *waiters_off, Size *fates_off)
{
	Size		size = MAXALIGN(sizeof(DlockDetachedShared));

	*requests_off = size;
	size = add_size(size, mul_size(MaxBackends, sizeof(DlockRequest)));
	*lines_off = size = MAXALIGN(size);
	size = add_size(size, mul_size(MaxBackends, sizeof(DlockLine)));
	*holds_off = size = MAXALIGN(size);
	size = add_size(size, mul_size(dlock_max_detached_locks, sizeof(DlockHold)));
	*waiters_off = size = MAXALIGN(size);
	size = add_size(size, mul_size(max_worker_processes, sizeof(DlockWaiter)));
	*fates_off = size = MAXALIGN(size);
	return add_size(size, mul_size(dlock_max_detached_locks, sizeof(pg_atomic_uint64)));
}

Size
dlock_protocol_shmem_size(void)
{
	Size		a,
				b,
				c,
				d,
				e;

	return layout(&a, &b, &c, &d, &e);
}

/* At start-up, with AddinShmemInitLock held (shmem.c). */
void
dlock_protocol_shmem_init(void)
{
	bool		found;
	DlockDetachedShared *s;
	int			i;

	s = ShmemInitStruct("dlock detached", dlock_protocol_shmem_size(), &found);
	dlock_detached = s;
	if (found)
		return;
	memset(s, 0, dlock_protocol_shmem_size());
	(void) layout(&s->requests_off, &s->lines_off, &s->holds_off, &s->waiters_off, &s->fates_off);
	s->holder_pid = 0;
	s->holder_procno = -1;
	s->nrequests = MaxBackends;
	s->max_holds = dlock_max_detached_locks;
	s->nwaiters = max_worker_processes;
	pg_atomic_init_u64(&s->ticket_next, 1);
	SpinLockInit(&s->expired_lock);
	for (i = 0; i < s->nrequests; i++)
	{
		pg_atomic_init_u32(&dlock_request(i)->state, DLOCK_REQ_IDLE);
		pg_atomic_init_u32(&dlock_request(i)->sleeping, 0);
		dlock_line(i)->pid = 0;
		pg_atomic_init_u32(&dlock_line(i)->hold.changecount, 0);
	}
	for (i = 0; i < DLOCK_LINE_BUCKETS; i++)
		pg_atomic_init_u32(&s->in_line[i], 0);
	for (i = 0; i < s->max_holds; i++)
	{
		pg_atomic_init_u32(&dlock_hold(i)->changecount, 0);
		pg_atomic_init_u64(dlock_hold_fate(i), DLOCK_FATE_PACK(0, DLOCK_FATE_FREE));
	}
	pg_atomic_init_u32(&s->undo_requests, 0);
	for (i = 0; i < s->nwaiters; i++)
	{
		pg_atomic_init_u64(&dlock_waiter(i)->tstate, DLOCK_W_PACK(0, DLOCK_W_FREE));
		dlock_waiter(i)->claim_role = InvalidOid;
		pg_atomic_init_u32(&dlock_waiter(i)->hold.changecount, 0);
	}
}

/* The lock of a detached hold: its name's advisory lock, or its permit. */
void
dlock_hold_locktag(LOCKTAG *tag, const DlockHold *h)
{
	dlock_set_permit_tag(tag, h->dbid, h->key, h->permit);
}

/* The ticket lock of a waited acquisition (dlock.h). */
void
dlock_ticket_locktag(LOCKTAG *tag, Oid dbid, uint64 ticket)
{
	SET_LOCKTAG_ADVISORY(*tag, dbid, (uint32) (ticket >> 32), (uint32) ticket,
						 DLOCK_SUBID_TICKET);
}

/* An error for the caller, from its parts (message, detail, hint: NULL or text). */
void
dlock_error_set(DlockError *e, int sqlerrcode, const char *message,
				const char *detail, const char *hint)
{
	e->sqlerrcode = sqlerrcode;
	strlcpy(e->message, message ? message : "", sizeof(e->message));
	strlcpy(e->detail, detail ? detail : "", sizeof(e->detail));
	strlcpy(e->hint, hint ? hint : "", sizeof(e->hint));
}

/* An error caught in a holding process, for its caller. */
void
dlock_error_save(DlockError *e, const ErrorData *edata)
{
	dlock_error_set(e, edata->sqlerrcode, edata->message, edata->detail, edata->hint);
}

/* ---- lease expiries ---- */

/* Remember a lease that ran out, so that dlock_extend can tell. */
void
dlock_expiry_note(const DlockHold *h)
{
	DlockDetachedShared *s = dlock_detached;
	DlockExpired *x;

	dlock_stats_count_counted(h->counted, h->dbid, h->key, h->mode, h->name, h->namelen,
							  DLOCK_STAT_EXPIRED, 0, h->limit_role);
	SpinLockAcquire(&s->expired_lock);
	x = &s->expired[s->expired_next];
	s->expired_next = (s->expired_next + 1) % DLOCK_EXPIRED_RING;
	x->dbid = h->dbid;
	x->key = h->key;
	x->token = h->token;
	x->expired = h->lease_expires;
	SpinLockRelease(&s->expired_lock);
}

bool
dlock_expiry_find(Oid dbid, int64 key, int64 token, TimestampTz *when)
{
	DlockDetachedShared *s = dlock_detached;
	bool		found = false;
	int			i;

	SpinLockAcquire(&s->expired_lock);
	for (i = 0; i < DLOCK_EXPIRED_RING; i++)
	{
		DlockExpired *x = &s->expired[i];

		if (x->token == token && x->key == key && x->dbid == dbid)
		{
			*when = x->expired;
			found = true;
			break;
		}
	}
	SpinLockRelease(&s->expired_lock);
	return found;
}

/* A consistent copy of a detached hold (its change counter: changecount.h). */
static void
hold_read(DlockHold *src, DlockHold *copy)
{
	int			tries = 0;

	for (;;)
	{
		uint32		before = dlock_read_begin(&src->changecount, &tries);

		dlock_hold_copy(copy, src);
		if (dlock_read_done(&src->changecount, before))
			return;
	}
}

/* (detached.h) The lock holder's, each waiter's, then each caller's in line. */
void
dlock_detached_each(DlockHoldFn fn, void *arg)
{
	DlockHold	hold;
	int			pid;
	int			i;

	if (dlock_detached == NULL)
		return;
	pid = dlock_detached->holder_pid;
	for (i = 0; pid != 0 && i < dlock_detached->max_holds; i++)
	{
		DlockHold  *h = dlock_hold(i);

		if (h->state == DLOCK_HOLD_FREE)	/* unlocked peek */
			continue;
		hold_read(h, &hold);
		if (hold.state != DLOCK_HOLD_FREE)
			fn(arg, pid, &hold);
	}
	for (i = 0; i < dlock_detached->nwaiters; i++)
	{
		DlockWaiter *w = dlock_waiter(i);

		pid = w->worker_pid;
		if (pid == 0 || w->hold.state == DLOCK_HOLD_FREE)
			continue;
		hold_read(&w->hold, &hold);
		if (hold.state != DLOCK_HOLD_FREE)
			fn(arg, pid, &hold);
	}
	/* the callers in line, as waiting */
	for (i = 0; i < dlock_detached->nrequests; i++)
	{
		DlockLine  *l = dlock_line(i);

		pid = l->pid;
		if (pid == 0 || l->hold.state == DLOCK_HOLD_FREE)
			continue;
		hold_read(&l->hold, &hold);
		if (hold.state != DLOCK_HOLD_FREE)
			fn(arg, pid, &hold);
	}
}

#ifdef DLOCK_FAULTS
/*
 * dlock_fault_leaks(): what the shared tables have in use, as one line:
 * waiter blocks not free, requests not idle, the lock holder's holds in
 * use, undos not yet done, and callers in line (for a semaphore's permit,
 * and for a detached lock: counted, and places taken).
 * After a fault has settled, each must match
 * what the view shows (test/faults.py).
 */
PG_FUNCTION_INFO_V1(dlock_fault_leaks);

Datum
dlock_fault_leaks(PG_FUNCTION_ARGS)
{
	int			waiters = 0;
	int			requests = 0;
	int			holds = 0;
	int			undos = 0;
	int			in_line = 0;
	int			i;
	char		buf[128];

	dlock_fault_require();
	for (i = 0; i < dlock_detached->nwaiters; i++)
		if (DLOCK_W_STATE(pg_atomic_read_u64(&dlock_waiter(i)->tstate)) != DLOCK_W_FREE)
			waiters++;
	for (i = 0; i < dlock_detached->nrequests; i++)
		if (pg_atomic_read_u32(&dlock_request(i)->state) != DLOCK_REQ_IDLE)
			requests++;
	for (i = 0; i < dlock_detached->max_holds; i++)
	{
		if (dlock_hold(i)->state != DLOCK_HOLD_FREE)
			holds++;
		if (DLOCK_FATE_STATE(pg_atomic_read_u64(dlock_hold_fate(i))) == DLOCK_FATE_UNDO ||
			DLOCK_FATE_STATE(pg_atomic_read_u64(dlock_hold_fate(i))) == DLOCK_FATE_UNDO_QUIET)
			undos++;
	}
	for (i = 0; i < DLOCK_LINE_BUCKETS; i++)
		in_line += (int) pg_atomic_read_u32(&dlock_detached->in_line[i]);
	for (i = 0; i < dlock_detached->nrequests; i++)
		if (dlock_line(i)->pid != 0)
			in_line++;
	snprintf(buf, sizeof(buf), "waiters=%d requests=%d holds=%d undos=%d in_line=%d",
			 waiters, requests, holds, undos, in_line + dlock_permit_in_line());
	PG_RETURN_TEXT_P(cstring_to_text(buf));
}
#endif
