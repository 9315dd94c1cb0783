/*
 * entries.h: this backend's entries, one for each (key, mode) it holds or
 * awaits (entries.c).
 *
 * A "ref" names one: 0 .. dlock_my_cap-1 are the entries of this backend's
 * shared slot (slots.h), dlock_my_cap and up are backend-local overflow
 * entries (no name in the view, no lease).  Only this backend writes them,
 * each change between dlock_change_begin and dlock_change_end.
 *
 * Also here: the lease marker of a session hold with a lease (dlock.h), and
 * the list of this backend's transaction-scope holds, which locks.c adds to
 * and xact.c ends.
 */
#ifndef DLOCK_ENTRIES_H
#define DLOCK_ENTRIES_H

#include <time.h>

#include "access/xact.h"
#include "utils/timestamp.h"

#include "changecount.h"
#include "name.h"
#include "slots.h"

extern DlockSlot *dlock_my_slot;
extern int	dlock_my_cap;
extern DlockEntry *dlock_overflow;
extern bool dlock_ready;
/*
 * dlock.max_held_locks bounds all of a session's entries (so that it cannot
 * fill the lock table); dlock.max_locks_per_session (slots.h) bounds only
 * those in its shared slot (names in the view, leases).
 */
extern int	dlock_max_held_locks;

/*
 * What runs once in each backend, right after its entries are set up, the
 * first time it uses dlock: registered from above (_PG_init), for the
 * files of higher layers (the transaction callbacks, the statistics).
 */
typedef void (*DlockSetupHook) (void);
extern void dlock_on_backend_setup(DlockSetupHook hook);

extern void dlock_backend_setup(void);

static inline void
dlock_backend_init(void)
{
	if (likely(dlock_ready))
		return;
	dlock_backend_setup();
}

/*
 * When a hold starts or ends, read cheaply on the lock path: the kernel's
 * coarse clock (the time of its last timer tick, up to two ticks behind on
 * an idle machine and more on an overloaded one, read without a system call
 * where precise clocks may need one), but never before the start of the
 * statement that asks.  So never later than the true time.  Leases and
 * waits read the precise clock.
 */
static inline TimestampTz
dlock_hold_time(void)
{
#ifdef CLOCK_REALTIME_COARSE
	struct timespec ts;

	if (likely(clock_gettime(CLOCK_REALTIME_COARSE, &ts) == 0))
	{
		TimestampTz t = (TimestampTz) ts.tv_sec * USECS_PER_SEC + ts.tv_nsec / 1000 -
			(TimestampTz) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC;

		return Max(t, GetCurrentStatementStartTimestamp());
	}
#endif
	return GetCurrentTimestamp();
}

static inline DlockEntry *
dlock_entry_at(int ref)
{
	return ref < dlock_my_cap ? &dlock_my_slot->entries[ref] :
		&dlock_overflow[ref - dlock_my_cap];
}

/*
 * Bracket every change to one of this backend's entries (slot entries only).
 * The fault point is a process stopped inside the window (a stall or a
 * death: an error there would be in a critical section).
 */
static inline void
dlock_change_begin(int ref)
{
	if (ref < dlock_my_cap)
	{
		dlock_count_begin(&dlock_my_slot->changecount);
		DLOCK_FAULT("slot.change");
	}
}

static inline void
dlock_change_end(int ref)
{
	if (ref < dlock_my_cap)
		dlock_count_end(&dlock_my_slot->changecount);
}

/* what only an entry in the shared slot can keep (dlock_entry_for) */
#define DLOCK_NEED_NONE		0
#define DLOCK_NEED_LEASE	1
#define DLOCK_NEED_INFO		2

/*
 * Set an entry's info, inside its change window; not given: unchanged, ''
 * clears it.  (No allocation: the bytes go into the slot.)
 */
static inline void
dlock_entry_set_info(DlockEntry *e, const DlockInfo *info)
{
	if (info->given)
	{
		memcpy(e->info, info->utf8, info->len);
		e->infolen = info->len;
	}
}

/* finding, starting and freeing entries */
extern int	dlock_entry_find(int64 key, uint8 mode);
extern int	dlock_entry_for(const DlockName *name, uint8 mode, int need);
extern void dlock_entry_refuse_shared(const DlockName *name, int need, bool beyond);
extern void dlock_entry_info_given(FunctionCallInfo fcinfo, int argno, DlockInfo *info);

/*
 * The info argument of a lock of this session's (the holder's word): as
 * dlock_info_arg, and refused without shared memory to keep it in.  Inline
 * for the lock path, where a call almost never gives one.
 */
static inline void
dlock_entry_info_arg(FunctionCallInfo fcinfo, int argno, DlockInfo *info)
{
	if (likely(argno >= PG_NARGS() || PG_ARGISNULL(argno)))
	{
		info->given = false;
		info->utf8 = NULL;
		info->len = 0;
		return;
	}
	dlock_entry_info_given(fcinfo, argno, info);
}
extern int	dlock_entry_nrefs(void);
extern void dlock_entry_start(int ref, const DlockName *name, uint8 mode, TimestampTz since);
extern void dlock_entry_free_if_unused(int ref);

/* holds that the lock manager no longer has (released behind dlock's back) */
extern bool dlock_entry_lock_held(const DlockEntry *e);
extern void dlock_entry_forget_stale(int ref);
extern void dlock_entry_end_session(int ref);
extern void dlock_entries_forget_released(void);
extern void dlock_entry_drop_stale_session_slow(int ref);

/*
 * A session hold with a lease whose marker the lock manager no longer has
 * (released behind dlock's back): forgotten (entries.c).
 */
static inline void
dlock_entry_drop_stale_session(int ref)
{
	if (unlikely(dlock_entry_at(ref)->lease_expires != 0))
		dlock_entry_drop_stale_session_slow(ref);
}
extern int	dlock_entries_held(const DlockName *name, int refs[DLOCK_MODES]);
extern void dlock_entries_not_held(const DlockName *name);

/* lease markers */
extern bool dlock_marker_held(int64 key, uint8 mode);
extern void dlock_marker_take(int64 key, uint8 mode);
extern void dlock_marker_drop(int64 key, uint8 mode);

/*
 * This backend's transaction-scope holds, each with the subtransaction that
 * owns it: exactly those the lock manager has.  Room for one more is
 * reserved before a lock is asked for, so recording a grant cannot fail.
 */
typedef struct DlockXactHold
{
	int			ref;
	SubTransactionId subid;
	bool		own_release;	/* a raise (dlock_raise, 1.7): its lock is a
								 * session lock that dlock gives back at the
								 * end of the (sub)transaction, and
								 * dlock_lower before */
	int64		token;			/* own_release: the hold's token, by which its
								 * entry is still its own (locks.c) */
} DlockXactHold;

extern DlockXactHold *dlock_xact_holds;
extern int	dlock_n_xact_holds;
extern void dlock_xact_hold_reserve(void);
extern void dlock_xact_hold_add(int ref, bool own_release);

#endif							/* DLOCK_ENTRIES_H */
