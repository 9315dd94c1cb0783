/*
 * stats.c: lock statistics, one entry per database, name and mode
 * (the dlock_stats view), in a bounded table of shared memory.
 *
 * The table is split into DLOCK_STATS_PARTS parts by a hash of (database,
 * key, mode), each with its own LWLock, its own share of dlock.max_stats
 * entries and an open-addressing index.  Counting an event takes the part's
 * lock in shared mode, finds the entry and changes it under the entry's
 * spinlock (as pg_stat_statements does); only a name the part has not seen
 * takes the part's lock exclusively.  So there is no lock that every lock
 * call takes, and two names in different parts never meet.
 *
 * A backend does not touch the table for each event: it adds the event to
 * its own pending counts (a small array, no lock, no allocation), and adds
 * those to the table at the end of each transaction, when it exits, when
 * DLOCK_STATS_PENDING names are pending, and before it reads the view.  So
 * a lock and unlock pair costs a few stores, and the table sees each name
 * once per transaction.  The background processes that hold detached locks
 * and enforce leases count into the table directly.
 *
 * Eviction, per part: when a new name finds its part full, the
 * DLOCK_STATS_EVICT_PERCENT of the part's entries with the lowest usage are
 * dropped, and every remaining usage is decayed by DLOCK_STATS_DECAY.  Each
 * event adds 1 to its entry's usage, so what goes is what was least used
 * lately (README.md "Monitoring").
 *
 * The table is written to DLOCK_STATS_FILE when the server shuts down
 * cleanly, read back (and the file removed) when it starts: kept across a
 * clean restart, empty after a crash or an immediate shutdown.
 *
 * Invariant: nothing here raises an error or allocates on the counting
 * path; an event that cannot be counted (never: the table makes room) is
 * dropped, never a reason for a lock call to fail.
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xlog.h"
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"

PG_FUNCTION_INFO_V1(dlock_stats);
PG_FUNCTION_INFO_V1(dlock_stats_info);
PG_FUNCTION_INFO_V1(dlock_stats_reset);

#define DLOCK_STATS_PARTS 32
#define DLOCK_STATS_EVICT_PERCENT 5
#define DLOCK_STATS_DECAY 0.99
#define DLOCK_STATS_FILE "pg_stat/dlock.stat"
#define DLOCK_STATS_MAGIC 0x444c5301	/* "DLS" 1 */

typedef struct DlockStatsCounters
{
	int64		acquisitions;
	int64		waited;
	int64		scope[3];		/* DLOCK_SCOPE_* */
	int64		busy;
	int64		timeouts;
	int64		deadlocks;
	int64		cancels;
	int64		released;
	int64		leases_expired;
	int64		wait_time_total;	/* microseconds */
	int64		wait_time_max;
	int64		hold_time_total;
	int64		hold_time_max;
	TimestampTz last_acquired;	/* 0: never */
	double		usage;
} DlockStatsCounters;

/* What identifies an entry, and what is written to the file for it. */
typedef struct DlockStatsRecord
{
	Oid			dbid;
	uint8		mode;
	uint8		pad;
	uint16		namelen;
	int64		key;
	DlockStatsCounters c;
	char		name[DLOCK_NAME_MAX];
} DlockStatsRecord;

typedef struct DlockStatsEntry
{
	slock_t		mutex;			/* guards r.c */
	bool		inuse;
	int32		next_free;
	DlockStatsRecord r;
} DlockStatsEntry;

typedef struct DlockStatsPart
{
	LWLock	   *lock;
	int			count;			/* entries in use */
	int			free_head;		/* -1: none */
	int64		evictions;
	double		new_usage;		/* a new entry's usage: the highest usage the
								 * last eviction dropped */
} DlockStatsPart;

typedef struct DlockStatsShared
{
	int			cap;			/* entries per part */
	uint32		index_mask;		/* index slots per part - 1 */
	slock_t		reset_lock;
	TimestampTz stats_reset;
	DlockStatsPart parts[DLOCK_STATS_PARTS];
	/* then cap * PARTS entries, then (index_mask + 1) * PARTS int32 */
} DlockStatsShared;

bool		dlock_track_stats = true;
int			dlock_max_stats = 5000;

static DlockStatsShared *stats = NULL;
static DlockStatsEntry *stats_entries;
static int32 *stats_index;

