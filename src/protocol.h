/*
 * protocol.h: the detached-lock protocol, between the caller's side
 * (request.c, detached_xact.c, detached_wait.c, detached.c) and the
 * processes that hold detached locks (serve.c, holder.c, waiter.c): request
 * slots, the lock holder's holds and their fate words, waiter blocks, their
 * states and transitions.  Only those files, and protocol.c, include it.
 */
#ifndef DLOCK_PROTOCOL_H
#define DLOCK_PROTOCOL_H

#include "storage/lock.h"
#include "storage/spin.h"

#include "changecount.h"
#include "detached.h"

/* Lease expiries remembered, so that a late dlock_extend can say so. */
#define DLOCK_EXPIRED_RING 1024

/*
 * DlockRequest.state.  The sender moves IDLE -> PENDING, and back to IDLE
 * when it has the answer (DONE) or takes back a request nobody claimed
 * (PENDING, on a cancel).  The process asked claims it (PENDING -> WORKING)
 * and answers (WORKING -> DONE).  A sender interrupted while its request is
 * being worked on leaves it (WORKING -> ABANDONED): the process asked then
 * undoes what it did for it (an acquisition is released, an extension taken
 * back) and frees the request (ABANDONED -> IDLE).  A new request waits for
 * IDLE.
 */
#define DLOCK_REQ_IDLE		0
#define DLOCK_REQ_PENDING	1
#define DLOCK_REQ_DONE		2
#define DLOCK_REQ_WORKING	3
#define DLOCK_REQ_ABANDONED	4

/* DlockRequest.op */
#define DLOCK_OP_ACQUIRE	1	/* without waiting */
#define DLOCK_OP_EXTEND		2
#define DLOCK_OP_RELEASE	3
#define DLOCK_OP_FORCE_RELEASE 4	/* an operator's override (dlock_force_release):
								 * any role's hold, in its minimum hold too */

/*
 * dlock_hold_fate(i): the fate word of the lock holder's hold i, the
 * hold's use (one more each time the index is used) and its state in one
 * word.  The backend whose transaction acquired the hold undoes it, when
 * that transaction rolls back, by moving PACK(use, HELD) to PACK(use, UNDO)
 * and waking the holder: it never waits for the holder, and a late undo of
 * an index used again since changes nothing.
 */
#define DLOCK_FATE_FREE		0
#define DLOCK_FATE_HELD		1
#define DLOCK_FATE_UNDO		2
#define DLOCK_FATE_UNDO_QUIET 3	/* the same, for an acquisition its caller never
								 * took (neither it nor its end is counted) */
#define DLOCK_FATE_PACK(use, st)	(((uint64) (use) << 8) | (uint64) (st))
#define DLOCK_FATE_STATE(v)			((uint32) ((v) & 0xff))
#define DLOCK_FATE_USE(v)			((uint64) (v) >> 8)

/* DlockRequest.result (and DlockWaiter.result) */
#define DLOCK_RES_OK		0
#define DLOCK_RES_BUSY		1	/* not available (acquire) */
#define DLOCK_RES_FULL		2	/* dlock.max_detached_locks are held */
#define DLOCK_RES_NO_TOKEN	3	/* token: <= 0, why (dlock_token_none_detail) */
#define DLOCK_RES_NOT_HELD	4	/* no such hold of this name and token */
#define DLOCK_RES_EXPIRED	5	/* its lease ran out at "expires" */
#define DLOCK_RES_NOT_YOURS 6	/* held by another role */
#define DLOCK_RES_ERROR		7	/* sqlerrcode, message, detail */
#define DLOCK_RES_TIMEOUT	8	/* waiter: not granted within the timeout */
#define DLOCK_RES_ROLE_FULL 9	/* the role holds dlock.max_detached_locks_per_role */

#define DLOCK_MSG_MAX 256

/* An error raised in a holding process, to be raised again by the caller. */
typedef struct DlockError
{
	int			sqlerrcode;
	char		message[DLOCK_MSG_MAX];
	char		detail[2 * DLOCK_MSG_MAX];
	char		hint[DLOCK_MSG_MAX];
} DlockError;

/*
 * A backend's request to a process that holds detached locks, one per
 * backend (indexed like the slots), answered in place.
 */
