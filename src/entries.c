/*
 * entries.c: this backend's entries (entries.h); their index is
 * entry_index.c.
 *
 * Entries beyond the slot's room live in backend-local "overflow" memory:
 * their locks work, but have no name in the view and no lease.
 *
 * Invariant: an entry is in use exactly while it is in this backend's index
 * (key, mode) -> ref (entry_index.c).  Everything that can fail or allocate
 * (growing the index or the overflow array) happens in dlock_entry_for,
 * before the lock manager is asked; marking an entry used or free
 * (dlock_entry_start, dlock_entry_free_if_unused) only moves what is already
 * there, so it can run inside a slot's change window.
 *
 * Layer 2 of the map in dlock.h (shared memory and per-backend records):
 * calls only files listed before it there.
 */
#include "postgres.h"

#include "access/twophase.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "entries.h"
#include "entry_index.h"

bool		dlock_ready = false;
DlockSlot  *dlock_my_slot = NULL;
int			dlock_my_cap = 0;
DlockEntry *dlock_overflow = NULL;
int			dlock_max_held_locks = -1;

static int	n_overflow = 0;		/* overflow[0 .. n_overflow) have been used */
static int	max_overflow = 0;
static int *free_overflow = NULL;	/* a stack of unused overflow refs */
static int	n_free_overflow = 0;
static int	free_in_slot = 0;	/* unused entries of the shared slot */

/*
 * Sweeping the full slot for holds released behind dlock's back costs one
 * lock-table lookup per entry.  Each new entry earns one credit; a sweep
 * needs sweep_cost of them, which starts at dlock_my_cap, doubles (up to
 * SWEEP_COST_MAX times that) after every sweep that found nothing, and is
 * back at dlock_my_cap once this session frees a slot entry itself.  So a
 * session holding thousands of names pays well under one lookup per new name.
 * A session with fewer overflow entries in use than the slot has entries
 * sweeps whenever the slot is full and a witness says holds went behind
 * dlock's back (pg_advisory_unlock_all, which takes every session hold,
 * or one a raw pg_advisory_unlock took): one session hold of the slot, a
 * different one each time, looked up (witness_released); so the names
 * beyond the slot cost one lookup each, not a sweep each.  A lease needs a
 * slot entry and sweeps whatever the credit.  (DISCARD ALL forgets the
 * released holds at once: dlock.c.)
 */
#define SWEEP_COST_MAX 16
static int	sweep_credit = 0;
static int	sweep_cost = 0;
static int	witness_next = 0;

/* probes for a witness among the slot's entries, at most */
#define WITNESS_PROBES 8

/* what runs after a backend's setup (entries.h) */
#define MAX_SETUP_HOOKS 8
static DlockSetupHook setup_hooks[MAX_SETUP_HOOKS];
static int	n_setup_hooks = 0;

void
dlock_on_backend_setup(DlockSetupHook hook)
{
	if (n_setup_hooks == MAX_SETUP_HOOKS)
		elog(ERROR, "too many dlock setup hooks");
	setup_hooks[n_setup_hooks++] = hook;
}

/* At backend exit: the lock manager released the locks, we forget them. */
static void
backend_exit(int code, Datum arg)
{
	if (dlock_my_slot == NULL)
		return;
	dlock_change_begin(0);
	dlock_my_slot->nused = 0;
	dlock_my_slot->pid = 0;
	dlock_change_end(0);
	dlock_my_slot = NULL;
	dlock_my_cap = 0;
}

/* ---- this backend's entries ---- */

void
dlock_backend_setup(void)
{
	uint32		size = 64;

	if (dlock_ready)
		return;
	if (dlock_slots != NULL && MyProc != NULL &&
		GetNumberFromPGProc(MyProc) < dlock_slots->nslots)
	{
		dlock_my_slot = dlock_slot(GetNumberFromPGProc(MyProc));
		dlock_my_cap = dlock_slots->entries_per_slot;
		dlock_change_begin(0);
		dlock_my_slot->pid = MyProcPid;
		dlock_my_slot->generation++;
		dlock_my_slot->dbid = MyDatabaseId;
		dlock_my_slot->nused = 0;
		for (int i = 0; i < dlock_my_cap; i++)
			dlock_my_slot->entries[i].inuse = 0;
		dlock_change_end(0);
		on_shmem_exit(backend_exit, (Datum) 0);
	}
	free_in_slot = dlock_my_cap;
	sweep_credit = sweep_cost = dlock_my_cap;
	while (size < (uint32) dlock_my_cap * 4)
		size *= 2;
	dlock_index_init(size);
	for (int i = 0; i < n_setup_hooks; i++)
		setup_hooks[i] ();
	dlock_ready = true;
}

