/*
 * stats.c: counting lock events for dlock_stats (stats.h), into the table
 * in shared memory (stats_table.c).
 *
 * A backend does not touch the table for each event: it adds the event to
 * its own pending counts (a small array, no lock, no allocation), and adds
 * those to the table at the end of each transaction, when it exits, when
 * DLOCK_STATS_PENDING names are pending, and before it reads the view.  So
 * a lock and unlock pair costs a few stores, and the table sees each name
 * once per transaction.  The background processes that hold detached locks
 * and enforce leases count into the table directly.
 *
 * Invariant: nothing here raises an error or allocates on the counting
 * path; an event that cannot be counted is dropped, never a reason for a
 * lock call to fail.
 *
 * Layer 3 of the map in dlock.h (mechanisms): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "entries.h"
#include "name.h"
#include "stats.h"
#include "stats_table.h"

bool		dlock_track_stats = true;

static inline void
add_time(int64 *total, int64 *max, int64 us)
{
	us = Max(us, 0);
	*total += us;
	*max = Max(*max, us);
}

static inline void
count_event(DlockStatsCounters *c, DlockStatEvent ev, int scope, int64 us,
			TimestampTz now)
{
	c->usage += 1.0;
	switch (ev)
	{
		case DLOCK_STAT_ACQUIRED:
			c->acquisitions++;
			c->scope[scope]++;
			c->last_acquired = Max(c->last_acquired, now);
			if (us >= 0)
			{
				c->waited++;
				add_time(&c->wait_time_total, &c->wait_time_max, us);
			}
			break;
		case DLOCK_STAT_BUSY:
			c->busy++;
			break;
		case DLOCK_STAT_TIMEOUT:
		case DLOCK_STAT_DEADLOCK:
		case DLOCK_STAT_CANCEL:
			if (ev == DLOCK_STAT_TIMEOUT)
				c->timeouts++;
			else if (ev == DLOCK_STAT_DEADLOCK)
				c->deadlocks++;
			else
				c->cancels++;
			add_time(&c->wait_time_total, &c->wait_time_max, us);
			break;
		case DLOCK_STAT_RELEASED:
			c->released++;
			add_time(&c->hold_time_total, &c->hold_time_max, us);
			break;
		case DLOCK_STAT_EXPIRED:
			c->leases_expired++;
			break;
		case DLOCK_STAT_FORCED:
			c->force_released++;
			break;
	}
}

/* ---- a backend's pending counts ---- */

#define DLOCK_STATS_PENDING 64
#define PENDING_INDEX (DLOCK_STATS_PENDING * 2)

static DlockStatsRecord pending[DLOCK_STATS_PENDING];
static bool pending_on = false;	/* false: count into the table */
static int	npending = 0;
static int16 pending_index[PENDING_INDEX];	/* -1: empty */
static int	last_pending = -1;	/* the record counted into last, or -1 */

/*
 * Before the backend's exit releases its locks (ShutdownPostgres, which runs
 * after this): the holds that end with the session, counted in dlock_stats.
 * A hold that the lock manager no longer has (released behind dlock's back)
 * ended at a time nobody knows, and is not counted.  Nothing is counted for
 * these entries after this (the transaction's abort frees them later).
 */
static void
backend_exit_holds(int code, Datum arg)
{
	int			n = dlock_entry_nrefs();
	int			ref;

	for (ref = 0; ref < n; ref++)
	{
		DlockEntry *e = dlock_entry_at(ref);

		if (ref < dlock_my_cap && ref >= dlock_my_slot->nused)
		{
			ref = dlock_my_cap - 1; /* the rest of the slot is unused */
			continue;
		}
		if (!e->inuse || !e->counted)
			continue;
		if (e->nsession + e->nxact > 0 && dlock_entry_lock_held(e))
			dlock_stats_hold_ended(e);
		dlock_change_begin(ref);
		e->counted = 0;
		dlock_change_end(ref);
	}
}

/* At backend exit: what it has pending, into the table. */
static void
backend_exit_flush(int code, Datum arg)
{
	dlock_stats_flush();
}

/*
 * When a backend first uses dlock (entries.h; registered in _PG_init): the
 * ends of its holds at exit are counted, and a regular backend counts into
 * pending counts from now on.
 */
void
dlock_stats_backend_setup(void)
{
	if (dlock_my_slot != NULL)
	{
		before_shmem_exit(backend_exit_holds, (Datum) 0);
		on_shmem_exit(backend_exit_flush, (Datum) 0);
	}
	if (dlock_stats_tab == NULL || MyBackendType != B_BACKEND || pending_on)
		return;
	memset(pending_index, -1, sizeof(pending_index));
	npending = 0;
	last_pending = -1;
	pending_on = true;
}

