/*
 * dlock.h: shared declarations of the dlock extension.
 *
 * dlock keeps no lock table of its own: every lock is a PostgreSQL advisory
 * lock taken through the lock manager.  What dlock adds lives in two places:
 *
 *  - a per-backend "slot" in shared memory, written only by its own backend,
 *    that remembers the name, mode, scope, start time, lease and fencing
 *    token of each lock the backend holds or awaits (readers: the dlock_locks
 *    view and the lease reaper, who use the slot's change counter to get a
 *    consistent copy);
 *  - a small global header with the fencing-token counter and the reaper's
 *    wake-up time.
 *
 * The source files, by concern:
 *   dlock.c    start-up, settings, shared memory
 *   slots.c    this backend's entries (slot and overflow) and their index
 *   locks.c    taking, waiting for and releasing locks (the SQL entry points)
 *   leases.c   lease arguments, expiry checks, dlock_renew, waking the reaper
 *   tokens.c   fencing tokens: the counter and its file, dlock_token
 *   xact.c     transaction-scope holds and the transaction callbacks
 *   view.c     dlock_names(), the names half of the dlock_locks view
 *   reaper.c   the background worker that enforces leases
 *   detached.c detached locks, the caller's side: dlock_acquire, _extend,
 *              _release, and the requests to the processes that hold them
 *   holder.c   the processes that hold detached locks: the lock holder
 *              (immediate acquisitions) and one waiter per waited one
 *   stats.c    lock statistics (dlock_stats): counting, eviction, the file
 *   name.c     names, keys, argument checks;  sha256.c  the hash
 */
#ifndef DLOCK_H
#define DLOCK_H

#include "postgres.h"

#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/spin.h"

#include "compat.h"
#include "fault.h"

/* The version of the shared library (the SQL side: dlock.control). */
#define DLOCK_VERSION "1.4"

/* Longest name, in bytes of its UTF-8 form (documented in README.md). */
#define DLOCK_NAME_MAX 255

/* Shortest lease the reaper enforces (documented in README.md). */
#define DLOCK_MIN_LEASE_US ((int64) 100 * 1000)

/*
 * A transaction-scope holder whose lease ran out is first cancelled; if it
 * still holds the lock this long afterwards (idle in transaction, or it
 * swallowed the cancel), its session is terminated.
 */
#define DLOCK_CANCEL_GRACE_US ((int64) 1000 * 1000)

/* Tokens are reserved on disk in blocks of dlock.token_reserve, by default: */
#define DLOCK_TOKEN_RESERVE_DEFAULT 1000000

/*
 * A fencing token is  timeline * DLOCK_TOKEN_SPAN + n,  n in 1 .. SPAN - 1
 * (tokens.c; README.md "High availability").  Decimal, so that a token shows
 * its timeline: 30000000000042 is the 42nd token of timeline 3.
 */
#define DLOCK_TOKEN_SPAN INT64CONST(10000000000000)	/* 10^13 */
#define DLOCK_TOKEN_MAX_TIMELINE (PG_INT64_MAX / DLOCK_TOKEN_SPAN - 1) /* 922336 */

/*
 * DlockShared.token_state.  A hold that got no token keeps, in place of it,
 * DLOCK_NO_TOKEN(the state that was the reason): a number <= 0.
 */
#define DLOCK_TOKENS_NOT_STARTED	0	/* in recovery: a standby's holds */
#define DLOCK_TOKENS_ON				1
#define DLOCK_TOKENS_FILE_FAILED	2	/* tried again after DLOCK_TOKEN_RETRY_US */
#define DLOCK_TOKENS_USED_UP		3	/* this timeline's tokens are used up */
#define DLOCK_TOKENS_BAD_TIMELINE	4	/* beyond DLOCK_TOKEN_MAX_TIMELINE */
#define DLOCK_TOKENS_FILE_AHEAD		5	/* the file has a later timeline's
										 * tokens; until the next start */
#define DLOCK_NO_TOKEN(state)	(-(int64) (state))

/* A token file that could not be read or written is tried again after: */
#define DLOCK_TOKEN_RETRY_US ((int64) 10 * 1000 * 1000)

/* The file, relative to the data directory, that holds the token ceiling. */
#define DLOCK_TOKEN_FILE "pg_dlock_tokens"

typedef enum DlockMode
{
	DLOCK_EXCLUSIVE = 0,
	DLOCK_SHARED = 1
} DlockMode;

#define DlockLockMode(m) ((m) == DLOCK_SHARED ? ShareLock : ExclusiveLock)