int
dlock_entry_find(int64 key, uint8 mode)
{
	return dlock_index_find(key, mode);
}

/* Refs 0 .. dlock_entry_nrefs()-1 cover every entry that may be in use. */
int
dlock_entry_nrefs(void)
{
	return dlock_my_cap + n_overflow;
}

/*
 * Forget every session hold in the shared slot that the lock manager no
 * longer has; true if that freed an entry.
 */
static bool
sweep_stale_entries(void)
{
	bool		freed = false;
	int			i;

	for (i = 0; i < dlock_my_slot->nused; i++)
	{
		DlockEntry *e = &dlock_my_slot->entries[i];

		if (!e->inuse || e->nsession == 0 || e->nxact > 0 ||
			e->waiting != DLOCK_WAIT_NONE)
			continue;
		if (!dlock_entry_lock_held(e))
		{
			dlock_entry_forget_stale(i);
			freed = true;
		}
	}
	return freed;
}

static int
free_slot_entry(void)
{
	int			i;

	if (free_in_slot == 0)
		return -1;
	for (i = 0; i < dlock_my_cap; i++)
		if (!dlock_my_slot->entries[i].inuse)
			return i;
	return -1;
}

/* dlock.max_held_locks as it applies: -1 is a quarter of the lock table. */
static uint32
held_limit(void)
{
	/* the lock table's size is fixed at server start */
	static uint32 quarter = 0;

	if (dlock_max_held_locks >= 0)
		return (uint32) dlock_max_held_locks;
	if (unlikely(quarter == 0))
	{
		int64		table = (int64) max_locks_per_xact * (MaxBackends + max_prepared_xacts);

		quarter = (uint32) Max(Min(table / 4, (int64) INT_MAX), 1);
	}
	return quarter;
}

/*
 * Has the lock manager let go of a session hold of the slot's (the next one
 * in turn that a sweep could reclaim)?  False where none was found in a few
 * probes: then a sweep would reclaim nothing the credit's sweeps will not.
 */
static bool
witness_released(void)
{
	int			n = dlock_my_slot->nused;

	for (int probe = 0; probe < WITNESS_PROBES && n > 0; probe++)
	{
		DlockEntry *e;

		if (witness_next >= n)
			witness_next = 0;
		e = &dlock_my_slot->entries[witness_next++];
		if (!e->inuse || e->nsession == 0 || e->nxact > 0 ||
			e->waiting != DLOCK_WAIT_NONE)
			continue;
		return !dlock_entry_lock_held(e);
	}
	return false;
}

/*
 * No single session may fill the server's lock table through dlock: a new
 * name beyond dlock.max_held_locks is refused (holds released behind dlock's
 * back are dropped first).
 */
static void
check_held_limit(const DlockName *name)
{
	uint32		limit = held_limit();

	if (likely(dlock_index.count < limit))
		return;
	dlock_entries_forget_released();
	if (dlock_index.count < limit)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("cannot take lock \"%s\": this session holds or awaits %u named locks",
					dlock_display_name(name), dlock_index.count),
			 errdetail("dlock.max_held_locks (%u) keeps a single session from filling the server's lock table.",
					   limit),
			 errhint("Release named locks that are no longer needed, or raise \"dlock.max_held_locks\".")));
}

/*
 * A lease or info (need: DLOCK_NEED_*) that only a slot entry can keep, for
 * a lock held beyond the slot (beyond) or with the slot full.
 */
