/*
 * slots.h: the per-backend slots in shared memory (slots.c).
 *
 * Each backend owns one slot (by its process number) and is its only
 * writer (entries.c); the view and the reaper read every slot, copying it
 * under its change counter (changecount.h).  A slot remembers the name,
 * mode, scope, start, lease and fencing token of each lock its backend holds
 * or awaits, up to dlock.max_locks_per_session of them.
 *
 * The slots are the part of shared memory every other part goes with: they
 * exist exactly when the library was preloaded (dlock_preloaded).
 */
#ifndef DLOCK_SLOTS_H
#define DLOCK_SLOTS_H

#include "datatype/timestamp.h"
#include "port/atomics.h"

/* DlockEntry.waiting: what an entry is waiting for, if anything */
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
								 * and why (dlock_token_none_detail) */
	int32		nsession;		/* session-scope holds (re-entrant count) */
	int32		nxact;			/* transaction-scope holds */
	uint8		inuse;
	uint8		mode;			/* DlockMode */
	uint8		waiting;		/* DLOCK_WAIT_* */
	uint8		counted;		/* its acquisition was counted in dlock_stats,
								 * so its end is too */
	uint8		foreign;		/* a hold of it was taken by code running as
								 * another role (name.h dlock_code_is_foreign):
								 * it gets no lease (locks.c) */
	uint8		precise;		/* since is from the precise clock (a wait, a
								 * lease), and so is the hold's end
								 * (entries.h dlock_hold_time) */
	uint8		notify;			/* taken with notify => true: its events are
								 * announced (notify.c, 1.7) */
	uint16		namelen;
	uint16		infolen;		/* 0: no info */
	uint16		permit;			/* the semaphore permit held (1..); 0: the
								 * name's own lock, not taken as a permit */
	uint16		permits;		/* the N of the call that began the hold
								 * (permits => N); 0: a lock */
	char		name[DLOCK_NAME_MAX];	/* UTF-8, not terminated */
	char		info[DLOCK_INFO_MAX];	/* the holder's word, UTF-8, not
										 * terminated */
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

/* The part of shared memory: this header, then nslots slots. */
typedef struct DlockSlots
{
	int			nslots;			/* MaxBackends */
	int			entries_per_slot;	/* dlock.max_locks_per_session */
	Size		slot_size;
} DlockSlots;

extern DlockSlots *dlock_slots;
extern int	dlock_max_locks_per_session;

/* Is shared memory there (the library was preloaded)? */
static inline bool
dlock_preloaded(void)
{
	return dlock_slots != NULL;
}

extern void dlock_require_preload(const char *detail);
extern Size dlock_slots_shmem_size(void);
extern void dlock_slots_shmem_init(void);
extern DlockSlot *dlock_slot(int i);
extern bool dlock_slot_read(DlockSlot *src, DlockSlot *copy, int limit);
extern int	dlock_slot_read_entries(DlockSlot *src, DlockEntry *buf, int cap, int *pid,
									Oid *dbid);

#endif							/* DLOCK_SLOTS_H */