/*
 * Advisory locks of dlock's own (objsubid; pg_advisory_lock(bigint) uses 1,
 * the (int, int) forms 2): the ticket of a waited detached acquisition (3),
 * and the lease marker of a session hold with a lease (4 + mode), held in
 * AccessShareLock (which nothing else takes, so it never conflicts) for as
 * long as dlock's hold lasts.  The lock manager drops it with every session
 * lock released behind dlock's back (DISCARD ALL, pg_advisory_unlock_all),
 * so the reaper ends only a session whose own leased hold is still there.
 */
#define DLOCK_SUBID_KEY		1
#define DLOCK_SUBID_TICKET	3
#define DLOCK_SUBID_MARKER	4
#define DLOCK_MARKER_MODE	AccessShareLock

/* What an entry is waiting for, if anything. */
#define DLOCK_WAIT_NONE		0
#define DLOCK_WAIT_SESSION	1
#define DLOCK_WAIT_XACT		2

/*
 * One named lock (a key and a mode) that a backend holds or awaits.  Holding
 * the same name in both modes takes two entries, as pg_locks shows two rows.
 */
typedef struct DlockEntry
{
	int64		key;
	TimestampTz since;			/* granted at (first grant of this hold), or
								 * wait start while only waiting */
	TimestampTz lease_expires;	/* 0: no lease */
	int64		lease_us;		/* length of the last lease given */
	int64		token;			/* fencing token of this hold; <= 0: none,
								 * DLOCK_NO_TOKEN(state) says why */
	int32		nsession;		/* session-scope holds (re-entrant count) */
	int32		nxact;			/* transaction-scope holds */
	uint8		inuse;
	uint8		mode;			/* DlockMode */
	uint8		waiting;		/* DLOCK_WAIT_* */
	uint8		counted;		/* its acquisition was counted in dlock_stats,
								 * so its end is too */
	uint16		namelen;
	char		name[DLOCK_NAME_MAX];	/* UTF-8, not terminated */
} DlockEntry;

typedef struct DlockSlot
{
	pg_atomic_uint32 changecount;	/* odd while the owner is writing */
	int32		pid;			/* owner; 0 when unused */
	uint32		generation;		/* one more for every owner */
	Oid			dbid;
	int32		nused;			/* entries[0 .. nused) may be in use */
	DlockEntry	entries[FLEXIBLE_ARRAY_MEMBER];
} DlockSlot;

/* ---- detached locks (detached.c, holder.c) ---- */

/* Longest lease of a detached lock (documented in README.md). */
#define DLOCK_DETACHED_MAX_LEASE_US ((int64) USECS_PER_DAY)

/* Longest client address kept for the view (numeric IPv6 with a zone). */
#define DLOCK_CLIENT_MAX 64

/* Lease expiries remembered, so that a late dlock_extend can say so. */
#define DLOCK_EXPIRED_RING 1024

/* DlockHold.state */
#define DLOCK_HOLD_FREE		0
#define DLOCK_HOLD_WAITING	1	/* a waiter process is queued for it */
#define DLOCK_HOLD_HELD		2

/*
 * One detached lock: held (or awaited) by the lock holder or by a waiter
 * process for the role that acquired it.  Written only by the process that
 * holds it, inside its change counter, like a slot.
 */
typedef struct DlockHold
{
	pg_atomic_uint32 changecount;
	uint8		state;			/* DLOCK_HOLD_* */
	uint8		mode;			/* DlockMode */
	uint16		namelen;
	bool		counted;		/* its acquisition was counted in dlock_stats,
								 * so its end and lease expiry are too */
	Oid			dbid;
	Oid			role;			/* the current user: who may extend, release */
	Oid			limit_role;		/* the session's user: whose limits it counts
								 * against (SET ROLE does not move it) */
	int64		key;
	int64		token;
	TimestampTz since;			/* granted at, or waiting since */
	TimestampTz lease_expires;
	char		name[DLOCK_NAME_MAX];	/* UTF-8, not terminated */
	char		rolname[NAMEDATALEN];
	char		appname[NAMEDATALEN];
	char		client[DLOCK_CLIENT_MAX];	/* "" for a Unix socket */
} DlockHold;

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

/*
 * DlockShared.hold_fate[i]: the fate word of the lock holder's hold i, the
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
#define DLOCK_RES_NO_TOKEN	3	/* token: DLOCK_NO_TOKEN(why) */
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

typedef struct DlockExpired
{
	Oid			dbid;
	int64		key;
	int64		token;
	TimestampTz expired;
} DlockExpired;

