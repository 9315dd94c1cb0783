/*
 * holder.c: the processes that hold detached locks (README.md "Detached
 * locks").
 *
 * A detached lock is a session-level advisory lock held in the lock manager
 * by a dlock background process on behalf of the role that acquired it, so
 * that pg_locks, the queue, pg_advisory_lock(dlock_key(name)) and the
 * deadlock detector all see it.  Two kinds of process hold them:
 *
 *  - the lock holder, one static background worker on a primary.  It takes
 *    locks only without waiting (LockAcquire with dontWait), on requests
 *    from backends (detached.c), so it never waits for anything and never
 *    appears as a waiter in the deadlock detector's graph.
 *  - a waiter, one dynamic background worker per acquisition that had to
 *    wait.  It takes a private "ticket" lock, then waits in the lock
 *    manager's queue for the named lock, while the caller waits for the
 *    ticket: the detector sees caller -> waiter -> holders of the lock, the
 *    truth.  Once granted, the waiter keeps that one lock and nothing else
 *    until it is released or its lease runs out, then exits.  A process that
 *    holds one owner's lock never waits on behalf of another (DESIGN.md).
 *
 * Why not hand a waited lock over to the lock holder: the lock manager has
 * no way to move a held lock between processes (a lock group's leader is
 * fixed when the lock is first requested), so the process that waited is
 * the one that holds.
 *
 * Each holding process also enforces the leases of what it holds: when a
 * lease runs out it releases the lock itself (no session is ended) and logs
 * it.  When such a process exits, the lock manager releases what it held;
 * at a restart or crash every detached lock is gone.
 *
 * Invariant: a hold is recorded (DlockHold, HELD) exactly while its process
 * has the lock in the lock manager, and a lock is kept only while the
 * acquisition that asked for it is still wanted (a caller that gave up
 * while waiting has the waiter release it).
 */
#include "postgres.h"

#include <limits.h>
#include <signal.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"

/* ---- shared by both kinds ---- */

static void
hold_locktag(LOCKTAG *tag, const DlockHold *h)
{
	SET_LOCKTAG_ADVISORY(*tag, h->dbid, (uint32) ((uint64) h->key >> 32),
						 (uint32) h->key, 1);
}