/* Add this backend's pending counts to the table. */
void
dlock_stats_flush(void)
{
	int			i;

	if (npending == 0)
		return;
	for (i = 0; i < npending; i++)
	{
		DlockStatsRecord *r = &pending[i];

		dlock_stats_add(r->dbid, r->key, r->mode, r->name, r->namelen, r->owner, &r->c);
	}
	npending = 0;
	last_pending = -1;
	memset(pending_index, -1, sizeof(pending_index));
}

/* pending_counts, past the record counted into last */
static DlockStatsCounters *
pending_counts_lookup(Oid dbid, int64 key, uint8 mode, const char *name, int namelen)
{
	uint32		i;
	DlockStatsRecord *r;

	i = dlock_stats_hash(dbid, key, mode) % PENDING_INDEX;
	for (;;)
	{
		int			x = pending_index[i];

		if (x < 0)
			break;
		r = &pending[x];
		if (r->key == key && r->dbid == dbid && r->mode == mode)
		{
			last_pending = x;
			return &r->c;
		}
		i = (i + 1) % PENDING_INDEX;
	}
	if (npending == DLOCK_STATS_PENDING)
	{
		dlock_stats_flush();
		return pending_counts_lookup(dbid, key, mode, name, namelen);
	}
	r = &pending[npending];
	last_pending = npending;
	pending_index[i] = npending++;
	memset(&r->c, 0, sizeof(r->c));
	r->dbid = dbid;
	r->key = key;
	r->mode = mode;
	/*
	 * A regular backend: its session's user owns what it adds, or the role
	 * that code running as another role runs as (stats_table.h)
	 */
	r->owner = dlock_limit_role();
	r->namelen = Min(namelen, DLOCK_NAME_MAX);
	memcpy(r->name, name, r->namelen);
	return &r->c;
}

/* The pending counts of (dbid, key, mode), started if need be. */
static pg_attribute_always_inline DlockStatsCounters *
pending_counts(Oid dbid, int64 key, uint8 mode, const char *name, int namelen)
{
	/* a hold's end usually follows its start: the same record */
	if (likely(last_pending >= 0))
	{
		DlockStatsRecord *r = &pending[last_pending];

		if (r->key == key && r->dbid == dbid && r->mode == mode)
			return &r->c;
	}
	return pending_counts_lookup(dbid, key, mode, name, namelen);
}

/*
 * Count one event of (dbid, key, mode).  us: ACQUIRED the wait (-1: none),
 * TIMEOUT/DEADLOCK/CANCEL the wait, RELEASED the hold.  now: ACQUIRED only
 * (0: take the time here).  owner: the role a new entry counts against,
 * for the processes that count into the table directly (a regular backend
 * counts against its session's user).  Inline where the event is a
 * constant (the lock path's two), so that only its case is compiled.
 */
static pg_attribute_always_inline void
count_one(Oid dbid, int64 key, uint8 mode, const char *name, int namelen,
		  DlockStatEvent ev, int scope, int64 us, TimestampTz now, Oid owner)
{
	DlockStatsCounters one;

	if (dlock_stats_tab == NULL)
		return;
	if (ev == DLOCK_STAT_ACQUIRED && now == 0)
		now = GetCurrentTimestamp();
	if (likely(pending_on))
	{
		count_event(pending_counts(dbid, key, mode, name, namelen), ev, scope, us, now);
		return;
	}
	memset(&one, 0, sizeof(one));
	count_event(&one, ev, scope, us, now);
	/* a parallel worker counts for its leader's role; autovacuum, for the
	 * table owner whose code it runs */
	if (!OidIsValid(owner) && (IsParallelWorker() || MyBackendType == B_AUTOVAC_WORKER))
		owner = dlock_limit_role();
	dlock_stats_add(dbid, key, mode, name, namelen, owner, &one);
}

void
dlock_stats_count_event(Oid dbid, int64 key, uint8 mode, const char *name, int namelen,
						DlockStatEvent ev, int scope, int64 us, TimestampTz now, Oid owner)
{
	count_one(dbid, key, mode, name, namelen, ev, scope, us, now, owner);
}

/* An acquisition by this backend (the lock path's event; stats.h). */
void
dlock_stats_acquired(int64 key, uint8 mode, const char *name, int namelen, int scope,
					 int64 waited_us, TimestampTz now)
{
	count_one(MyDatabaseId, key, mode, name, namelen, DLOCK_STAT_ACQUIRED, scope, waited_us,
			  now, InvalidOid);
}

/*
 * A hold of this backend's entry ended now: timed with the clock its start
 * was (entries.h dlock_hold_time), so that a length is not two clocks'
 * difference.
 */
void
dlock_stats_hold_ended(const DlockEntry *e)
{
	if (!e->counted)
		return;
	count_one(MyDatabaseId, e->key, e->mode, e->name, e->namelen, DLOCK_STAT_RELEASED, 0,
			  (e->precise ? GetCurrentTimestamp() : dlock_hold_time()) - e->since, 0,
			  InvalidOid);
}
