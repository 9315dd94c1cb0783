/*
 * holder.c: the lock holder, and what the processes that hold detached
 * locks are (doc/detached.md; a waiter: waiter.c).
 *
 * A detached lock is a session-level advisory lock held in the lock manager
 * by a dlock background process on behalf of the role that acquired it, so
 * that pg_locks, the queue, pg_advisory_lock(dlock_key(name)) and the
 * deadlock detector all see it.  Two kinds of process hold them:
 *
 *  - the lock holder, one static background worker on a primary.  It takes
 *    locks only without waiting (LockAcquire with dontWait), on requests
 *    from backends (request.c), so it never waits for anything and never
 *    appears as a waiter in the deadlock detector's graph.
 *  - a waiter, one dynamic background worker per acquisition that had to
 *    wait, started by the first in the name's line (detached_wait.c: the
 *    others wait in line in their own backends).  It takes a private
 *    "ticket" lock, then waits in the lock manager's queue for the named
 *    lock, while the caller waits for the ticket: the detector sees those in
 *    line -> the first -> waiter -> holders of the lock, the truth.  Once granted, the waiter keeps that one lock and nothing else
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
 * Here: the lock holder, which acquires without waiting (holder_acquire),
 * keeps the per-role limit, undoes rolled-back acquisitions through their
 * fate words (holder_undo), releases what ran out of lease (holder_expire)
 * and recovers from an error in its loop (holder_recover).
 *
 * Invariant: a hold is recorded (DlockHold, HELD) exactly while its process
 * has the lock in the lock manager, and a lock is kept only while the
 * acquisition that asked for it is still wanted (a caller that gave up
 * while waiting has the waiter release it).
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

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
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
#include "utils/wait_event.h"

#include "dlock.h"
#include "detached.h"
#include "name.h"
#include "notify.h"
#include "semaphore.h"
#include "serve.h"
#include "stats.h"
#include "tokens.h"
#include "workers.h"

typedef struct HeldToken
{
	int64		token;			/* hash key */
	int			index;			/* in the shared holds */
} HeldToken;

typedef struct HeldKey
{
	Oid			dbid;			/* hash key: dbid, permit and key (no
								 * padding: the key is compared as bytes) */
	int32		permit;			/* 1..: a semaphore's permit (1 also the
								 * name's lock) */
	int64		key;
	int			nshared;
	int			nexclusive;
} HeldKey;

typedef struct HeldKeyTag
{
	Oid			dbid;
	int32		permit;
	int64		key;
} HeldKeyTag;

typedef struct HeldRole
{
	Oid			role;			/* hash key */
	int			nholds;
} HeldRole;

int			dlock_max_detached_locks_per_role = -1;

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
static bool serving_locked = false;
static LOCKTAG serving_tag;
static LOCKMODE serving_mode;

/*
 * Before the exit releases our locks (ShutdownPostgres runs after this):
 * the end of each hold taken with notify, announced while it is still
 * held, so that no grant of the next holder is announced before it.
 */
static void
holder_exit_announce(int code, Datum arg)
{
	for (int i = 0; i < dlock_detached->max_holds; i++)
	{
		DlockHold  *h = dlock_hold(i);

		if (h->state == DLOCK_HOLD_HELD)
			dlock_announce_hold(h, DLOCK_EV_ENDED);
	}
}