/* per process, for eviction: (usage, entry) pairs of one part */
typedef struct UsageRank
{
	double		usage;
	int			entry;
} UsageRank;
static UsageRank *ranks = NULL;

static int
stats_cap(void)
{
	return (dlock_max_stats + DLOCK_STATS_PARTS - 1) / DLOCK_STATS_PARTS;
}

static uint32
stats_index_size(void)
{
	uint32		size = 16;

	while (size < (uint32) stats_cap() * 2)
		size *= 2;
	return size;
}

Size
dlock_stats_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(DlockStatsShared));

	size = add_size(size, mul_size(sizeof(DlockStatsEntry),
								   mul_size(stats_cap(), DLOCK_STATS_PARTS)));
	size = add_size(size, mul_size(sizeof(int32),
								   mul_size(stats_index_size(), DLOCK_STATS_PARTS)));
	return size;
}

static inline uint32
stats_hash(Oid dbid, int64 key, uint8 mode)
{
	/* keys are SHA-256 bits already; the multiply mixes in the rest */
	return (uint32) ((((uint64) key ^ ((uint64) dbid << 1) ^ mode) *
					  UINT64CONST(0x9E3779B97F4A7C15)) >> 32);
}

/* The index slot where an entry with hash h starts its probe (its part: h % PARTS). */
static inline uint32
index_start(uint32 h)
{
	return (h / DLOCK_STATS_PARTS) & stats->index_mask;
}

/* ... and where entry e's does. */
static inline uint32
entry_index_start(const DlockStatsEntry *e)
{
	return index_start(stats_hash(e->r.dbid, e->r.key, e->r.mode));
}

static inline DlockStatsEntry *
part_entry(int p, int i)
{
	return &stats_entries[p * stats->cap + i];
}

static inline int32 *
part_index(int p)
{
	return &stats_index[(Size) p * (stats->index_mask + 1)];
}

/* The entry of (dbid, key, mode) in part p, or -1; the part's lock is held. */
static int
part_find(int p, uint32 h, Oid dbid, int64 key, uint8 mode)
{
	int32	   *index = part_index(p);
	uint32		i = index_start(h);

	for (;;)
	{
		int32		x = index[i];
		DlockStatsEntry *e;

		if (x < 0)
			return -1;
		e = part_entry(p, x);
		if (e->r.key == key && e->r.dbid == dbid && e->r.mode == mode)
			return x;
		i = (i + 1) & stats->index_mask;
	}
}

static void
index_add(int p, int x)
{
	int32	   *index = part_index(p);
	DlockStatsEntry *e = part_entry(p, x);
	uint32		i = entry_index_start(e);

	while (index[i] >= 0)
		i = (i + 1) & stats->index_mask;
	index[i] = x;
}

/* Take entry x out of part p's index, moving later entries of its run back. */
static void
index_remove(int p, int x)
{
	int32	   *index = part_index(p);
	uint32		mask = stats->index_mask;
	DlockStatsEntry *e = part_entry(p, x);
	uint32		i = entry_index_start(e);
	uint32		j;

	while (index[i] >= 0 && index[i] != x)
		i = (i + 1) & mask;
	if (index[i] < 0)
		return;
	j = i;
	for (;;)
	{
		uint32		home;
		DlockStatsEntry *o;

		j = (j + 1) & mask;
		if (index[j] < 0)
			break;
		o = part_entry(p, index[j]);
		home = entry_index_start(o);
		/* move j into the gap at i unless its home lies in (i, j] */
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
		{
			index[i] = index[j];
			i = j;
		}
	}
	index[i] = -1;
}

/* Drop entry x of part p (exclusive lock held), and from its index. */
static void
entry_remove(int p, int x)
{
	DlockStatsPart *part = &stats->parts[p];
	DlockStatsEntry *e = part_entry(p, x);

	index_remove(p, x);
	e->inuse = false;
	e->next_free = part->free_head;
	part->free_head = x;
	part->count--;
}

/*
 * Reorder r[0 .. n) so that its k lowest usages come first (Hoare's
 * selection: linear on average, where a sort would cost n log n on every
 * eviction).
 */