void
dlock_entry_refuse_shared(const DlockName *name, int need, bool beyond)
{
	if (need == DLOCK_NEED_LEASE && beyond)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("cannot give lock \"%s\" a lease", dlock_display_name(name)),
				 errdetail("The lock is held beyond dlock.max_locks_per_session (%d), where leases cannot be kept.",
						   dlock_my_cap),
				 errhint("Release it and take it again once fewer named locks are held, or raise dlock.max_locks_per_session.")));
	if (need == DLOCK_NEED_LEASE)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("cannot give lock \"%s\" a lease", dlock_display_name(name)),
				 errdetail("This session already holds %d named locks, the most that dlock.max_locks_per_session allows leases for.",
						   dlock_my_cap),
				 errhint("Release some named locks, or raise dlock.max_locks_per_session.")));
	if (beyond)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("cannot give lock \"%s\" info", dlock_display_name(name)),
				 errdetail("The lock is held beyond dlock.max_locks_per_session (%d), where info cannot be kept.",
						   dlock_my_cap),
				 errhint("Release it and take it again once fewer named locks are held, or raise dlock.max_locks_per_session.")));
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("cannot give lock \"%s\" info", dlock_display_name(name)),
			 errdetail("This session already holds %d named locks, the most that dlock.max_locks_per_session allows info for.",
					   dlock_my_cap),
			 errhint("Release some named locks, or raise dlock.max_locks_per_session.")));
}

/* dlock_entry_info_arg (entries.h) when the call gives one. */
void
dlock_entry_info_given(FunctionCallInfo fcinfo, int argno, DlockInfo *info)
{
	dlock_info_arg(fcinfo, argno, info);
	dlock_require_preload("The info of a lock is kept in shared memory, with its name.");
}

/*
 * The entry to use for (key, mode): the existing one, or a free one (not yet
 * marked in use).  Allocation happens here, before any lock is taken.
 * need: DLOCK_NEED_* (a lease or info needs a slot entry).
 */
int
dlock_entry_for(const DlockName *name, uint8 mode, int need)
{
	int			ref = dlock_index_find(name->key, mode);

	if (ref >= 0)
	{
		if (need != DLOCK_NEED_NONE && ref >= dlock_my_cap)
			dlock_entry_refuse_shared(name, need, true);
		return ref;
	}
	check_held_limit(name);
	dlock_index_reserve();
	if (sweep_credit < SWEEP_COST_MAX * dlock_my_cap)
		sweep_credit++;
	if ((ref = free_slot_entry()) >= 0)
		return ref;

	/* full: drop holds released behind dlock's back, then look again */
	if (dlock_my_cap > 0 &&
		(need != DLOCK_NEED_NONE || sweep_credit >= sweep_cost ||
		 (n_overflow - n_free_overflow < dlock_my_cap && witness_released())))
	{
		sweep_credit = 0;
		if (sweep_stale_entries() && (ref = free_slot_entry()) >= 0)
			return ref;
		sweep_cost = Min(sweep_cost * 2, SWEEP_COST_MAX * dlock_my_cap);
	}
	if (need != DLOCK_NEED_NONE)
		dlock_entry_refuse_shared(name, need, false);
	if (n_free_overflow > 0)
		return free_overflow[n_free_overflow - 1];
	if (n_overflow == max_overflow)
	{
		int			newmax = Max(8, max_overflow * 2);

		/* each array on its own, so that a failed allocation leaves no mix */
		if (free_overflow == NULL)
			free_overflow = MemoryContextAlloc(TopMemoryContext, sizeof(int) * newmax);
		else
			free_overflow = repalloc(free_overflow, sizeof(int) * newmax);
		if (dlock_overflow == NULL)
			dlock_overflow = MemoryContextAlloc(TopMemoryContext, sizeof(DlockEntry) * newmax);
		else
			dlock_overflow = repalloc(dlock_overflow, sizeof(DlockEntry) * newmax);
		/* as dlock_entry_free_if_unused leaves an entry (no need to zero all) */
		for (int i = max_overflow; i < newmax; i++)
		{
			dlock_overflow[i].inuse = 0;
			dlock_overflow[i].lease_expires = 0;
			dlock_overflow[i].nsession = 0;
			dlock_overflow[i].nxact = 0;
			dlock_overflow[i].waiting = DLOCK_WAIT_NONE;
		}
		max_overflow = newmax;
	}
	free_overflow[n_free_overflow++] = dlock_my_cap + n_overflow++;
	return free_overflow[n_free_overflow - 1];
}

/* Take a free entry out of the free lists; no allocation. */
static void
take_free(int ref)
{
	if (ref < dlock_my_cap)
	{
		free_in_slot--;
		if (ref >= dlock_my_slot->nused)
			dlock_my_slot->nused = ref + 1;
		return;
	}
	/* dlock_entry_for handed out the top of the stack; look further if not */
	for (int i = n_free_overflow - 1; i >= 0; i--)
		if (free_overflow[i] == ref)
		{
			free_overflow[i] = free_overflow[--n_free_overflow];
			return;
		}
}

