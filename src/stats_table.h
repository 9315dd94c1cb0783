/*
 * stats_table.h: the statistics table in shared memory (stats_table.c),
 * for the files that count into it (stats.c), keep it across a restart
 * (stats_file.c) and show it (view_stats.c).
 *
 * The table is split into DLOCK_STATS_PARTS parts by a hash of (database,
 * key, mode), each with its own LWLock, its own share of dlock.max_stats
 * entries and an open-addressing index.  A part's entries are read and
 * changed under its lock (shared: the counters, under each entry's
 * spinlock; exclusive: adding and removing entries).  Each entry has an
 * owner, the role whose count made it, so that one role cannot push the
 * entries of others out (dlock_stats_role_share).
 */
#ifndef DLOCK_STATS_TABLE_H
#define DLOCK_STATS_TABLE_H

#include "datatype/timestamp.h"
#include "storage/lwlock.h"
#include "storage/spin.h"

#define DLOCK_STATS_PARTS 32

typedef struct DlockStatsCounters
{
	int64		acquisitions;
	int64		waited;
	int64		scope[3];		/* DLOCK_SCOPE_* (stats.h) */
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
	int64		force_released; /* (1.6) */
} DlockStatsCounters;

/*
 * What identifies an entry, and what is written to the file for it: a change
 * here needs a new DLOCK_STATS_MAGIC (stats_file.c), as the file is read
 * back by size only.
 */
typedef struct DlockStatsRecord
{
	Oid			dbid;
	uint8		mode;
	uint8		pad;
	uint16		namelen;
	Oid			owner;			/* the role whose count made the entry (the
								 * session's user, or the role code of another
								 * runs as); InvalidOid: nobody's (counted by
								 * several roles, or not known): whose share of
								 * the part it takes */
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

extern DlockStatsShared *dlock_stats_tab;	/* NULL: not preloaded */
extern DlockStatsEntry *dlock_stats_entries;
extern int	dlock_max_stats;

extern Size dlock_stats_shmem_size(void);
extern void dlock_stats_shmem_request(void);
extern bool dlock_stats_shmem_init(void);

static inline uint32
dlock_stats_hash(Oid dbid, int64 key, uint8 mode)
{
	/* keys are SHA-256 bits already; the multiply mixes in the rest */
	return (uint32) ((((uint64) key ^ ((uint64) dbid << 1) ^ mode) *
					  UINT64CONST(0x9E3779B97F4A7C15)) >> 32);
}

/* Entry i of part p. */
static inline DlockStatsEntry *
dlock_stats_entry(int p, int i)
{
	return &dlock_stats_entries[p * dlock_stats_tab->cap + i];
}

extern int	dlock_stats_find(int p, uint32 h, Oid dbid, int64 key, uint8 mode);
extern DlockStatsEntry *dlock_stats_entry_new(int p, Oid dbid, int64 key, uint8 mode,
											  const char *name, int namelen, Oid owner);
extern void dlock_stats_entry_remove(int p, int x);
extern void dlock_stats_add(Oid dbid, int64 key, uint8 mode, const char *name, int namelen,
							Oid owner, const DlockStatsCounters *c);

/*
 * A role's share of each part: while it owns fewer entries of a part, its
 * new names may push out entries of the roles that own more than theirs;
 * beyond it, only its own (stats_table.c).
 */
#define DLOCK_STATS_ROLE_SHARE_DIV 8

static inline int
dlock_stats_role_share(int cap)
{
	return Max(1, cap / DLOCK_STATS_ROLE_SHARE_DIV);
}

#endif							/* DLOCK_STATS_TABLE_H */