static void
select_lowest(UsageRank *r, int n, int k)
{
	int			lo = 0;
	int			hi = n - 1;

	while (lo < hi)
	{
		double		pivot = r[lo + (hi - lo) / 2].usage;
		int			i = lo;
		int			j = hi;

		while (i <= j)
		{
			while (r[i].usage < pivot)
				i++;
			while (r[j].usage > pivot)
				j--;
			if (i <= j)
			{
				UsageRank	t = r[i];

				r[i] = r[j];
				r[j] = t;
				i++;
				j--;
			}
		}
		/* r[lo .. j] <= pivot <= r[i .. hi] */
		if (k - 1 <= j)
			hi = j;
		else if (k - 1 >= i)
			lo = i;
		else
			return;
	}
}

/*
 * Part p is full (exclusive lock held): drop its least used entries, and
 * decay the usage of the rest.  Without memory to rank them (never in
 * practice), only the least used entry goes.
 */
static void
part_evict(int p)
{
	DlockStatsPart *part = &stats->parts[p];
	int			n = 0;
	int			drop = Max(1, stats->cap * DLOCK_STATS_EVICT_PERCENT / 100);
	int			i;

	if (ranks == NULL)
		ranks = MemoryContextAllocExtended(TopMemoryContext,
										   sizeof(UsageRank) * stats->cap,
										   MCXT_ALLOC_NO_OOM);
	if (ranks == NULL)
	{
		int			least = -1;

		for (i = 0; i < stats->cap; i++)
			if (part_entry(p, i)->inuse &&
				(least < 0 || part_entry(p, i)->r.c.usage < part_entry(p, least)->r.c.usage))
				least = i;
		if (least >= 0)
			entry_remove(p, least);
		part->evictions++;
		return;
	}
	for (i = 0; i < stats->cap; i++)
	{
		DlockStatsEntry *e = part_entry(p, i);

		if (!e->inuse)
			continue;
		ranks[n].usage = e->r.c.usage;
		ranks[n].entry = i;
		n++;
	}
	drop = Min(drop, n);
	select_lowest(ranks, n, drop);
	part->new_usage = 0;
	for (i = 0; i < drop; i++)
	{
		part->new_usage = Max(part->new_usage, ranks[i].usage);
		entry_remove(p, ranks[i].entry);
	}
	for (i = drop; i < n; i++)
		part_entry(p, ranks[i].entry)->r.c.usage *= DLOCK_STATS_DECAY;
	part->evictions += drop;
}

/* A new entry in part p (exclusive lock held, or alone at start-up). */
static DlockStatsEntry *
entry_new(int p, Oid dbid, int64 key, uint8 mode, const char *name, int namelen)
{
	DlockStatsPart *part = &stats->parts[p];
	DlockStatsEntry *e;
	int			x;

	if (part->count >= stats->cap)
		part_evict(p);
	x = part->free_head;
	if (x < 0)
		return NULL;			/* not reached: eviction made room */
	e = part_entry(p, x);
	part->free_head = e->next_free;
	part->count++;
	memset(&e->r, 0, sizeof(e->r));
	e->r.dbid = dbid;
	e->r.key = key;
	e->r.mode = mode;
	e->r.namelen = Min(namelen, DLOCK_NAME_MAX);
	memcpy(e->r.name, name, e->r.namelen);
	/* not the first to go at the next eviction, just for being new */
	e->r.c.usage = part->new_usage;
	e->inuse = true;
	index_add(p, x);
	return e;
}

/* Add a duration to a total and a maximum. */
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
			c->last_acquired = now;
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
	}
}

/* Add counts c (pending, or one event's) to the table's counters t. */
static void
merge_counts(DlockStatsCounters *t, const DlockStatsCounters *c)
{
	int			i;

	t->acquisitions += c->acquisitions;
	t->waited += c->waited;
	for (i = 0; i < 3; i++)
		t->scope[i] += c->scope[i];
	t->busy += c->busy;
	t->timeouts += c->timeouts;
	t->deadlocks += c->deadlocks;
	t->cancels += c->cancels;
	t->released += c->released;
	t->leases_expired += c->leases_expired;
	t->wait_time_total += c->wait_time_total;
	t->wait_time_max = Max(t->wait_time_max, c->wait_time_max);
	t->hold_time_total += c->hold_time_total;
	t->hold_time_max = Max(t->hold_time_max, c->hold_time_max);
	t->last_acquired = Max(t->last_acquired, c->last_acquired);
	t->usage += c->usage;
}