/*
 * (Re)start an entry as a new hold of name, or as a wait for it.  The entry
 * came from dlock_entry_for, so the index has room for it.
 */
void
dlock_entry_start(int ref, const DlockName *name, uint8 mode, TimestampTz since)
{
	DlockEntry *e = dlock_entry_at(ref);

	if (!e->inuse)
	{
		take_free(ref);
		dlock_index_insert(name->key, mode, ref);
	}
	e->key = name->key;
	e->mode = mode;
	e->namelen = name->len;
	memcpy(e->name, name->utf8, name->len);
	e->infolen = 0;
	e->permit = 0;
	e->permits = 0;
	e->nsession = 0;
	e->nxact = 0;
	e->waiting = DLOCK_WAIT_NONE;
	e->token = 0;
	e->lease_expires = 0;
	e->lease_us = 0;
	e->since = since;
	e->counted = 0;
	e->foreign = 0;
	e->precise = 0;
	e->notify = 0;
	e->inuse = 1;
}

/* Forget an entry that no longer holds or awaits anything. */
void
dlock_entry_free_if_unused(int ref)
{
	DlockEntry *e = dlock_entry_at(ref);

	if (!e->inuse || e->nsession > 0 || e->nxact > 0 ||
		e->waiting != DLOCK_WAIT_NONE)
		return;
	dlock_index_delete(e->key, e->mode);
	e->inuse = 0;
	e->lease_expires = 0;
	if (ref < dlock_my_cap)
	{
		free_in_slot++;
		sweep_cost = dlock_my_cap;
		while (dlock_my_slot->nused > 0 &&
			   !dlock_my_slot->entries[dlock_my_slot->nused - 1].inuse)
			dlock_my_slot->nused--;
	}
	else
		free_overflow[n_free_overflow++] = ref;
}

/*
 * Does the lock manager still have this entry's hold (any scope)?  A
 * session hold with a lease is still dlock's only while its lease marker is
 * held too: a lock of the same key taken afresh after DISCARD ALL or
 * pg_advisory_unlock_all (which drop the marker) is another hold.
 */
bool
dlock_entry_lock_held(const DlockEntry *e)
{
	LOCKTAG		tag;

	dlock_set_permit_tag(&tag, MyDatabaseId, e->key, e->permit);
	if (!dlock_lock_held_by_me(&tag, DlockLockMode(e->mode)))
		return false;
	if (unlikely(e->mode == DLOCK_UPDATE))
	{
		dlock_set_update_tag(&tag, MyDatabaseId, e->key);
		if (!dlock_lock_held_by_me(&tag, DLOCK_UPDATE_MODE))
			return false;
	}
	if (e->lease_expires != 0 && e->nxact == 0 && e->nsession > 0)
		return dlock_marker_held(e->key, e->mode);
	return true;
}

bool
dlock_marker_held(int64 key, uint8 mode)
{
	LOCKTAG		tag;

	dlock_set_marker_tag(&tag, MyDatabaseId, key, mode);
	return dlock_lock_held_by_me(&tag, DLOCK_MARKER_MODE);
}

/* Take the lease marker of a session hold; an error if the lock table is full. */
void
dlock_marker_take(int64 key, uint8 mode)
{
	LOCKTAG		tag;

	dlock_set_marker_tag(&tag, MyDatabaseId, key, mode);
	if (!dlock_lock_held_by_me(&tag, DLOCK_MARKER_MODE))
		(void) LockAcquire(&tag, DLOCK_MARKER_MODE, true, true);
}

void
dlock_marker_drop(int64 key, uint8 mode)
{
	LOCKTAG		tag;

	dlock_set_marker_tag(&tag, MyDatabaseId, key, mode);
	if (dlock_lock_held_by_me(&tag, DLOCK_MARKER_MODE))
		LockRelease(&tag, DLOCK_MARKER_MODE, true);
}

/*
 * The lock manager said "not available" for a mode this backend supposedly
 * held at session level: it was released behind dlock's back (for example
 * by pg_advisory_unlock_all() or DISCARD ALL).  Transaction-scope holds can
 * only end with their (sub)transaction, which xact.c follows.
 */
void
dlock_entry_forget_stale(int ref)
{
	DlockEntry *e = dlock_entry_at(ref);

	if (!e->inuse || e->nsession == 0)
		return;
	dlock_entry_end_session(ref);
}

