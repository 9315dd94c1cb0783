/*
 * compat.h: the differences between the supported PostgreSQL majors (15, 17,
 * 18 and 19), in one place.  Everything else in dlock is written against one
 * API; each macro here says which major changed what.
 */
#ifndef DLOCK_COMPAT_H
#define DLOCK_COMPAT_H

#include "storage/lock.h"
#include "storage/proc.h"

#if PG_VERSION_NUM < 150000
#error "dlock needs PostgreSQL 15 or later"
#endif

/* 16 moved the varlena macros (VARDATA_ANY and friends) to their own header. */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * 17 dropped PGPROC.pgprocno: a process's number is now its offset in
 * ProcGlobal->allProcs (GetNumberFromPGProc).
 */
#if PG_VERSION_NUM < 170000
#define GetNumberFromPGProc(proc) ((proc)->pgprocno)
#endif

/*
 * 17 gave LockHeldByMe a third argument, "or a stronger mode"; dlock always
 * asks about the exact mode, as 15 did.
 */
#if PG_VERSION_NUM >= 170000
#define dlock_lock_held_by_me(tag, mode) LockHeldByMe((tag), (mode), false)
#else
#define dlock_lock_held_by_me(tag, mode) LockHeldByMe((tag), (mode))
#endif

/*
 * 18 gave LockAcquireExtended a last argument, "log a lock failure"
 * (log_lock_failures); the detached-lock holder never logs them.
 */
#if PG_VERSION_NUM >= 180000
#define dlock_lock_acquire_ext(tag, mode, session, dontWait, reportMemoryError, locallockp) \
	LockAcquireExtended((tag), (mode), (session), (dontWait), (reportMemoryError), (locallockp), false)
#else
#define dlock_lock_acquire_ext(tag, mode, session, dontWait, reportMemoryError, locallockp) \
	LockAcquireExtended((tag), (mode), (session), (dontWait), (reportMemoryError), (locallockp))
#endif

/*
 * 16 renamed the accessor of the local copy of backend statuses, by index
 * (1-based), to pgstat_get_local_beentry_by_index.
 */
#if PG_VERSION_NUM >= 160000
#define dlock_local_beentry(i) pgstat_get_local_beentry_by_index(i)
#else
#define dlock_local_beentry(i) pgstat_fetch_stat_local_beentry(i)
#endif

/*
 * Which synchronous standbys a commit waits for, as the checkpointer last
 * saw synchronous_standby_names (dlock.synchronous_grants waits as a commit
 * does).  The minor releases of 2025 (15.13, 17.5, 18) made the flag
 * sync_standbys_status, whose SYNC_STANDBY_INIT says the checkpointer has
 * set it; until then a backend goes by its own setting, as a commit does.
 * Read with SyncRepLock held.
 */
#ifdef SYNC_STANDBY_DEFINED
#define dlock_sync_standbys_defined(ctl) \
	(((ctl)->sync_standbys_status & SYNC_STANDBY_INIT) ? \
	 ((ctl)->sync_standbys_status & SYNC_STANDBY_DEFINED) != 0 : \
	 (SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0'))
#else
#define dlock_sync_standbys_defined(ctl) ((ctl)->sync_standbys_defined)
#endif

/*
 * 19 gave signal handlers a second argument (who sent the signal), so
 * SIG_IGN is no handler of its type there: PG_SIG_IGN is.
 */
#ifndef PG_SIG_IGN
#define PG_SIG_IGN SIG_IGN
#endif

/*
 * 19 builds with -Wimplicit-fallthrough=5, which takes only the attribute
 * (pg_fallthrough), not a comment, as an intended fall-through.
 */
#ifndef pg_fallthrough
#if defined(__has_attribute)
#if __has_attribute(fallthrough)
#define pg_fallthrough __attribute__((fallthrough))
#endif
#endif
#ifndef pg_fallthrough
#define pg_fallthrough ((void) 0)
#endif
#endif

/* 18 lets a module say its name and version in its magic block. */
#ifdef PG_MODULE_MAGIC_EXT
#define DLOCK_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "dlock", .version = DLOCK_VERSION)
#else
#define DLOCK_MODULE_MAGIC PG_MODULE_MAGIC
#endif

#endif							/* DLOCK_COMPAT_H */