typedef struct DlockShared
{
	LWLock	   *token_lock;		/* serialises starting the counter and
								 * extending the token ceiling */
	pg_atomic_uint32 token_state;	/* DLOCK_TOKENS_* */
	pg_atomic_uint64 token_next;	/* next token to hand out */
	pg_atomic_uint64 token_ceiling; /* tokens < ceiling are reserved on disk */
	uint64		token_limit;	/* tokens of this timeline are below this */
	uint64		token_block;	/* dlock.token_reserve */
	TimeLineID	token_timeline; /* the timeline in tokens (the server's, plus
								 * token_offset) */
	uint32		token_offset;	/* added to the timeline: see tokens.c */
	pg_atomic_uint64 token_retry_at;	/* FILE_FAILED: when to try again */
	int			reaper_procno;	/* -1 when no reaper runs */
	pg_atomic_uint64 reaper_wakeup; /* 0: scanning; else next planned wake */
	int			nslots;
	int			entries_per_slot;
	Size		slot_size;
	/* detached locks */
	int			holder_pid;		/* the lock holder; 0 when not running */
	int			holder_procno;
	pg_atomic_uint32 undo_requests;	/* one more for every undo asked of it */
	int			max_holds;		/* dlock.max_detached_locks */
	int			nwaiters;		/* max_worker_processes */
	pg_atomic_uint64 ticket_next;
	slock_t		expired_lock;
	int			expired_next;
	DlockExpired expired[DLOCK_EXPIRED_RING];
	Size		requests_off;	/* DlockRequest[nslots] */
	Size		holds_off;		/* DlockHold[max_holds] */
	Size		waiters_off;	/* DlockWaiter[nwaiters] */
	Size		fates_off;		/* pg_atomic_uint64[max_holds] */
	/* slots follow, each slot_size bytes, MAXALIGNed; then the above */
} DlockShared;

#define dlock_request(i) \
	(&((DlockRequest *) ((char *) dlock_shared + dlock_shared->requests_off))[i])
#define dlock_hold(i) \
	(&((DlockHold *) ((char *) dlock_shared + dlock_shared->holds_off))[i])
#define dlock_waiter(i) \
	(&((DlockWaiter *) ((char *) dlock_shared + dlock_shared->waiters_off))[i])
#define dlock_hold_fate(i) \
	(&((pg_atomic_uint64 *) ((char *) dlock_shared + dlock_shared->fates_off))[i])

/* A limit setting as it applies: -1 (its default) is half of total, at least 1. */
static inline int
dlock_limit_or_half(int setting, int total)
{
	return setting >= 0 ? setting : Max(total / 2, 1);
}

/* A checked lock-name argument (name.c). */
typedef struct DlockName
{
	text	   *arg;			/* the argument, for messages */
	const char *utf8;			/* bytes that are hashed */
	int			len;
	int64		key;
} DlockName;

/* dlock.c */
extern DlockShared *dlock_shared;
extern int	dlock_max_locks_per_session;
extern int	dlock_max_detached_locks;
extern int	dlock_max_detached_locks_per_role;
extern int	dlock_max_detached_waiters_per_role;
extern int	dlock_max_held_locks;
extern int	dlock_token_reserve;
extern bool dlock_allow_standby_locks;
extern void dlock_require_preload(const char *detail);

/* ---- statistics (stats.c) ---- */

typedef enum DlockStatEvent
{
	DLOCK_STAT_ACQUIRED,		/* us: the wait, -1 if granted at once */
	DLOCK_STAT_BUSY,			/* not granted, no wait */
	DLOCK_STAT_TIMEOUT,			/* us: the wait */
	DLOCK_STAT_DEADLOCK,		/* us: the wait */
	DLOCK_STAT_CANCEL,			/* us: the wait */
	DLOCK_STAT_RELEASED,		/* us: the hold */
	DLOCK_STAT_EXPIRED			/* a lease enforced */
} DlockStatEvent;

/* the scope of an acquisition */
#define DLOCK_SCOPE_SESSION		0
#define DLOCK_SCOPE_XACT		1
#define DLOCK_SCOPE_DETACHED	2

extern bool dlock_track_stats;
extern int	dlock_max_stats;
extern Size dlock_stats_shmem_size(void);
extern void dlock_stats_shmem_request(void);
extern void dlock_stats_shmem_init(void);
extern void dlock_stats_count_event(Oid dbid, int64 key, uint8 mode, const char *name,
									int namelen, DlockStatEvent ev, int scope, int64 us,
									TimestampTz now);