/* Remember a lease that ran out, so that dlock_extend can tell. */
void
dlock_note_expiry(const DlockHold *h)
{
	DlockShared *s = dlock_shared;
	DlockExpired *x;

	dlock_stats_count_counted(h->counted, h->dbid, h->key, h->mode, h->name, h->namelen,
							  DLOCK_STAT_EXPIRED, 0);
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
dlock_find_expiry(Oid dbid, int64 key, int64 token, TimestampTz *when)
{
	DlockShared *s = dlock_shared;
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

/* A detached hold ended (released, expired, or its process exits). */
static void
hold_ended(const DlockHold *h)
{
	if (h->state == DLOCK_HOLD_HELD)
		dlock_stats_count_counted(h->counted, h->dbid, h->key, h->mode, h->name, h->namelen,
								  DLOCK_STAT_RELEASED, GetCurrentTimestamp() - h->since);
}

static void
log_expiry(const DlockHold *h, const char *who)
{
	ereport(LOG,
			(errmsg("lease of detached lock \"%.*s\" expired, released it",
					(int) h->namelen, h->name),
			 errdetail("The lease expired at %s; fencing token " INT64_FORMAT ", acquired by role \"%s\", held by the %s.",
					   timestamptz_to_str(h->lease_expires), h->token, h->rolname, who)));
}

/*
 * Mark a request answered and wake its sender if it sleeps; false if its
 * sender left it meanwhile (ABANDONED; dlock.h), when the caller undoes what
 * it did for it and then frees it (request_free).  On Linux the sender
 * sleeps on the state word itself (a futex): a wake-up is one system call,
 * where setting a sleeping process's latch sends it a signal, which costs
 * several times as much and was most of a detached lock's cost.
 */
bool
dlock_request_done(DlockRequest *r)
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
static void
request_free(DlockRequest *r)
{
	pg_atomic_write_u32(&r->state, DLOCK_REQ_IDLE);
}

/* Answer a request and wake its sender; false if the sender left it. */
static bool
reply(DlockRequest *r, int result)
{
	r->result = result;
	pg_write_barrier();
	return dlock_request_done(r);
}

/* Answer a request that changed nothing (freed if its sender left it). */
static void
reply_only(DlockRequest *r, int result)
{
	if (!reply(r, result))
		request_free(r);
}

/*
 * Checks common to extend and release of hold h (held by this
 * process): is it the hold named, may the caller act on it, is its lease
 * still running?  DLOCK_RES_OK if the operation may go on.
 */
static int
check_hold(DlockRequest *r, const DlockHold *h, TimestampTz now)
{
	if (h->state != DLOCK_HOLD_HELD || h->token != r->hold.token ||
		h->key != r->hold.key || h->dbid != r->hold.dbid)
		return DLOCK_RES_NOT_HELD;
	if (h->role != r->hold.role && !r->superuser)
	{
		strlcpy(r->holder_role, h->rolname, NAMEDATALEN);
		return DLOCK_RES_NOT_YOURS;
	}
	if (h->lease_expires <= now)
	{
		r->expires = h->lease_expires;
		return DLOCK_RES_EXPIRED;
	}
	return DLOCK_RES_OK;
}

/*
 * Extend hold h (held by this process) as r asks, and answer; false if its
 * sender left meanwhile, when the lease it was not told of is taken back.
 */
static bool
extend_hold(DlockRequest *r, DlockHold *h, TimestampTz now)
{
	TimestampTz old = h->lease_expires;

	dlock_hold_begin(h);
	h->lease_expires = now + r->lease_us;
	dlock_hold_end(h);
	r->expires = h->lease_expires;
	if (reply(r, DLOCK_RES_OK))
		return true;
	dlock_hold_begin(h);
	h->lease_expires = old;
	dlock_hold_end(h);
	request_free(r);
	return false;
}

/* ---- the lock holder ---- */

typedef struct HeldToken
{
	int64		token;			/* hash key */
	int			index;			/* in the shared holds */
} HeldToken;

typedef struct HeldKey
{
	Oid			dbid;			/* hash key: dbid and key */
	int64		key;
	int			nshared;
	int			nexclusive;
} HeldKey;

typedef struct HeldKeyTag
{
	Oid			dbid;
	int64		key;
} HeldKeyTag;

typedef struct HeldRole
{
	Oid			role;			/* hash key */
	int			nholds;
} HeldRole;

static HTAB *by_token;
static HTAB *by_key;
static HTAB *by_role;
static int *free_holds;			/* a stack of unused hold indexes */
static int	n_free_holds;
static TimestampTz next_expiry = PG_INT64_MAX;
static uint32 undo_seen = 0;

/*
 * An acquisition between the lock manager's grant and its record, for the
 * error recovery of the holder's loop: the lock it must give back.
 */
static DlockRequest *serving = NULL;
static bool serving_locked = false;
static LOCKTAG serving_tag;
static LOCKMODE serving_mode;

static void
holder_exit(int code, Datum arg)
{
	int			i;

	/* the lock manager released our locks before this runs */
	dlock_shared->holder_pid = 0;
	for (i = 0; i < dlock_shared->max_holds; i++)
	{
		DlockHold  *h = dlock_hold(i);

		if (h->state == DLOCK_HOLD_FREE)
			continue;
		hold_ended(h);
		dlock_hold_begin(h);
		h->state = DLOCK_HOLD_FREE;
		dlock_hold_end(h);
	}
}

/*
 * A backend-local hash table that never allocates after this: filled once
 * to its bound and emptied, its elements stay on its free list, so that an
 * insert while serving a request cannot fail for want of memory.
 */
static HTAB *
prefilled_table(const char *name, int max, Size keysize, Size entrysize)
{
	HASHCTL		ctl;
	HTAB	   *t;
	char	   *key = palloc0(keysize);
	int			i;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = keysize;
	ctl.entrysize = entrysize;
	t = hash_create(name, max + 1, &ctl, HASH_ELEM | HASH_BLOBS);
	for (i = 0; i <= max; i++)
	{
		memcpy(key, &i, sizeof(i));
		(void) hash_search(t, key, HASH_ENTER, NULL);
	}
	for (i = 0; i <= max; i++)
	{
		memcpy(key, &i, sizeof(i));
		(void) hash_search(t, key, HASH_REMOVE, NULL);
	}
	pfree(key);
	return t;
}

static HeldKey *
held_key(const DlockHold *h, HASHACTION action)
{
	HeldKeyTag	tag;
	bool		found;
	HeldKey    *k;

	memset(&tag, 0, sizeof(tag));
	tag.dbid = h->dbid;
	tag.key = h->key;
	k = hash_search(by_key, &tag, action, &found);
	if (action == HASH_ENTER && !found)
		k->nshared = k->nexclusive = 0;
	return k;
}

static HeldRole *
held_role(Oid role, HASHACTION action)
{
	bool		found;
	HeldRole   *r = hash_search(by_role, &role, action, &found);

	if (action == HASH_ENTER && !found)
		r->nholds = 0;
	return r;
}

/* dlock.max_detached_locks_per_role as it applies: -1 is half the table. */
static int
role_limit(void)
{
	return dlock_limit_or_half(dlock_max_detached_locks_per_role, dlock_shared->max_holds);
}

/* Release hold i: the lock, its record, its index entries. */
static void
holder_release(int i)
{
	DlockHold  *h = dlock_hold(i);
	pg_atomic_uint64 *fate = dlock_hold_fate(i);
	LOCKTAG		tag;
	HeldKey    *k;
	HeldRole   *role;

	/* counted first: the next holder may look at dlock_stats at once */
	hold_ended(h);
	hold_locktag(&tag, h);
	if (!LockRelease(&tag, DlockLockMode(h->mode), true))
		elog(WARNING, "dlock lock holder did not hold the lock of \"%.*s\"",
			 (int) h->namelen, h->name);
	k = held_key(h, HASH_FIND);
	if (k != NULL)
	{
		if (h->mode == DLOCK_SHARED)
			k->nshared--;
		else
			k->nexclusive--;
		if (k->nshared <= 0 && k->nexclusive <= 0)
			hash_search(by_key, k, HASH_REMOVE, NULL);
	}
	role = held_role(h->limit_role, HASH_FIND);
	if (role != NULL && --role->nholds <= 0)
		hash_search(by_role, &h->limit_role, HASH_REMOVE, NULL);
	hash_search(by_token, &h->token, HASH_REMOVE, NULL);
	dlock_hold_begin(h);
	h->state = DLOCK_HOLD_FREE;
	dlock_hold_end(h);
	pg_atomic_write_u64(fate, DLOCK_FATE_PACK(DLOCK_FATE_USE(pg_atomic_read_u64(fate)),
											  DLOCK_FATE_FREE));
	free_holds[n_free_holds++] = i;
}

/* Release every hold whose acquiring transaction rolled back (its fate word). */
static void
holder_undo(void)
{
	uint32		seen = pg_atomic_read_u32(&dlock_shared->undo_requests);
	int			i;

	if (seen == undo_seen)
		return;
	undo_seen = seen;
	pg_read_barrier();
	for (i = 0; i < dlock_shared->max_holds; i++)
	{
		uint32		st = DLOCK_FATE_STATE(pg_atomic_read_u64(dlock_hold_fate(i)));
		DlockHold  *h = dlock_hold(i);

		if ((st != DLOCK_FATE_UNDO && st != DLOCK_FATE_UNDO_QUIET) || h->state != DLOCK_HOLD_HELD)
			continue;
		if (st == DLOCK_FATE_UNDO_QUIET && h->counted)
		{
			/* its caller never took it: neither it nor its end counts */
			dlock_hold_begin(h);
			h->counted = false;
			dlock_hold_end(h);
		}
		holder_release(i);
	}
}

/*
 * Would a new shared hold of a lock this process already holds in shared
 * mode jump the queue?  The lock manager grants a re-entrant request at
 * once; a new one from another session would queue behind a waiter whose
 * mode conflicts, and so must this.
 */
static bool
queue_has_conflict(LOCALLOCK *locallock, LOCKMODE lockmode)
{
	LWLock	   *partition = LockHashPartitionLock(locallock->hashcode);
	LockMethod	method = GetLocksMethodTable(locallock->lock);
	bool		conflict;

	LWLockAcquire(partition, LW_SHARED);
	conflict = (method->conflictTab[lockmode] & locallock->lock->waitMask) != 0;
	LWLockRelease(partition);
	return conflict;
}

/*
 * LockAcquire without waiting; an error (a full lock table) is answered to
 * the caller, and false returned.
 */
static bool
take_without_waiting(DlockRequest *r, const LOCKTAG *tag, LOCKMODE lockmode,
					 LOCALLOCK **locallock, LockAcquireResult *res)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = true;

	PG_TRY();
	{
		*res = dlock_lock_acquire_ext(tag, lockmode, true, true, true, locallock);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		dlock_error_save(&r->error, edata);
		FreeErrorData(edata);
		reply_only(r, DLOCK_RES_ERROR);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/* Give back a grant not recorded, and answer. */
static void
give_back(DlockRequest *r, const LOCKTAG *tag, LOCKMODE lockmode, int result)
{
	LockRelease(tag, lockmode, true);
	serving_locked = false;
	reply_only(r, result);
}

static void
holder_acquire(DlockRequest *r)
{
	DlockHold  *req = &r->hold;
	LOCKMODE	lockmode = DlockLockMode(req->mode);
	LOCKTAG		tag;
	LOCALLOCK  *locallock = NULL;
	LockAcquireResult res;
	HeldKey    *k;
	HeldRole   *role;
	int64		token;
	DlockHold  *h;
	pg_atomic_uint64 *fate;
	uint64		use;
	int			i;

	/*
	 * Rolled-back acquisitions are undone first: a backend marks its undo
	 * (and counts it) before it sends its next request, which this process
	 * claimed with a full barrier, so a new try of the same name never meets
	 * the old hold.
	 */
	holder_undo();
	if (n_free_holds == 0)
	{
		reply_only(r, DLOCK_RES_FULL);
		return;
	}
	role = held_role(req->limit_role, HASH_FIND);
	if ((role != NULL ? role->nholds : 0) >= role_limit())
	{
		r->token = role_limit();
		reply_only(r, DLOCK_RES_ROLE_FULL);
		return;
	}
	/* our own holds, for other owners, conflict as another session's would */
	k = held_key(req, HASH_FIND);
	if (k != NULL && (req->mode == DLOCK_EXCLUSIVE || k->nexclusive > 0))
	{
		reply_only(r, DLOCK_RES_BUSY);
		return;
	}

	hold_locktag(&tag, req);
	DLOCK_FAULT("holder.acquire");
	if (!take_without_waiting(r, &tag, lockmode, &locallock, &res))
		return;

	if (res == LOCKACQUIRE_NOT_AVAIL)
	{
		reply_only(r, DLOCK_RES_BUSY);
		return;
	}
	serving_tag = tag;
	serving_mode = lockmode;
	serving_locked = true;
	if (res != LOCKACQUIRE_OK && queue_has_conflict(locallock, lockmode))
	{
		give_back(r, &tag, lockmode, DLOCK_RES_BUSY);
		return;
	}
	DLOCK_FAULT("holder.granted");
	token = dlock_next_token();
	if (token <= 0)
	{
		r->token = token;
		give_back(r, &tag, lockmode, DLOCK_RES_NO_TOKEN);
		return;
	}
	DLOCK_FAULT("holder.token");
	if (ProcDiePending)
	{
		/* about to exit, and the lock with it: not a token for the caller */
		r->token = 0;
		dlock_error_set(&r->error, ERRCODE_ADMIN_SHUTDOWN,
						"the dlock lock holder process is exiting", NULL, NULL);
		give_back(r, &tag, lockmode, DLOCK_RES_ERROR);
		return;
	}

	/* nothing below can fail: the tables were filled to max_holds once */
	i = free_holds[--n_free_holds];
	h = dlock_hold(i);
	fate = dlock_hold_fate(i);
	use = DLOCK_FATE_USE(pg_atomic_read_u64(fate)) + 1;
	dlock_hold_begin(h);
	h->mode = req->mode;
	h->namelen = req->namelen;
	h->counted = req->counted;
	h->dbid = req->dbid;
	h->role = req->role;
	h->limit_role = req->limit_role;
	h->key = req->key;
	h->token = token;
	h->since = GetCurrentTimestamp();
	h->lease_expires = h->since + r->lease_us;
	memcpy(h->name, req->name, req->namelen);
	memcpy(h->rolname, req->rolname, NAMEDATALEN);
	memcpy(h->appname, req->appname, NAMEDATALEN);
	memcpy(h->client, req->client, DLOCK_CLIENT_MAX);
	h->state = DLOCK_HOLD_HELD;
	dlock_hold_end(h);
	pg_atomic_write_u64(fate, DLOCK_FATE_PACK(use, DLOCK_FATE_HELD));
	((HeldToken *) hash_search(by_token, &token, HASH_ENTER, NULL))->index = i;
	k = held_key(h, HASH_ENTER);
	if (h->mode == DLOCK_SHARED)
		k->nshared++;
	else
		k->nexclusive++;
	held_role(h->limit_role, HASH_ENTER)->nholds++;
	next_expiry = Min(next_expiry, h->lease_expires);
	serving_locked = false;

	r->token = token;
	r->expires = h->lease_expires;
	r->hold_index = i;
	r->hold_use = use;
	if (!reply(r, DLOCK_RES_OK))
	{
		/* its sender left while we were at it: not kept, nor counted */
		dlock_hold_begin(h);
		h->counted = false;
		dlock_hold_end(h);
		holder_release(i);
		request_free(r);
	}
}

static void
holder_extend_release(DlockRequest *r)
{
	HeldToken  *t = hash_search(by_token, &r->hold.token, HASH_FIND, NULL);
	TimestampTz now = GetCurrentTimestamp();
	DlockHold  *h;
	int			res;

	if (t == NULL)
	{
		reply_only(r, DLOCK_RES_NOT_HELD);
		return;
	}
	h = dlock_hold(t->index);
	res = check_hold(r, h, now);
	DLOCK_FAULT("holder.extend_release");
	if (res == DLOCK_RES_EXPIRED)
	{
		/* ran out before we got round to it: released as an expiry */
		log_expiry(h, "lock holder");
		dlock_note_expiry(h);
		holder_release(t->index);
	}
	else if (res == DLOCK_RES_OK && r->op == DLOCK_OP_EXTEND)
	{
		/* a shorter lease than before: the next expiry may be this one */
		if (extend_hold(r, h, now))
			next_expiry = Min(next_expiry, h->lease_expires);
		return;
	}
	else if (res == DLOCK_RES_OK)
		holder_release(t->index);
	reply_only(r, res);
}

/* Release every hold whose lease has run out; plan the next wake-up. */
static void
holder_expire(TimestampTz now)
{
	int			i;

	next_expiry = PG_INT64_MAX;
	for (i = 0; i < dlock_shared->max_holds; i++)
	{
		DlockHold  *h = dlock_hold(i);

		if (h->state != DLOCK_HOLD_HELD)
			continue;
		if (h->lease_expires > now)
		{
			next_expiry = Min(next_expiry, h->lease_expires);
			continue;
		}
		log_expiry(h, "lock holder");
		dlock_note_expiry(h);
		holder_release(i);
	}
}

/* Serve the requests addressed to this process; true if there were any. */
static bool
serve_requests(void (*acquire) (DlockRequest *), void (*other) (DlockRequest *))
{
	bool		any = false;
	uint32		pending = DLOCK_REQ_PENDING;
	int			i;

	for (i = 0; i < dlock_shared->nslots; i++)
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
				request_free(r);	/* left by its sender meanwhile */
			else
				SetLatch(&GetPGProcByNumber(r->target_procno)->procLatch);
			continue;
		}
		any = true;
		serving = r;
		DLOCK_FAULT("holder.claimed");
		if (r->op == DLOCK_OP_ACQUIRE && acquire != NULL)
			acquire(r);
		else if (r->op == DLOCK_OP_ACQUIRE)
			reply_only(r, DLOCK_RES_BUSY);
		else
			other(r);
		serving = NULL;
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
 * polls while there is work coming (README.md "Detached locks").
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

	if (!serve_requests(acquire, other))
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
 * interrupt, a reload or a lease to enforce: the main loop does those.
 */
#define DLOCK_POLL_MAX_US 1000

static void
serve_and_poll(void (*acquire) (DlockRequest *), void (*other) (DlockRequest *))
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
			(next_expiry != PG_INT64_MAX && next_expiry <= GetCurrentTimestamp()))
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

static void
worker_signals(void)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	/* a cancel must never make a holder drop what it holds */
	pqsignal(SIGINT, SIG_IGN);
	BackgroundWorkerUnblockSignals();
	/* a connection to no database: only so that pg_stat_activity shows it */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
}

/* The start of each round of a holding process's loop. */
static void
loop_top(void)
{
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

static void
wait_for_work(TimestampTz until)
{
	long		sleep_ms = 60 * 1000L;
	TimestampTz now = GetCurrentTimestamp();

	if (until != PG_INT64_MAX)
		sleep_ms = until <= now ? 0 : Min(sleep_ms, (long) ((until - now + 999) / 1000));
	if (sleep_ms > 0)
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
}

/*
 * An error in the holder's loop (never expected: out of memory, a fault
 * point) ends neither the holder nor anyone's locks: the request it was
 * serving gets the error, a grant not yet recorded is given back, and the
 * loop goes on (the recovery of PostgreSQL's own auxiliary processes).
 */
static void
holder_recover(void)
{
	ErrorData  *edata;
	DlockRequest *r = serving;

	HOLD_INTERRUPTS();
	LWLockReleaseAll();
	pgstat_report_wait_end();
	AtEOXact_Files(false);
	MemoryContextSwitchTo(TopMemoryContext);
	edata = CopyErrorData();
	EmitErrorReport();
	FlushErrorState();
	if (serving_locked)
		LockRelease(&serving_tag, serving_mode, true);
	serving_locked = false;
	serving = NULL;
	if (r != NULL)
	{
		uint32		st = pg_atomic_read_u32(&r->state);

		if (st == DLOCK_REQ_WORKING || st == DLOCK_REQ_ABANDONED)
		{
			dlock_error_save(&r->error, edata);
			reply_only(r, DLOCK_RES_ERROR);
		}
	}
	FreeErrorData(edata);
	RESUME_INTERRUPTS();
}

void
dlock_holder_main(Datum arg)
{
	sigjmp_buf	local_sigjmp_buf;
	int			max = dlock_shared->max_holds;
	int			i;

	worker_signals();
	pgstat_report_appname("dlock lock holder");

	by_token = prefilled_table("dlock holds by token", max, sizeof(int64), sizeof(HeldToken));
	by_key = prefilled_table("dlock holds by key", max, sizeof(HeldKeyTag), sizeof(HeldKey));
	by_role = prefilled_table("dlock holds by role", max, sizeof(Oid), sizeof(HeldRole));
	free_holds = MemoryContextAlloc(TopMemoryContext, sizeof(int) * max);
	/* a previous holder's holds went with it */
	for (i = max - 1; i >= 0; i--)
	{
		DlockHold  *h = dlock_hold(i);
		pg_atomic_uint64 *fate = dlock_hold_fate(i);

		if (h->state != DLOCK_HOLD_FREE)
		{
			dlock_hold_begin(h);
			h->state = DLOCK_HOLD_FREE;
			dlock_hold_end(h);
		}
		pg_atomic_write_u64(fate, DLOCK_FATE_PACK(DLOCK_FATE_USE(pg_atomic_read_u64(fate)),
												  DLOCK_FATE_FREE));
		free_holds[n_free_holds++] = i;
	}
	undo_seen = pg_atomic_read_u32(&dlock_shared->undo_requests);
	on_shmem_exit(holder_exit, (Datum) 0);
	dlock_shared->holder_procno = GetNumberFromPGProc(MyProc);
	pg_write_barrier();
	dlock_shared->holder_pid = MyProcPid;

	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
		holder_recover();
	PG_exception_stack = &local_sigjmp_buf;

	for (;;)
	{
		loop_top();
		holder_undo();
		serve_and_poll(holder_acquire, holder_extend_release);
		holder_undo();
		if (next_expiry != PG_INT64_MAX && next_expiry <= GetCurrentTimestamp())
			holder_expire(GetCurrentTimestamp());
		DLOCK_FAULT("holder.loop");
		wait_for_work(next_expiry);
	}
}

/* ---- a waiter ---- */

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
	reply_only(r, DLOCK_RES_NOT_HELD);
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

static void
waiter_exit(int code, Datum arg)
{
	DlockWaiter *w = my_waiter;

	if (w == NULL)
		return;
	/* the lock manager released our locks before this runs */
	if (dlock_waiter_state(w, my_ticket) == DLOCK_W_FREE)
		return;					/* not ours any more */
	if (w->hold.state != DLOCK_HOLD_FREE)
	{
		waiter_uncount_if_abandoned();
		hold_ended(&w->hold);
		dlock_hold_begin(&w->hold);
		w->hold.state = DLOCK_HOLD_FREE;
		dlock_hold_end(&w->hold);
	}

	/*
	 * Answer what was asked of us, then say we are gone: a sender that sees
	 * us gone finds its answer written, or knows none will come.
	 */
	serve_requests(waiter_refuse_requests, waiter_refuse_requests);
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
				/* FALLTHROUGH */
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
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		QueryCancelPending = false;
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

/* Release the lock this waiter holds (granted). */
static void
waiter_release(void)
{
	DlockHold  *h = &my_waiter->hold;
	LOCKTAG		tag;

	/* counted first: the next holder may look at dlock_stats at once */
	hold_ended(h);
	hold_locktag(&tag, h);
	LockRelease(&tag, DlockLockMode(h->mode), true);
	my_lock_ended = true;
	dlock_hold_begin(h);
	h->state = DLOCK_HOLD_FREE;
	dlock_hold_end(h);
}

/* ... and leave; waiter_exit frees or hands on the block. */
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
	int			res = check_hold(r, h, now);

	if (res == DLOCK_RES_OK && r->op == DLOCK_OP_EXTEND)
	{
		(void) extend_hold(r, h, now);
		return;
	}
	if (res == DLOCK_RES_EXPIRED)
	{
		log_expiry(h, "waiter process");
		dlock_note_expiry(h);
	}
	if (res == DLOCK_RES_OK || res == DLOCK_RES_EXPIRED)
	{
		/* release before answering: the caller may take it again at once */
		waiter_release();
		reply_only(r, res);
		proc_exit(0);
	}
	reply_only(r, res);
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
	pgstat_report_appname("dlock waiter");

	w->worker_procno = GetNumberFromPGProc(MyProc);
	w->worker_pid = MyProcPid;
	DLOCK_FAULT("waiter.claimed");

	/* the ticket the caller waits for: ours alone, so granted at once */
	SET_LOCKTAG_ADVISORY(ticket_tag, w->hold.dbid, (uint32) (my_ticket >> 32),
						 (uint32) my_ticket, 3);
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

	hold_locktag(&tag, &w->hold);
	lockmode = DlockLockMode(w->hold.mode);
	dlock_hold_begin(&w->hold);
	w->hold.since = GetCurrentTimestamp();
	w->hold.state = DLOCK_HOLD_WAITING;
	dlock_hold_end(&w->hold);
	if (!dlock_waiter_move(w, my_ticket, DLOCK_W_CLAIMED, DLOCK_W_WAITING))
		proc_exit(0);			/* abandoned meanwhile: waiter_exit frees it */
	SetLatch(&GetPGProcByNumber(w->caller_procno)->procLatch);

	result = waiter_wait(w, &tag, lockmode);
	if (result == DLOCK_RES_OK)
	{
		DLOCK_FAULT("waiter.granted");
		token = dlock_next_token();
		if (token <= 0)
		{
			LockRelease(&tag, lockmode, true);
			result = DLOCK_RES_NO_TOKEN;
		}
	}
	if (result != DLOCK_RES_OK)
		waiter_not_granted(w, &ticket_tag, result, token);

	dlock_hold_begin(&w->hold);
	w->hold.token = token;
	w->hold.since = GetCurrentTimestamp();
	w->hold.lease_expires = w->hold.since + w->lease_us;
	w->hold.state = DLOCK_HOLD_HELD;
	dlock_hold_end(&w->hold);
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
	pqsignal(SIGINT, SIG_IGN);
	QueryCancelPending = false;
	for (;;)
	{
		uint32		st;

		loop_top();
		DLOCK_FAULT("waiter.holding");

		/*
		 * The caller gave up after all (an error before it took the lock),
		 * or the transaction that took it rolled back.
		 */
		st = dlock_waiter_state(w, my_ticket);
		if (st == DLOCK_W_ABANDONED || st == DLOCK_W_UNDO)
			waiter_release_and_leave();
		serve_requests(NULL, waiter_extend_release);
		if (w->hold.lease_expires <= GetCurrentTimestamp())
		{
			log_expiry(&w->hold, "waiter process");
			dlock_note_expiry(&w->hold);
			waiter_release_and_leave();
		}
		wait_for_work(w->hold.lease_expires);
	}
}
