/*
 * stats_table.c: the statistics table in shared memory (stats_table.h),
 * one entry per database, name and mode (the dlock_stats view).
 *
 * Counting an event takes the part's lock in shared mode, finds the entry
 * and changes it under the entry's spinlock (as pg_stat_statements does);
 * only a name the part has not seen takes the part's lock exclusively.  So
 * there is no lock that every lock call takes, and two names in different
 * parts never meet.
 *
 * Eviction, per part: when a new name finds its part full, up to
 * DLOCK_STATS_EVICT_PERCENT of the part's entries with the lowest usage are
 * dropped, and every remaining usage is decayed by DLOCK_STATS_DECAY.  Each
 * event adds 1 to its entry's usage, so what goes is what was least used
 * lately (doc/monitoring.md).  Which entries may go depends on who
 * asks (the owner of the new entry, the session's user): a role that owns
 * its share of the part (dlock_stats_role_share) or more drops only its
 * own; one that owns less drops those of the roles that own more than
 * their share, and the least used of all only when no role does.  So the
 * names of one role, however many and however chosen for one part, push
 * out at most a share of another role's entries (doc/security.md).
 *
 * Invariant: nothing here raises an error or allocates on the counting
 * path; an event that cannot be counted (never: the table makes room) is
 * dropped, never a reason for a lock call to fail.
 *
 * Layer 3 of the map in dlock.h (mechanisms): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "stats_table.h"

#define DLOCK_STATS_EVICT_PERCENT 5
#define DLOCK_STATS_DECAY 0.99

int			dlock_max_stats = 5000;

DlockStatsShared *dlock_stats_tab = NULL;
DlockStatsEntry *dlock_stats_entries;
static int32 *dlock_stats_index;

/* per process, for eviction: (usage, entry) pairs of one part */
typedef struct UsageRank
{
	double		usage;
	int			entry;
} UsageRank;
static UsageRank *ranks = NULL;

/* per process, for eviction: the owners of one part's entries, sorted */
static Oid *owners = NULL;

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
index_start(uint32 h)
{
	return (h / DLOCK_STATS_PARTS) & dlock_stats_tab->index_mask;
}

/* ... and where entry e's does. */
static inline uint32
entry_index_start(const DlockStatsEntry *e)
{
	return index_start(dlock_stats_hash(e->r.dbid, e->r.key, e->r.mode));
}

static inline int32 *
part_index(int p)
{
	return &dlock_stats_index[(Size) p * (dlock_stats_tab->index_mask + 1)];
}

/* The entry of (dbid, key, mode) in part p, or -1; the part's lock is held. */
int
dlock_stats_find(int p, uint32 h, Oid dbid, int64 key, uint8 mode)
{
	int32	   *index = part_index(p);
	uint32		i = index_start(h);

	for (;;)
	{
		int32		x = index[i];
		DlockStatsEntry *e;

		if (x < 0)
			return -1;
		e = dlock_stats_entry(p, x);
		if (e->r.key == key && e->r.dbid == dbid && e->r.mode == mode)
			return x;
		i = (i + 1) & dlock_stats_tab->index_mask;
	}
}

static void
index_add(int p, int x)
{
	int32	   *index = part_index(p);
	DlockStatsEntry *e = dlock_stats_entry(p, x);
	uint32		i = entry_index_start(e);

	while (index[i] >= 0)
		i = (i + 1) & dlock_stats_tab->index_mask;
	index[i] = x;
}