typedef struct DlockRequest
{
	pg_atomic_uint32 state;		/* DLOCK_REQ_* */
	pg_atomic_uint32 sleeping;	/* the sender sleeps until state changes */
	int			target_pid;		/* the process asked */
	int			target_procno;
	int			op;				/* DLOCK_OP_* */
	int			caller_procno;
	bool		superuser;		/* the caller may act for any role */
	bool		set_info;		/* EXTEND: set hold.info (infolen bytes) */
	char		caller[2 * NAMEDATALEN + 24];	/* FORCE_RELEASE: who asks, for
												 * the log of the process that
												 * releases */
	int64		lease_us;		/* ACQUIRE, EXTEND */
	DlockHold	hold;			/* ACQUIRE: all of it; else dbid, key, token,
								 * role */
	/* the answer */
	int			result;			/* DLOCK_RES_* */
	int			hold_index;		/* ACQUIRE: the holder's hold, and its use */
	uint64		hold_use;
	int64		token;
	TimestampTz expires;
	char		holder_role[NAMEDATALEN];
	DlockError	error;			/* DLOCK_RES_ERROR */
} DlockRequest;

/*
 * DlockWaiter.tstate: the state below and the ticket of the acquisition in
 * one word, so that every change names the acquisition it is about and a
 * process that is late (a worker that starts after its caller gave up and
 * the block was reused) changes nothing.
 */
/* (The numbers are names, not an order.) */
#define DLOCK_W_FREE		0
#define DLOCK_W_STARTING	1	/* claimed by a caller, worker not yet there;
								 * a caller that gives up frees it at once,
								 * and a worker that starts later finds its
								 * ticket gone and touches nothing */
#define DLOCK_W_CLAIMED		8	/* the worker runs, not yet in the queue */
#define DLOCK_W_WAITING		2	/* the worker holds the ticket and waits */
#define DLOCK_W_GRANTED		3	/* the worker holds the lock; caller to take it */
#define DLOCK_W_ENDED		4	/* not granted (result says why); caller frees */
#define DLOCK_W_ABANDONED	5	/* the caller gave up (error, exit); worker frees */
#define DLOCK_W_HELD		6	/* taken by the caller; the worker frees it when
								 * the lock ends */
#define DLOCK_W_ORPHANED	7	/* the lock ended before the caller took it;
								 * caller frees */
#define DLOCK_W_UNDO		9	/* taken, and the caller's transaction rolled
								 * back: the worker releases it and frees */

#define DLOCK_W_PACK(ticket, st)	(((uint64) (ticket) << 8) | (uint64) (st))
#define DLOCK_W_STATE(v)			((uint32) ((v) & 0xff))
#define DLOCK_W_TICKET(v)			((uint64) (v) >> 8)

/*
 * One waited acquisition, and then the lock it got: run by a waiter process
 * (a dynamic background worker) that waits in the lock manager's queue while
 * the caller waits for a "ticket" lock the worker holds, so that the
 * deadlock detector sees caller -> worker -> holders (holder.c).
 */
typedef struct DlockWaiter
{
	pg_atomic_uint64 tstate;	/* DLOCK_W_PACK(ticket, DLOCK_W_*) */
	Oid			claim_role;		/* the role that claimed it (written right after
															 * the claim; dlock.max_detached_waiters_per_role) */
	int			caller_pid;
	int			caller_procno;
	int			worker_pid;		/* 0 until it runs */
	int			worker_procno;
	TimestampTz deadline;		/* 0: no limit */
	int			deadlock_timeout_ms;
	int64		lease_us;
	int			result;			/* ENDED: DLOCK_RES_* */
	DlockError	error;			/* DLOCK_RES_ERROR */
	DlockHold	hold;
} DlockWaiter;

static inline uint32
dlock_waiter_state(DlockWaiter *w, uint64 ticket)
{
	uint64		v = pg_atomic_read_u64(&w->tstate);

	return DLOCK_W_TICKET(v) == ticket ? DLOCK_W_STATE(v) : DLOCK_W_FREE;
}

static inline bool
dlock_waiter_move(DlockWaiter *w, uint64 ticket, uint32 from, uint32 to)
{
	uint64		expected = DLOCK_W_PACK(ticket, from);

	return pg_atomic_compare_exchange_u64(&w->tstate, &expected, DLOCK_W_PACK(ticket, to));
}

/*
 * A backend's place in the line of a name's waited detached acquisitions
 * (dlock.h DLOCK_SUBID_LINE), one per backend (indexed like the requests):
 * what it waits for, for the view, while it waits for the line.  Written
 * only by its backend, inside the hold's change counter.
 */