static void
holder_exit(int code, Datum arg)
{
	int			i;

	/* the lock manager released our locks before this runs */
	dlock_detached->holder_pid = 0;
	dlock_permit_wake_all();
	for (i = 0; i < dlock_detached->max_holds; i++)
	{
		DlockHold  *h = dlock_hold(i);

		if (h->state == DLOCK_HOLD_FREE)
			continue;
		/* (its end announced by holder_exit_announce) */
		dlock_serve_end_kind(DLOCK_EV_NONE);
		dlock_serve_hold_ended(h);
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
held_permit(Oid dbid, int64 key, int permit, HASHACTION action)
{
	HeldKeyTag	tag;
	bool		found;
	HeldKey    *k;

	memset(&tag, 0, sizeof(tag));
	tag.dbid = dbid;
	tag.key = key;
	tag.permit = Max(permit, 1);	/* the name's lock is permit 1 */
	k = hash_search(by_key, &tag, action, &found);
	if (action == HASH_ENTER && !found)
		k->nshared = k->nexclusive = 0;
	return k;
}

static HeldKey *
held_key(const DlockHold *h, HASHACTION action)
{
	return held_permit(h->dbid, h->key, h->permit, action);
}

/* A permit held already, for another caller: not to be taken again. */
static bool
permit_held(void *arg, int permit)
{
	const DlockHold *req = (const DlockHold *) arg;

	return held_permit(req->dbid, req->key, permit, HASH_FIND) != NULL;
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
	return dlock_limit_or_half(dlock_max_detached_locks_per_role, dlock_detached->max_holds);
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
	dlock_serve_hold_ended(h);
	dlock_hold_locktag(&tag, h);
	if (!LockRelease(&tag, DlockLockMode(h->mode), true))
		elog(WARNING, "dlock lock holder did not hold the lock of \"%.*s\"",
			 (int) h->namelen, h->name);
	dlock_permit_released(h->dbid, h->key);
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
	uint32		seen = pg_atomic_read_u32(&dlock_detached->undo_requests);
	int			i;

	if (seen == undo_seen)
		return;
	undo_seen = seen;
	pg_read_barrier();
	for (i = 0; i < dlock_detached->max_holds; i++)
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
 * LockAcquire without waiting, or for a semaphore (permit not NULL) its
 * first free permit (semaphore.c: *permit 0 if none is, or others are in
 * line); an error (a full lock table) is answered to the caller, and false
 * returned.
 */
static bool
take_without_waiting(DlockRequest *r, const LOCKTAG *tag, LOCKMODE lockmode,
					 LOCALLOCK **locallock, LockAcquireResult *res, int *permit)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = true;

	PG_TRY();
	{
		if (permit != NULL)
			*permit = dlock_permit_take(r->hold.dbid, r->hold.key, r->hold.permits, true,
										permit_held, &r->hold);
		else
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
		dlock_serve_reply_only(r, DLOCK_RES_ERROR);
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
	dlock_permit_tag_released(tag);
	serving_locked = false;
	dlock_serve_reply_only(r, result);
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
	int			permit = 0;

	/*
	 * Rolled-back acquisitions are undone first: a backend marks its undo
	 * (and counts it) before it sends its next request, which this process
	 * claimed with a full barrier, so a new try of the same name never meets
	 * the old hold.
	 */
	holder_undo();
	if (n_free_holds == 0)
	{
		dlock_serve_reply_only(r, DLOCK_RES_FULL);
		return;
	}
	role = held_role(req->limit_role, HASH_FIND);
	if ((role != NULL ? role->nholds : 0) >= role_limit())
	{
		r->token = role_limit();
		dlock_serve_reply_only(r, DLOCK_RES_ROLE_FULL);
		return;
	}
	/* our own holds, for other owners, conflict as another session's would */
	k = req->permits > 1 ? NULL : held_key(req, HASH_FIND);
	if (k != NULL && (req->mode == DLOCK_EXCLUSIVE || k->nexclusive > 0))
	{
		dlock_serve_reply_only(r, DLOCK_RES_BUSY);
		return;
	}

	DLOCK_FAULT("holder.acquire");
	if (req->permits > 1)
	{
		/* a semaphore: the first permit free that we do not hold already */
		if (!take_without_waiting(r, NULL, lockmode, NULL, &res, &permit))
			return;
		res = permit > 0 ? LOCKACQUIRE_OK : LOCKACQUIRE_NOT_AVAIL;
		dlock_set_permit_tag(&tag, req->dbid, req->key, permit);
	}
	else
	{
		dlock_hold_locktag(&tag, req);
		if (!take_without_waiting(r, &tag, lockmode, &locallock, &res, NULL))
			return;
	}

	if (res == LOCKACQUIRE_NOT_AVAIL)
	{
		dlock_serve_reply_only(r, DLOCK_RES_BUSY);
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
	token = dlock_token_next();
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
	h->infolen = req->infolen;
	h->counted = req->counted;
	h->dbid = req->dbid;
	h->role = req->role;
	h->limit_role = req->limit_role;
	h->client_role = req->client_role;
	h->key = req->key;
	h->token = token;
	h->min_hold_us = req->min_hold_us;
	h->permits = req->permits;
	h->permit = (uint16) permit;
	h->notify = req->notify;
	dlock_serve_hold_times(h, GetCurrentTimestamp(), r->lease_us);
	memcpy(h->name, req->name, req->namelen);
	memcpy(h->info, req->info, req->infolen);
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
	dlock_announce_hold(h, DLOCK_EV_GRANTED);

	r->token = token;
	r->expires = h->lease_expires;
	r->hold_index = i;
	r->hold_use = use;
	if (!dlock_serve_reply(r, DLOCK_RES_OK))
	{
		/* its sender left while we were at it: not kept, nor counted */
		dlock_hold_begin(h);
		h->counted = false;
		dlock_hold_end(h);
		holder_release(i);
		dlock_serve_free(r);
	}
}

static void
holder_extend_release(DlockRequest *r)
{
	HeldToken  *t;
	TimestampTz now = GetCurrentTimestamp();
	DlockHold  *h;
	int			res;

	/* rolled-back acquisitions first: their tokens hold nothing (holder_acquire) */
	holder_undo();
	t = hash_search(by_token, &r->hold.token, HASH_FIND, NULL);
	if (t == NULL)
	{
		dlock_serve_reply_only(r, DLOCK_RES_NOT_HELD);
		return;
	}
	h = dlock_hold(t->index);
	res = dlock_serve_check_hold(r, h, now);
	DLOCK_FAULT("holder.extend_release");
	if (res == DLOCK_RES_EXPIRED)
	{
		/* ran out before we got round to it: released as an expiry */
		dlock_serve_hold_expired(h, "lock holder");
		holder_release(t->index);
	}
	else if (res == DLOCK_RES_OK && r->op == DLOCK_OP_EXTEND)
	{
		/* a shorter lease than before: the next expiry may be this one */
		if (dlock_serve_extend_hold(r, h, now))
			next_expiry = Min(next_expiry, h->lease_expires);
		return;
	}
	else if (res == DLOCK_RES_OK && dlock_serve_release_later(r, h, now))
	{
		/* kept until its minimum hold ends, answered */
		next_expiry = Min(next_expiry, h->lease_expires);
		return;
	}
	else if (res == DLOCK_RES_OK)
	{
		if (r->op == DLOCK_OP_FORCE_RELEASE)
			dlock_serve_forced(r, h, now);
		holder_release(t->index);
	}
	dlock_serve_reply_only(r, res);
}

/* Release every hold whose lease has run out; plan the next wake-up. */
static void
holder_expire(TimestampTz now)
{
	int			i;

	next_expiry = PG_INT64_MAX;
	for (i = 0; i < dlock_detached->max_holds; i++)
	{
		DlockHold  *h = dlock_hold(i);

		if (h->state != DLOCK_HOLD_HELD)
			continue;
		if (h->lease_expires > now)
		{
			next_expiry = Min(next_expiry, h->lease_expires);
			continue;
		}
		dlock_serve_hold_expired(h, "lock holder");
		holder_release(i);
	}
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
	DlockRequest *r = dlock_serving;

	HOLD_INTERRUPTS();
	LWLockReleaseAll();
	pgstat_report_wait_end();
	AtEOXact_Files(false);
	MemoryContextSwitchTo(TopMemoryContext);
	edata = CopyErrorData();
	EmitErrorReport();
	FlushErrorState();
	if (serving_locked)
	{
		LockRelease(&serving_tag, serving_mode, true);
		dlock_permit_tag_released(&serving_tag);
	}
	serving_locked = false;
	dlock_serving = NULL;
	if (r != NULL)
	{
		uint32		st = pg_atomic_read_u32(&r->state);

		if (st == DLOCK_REQ_WORKING || st == DLOCK_REQ_ABANDONED)
		{
			dlock_error_save(&r->error, edata);
			dlock_serve_reply_only(r, DLOCK_RES_ERROR);
		}
	}
	FreeErrorData(edata);
	RESUME_INTERRUPTS();
}

void
dlock_holder_main(Datum arg)
{
	sigjmp_buf	local_sigjmp_buf;
	int			max = dlock_detached->max_holds;
	int			i;

	dlock_serve_signals();
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
	undo_seen = pg_atomic_read_u32(&dlock_detached->undo_requests);
	on_shmem_exit(holder_exit, (Datum) 0);
	before_shmem_exit(holder_exit_announce, (Datum) 0);
	dlock_detached->holder_procno = GetNumberFromPGProc(MyProc);
	pg_write_barrier();
	dlock_detached->holder_pid = MyProcPid;

	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
		holder_recover();
	PG_exception_stack = &local_sigjmp_buf;

	for (;;)
	{
		dlock_serve_loop_top();
		holder_undo();
		dlock_serve_and_poll(holder_acquire, holder_extend_release, &next_expiry);
		holder_undo();
		if (next_expiry != PG_INT64_MAX && next_expiry <= GetCurrentTimestamp())
			holder_expire(GetCurrentTimestamp());
		DLOCK_FAULT("holder.loop");
		dlock_serve_wait(next_expiry);
	}
}
