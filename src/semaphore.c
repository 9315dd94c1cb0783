/*
 * semaphore.c: semaphores (1.5), a name that up to N hold at once.
 *
 * Permit p (1..N) of a name is an advisory lock of its own in the lock
 * manager (dlock.h): permit 1 is the name's lock itself, permit p > 1 has
 * objsubid 1000 + p.  Whoever holds permit p holds it exclusively, so a
 * name never has more holders than permits are asked for, and a session's
 * end, a crash or a rollback frees a permit as it frees any lock.
 *
 * Taking one: permits 1..N are tried in order without waiting, and the
 * first one free is taken.  A caller that must wait lines up in the name's
 * turnstile, an exclusive advisory lock (objsubid 1000) whose queue the
 * lock manager keeps first come, first served; the one that holds it is
 * first in line: it tries the permits again each time one of the name's
 * locks is released, sleeping on a condition variable in between, and
 * hands the turnstile to the next once it has a permit.  A caller that does
 * not wait takes a free permit only when nobody is in line.
 *
 * Wake-ups: every release of a lock or permit that dlock sees (an unlock, a
 * transaction's end, a session's exit, a detached lock's release, DISCARD
 * ALL) broadcasts the condition variable of the name's bucket, if the
 * bucket has waiters.  A release dlock does not see (pg_advisory_unlock_all,
 * COMMIT PREPARED in another session) is noticed by the next timed look,
 * at most a second later.
 *
 * The lock manager's deadlock detector sees the queue (a wait for the
 * turnstile), not the wait of the first in line (a condition variable).
 * For a session, that is checked here instead, after deadlock_timeout and
 * then at doubling intervals: a deadlock when each permit has a holder that
 * waits, through lock waits, for the first in line (permits_deadlocked).  A cycle through a wait the lock
 * manager does not see either (another semaphore's first in line, a
 * detached acquisition's waiter process) ends at its timeout,
 * statement_timeout or a cancel.
 *
 * Layer 3 of the map in dlock.h (mechanisms): calls only files listed
 * before it there.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "name.h"
#include "semaphore.h"
#include "slots.h"

/* The longest sleep of the first in line between two looks (ms). */
#define DLOCK_PERMIT_LOOK_MS 1000

DlockPermitBucket *dlock_permit_buckets = NULL;

/* this backend: the bucket it is in line in (-1: none) */
static int	my_bucket = -1;

/* buckets to wake at the end of the transaction (their names' holds end) */
static uint64 wake_at_end[DLOCK_PERMIT_BUCKETS / 64];
static bool wake_pending = false;

Size
dlock_permits_shmem_size(void)
{
	return mul_size(DLOCK_PERMIT_BUCKETS, sizeof(DlockPermitBucket));
}

void
dlock_permits_shmem_init(void)
{
	bool		found;
	DlockPermitBucket *b;

	b = ShmemInitStruct("dlock permits", dlock_permits_shmem_size(), &found);
	if (!found)
		for (int i = 0; i < DLOCK_PERMIT_BUCKETS; i++)
		{
			pg_atomic_init_u32(&b[i].waiters, 0);
			ConditionVariableInit(&b[i].cv);
		}
	dlock_permit_buckets = b;
}

static inline DlockPermitBucket *
bucket(int i)
{
	return &dlock_permit_buckets[i];
}