typedef struct DlockLine
{
	int			pid;			/* 0: not in line */
	DlockHold	hold;			/* state WAITING while in line */
} DlockLine;

/*
 * Callers in line, counted per bucket of names (dlock_line_bucket), so that
 * an acquisition looks at a name's line only when someone may be in it.
 */
#define DLOCK_LINE_BUCKETS 256

static inline int
dlock_line_bucket(Oid dbid, int64 key)
{
	return (int) (((uint64) key ^ ((uint64) key >> 32) ^ dbid) % DLOCK_LINE_BUCKETS);
}

typedef struct DlockExpired
{
	Oid			dbid;
	int64		key;
	int64		token;
	TimestampTz expired;
} DlockExpired;

/*
 * The protocol's part of shared memory (protocol.c): this header, then a
 * request and a place in line per backend, the lock holder's holds, a waiter block per
 * background worker slot, and a fate word per hold.  Each array starts at
 * the offset the header records.
 */
typedef struct DlockDetachedShared
{
	int			holder_pid;		/* the lock holder; 0 when not running */
	int			holder_procno;
	pg_atomic_uint32 undo_requests;	/* one more for every undo asked of it */
	int			nrequests;		/* MaxBackends, as the slots */
	int			max_holds;		/* dlock.max_detached_locks */
	int			nwaiters;		/* max_worker_processes */
	pg_atomic_uint64 ticket_next;
	slock_t		expired_lock;
	int			expired_next;
	DlockExpired expired[DLOCK_EXPIRED_RING];
	pg_atomic_uint32 in_line[DLOCK_LINE_BUCKETS];	/* callers in line */
	Size		requests_off;	/* DlockRequest[nrequests] */
	Size		lines_off;		/* DlockLine[nrequests] */
	Size		holds_off;		/* DlockHold[max_holds] */
	Size		waiters_off;	/* DlockWaiter[nwaiters] */
	Size		fates_off;		/* pg_atomic_uint64[max_holds] */
} DlockDetachedShared;

extern DlockDetachedShared *dlock_detached;

#define dlock_request(i) \
	(&((DlockRequest *) ((char *) dlock_detached + dlock_detached->requests_off))[i])
#define dlock_line(i) \
	(&((DlockLine *) ((char *) dlock_detached + dlock_detached->lines_off))[i])
#define dlock_hold(i) \
	(&((DlockHold *) ((char *) dlock_detached + dlock_detached->holds_off))[i])
#define dlock_waiter(i) \
	(&((DlockWaiter *) ((char *) dlock_detached + dlock_detached->waiters_off))[i])
#define dlock_hold_fate(i) \
	(&((pg_atomic_uint64 *) ((char *) dlock_detached + dlock_detached->fates_off))[i])

/* Everything of a hold but its change counter, src to dst (a copy being made or written). */
static inline void
dlock_hold_copy(DlockHold *dst, const DlockHold *src)
{
	memcpy((char *) dst + sizeof(pg_atomic_uint32), (const char *) src + sizeof(pg_atomic_uint32),
		   sizeof(DlockHold) - sizeof(pg_atomic_uint32));
}

/* A detached hold is written only by the process that holds it, like a slot. */
static inline void
dlock_hold_begin(DlockHold *h)
{
	dlock_count_begin(&h->changecount);
}

static inline void
dlock_hold_end(DlockHold *h)
{
	dlock_count_end(&h->changecount);
}

/* A per-role limit setting as it applies: -1 (its default) is half of total, at least 1. */
static inline int
dlock_limit_or_half(int setting, int total)
{
	return setting >= 0 ? setting : Max(total / 2, 1);
}

/* protocol.c */
extern Size dlock_protocol_shmem_size(void);
extern void dlock_protocol_shmem_init(void);
extern void dlock_error_set(DlockError *e, int sqlerrcode, const char *message,
							const char *detail, const char *hint);
extern void dlock_error_save(DlockError *e, const ErrorData *edata);
extern void dlock_expiry_note(const DlockHold *h);
extern bool dlock_expiry_find(Oid dbid, int64 key, int64 token, TimestampTz *when);
extern void dlock_hold_locktag(LOCKTAG *tag, const DlockHold *h);
extern void dlock_ticket_locktag(LOCKTAG *tag, Oid dbid, uint64 ticket);

#endif							/* DLOCK_PROTOCOL_H */