/* Take entry x out of part p's index, moving later entries of its run back. */
static void
index_remove(int p, int x)
{
	int32	   *index = part_index(p);
	uint32		mask = dlock_stats_tab->index_mask;
	DlockStatsEntry *e = dlock_stats_entry(p, x);
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
		o = dlock_stats_entry(p, index[j]);
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
void
dlock_stats_entry_remove(int p, int x)
{
	DlockStatsPart *part = &dlock_stats_tab->parts[p];
	DlockStatsEntry *e = dlock_stats_entry(p, x);

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

static int
oid_cmp(const void *a, const void *b)
{
	Oid			x = *(const Oid *) a;
	Oid			y = *(const Oid *) b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/* Does role own more than its share of part p?  (owners: the part's, sorted) */
static bool
over_share(const Oid *sorted, int n, Oid role, int share)
{
	int			lo = 0;
	int			hi = n;
	int			count = 0;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (sorted[mid] < role)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo < n && sorted[lo] == role && count <= share)
		lo++, count++;
	return count > share;
}

/*
 * Part p is full (exclusive lock held) and owner needs an entry: drop the
 * least used entries that owner may push out (above), and decay the usage
 * of the rest.  Without memory to rank them (never in practice), only the
 * least used entry that may go goes.
 */
static void
part_evict(int p, Oid owner)
{
	DlockStatsPart *part = &dlock_stats_tab->parts[p];
	int			cap = dlock_stats_tab->cap;
	int			share = dlock_stats_role_share(cap);
	int			n = 0;
	int			nowners = 0;
	int			drop = Max(1, cap * DLOCK_STATS_EVICT_PERCENT / 100);
	int			victims;			/* 0: owner's own; 1: over-share roles'; 2: any */
	bool		only_owner = true;
	int			i;

	if (ranks == NULL)
		ranks = MemoryContextAllocExtended(TopMemoryContext, sizeof(UsageRank) * cap,
										   MCXT_ALLOC_NO_OOM);
	if (owners == NULL)
		owners = MemoryContextAllocExtended(TopMemoryContext, sizeof(Oid) * cap,
											MCXT_ALLOC_NO_OOM);
	if (ranks == NULL || owners == NULL)
	{
		/* only the owner's own least used entry, or else any */
		int			least = -1;

		for (int pass = 0; pass < 2 && least < 0; pass++)
			for (i = 0; i < cap; i++)
			{
				DlockStatsEntry *e = dlock_stats_entry(p, i);

				if (e->inuse && (pass == 1 || e->r.owner == owner) &&
					(least < 0 || e->r.c.usage < dlock_stats_entry(p, least)->r.c.usage))
					least = i;
			}
		if (least >= 0)
			dlock_stats_entry_remove(p, least);
		part->evictions++;
		return;
	}
	for (i = 0; i < cap; i++)
	{
		DlockStatsEntry *e = dlock_stats_entry(p, i);

		if (e->inuse)
		{
			owners[nowners++] = e->r.owner;
			only_owner &= (e->r.owner == owner);
		}
	}
	/*
	 * Owns its share: its own entries go.  (The usual case, a part of one
	 * role's entries alone, needs no sorting of the roles.)
	 */
	if (only_owner)
		victims = nowners > share - 1 ? 0 : 2;
	else
	{
		qsort(owners, nowners, sizeof(Oid), oid_cmp);
		victims = over_share(owners, nowners, owner, share - 1) ? 0 : -1;
	}
	if (victims < 0)
	{
		victims = 2;
		for (i = 0; i < nowners; i++)
			if ((i == 0 || owners[i] != owners[i - 1]) && owners[i] != owner &&
				over_share(owners, nowners, owners[i], share))
			{
				victims = 1;
				break;
			}
	}
	for (i = 0; i < cap; i++)
	{
		DlockStatsEntry *e = dlock_stats_entry(p, i);

		if (!e->inuse)
			continue;
		if (victims == 0 ? e->r.owner != owner :
			victims == 1 ? (e->r.owner == owner ||
							!over_share(owners, nowners, e->r.owner, share)) : false)
		{
			/* stays; its usage decays below */
			e->r.c.usage *= DLOCK_STATS_DECAY;
			continue;
		}
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
		dlock_stats_entry_remove(p, ranks[i].entry);
	}
	for (i = drop; i < n; i++)
		dlock_stats_entry(p, ranks[i].entry)->r.c.usage *= DLOCK_STATS_DECAY;
	part->evictions += drop;
}

/* A new entry in part p (exclusive lock held, or alone at start-up). */
DlockStatsEntry *
dlock_stats_entry_new(int p, Oid dbid, int64 key, uint8 mode, const char *name, int namelen,
					  Oid owner)
{
	DlockStatsPart *part = &dlock_stats_tab->parts[p];
	DlockStatsEntry *e;
	int			x;

	if (part->count >= dlock_stats_tab->cap)
		part_evict(p, owner);
	x = part->free_head;
	if (x < 0)
		return NULL;			/* not reached: eviction made room */
	e = dlock_stats_entry(p, x);
	part->free_head = e->next_free;
	part->count++;
	memset(&e->r, 0, sizeof(e->r));
	e->r.dbid = dbid;
	e->r.key = key;
	e->r.mode = mode;
	e->r.owner = owner;
	e->r.namelen = Min(namelen, DLOCK_NAME_MAX);
	memcpy(e->r.name, name, e->r.namelen);
	/* not the first to go at the next eviction, just for being new */
	e->r.c.usage = part->new_usage;
	e->inuse = true;
	index_add(p, x);
	return e;
}

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
	t->force_released += c->force_released;
	t->wait_time_total += c->wait_time_total;
	t->wait_time_max = Max(t->wait_time_max, c->wait_time_max);
	t->hold_time_total += c->hold_time_total;
	t->hold_time_max = Max(t->hold_time_max, c->hold_time_max);
	t->last_acquired = Max(t->last_acquired, c->last_acquired);
	t->usage += c->usage;
}

/* Add counts c of (dbid, key, mode) to the table; owner: of a new entry. */
void
dlock_stats_add(Oid dbid, int64 key, uint8 mode, const char *name, int namelen, Oid owner,
				const DlockStatsCounters *c)
{
	uint32		h;
	int			p;
	int			x;
	DlockStatsEntry *e;

	h = dlock_stats_hash(dbid, key, mode);
	p = h % DLOCK_STATS_PARTS;
	LWLockAcquire(dlock_stats_tab->parts[p].lock, LW_SHARED);
	/* a process stalled or killed with a part lock held */
	DLOCK_FAULT("stats.flush");
	x = dlock_stats_find(p, h, dbid, key, mode);
	if (x >= 0)
	{
		e = dlock_stats_entry(p, x);
		SpinLockAcquire(&e->mutex);
		merge_counts(&e->r.c, c);
		/* counted by two roles: nobody's (no role's own to push out) */
		if (e->r.owner != owner)
			e->r.owner = InvalidOid;
		SpinLockRelease(&e->mutex);
		LWLockRelease(dlock_stats_tab->parts[p].lock);
		return;
	}
	LWLockRelease(dlock_stats_tab->parts[p].lock);

	/* a name new to its part: insert it (someone may have meanwhile) */
	LWLockAcquire(dlock_stats_tab->parts[p].lock, LW_EXCLUSIVE);
	x = dlock_stats_find(p, h, dbid, key, mode);
	e = x >= 0 ? dlock_stats_entry(p, x) :
		dlock_stats_entry_new(p, dbid, key, mode, name, namelen, owner);
	if (e != NULL)
	{
		SpinLockAcquire(&e->mutex);
		merge_counts(&e->r.c, c);
		if (e->r.owner != owner)
			e->r.owner = InvalidOid;
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(dlock_stats_tab->parts[p].lock);
}

/*
 * At start-up, with AddinShmemInitLock held (shmem.c); true if the table
 * was made here (empty), false if it was there already.
 */
bool
dlock_stats_shmem_init(void)
{
	bool		found;
	int			p;
	int			i;
	LWLockPadded *locks;

	dlock_stats_tab = ShmemInitStruct("dlock stats", dlock_stats_shmem_size(), &found);
	dlock_stats_entries = (DlockStatsEntry *) ((char *) dlock_stats_tab + MAXALIGN(sizeof(DlockStatsShared)));
	if (!found)
	{
		dlock_stats_tab->cap = stats_cap();
		dlock_stats_tab->index_mask = stats_index_size() - 1;
	}
	dlock_stats_index = (int32 *) &dlock_stats_entries[(Size) dlock_stats_tab->cap * DLOCK_STATS_PARTS];
	if (found)
		return false;

	SpinLockInit(&dlock_stats_tab->reset_lock);
	dlock_stats_tab->stats_reset = GetCurrentTimestamp();
	locks = GetNamedLWLockTranche("dlock stats");
	for (p = 0; p < DLOCK_STATS_PARTS; p++)
	{
		DlockStatsPart *part = &dlock_stats_tab->parts[p];

		part->lock = &locks[p].lock;
		part->count = 0;
		part->evictions = 0;
		part->new_usage = 0;
		part->free_head = -1;
		for (i = dlock_stats_tab->cap - 1; i >= 0; i--)
		{
			DlockStatsEntry *e = dlock_stats_entry(p, i);

			SpinLockInit(&e->mutex);
			e->inuse = false;
			e->next_free = part->free_head;
			part->free_head = i;
		}
		for (i = 0; i <= (int) dlock_stats_tab->index_mask; i++)
			part_index(p)[i] = -1;
	}
	return true;
}

void
dlock_stats_shmem_request(void)
{
	RequestNamedLWLockTranche("dlock stats", DLOCK_STATS_PARTS);
}