extern void dlock_stats_hold_ended(const DlockEntry *e);
extern void dlock_stats_backend_setup(void);
extern void dlock_stats_flush(void);

/* Are statistics kept and tracked? */
static inline bool
dlock_stats_tracking(void)
{
	return dlock_track_stats && dlock_shared != NULL;
}

/* Count an event, if statistics are kept and tracked. */
static inline void
dlock_stats_count(Oid dbid, int64 key, uint8 mode, const char *name, int namelen,
				  DlockStatEvent ev, int scope, int64 us, TimestampTz now)
{
	if (dlock_stats_tracking())
		dlock_stats_count_event(dbid, key, mode, name, namelen, ev, scope, us, now);
}

/*
 * Count the end of a hold, or its lease's expiry, if its start was counted
 * (whatever dlock.track_stats says now).
 */
static inline void
dlock_stats_count_counted(bool counted, Oid dbid, int64 key, uint8 mode, const char *name,
						  int namelen, DlockStatEvent ev, int64 us)
{
	if (counted && dlock_shared != NULL)
		dlock_stats_count_event(dbid, key, mode, name, namelen, ev, 0, us, 0);
}

/* The event of an error that ended a wait (SQLSTATE), or -1: not counted. */
static inline int
dlock_stat_wait_error(int sqlerrcode)
{
	if (sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED)
		return DLOCK_STAT_DEADLOCK;
	if (sqlerrcode == ERRCODE_QUERY_CANCELED)
		return DLOCK_STAT_CANCEL;
	if (sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
		return DLOCK_STAT_TIMEOUT;	/* lock_timeout */
	return -1;
}

/* slots.c: the shared slots (any backend) */
extern Size dlock_slot_size(int entries);
extern DlockSlot *dlock_slot(int i);
extern uint32 dlock_read_begin(pg_atomic_uint32 *changecount, int *tries);
extern bool dlock_read_begin_within(pg_atomic_uint32 *changecount, int *tries, int limit,
									uint32 *before);
extern bool dlock_read_slot(DlockSlot *src, DlockSlot *copy, int limit);
extern int	dlock_read_slot_entries(DlockSlot *src, DlockEntry *buf, int cap, int *pid,
									Oid *dbid);

/*
 * slots.c: this backend's entries.  A "ref" names one: 0 .. dlock_my_cap-1
 * are the entries of this backend's shared slot, dlock_my_cap and up are
 * backend-local overflow entries (no name in the view, no lease).
 */
extern DlockSlot *dlock_my_slot;
extern int	dlock_my_cap;
extern DlockEntry *dlock_overflow;
extern bool dlock_ready;
extern void dlock_backend_setup(void);
extern int	dlock_find_entry(int64 key, uint8 mode);
extern int	dlock_entry_for(const DlockName *name, uint8 mode, bool need_shared);
extern int	dlock_nrefs(void);
extern void dlock_entry_start(int ref, const DlockName *name, uint8 mode);
extern void dlock_entry_free_if_unused(int ref);
extern bool dlock_entry_lock_held(const DlockEntry *e);
extern bool dlock_marker_held(int64 key, uint8 mode);
extern void dlock_marker_take(int64 key, uint8 mode);
extern void dlock_marker_drop(int64 key, uint8 mode);
extern void dlock_forget_stale_session_hold(int ref);
extern void dlock_end_session_part(int ref);
extern void dlock_forget_released_session_holds(void);
extern void dlock_drop_stale_session_part(int ref);
extern TimestampTz dlock_min_lease;
extern void dlock_note_lease(TimestampTz expires);
extern void dlock_refuse_after_expiry(void);
extern void dlock_forget_released_leased(void);
extern void dlock_refuse_prepare_with_lease(void);

static inline void
dlock_backend_init(void)
{
	if (likely(dlock_ready))
		return;
	dlock_backend_setup();
}

static inline DlockEntry *
dlock_entry_at(int ref)
{
	return ref < dlock_my_cap ? &dlock_my_slot->entries[ref] :
		&dlock_overflow[ref - dlock_my_cap];
}

/*
 * A change counter guards shared memory that one process writes and others
 * copy (a slot, a detached hold): odd while the writer is inside.  The
 * change is a few stores with nothing in between that can fail, inside a
 * critical section: an error there would leave the counter odd and every
 * reader spinning.  A reader copies between dlock_read_begin (slots.c) and
 * dlock_read_done, and copies again until the counter did not move.
 */
static inline void
dlock_count_begin(pg_atomic_uint32 *changecount)
{
	uint32		c = pg_atomic_read_u32(changecount);

	START_CRIT_SECTION();
	Assert((c & 1) == 0);
	pg_atomic_write_u32(changecount, c + 1);
	pg_write_barrier();
}

static inline void
dlock_count_end(pg_atomic_uint32 *changecount)
{
	uint32		c = pg_atomic_read_u32(changecount);

	Assert((c & 1) == 1);
	pg_write_barrier();
	pg_atomic_write_u32(changecount, c + 1);
	END_CRIT_SECTION();
}

static inline bool
dlock_read_done(pg_atomic_uint32 *changecount, uint32 before)
{
	pg_read_barrier();
	return pg_atomic_read_u32(changecount) == before;
}

/*
 * Bracket every change to one of this backend's entries (slot entries only).
 * The fault point is a process stopped inside the window (a stall or a
 * death: an error there would be in a critical section).
 */
static inline void
dlock_change_begin(int ref)
{
	if (ref < dlock_my_cap)
	{
		dlock_count_begin(&dlock_my_slot->changecount);
		DLOCK_FAULT("slot.change");
	}
}

static inline void
dlock_change_end(int ref)
{
	if (ref < dlock_my_cap)
		dlock_count_end(&dlock_my_slot->changecount);
}

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

/* locks.c */
extern char *dlock_display_name(const DlockName *name);
extern void dlock_not_held(const DlockName *name);
extern int	dlock_held_entries(const DlockName *name, int refs[2]);

/* leases.c */
extern int64 dlock_lease_arg(FunctionCallInfo fcinfo, int argno);
extern bool dlock_lease_ran_out(const DlockEntry *e);
extern void dlock_lease_expired(const char *name, TimestampTz expired);
extern void dlock_wake_reaper(TimestampTz expires);
extern void dlock_note_release(const DlockEntry *e);
extern void dlock_refuse_commit_after_expiry(bool prepare);
extern void dlock_forget_released_expired(void);

/* tokens.c */
extern int64 dlock_next_token(void);
extern void dlock_tokens_prepare(void);
extern int	dlock_no_token_detail(int64 token);

/* xact.c */
extern void dlock_xact_setup(void);
extern void dlock_reserve_xact_hold(void);
extern void dlock_add_xact_hold(int ref);
extern void dlock_xact_callback_first(void);

/* name.c */
extern void dlock_name_arg(FunctionCallInfo fcinfo, int argno, DlockName *name);
extern void dlock_set_locktag(LOCKTAG *tag, int64 key);
extern void dlock_set_marker_tag(LOCKTAG *tag, Oid dbid, int64 key, uint8 mode);
extern int64 dlock_interval_arg(FunctionCallInfo fcinfo, int argno, const char *what);
extern int64 dlock_timeout_arg(FunctionCallInfo fcinfo, int argno);
extern TimestampTz dlock_lease_end(TimestampTz now, int64 lease_us);
extern bool dlock_bool_arg(FunctionCallInfo fcinfo, int argno, const char *what);

/* sha256.c */
extern void dlock_sha256(const uint8 *data, size_t len, uint8 out[32]);

/* view.c */
extern Datum dlock_name_datum(const char *name, int namelen, bool *isnull);
extern Datum dlock_database_name(Oid dbid, bool as_text, bool *isnull);
extern void dlock_database_names_reset(void);
extern Datum dlock_interval_datum(int64 us);
struct PgBackendStatus;
extern void dlock_client_address(const struct PgBackendStatus *be, char *buf);

/* reaper.c */
extern PGDLLEXPORT void dlock_reaper_main(Datum arg);

/* detached.c */
extern void dlock_error_set(DlockError *e, int sqlerrcode, const char *message,
							const char *detail, const char *hint);
extern void dlock_error_save(DlockError *e, const ErrorData *edata);
extern void dlock_read_hold(DlockHold *src, DlockHold *copy);
extern void dlock_detached_refuse_prepare(void);
extern void dlock_detached_xact_end(bool commit);
extern void dlock_detached_subxact_end(bool commit, SubTransactionId mySubid,
									   SubTransactionId parentSubid);

/* holder.c */
extern bool dlock_request_done(DlockRequest *r);
extern PGDLLEXPORT void dlock_holder_main(Datum arg);
extern PGDLLEXPORT void dlock_waiter_main(Datum arg);
extern void dlock_note_expiry(const DlockHold *h);
extern bool dlock_find_expiry(Oid dbid, int64 key, int64 token, TimestampTz *when);

#endif							/* DLOCK_H */
