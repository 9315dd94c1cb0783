/*
 * stats.h: counting lock events for dlock_stats (stats.c): what the lock
 * paths and the processes call.
 */
#ifndef DLOCK_STATS_H
#define DLOCK_STATS_H

#include "datatype/timestamp.h"

#include "slots.h"

typedef enum DlockStatEvent
{
	DLOCK_STAT_ACQUIRED,		/* us: the wait, -1 if granted at once */
	DLOCK_STAT_BUSY,			/* not granted, no wait */
	DLOCK_STAT_TIMEOUT,			/* us: the wait */
	DLOCK_STAT_DEADLOCK,		/* us: the wait */
	DLOCK_STAT_CANCEL,			/* us: the wait */
	DLOCK_STAT_RELEASED,		/* us: the hold */
	DLOCK_STAT_EXPIRED,			/* a lease enforced */
	DLOCK_STAT_FORCED			/* a detached hold ended by an operator's
								 * override (dlock_force_release) */
} DlockStatEvent;

/* the scope of an acquisition */
#define DLOCK_SCOPE_SESSION		0
#define DLOCK_SCOPE_XACT		1
#define DLOCK_SCOPE_DETACHED	2

extern bool dlock_track_stats;
extern void dlock_stats_count_event(Oid dbid, int64 key, uint8 mode, const char *name,
									int namelen, DlockStatEvent ev, int scope, int64 us,
									TimestampTz now, Oid owner);
extern void dlock_stats_acquired(int64 key, uint8 mode, const char *name, int namelen,
								 int scope, int64 waited_us, TimestampTz now);
extern void dlock_stats_hold_ended(const DlockEntry *e);
extern void dlock_stats_backend_setup(void);
extern void dlock_stats_flush(void);

/* Are statistics kept and tracked? */
static inline bool
dlock_stats_tracking(void)
{
	return dlock_track_stats && dlock_preloaded();
}

/* Count an event, if statistics are kept and tracked. */
static inline void
dlock_stats_count(Oid dbid, int64 key, uint8 mode, const char *name, int namelen,
				  DlockStatEvent ev, int scope, int64 us, TimestampTz now)
{
	if (dlock_stats_tracking())
		dlock_stats_count_event(dbid, key, mode, name, namelen, ev, scope, us, now, InvalidOid);
}

/*
 * Count the end of a hold, or its lease's expiry, if its start was counted
 * (whatever dlock.track_stats says now); owner: the role of the hold
 * (InvalidOid: not known).
 */
static inline void
dlock_stats_count_counted(bool counted, Oid dbid, int64 key, uint8 mode, const char *name,
						  int namelen, DlockStatEvent ev, int64 us, Oid owner)
{
	if (counted && dlock_preloaded())
		dlock_stats_count_event(dbid, key, mode, name, namelen, ev, 0, us, 0, owner);
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

#endif							/* DLOCK_STATS_H */