/* Add counts c of (dbid, key, mode) to the table. */
static void
add_to_table(Oid dbid, int64 key, uint8 mode, const char *name, int namelen,
			 const DlockStatsCounters *c)
{
	uint32		h;
	int			p;
	int			x;
	DlockStatsEntry *e;

	h = stats_hash(dbid, key, mode);
	p = h % DLOCK_STATS_PARTS;
	LWLockAcquire(stats->parts[p].lock, LW_SHARED);
	/* a process stalled or killed with a part lock held */
	DLOCK_FAULT("stats.flush");
	x = part_find(p, h, dbid, key, mode);
	if (x >= 0)
	{
		e = part_entry(p, x);
		SpinLockAcquire(&e->mutex);
		merge_counts(&e->r.c, c);
		SpinLockRelease(&e->mutex);
		LWLockRelease(stats->parts[p].lock);
		return;
	}
	LWLockRelease(stats->parts[p].lock);

	/* a name new to its part: insert it (someone may have meanwhile) */
	LWLockAcquire(stats->parts[p].lock, LW_EXCLUSIVE);
	x = part_find(p, h, dbid, key, mode);
	e = x >= 0 ? part_entry(p, x) : entry_new(p, dbid, key, mode, name, namelen);
	if (e != NULL)
	{
		SpinLockAcquire(&e->mutex);
		merge_counts(&e->r.c, c);
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(stats->parts[p].lock);
}

/* ---- a backend's pending counts ---- */

#define DLOCK_STATS_PENDING 64
#define PENDING_INDEX (DLOCK_STATS_PENDING * 2)

static DlockStatsRecord pending[DLOCK_STATS_PENDING];
static bool pending_on = false;	/* false: count into the table */
static int	npending = 0;
static int16 pending_index[PENDING_INDEX];	/* -1: empty */

/* A regular backend counts into pending counts from now on. */
void
dlock_stats_backend_setup(void)
{
	if (stats == NULL || MyBackendType != B_BACKEND || pending_on)
		return;
	memset(pending_index, -1, sizeof(pending_index));
	npending = 0;
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

		add_to_table(r->dbid, r->key, r->mode, r->name, r->namelen, &r->c);
	}
	npending = 0;
	memset(pending_index, -1, sizeof(pending_index));
}

/* The pending counts of (dbid, key, mode), started if need be. */
static DlockStatsCounters *
pending_counts(Oid dbid, int64 key, uint8 mode, const char *name, int namelen)
{
	uint32		i = stats_hash(dbid, key, mode) % PENDING_INDEX;
	DlockStatsRecord *r;

	for (;;)
	{
		int			x = pending_index[i];

		if (x < 0)
			break;
		r = &pending[x];
		if (r->key == key && r->dbid == dbid && r->mode == mode)
			return &r->c;
		i = (i + 1) % PENDING_INDEX;
	}
	if (npending == DLOCK_STATS_PENDING)
	{
		dlock_stats_flush();
		return pending_counts(dbid, key, mode, name, namelen);
	}
	r = &pending[npending];
	pending_index[i] = npending++;
	memset(&r->c, 0, sizeof(r->c));
	r->dbid = dbid;
	r->key = key;
	r->mode = mode;
	r->namelen = Min(namelen, DLOCK_NAME_MAX);
	memcpy(r->name, name, r->namelen);
	return &r->c;
}

/*
 * Count one event of (dbid, key, mode).  us: ACQUIRED the wait (-1: none),
 * TIMEOUT/DEADLOCK/CANCEL the wait, RELEASED the hold.  now: ACQUIRED only
 * (0: take the time here).
 */
void
dlock_stats_count_event(Oid dbid, int64 key, uint8 mode, const char *name, int namelen,
						DlockStatEvent ev, int scope, int64 us, TimestampTz now)
{
	DlockStatsCounters one;

	if (stats == NULL)
		return;
	if (ev == DLOCK_STAT_ACQUIRED && now == 0)
		now = GetCurrentTimestamp();
	if (pending_on)
	{
		count_event(pending_counts(dbid, key, mode, name, namelen), ev, scope, us, now);
		return;
	}
	memset(&one, 0, sizeof(one));
	count_event(&one, ev, scope, us, now);
	add_to_table(dbid, key, mode, name, namelen, &one);
}