static void
need_buckets(void)
{
	if (dlock_permit_buckets == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dlock must be loaded via \"shared_preload_libraries\""),
				 errdetail("A semaphore's waiters line up and are woken through shared memory."),
				 errhint("Add dlock to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/*
 * Try permits 1..permits once, without waiting; the first free one is taken
 * (in session or transaction scope) and returned, 0 if none is.  skip: a
 * permit this process holds already for another owner.
 */
static int
try_permits(Oid dbid, int64 key, int permits, bool session, DlockPermitSkip skip, void *arg)
{
	for (int p = 1; p <= permits; p++)
	{
		LOCKTAG		tag;
		LockAcquireResult res;

		if (skip != NULL && skip(arg, p))
			continue;
		dlock_set_permit_tag(&tag, dbid, key, p);
		res = LockAcquire(&tag, ExclusiveLock, session, true);
		if (res == LOCKACQUIRE_OK)
		{
			/* nothing below raises: only a signal, a stall or a death */
			DLOCK_FAULT("permit.taken");
			return p;
		}
		/* this process has it already (pg_advisory_lock of the key): not free */
		if (res == LOCKACQUIRE_ALREADY_HELD || res == LOCKACQUIRE_ALREADY_CLEAR)
			LockRelease(&tag, ExclusiveLock, session);
	}
	return 0;
}

/*
 * Take a free permit without waiting, unless others are in line for the
 * name (their turn comes first): the permit, or 0.
 */
int
dlock_permit_take(Oid dbid, int64 key, int permits, bool session,
				  DlockPermitSkip skip, void *arg)
{
	DlockPermitBucket *b;
	LOCKTAG		turnstile;
	volatile int p = 0;

	need_buckets();
	b = bucket(dlock_permit_bucket_of(dbid, key));
	if (pg_atomic_read_u32(&b->waiters) == 0)
		return try_permits(dbid, key, permits, session, skip, arg);

	/*
	 * Someone waits for a name of this bucket: is it in line for this one?
	 * The turnstile in share mode, which those in line (exclusive: the first
	 * holds it, the rest wait for it) keep us from, and other callers that
	 * look at the same time (share) do not: a look of theirs is nobody in
	 * line.  (The lock manager does not grant it while an exclusive request
	 * waits, either.)
	 */
	dlock_set_turnstile_tag(&turnstile, dbid, key);
	if (LockAcquire(&turnstile, ShareLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		return 0;
	PG_TRY();
	{
		p = try_permits(dbid, key, permits, session, skip, arg);
	}
	PG_CATCH();
	{
		LockRelease(&turnstile, ShareLock, true);
		PG_RE_THROW();
	}
	PG_END_TRY();
	LockRelease(&turnstile, ShareLock, true);
	return p;
}

/*
 * In line for a name's permit (before waiting for its turnstile), and out
 * again (after the wait, however it ended; at exit if it never did).
 */
void
dlock_permit_queue_enter(Oid dbid, int64 key)
{
	need_buckets();
	Assert(my_bucket < 0);
	my_bucket = dlock_permit_bucket_of(dbid, key);
	/* a full barrier: a release after this sees us, or we see its permit */
	pg_atomic_fetch_add_u32(&bucket(my_bucket)->waiters, 1);
}

void
dlock_permit_queue_leave(void)
{
	if (my_bucket < 0)
		return;
	pg_atomic_fetch_sub_u32(&bucket(my_bucket)->waiters, 1);
	my_bucket = -1;
}

/* Does pid wait, through lock waits, for this process (pg_blocking_pids)? */
static bool
waits_for_me(int pid)
{
	List	   *seen = list_make1_int(pid);
	List	   *todo = list_make1_int(pid);

	while (todo != NIL)
	{
		int			x = linitial_int(todo);
		ArrayType  *blockers;
		Datum	   *elems;
		int			n;

		todo = list_delete_first(todo);
		blockers = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids, Int32GetDatum(x)));
		deconstruct_array(blockers, INT4OID, sizeof(int32), true, TYPALIGN_INT, &elems, NULL, &n);
		for (int i = 0; i < n; i++)
		{
			int			b = DatumGetInt32(elems[i]);

			if (b == MyProcPid)
				return true;
			if (!list_member_int(seen, b))
			{
				seen = lappend_int(seen, b);
				todo = lappend_int(todo, b);
			}
		}
	}
	return false;
}

/*
 * Does session pid hold a lock with a lease, on any name?  Its lease's end
 * ends the session, or its transaction, and lets go of what it holds.
 */
static bool
holds_with_lease(int pid, Oid dbid)
{
	for (int i = 0; i < dlock_slots->nslots; i++)
	{
		DlockSlot  *slot = dlock_slot(i);

		if (slot->pid != pid || slot->dbid != dbid)
			continue;
		for (int j = 0; j < slot->nused && j < dlock_slots->entries_per_slot; j++)
		{
			DlockEntry *e = &slot->entries[j];

			if (e->inuse && e->lease_expires != 0)
				return true;
		}
	}
	return false;
}

/*
 * The deadlock the lock manager cannot see: each of the permits 1..permits
 * this process waits for (first in line) has a holder (or a request waiting
 * for it, which gets it first) that waits, through lock waits, for this
 * process, and without a lease: none of them will ever be let go.  (Permit 1 shared by plain shared holders is blocked by
 * one of them.)  A holder that waits where the lock manager does not look
 * (first in line for another semaphore), a prepared transaction's hold, a
 * holder with a lease, or a free permit: no deadlock.  by[p]: the pid
 * found to block permit p.
 */
static bool
permits_deadlocked(Oid dbid, int64 key, int permits, int *by)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "dlock deadlock check",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	LockData   *ld = GetLockStatusData();
	bool	   *blocked = palloc0(sizeof(bool) * (permits + 1));
	bool	   *held = palloc0(sizeof(bool) * (permits + 1));
	List	   *waiting = NIL;	/* pids found to wait for us */
	List	   *free_to_go = NIL;	/* pids found not to */
	bool		deadlock = true;

	for (int i = 0; i < ld->nelements && deadlock; i++)
	{
		LockInstanceData *l = &ld->locks[i];
		uint16		subid = l->locktag.locktag_field4;
		int			permit;
		bool		w;

		if (l->locktag.locktag_type != LOCKTAG_ADVISORY ||
			l->locktag.locktag_lockmethodid != USER_LOCKMETHOD ||
			l->locktag.locktag_field1 != dbid ||
			l->locktag.locktag_field2 != (uint32) ((uint64) key >> 32) ||
			l->locktag.locktag_field3 != (uint32) key ||
			(l->holdMask == 0 && l->waitLockMode == NoLock))
			continue;
		if (subid == DLOCK_SUBID_KEY)
			permit = 1;
		else if (subid > DLOCK_SUBID_TURNSTILE + 1 && subid <= DLOCK_SUBID_TURNSTILE + permits)
			permit = subid - DLOCK_SUBID_TURNSTILE;
		else
			continue;
		if (l->pid == MyProcPid)
		{
			/*
			 * Our own hold: in share mode (a plain shared lock of ours) it
			 * does not keep us from the permit; in exclusive mode (a raw
			 * pg_advisory_lock of the key) try_permits takes it for busy,
			 * and we will not let go of it while we wait: blocked by us.
			 * Looked at before anything else, whatever the order of the
			 * lock table.
			 */
			if ((l->holdMask & LOCKBIT_ON(ExclusiveLock)) == 0)
				continue;
			held[permit] = true;
			blocked[permit] = true;
			by[permit] = MyProcPid;
			continue;
		}

		/*
		 * A holder of the permit, or one that waits for it: a request in its
		 * queue keeps our try from it too (the lock manager grants no
		 * request that conflicts with one waiting), and gets it before us.
		 */
		held[permit] = true;
		if (blocked[permit])
			continue;
		if (l->pid == 0)
		{
			deadlock = false;	/* a prepared transaction's: it ends */
			break;
		}
		if (list_member_int(waiting, l->pid))
			w = true;
		else if (list_member_int(free_to_go, l->pid))
			w = false;
		else
		{
			w = waits_for_me(l->pid) && !holds_with_lease(l->pid, dbid);
			if (w)
				waiting = lappend_int(waiting, l->pid);
			else
				free_to_go = lappend_int(free_to_go, l->pid);
		}
		if (w)
		{
			blocked[permit] = true;
			by[permit] = l->pid;
		}
	}
	for (int p = 1; p <= permits && deadlock; p++)
		deadlock = held[p] && blocked[p];
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return deadlock;
}

/*
 * First in line (the turnstile held): wait for a free permit until deadline
 * (0: no limit).  The permit, or 0 at the deadline; an error (a cancel, a
 * terminate, a deadlock) leaves no permit taken.  The caller gives the
 * turnstile back.  detect: look for the deadlock the lock manager cannot
 * see (permits_deadlocked).
 */
int
dlock_permit_head(Oid dbid, int64 key, int permits, bool session,
				  TimestampTz deadline, bool detect)
{
	DlockPermitBucket *b = bucket(dlock_permit_bucket_of(dbid, key));
	volatile int p = 0;
	volatile int64 check_every = (int64) DeadlockTimeout * 1000;
	volatile TimestampTz next_check = detect && DeadlockTimeout > 0 ?
		GetCurrentTimestamp() + check_every : 0;

	PG_TRY();
	{
		for (;;)
		{
			TimestampTz now;
			long		ms = DLOCK_PERMIT_LOOK_MS;

			/* before the look: a release after it wakes us */
			ConditionVariablePrepareToSleep(&b->cv);
			DLOCK_FAULT("permit.look");
			p = try_permits(dbid, key, permits, session, NULL, NULL);
			if (p > 0)
				break;
			now = GetCurrentTimestamp();
			if (deadline != 0)
			{
				if (now >= deadline)
					break;
				ms = (long) Min((deadline - now + 999) / 1000, DLOCK_PERMIT_LOOK_MS);
			}
			if (next_check != 0)
			{
				/*
				 * A deadlock, seen twice with a look for a free permit
				 * between, and the same holders blocking the same permits
				 * both times (a holder may let go while we read the lock
				 * table, and wait for us afterwards).  Looked for after
				 * deadlock_timeout, then at twice the last interval.
				 */
				if (now >= next_check)
				{
					int		   *by1 = palloc0(sizeof(int) * (permits + 1));
					int		   *by2 = palloc0(sizeof(int) * (permits + 1));

					if (permits_deadlocked(dbid, key, permits, by1))
					{
						p = try_permits(dbid, key, permits, session, NULL, NULL);
						if (p > 0)
							break;
						/* the same holders, blocking the same permits */
						if (permits_deadlocked(dbid, key, permits, by2) &&
							memcmp(by1, by2, sizeof(int) * (permits + 1)) == 0)
							ereport(ERROR,
									(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
									 errmsg("deadlock detected"),
									 errdetail("Process %d waits for a permit of a semaphore whose every permit is held by a process that waits for it.",
											   MyProcPid)));
					}
					pfree(by1);
					pfree(by2);
					check_every *= 2;
					next_check = now + check_every;
				}
				ms = Min(ms, (long) ((next_check - now + 999) / 1000));
			}
			(void) ConditionVariableTimedSleep(&b->cv, ms, PG_WAIT_EXTENSION);
		}
	}
	PG_CATCH();
	{
		ConditionVariableCancelSleep();
		PG_RE_THROW();
	}
	PG_END_TRY();
	ConditionVariableCancelSleep();
	return p;
}

/*
 * A transaction-scope hold of a name ends with its transaction: wake the
 * name's waiters once the lock manager has released it (release_callback).
 */
void
dlock_permit_wake_at_end(Oid dbid, int64 key)
{
	int			i;

	if (dlock_permit_buckets == NULL)
		return;
	i = dlock_permit_bucket_of(dbid, key);
	wake_at_end[i / 64] |= UINT64CONST(1) << (i % 64);
	wake_pending = true;
}

static void
wake_buckets(bool all)
{
	pg_memory_barrier();
	for (int i = 0; i < DLOCK_PERMIT_BUCKETS; i++)
	{
		bool		marked = (wake_at_end[i / 64] & (UINT64CONST(1) << (i % 64))) != 0;

		if ((all || marked) && pg_atomic_read_u32(&bucket(i)->waiters) > 0)
			ConditionVariableBroadcast(&bucket(i)->cv);
	}
	memset(wake_at_end, 0, sizeof(wake_at_end));
	wake_pending = false;
}

/* Callers in line for a permit, all names (test/faults.py: none once settled). */
int
dlock_permit_in_line(void)
{
	int			n = 0;

	for (int i = 0; dlock_permit_buckets != NULL && i < DLOCK_PERMIT_BUCKETS; i++)
		n += (int) pg_atomic_read_u32(&bucket(i)->waiters);
	return n;
}

/* Every bucket with waiters (a session's locks went all at once). */
void
dlock_permit_wake_all(void)
{
	if (dlock_permit_buckets != NULL)
		wake_buckets(true);
}

/* After the lock manager released a (sub)transaction's locks. */
static void
release_callback(ResourceReleasePhase phase, bool isCommit, bool isTopLevel, void *arg)
{
	if (phase == RESOURCE_RELEASE_AFTER_LOCKS && wake_pending)
		wake_buckets(false);
}

/* At exit, after the session's locks were released (ShutdownPostgres). */
static void
permits_exit(int code, Datum arg)
{
	dlock_permit_queue_leave();
	dlock_permit_wake_all();
}

/* Once in each process that takes locks (entries.h, and the lock holder). */
void
dlock_permits_backend_setup(void)
{
	if (dlock_permit_buckets == NULL)
		return;
	RegisterResourceReleaseCallback(release_callback, NULL);
	on_shmem_exit(permits_exit, (Datum) 0);
}