/*
 * The session part of entry ref is over (released, or gone behind dlock's
 * back): its lease marker goes, and the entry if nothing else holds it.
 */
void
dlock_entry_end_session(int ref)
{
	DlockEntry *e = dlock_entry_at(ref);

	if (e->lease_expires != 0)
		dlock_marker_drop(e->key, e->mode);
	dlock_change_begin(ref);
	e->nsession = 0;
	dlock_entry_free_if_unused(ref);
	dlock_change_end(ref);
}

/*
 * A session part with a lease whose marker is gone was released behind
 * dlock's back (DISCARD ALL, pg_advisory_unlock_all), even while a
 * transaction-scope hold of the entry keeps the lock itself: forget it.
 * Costs a lookup only for an entry with a lease.
 */
void
dlock_entry_drop_stale_session_slow(int ref)
{
	DlockEntry *e = dlock_entry_at(ref);

	if (e->lease_expires == 0 || !e->inuse || e->nsession == 0 ||
		dlock_marker_held(e->key, e->mode))
		return;
	dlock_entry_end_session(ref);
}

/*
 * After DISCARD ALL (dlock.c), which releases every session-level advisory
 * lock: forget every session hold the lock manager no longer has, so that
 * the view and the reaper never take a lock of the same key taken afresh
 * for the old hold.
 */
void
dlock_entries_forget_released(void)
{
	int			n;
	int			ref;

	if (!dlock_ready)
		return;
	n = dlock_entry_nrefs();
	for (ref = 0; ref < n; ref++)
	{
		DlockEntry *e = dlock_entry_at(ref);

		if (ref < dlock_my_cap && ref >= dlock_my_slot->nused)
		{
			ref = dlock_my_cap - 1; /* the rest of the slot is unused */
			continue;
		}
		if (e->inuse && e->nsession > 0 && !dlock_entry_lock_held(e))
			dlock_entry_forget_stale(ref);
	}
}

/*
 * This session's live entries for name: exclusive, update, shared.  An entry whose
 * lock the lock manager no longer has is stale and is dropped here.
 */
int
dlock_entries_held(const DlockName *name, int refs[DLOCK_MODES])
{
	static const uint8 modes[DLOCK_MODES] = {DLOCK_EXCLUSIVE, DLOCK_UPDATE, DLOCK_SHARED};
	int			n = 0;
	int			i;

	for (i = 0; i < DLOCK_MODES; i++)
	{
		int			ref = dlock_entry_find(name->key, modes[i]);
		DlockEntry *e;

		if (ref < 0)
			continue;
		dlock_entry_drop_stale_session(ref);
		e = dlock_entry_at(ref);
		if (!e->inuse || e->nsession + e->nxact == 0)
			continue;
		if (!dlock_entry_lock_held(e))
		{
			dlock_entry_forget_stale(ref);
			continue;
		}
		refs[n++] = ref;
	}
	return n;
}

void
dlock_entries_not_held(const DlockName *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("lock \"%s\" is not held by this session", dlock_display_name(name))));
}

/* ---- transaction-scope holds ---- */

DlockXactHold *dlock_xact_holds = NULL;
int			dlock_n_xact_holds = 0;
static int	max_xact_holds = 0;

void
dlock_xact_hold_reserve(void)
{
	if (dlock_n_xact_holds < max_xact_holds)
		return;
	if (dlock_xact_holds == NULL)
	{
		max_xact_holds = 16;
		dlock_xact_holds = MemoryContextAlloc(TopMemoryContext,
											  sizeof(DlockXactHold) * max_xact_holds);
	}
	else
	{
		dlock_xact_holds = repalloc(dlock_xact_holds, sizeof(DlockXactHold) * max_xact_holds * 2);
		max_xact_holds *= 2;
	}
}

/* Record a transaction-scope grant; room was reserved before the lock. */
void
dlock_xact_hold_add(int ref, bool own_release)
{
	Assert(dlock_n_xact_holds < max_xact_holds);
	dlock_xact_holds[dlock_n_xact_holds].ref = ref;
	dlock_xact_holds[dlock_n_xact_holds].subid = GetCurrentSubTransactionId();
	dlock_xact_holds[dlock_n_xact_holds].own_release = own_release;
	dlock_xact_holds[dlock_n_xact_holds].token = dlock_entry_at(ref)->token;
	dlock_n_xact_holds++;
}