/* A hold of this backend's entry ended now. */
void
dlock_stats_hold_ended(const DlockEntry *e)
{
	if (!e->counted || stats == NULL)
		return;
	dlock_stats_count_event(MyDatabaseId, e->key, e->mode, e->name, e->namelen,
							DLOCK_STAT_RELEASED, 0,
							GetCurrentTimestamp() - e->since, 0);
}

/* ---- shared memory, and the file ---- */

static void stats_shutdown(int code, Datum arg);
static void stats_load(void);

void
dlock_stats_shmem_init(void)
{
	bool		found;
	int			p;
	int			i;
	LWLockPadded *locks;

	stats = ShmemInitStruct("dlock stats", dlock_stats_shmem_size(), &found);
	stats_entries = (DlockStatsEntry *) ((char *) stats + MAXALIGN(sizeof(DlockStatsShared)));
	if (!found)
	{
		stats->cap = stats_cap();
		stats->index_mask = stats_index_size() - 1;
	}
	stats_index = (int32 *) &stats_entries[(Size) stats->cap * DLOCK_STATS_PARTS];
	if (found)
		return;

	SpinLockInit(&stats->reset_lock);
	stats->stats_reset = GetCurrentTimestamp();
	locks = GetNamedLWLockTranche("dlock stats");
	for (p = 0; p < DLOCK_STATS_PARTS; p++)
	{
		DlockStatsPart *part = &stats->parts[p];

		part->lock = &locks[p].lock;
		part->count = 0;
		part->evictions = 0;
		part->new_usage = 0;
		part->free_head = -1;
		for (i = stats->cap - 1; i >= 0; i--)
		{
			DlockStatsEntry *e = part_entry(p, i);

			SpinLockInit(&e->mutex);
			e->inuse = false;
			e->next_free = part->free_head;
			part->free_head = i;
		}
		for (i = 0; i <= (int) stats->index_mask; i++)
			part_index(p)[i] = -1;
	}

	/* in the postmaster: read what the last clean shutdown kept, save at exit */
	if (!IsUnderPostmaster)
	{
		stats_load();
		on_shmem_exit(stats_shutdown, (Datum) 0);
	}
}

void
dlock_stats_shmem_request(void)
{
	RequestNamedLWLockTranche("dlock stats", DLOCK_STATS_PARTS);
}

typedef struct DlockStatsFileHeader
{
	uint32		magic;
	uint32		record_size;
	int64		evictions;
	TimestampTz stats_reset;
	int32		count;
} DlockStatsFileHeader;

static void
stats_load(void)
{
	FILE	   *file;
	DlockStatsFileHeader hdr;
	DlockStatsRecord rec;
	int			i;
	int			loaded = 0;

	file = AllocateFile(DLOCK_STATS_FILE, PG_BINARY_R);
	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", DLOCK_STATS_FILE)));
		return;
	}
	if (fread(&hdr, sizeof(hdr), 1, file) != 1 ||
		hdr.magic != DLOCK_STATS_MAGIC || hdr.record_size != sizeof(DlockStatsRecord) ||
		hdr.count < 0)
	{
		ereport(LOG,
				(errmsg("ignoring dlock statistics file \"%s\": not written by this version of dlock",
						DLOCK_STATS_FILE)));
		goto done;
	}
	stats->stats_reset = hdr.stats_reset;
	stats->parts[0].evictions = hdr.evictions;
	for (i = 0; i < hdr.count; i++)
	{
		DlockStatsEntry *e;
		int			p;

		if (fread(&rec, sizeof(rec), 1, file) != 1)
		{
			ereport(LOG,
					(errmsg("dlock statistics file \"%s\" is truncated; kept %d of %d entries",
							DLOCK_STATS_FILE, loaded, hdr.count)));
			break;
		}
		if (rec.namelen > DLOCK_NAME_MAX || rec.mode > DLOCK_SHARED)
			continue;
		p = stats_hash(rec.dbid, rec.key, rec.mode) % DLOCK_STATS_PARTS;
		/* dlock.max_stats may have been lowered: the rest does not fit */
		if (stats->parts[p].count >= stats->cap ||
			part_find(p, stats_hash(rec.dbid, rec.key, rec.mode), rec.dbid, rec.key, rec.mode) >= 0)
			continue;
		e = entry_new(p, rec.dbid, rec.key, rec.mode, rec.name, rec.namelen);
		if (e != NULL)
		{
			e->r.c = rec.c;
			if (!(e->r.c.usage >= 0 && e->r.c.usage < 1e300))	/* NaN too */
				e->r.c.usage = 0;
			loaded++;
		}
	}
done:
	FreeFile(file);
	/* read once: after a crash the statistics start empty */
	if (unlink(DLOCK_STATS_FILE) != 0)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not remove file \"%s\": %m", DLOCK_STATS_FILE)));
}

/* Did the server just shut down cleanly (a shutdown checkpoint)? */
static bool
clean_shutdown(void)
{
	volatile bool clean = false;

	PG_TRY();
	{
		bool		crc_ok;
		ControlFileData *cf = get_controlfile(DataDir, &crc_ok);

		clean = crc_ok && (cf->state == DB_SHUTDOWNED ||
						   cf->state == DB_SHUTDOWNED_IN_RECOVERY);
		pfree(cf);
	}
	PG_CATCH();
	{
		/* unreadable: as after a crash, nothing is kept */
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
	return clean;
}

/* At postmaster exit: write the table, unless it was a crash or immediate stop. */
static void
stats_shutdown(int code, Datum arg)
{
	FILE	   *file;
	DlockStatsFileHeader hdr;
	int			p;
	int			i;

	if (code != 0 || stats == NULL || !clean_shutdown())
		return;
	file = AllocateFile(DLOCK_STATS_FILE ".tmp", PG_BINARY_W);
	if (file == NULL)
		goto error;
	memset(&hdr, 0, sizeof(hdr));
	hdr.magic = DLOCK_STATS_MAGIC;
	hdr.record_size = sizeof(DlockStatsRecord);
	hdr.stats_reset = stats->stats_reset;
	for (p = 0; p < DLOCK_STATS_PARTS; p++)
	{
		hdr.evictions += stats->parts[p].evictions;
		hdr.count += stats->parts[p].count;
	}
	if (fwrite(&hdr, sizeof(hdr), 1, file) != 1)
		goto error;
	for (p = 0; p < DLOCK_STATS_PARTS; p++)
		for (i = 0; i < stats->cap; i++)
		{
			DlockStatsEntry *e = part_entry(p, i);

			if (e->inuse && fwrite(&e->r, sizeof(e->r), 1, file) != 1)
				goto error;
		}
	if (FreeFile(file) != 0)
	{
		file = NULL;
		goto error;
	}
	(void) durable_rename(DLOCK_STATS_FILE ".tmp", DLOCK_STATS_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", DLOCK_STATS_FILE ".tmp")));
	if (file)
		FreeFile(file);
	unlink(DLOCK_STATS_FILE ".tmp");
}

/* ---- SQL ---- */

static void
require_stats(void)
{
	dlock_require_preload("Lock statistics are kept in shared memory.");
}

#define DLOCK_STATS_COLS 21

/* dlock_stats(): every entry, copied part by part */
Datum
dlock_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DlockStatsRecord *copy;
	int			p;

	require_stats();
	dlock_stats_flush();		/* this session's own counts, too */
	InitMaterializedSRF(fcinfo, 0);
	dlock_database_names_reset();
	copy = palloc(sizeof(DlockStatsRecord) * stats->cap);
	for (p = 0; p < DLOCK_STATS_PARTS; p++)
	{
		int			n = 0;
		int			i;

		LWLockAcquire(stats->parts[p].lock, LW_SHARED);
		for (i = 0; i < stats->cap; i++)
		{
			DlockStatsEntry *e = part_entry(p, i);

			if (!e->inuse)
				continue;
			/* the key and name do not change under the shared lock */
			memcpy(&copy[n], &e->r, offsetof(DlockStatsRecord, c));
			memcpy(copy[n].name, e->r.name, e->r.namelen);
			SpinLockAcquire(&e->mutex);
			copy[n].c = e->r.c;
			SpinLockRelease(&e->mutex);
			n++;
		}
		LWLockRelease(stats->parts[p].lock);

		for (i = 0; i < n; i++)
		{
			DlockStatsRecord *r = &copy[i];
			DlockStatsCounters *c = &r->c;
			Datum		values[DLOCK_STATS_COLS];
			bool		nulls[DLOCK_STATS_COLS];
			int			k = 0;

			memset(nulls, 0, sizeof(nulls));
			values[k] = dlock_database_name(r->dbid, false, &nulls[k]);
			k++;
			values[k] = dlock_name_datum(r->name, r->namelen, &nulls[k]);
			k++;
			values[k++] = Int64GetDatum(r->key);
			values[k++] = CStringGetTextDatum(r->mode == DLOCK_SHARED ? "shared" : "exclusive");
			values[k++] = Int64GetDatum(c->acquisitions);
			values[k++] = Int64GetDatum(c->acquisitions - c->waited);
			values[k++] = Int64GetDatum(c->waited);
			values[k++] = Int64GetDatum(c->scope[DLOCK_SCOPE_SESSION]);
			values[k++] = Int64GetDatum(c->scope[DLOCK_SCOPE_XACT]);
			values[k++] = Int64GetDatum(c->scope[DLOCK_SCOPE_DETACHED]);
			values[k++] = Int64GetDatum(c->busy);
			values[k++] = Int64GetDatum(c->timeouts);
			values[k++] = Int64GetDatum(c->deadlocks);
			values[k++] = Int64GetDatum(c->cancels);
			values[k++] = dlock_interval_datum(c->wait_time_total);
			values[k++] = dlock_interval_datum(c->wait_time_max);
			values[k++] = Int64GetDatum(c->released);
			values[k++] = dlock_interval_datum(c->hold_time_total);
			values[k++] = dlock_interval_datum(c->hold_time_max);
			values[k++] = Int64GetDatum(c->leases_expired);
			values[k] = TimestampTzGetDatum(c->last_acquired);
			nulls[k] = (c->last_acquired == 0);
			k++;
			Assert(k == DLOCK_STATS_COLS);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	pfree(copy);
	return (Datum) 0;
}

/* dlock_stats_info(): evictions, last reset, entries in use and the bound */
Datum
dlock_stats_info(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	int64		evictions = 0;
	int			entries = 0;
	int			p;

	require_stats();
	dlock_stats_flush();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	for (p = 0; p < DLOCK_STATS_PARTS; p++)
	{
		LWLockAcquire(stats->parts[p].lock, LW_SHARED);
		evictions += stats->parts[p].evictions;
		entries += stats->parts[p].count;
		LWLockRelease(stats->parts[p].lock);
	}
	values[0] = Int64GetDatum(evictions);
	SpinLockAcquire(&stats->reset_lock);
	values[1] = TimestampTzGetDatum(stats->stats_reset);
	SpinLockRelease(&stats->reset_lock);
	values[2] = Int32GetDatum(entries);
	values[3] = Int32GetDatum(stats->cap * DLOCK_STATS_PARTS);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * dlock_stats_reset(): forget every entry (and the evictions; the reset
 * time is now).  dlock_stats_reset(name), strict: the entries of one name in
 * this database, in both modes.
 */
Datum
dlock_stats_reset(PG_FUNCTION_ARGS)
{
	int			p;

	require_stats();
	dlock_stats_flush();		/* what this session counted is reset too */
	if (PG_NARGS() == 0)
	{
		for (p = 0; p < DLOCK_STATS_PARTS; p++)
		{
			int			i;

			LWLockAcquire(stats->parts[p].lock, LW_EXCLUSIVE);
			for (i = 0; i < stats->cap; i++)
				if (part_entry(p, i)->inuse)
					entry_remove(p, i);
			stats->parts[p].evictions = 0;
			stats->parts[p].new_usage = 0;
			LWLockRelease(stats->parts[p].lock);
		}
		SpinLockAcquire(&stats->reset_lock);
		stats->stats_reset = GetCurrentTimestamp();
		SpinLockRelease(&stats->reset_lock);
	}
	else
	{
		DlockName	name;
		uint8		mode;

		dlock_name_arg(fcinfo, 0, &name);
		for (mode = DLOCK_EXCLUSIVE; mode <= DLOCK_SHARED; mode++)
		{
			uint32		h = stats_hash(MyDatabaseId, name.key, mode);
			int			x;

			p = h % DLOCK_STATS_PARTS;
			LWLockAcquire(stats->parts[p].lock, LW_EXCLUSIVE);
			x = part_find(p, h, MyDatabaseId, name.key, mode);
			if (x >= 0)
				entry_remove(p, x);
			LWLockRelease(stats->parts[p].lock);
		}
	}
	PG_RETURN_VOID();
}
