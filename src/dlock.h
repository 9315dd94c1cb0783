/*
 * dlock.h: the map of dlock's source, and what every file shares.
 *
 * dlock keeps no lock table of its own: every lock is a PostgreSQL advisory
 * lock taken through the lock manager.  What dlock adds is bookkeeping (per
 * backend, and in shared memory), fencing tokens, leases, statistics, and the
 * processes that hold detached locks and enforce leases.
 *
 * The files, in layers from the ground up.  A file calls only files of its
 * own layer that come before it in this list, and files of lower layers;
 * where a lower layer must tell a higher one something, it takes a callback
 * registered from above (entries.h: what runs when a backend first uses
 * dlock).  Each concern's face is a header: most files have their own, a
 * few headers serve a group of files (locks.h, detached.h, detached_caller.h,
 * protocol.h, serve.h, view.h, workers.h), and files that only define SQL
 * functions need none.  From the repository root,
 * `../shared/tools/callgraph src` checks the arrows.
 *
 *  1. ground
 *     compat.h       the differences between PostgreSQL majors
 *     fault.c/.h     fault points (only in the fault-injection build)
 *     sha256.c/.h    the hash of names
 *     name.c/.h      names, keys (dlock_key), argument checks, SQL values
 *     hints.c/.h     dlock's hint in PostgreSQL's report of a call it could
 *                    not match (a duration given as a number)
 *     changecount.c/.h  the change counter: one writer, readers that copy
 *     subxact.c/.h   a step in an internal subtransaction (several names)
 *  2. shared memory and per-backend records
 *     slots.c/.h     the per-backend slots in shared memory (DlockEntry)
 *     entry_index.c/.h  a backend's index (key, mode) -> entry
 *     entries.c/.h   this backend's entries: in its slot or in overflow,
 *                    their lease markers, its transaction-scope holds
 *  3. mechanisms
 *     tokens.c/.h    fencing tokens: the counter, its file, dlock_token
 *     semaphore.c/.h permits of a semaphore: taking one, the queue of
 *                    its waiters, their wake-ups
 *     leases.c/.h    leases as the holding backend sees them, dlock_renew,
 *                    the reaper's wake-up
 *     stats_table.c/.h  the statistics table in shared memory
 *     stats.c/.h     counting events (per backend, then into the table)
 *     stats_file.c/.h   the table's file across a clean restart
 *     confirm.c/.h   dlock.synchronous_grants: a grant answered once the
 *                    synchronous standbys have WAL written after it; a
 *                    client gone noticed while a call waits
 *     notify.c/.h    observers (1.7): events of holds taken with notify,
 *                    put in a notifier's ring in shared memory
 *     protocol.c/.h  the detached-lock protocol, shared by its two sides:
 *                    request slots, holds, waiter blocks, their states;
 *                    detached.h is what the rest of dlock sees of detached
 *                    locks (a hold, the transaction's part, the settings)
 *  4. the SQL functions of locks, detached locks and views, with their
 *     helpers (dlock_key, dlock_token and dlock_renew are with their concerns)
 *     lock_wait.c    waiting in the lock manager's queue: for a lock, with
 *                    the call's timeout; for a semaphore's permit
 *     locks.c        the fast path: one name taken (dlock_try, dlock_lock,
 *                    their _xact forms) and released (dlock_unlock,
 *                    dlock_unlock_all)
 *     locks_many.c   several names at once (locks.h serves all three)
 *     update.c       update mode's raise and lower (dlock_raise, dlock_lower)
 *     request.c/detached_xact.c/detached_wait.c/detached_line.c/detached.c
 *                    detached locks, the caller's side (detached_caller.h):
 *                    a request and its answer; undo with the transaction; a
 *                    waited acquisition; an acquisition asked for and the
 *                    name's line; dlock_acquire, dlock_extend,
 *                    dlock_release
 *     view_names.c/view_locks.c (view.h), view_stats.c
 *                    dlock_names, dlock_locks, dlock_stats
 *  5. transaction callbacks
 *     xact.c/.h      the ends of transactions and subtransactions
 *  6. processes (workers.h: their entry points)
 *     reaper.c       the lease reaper
 *     serve.c/.h     what both holding processes do: answer requests
 *     holder.c       the lock holder: detached locks taken without waiting
 *     waiter.c       a waiter: one waited detached lock
 *     notifier.c     a notifier: NOTIFY of one database's events
 *  7. module start
 *     shmem.c/.h     the shared-memory hooks: every part requested and made
 *                    in one place (each part's size and layout are its
 *                    owner's)
 *     dlock.c        _PG_init: the settings, the background workers, the
 *                    ProcessUtility hook (a COMMIT past a lease is refused
 *                    there first; DISCARD ALL forgets the session's holds)
 */
#ifndef DLOCK_H
#define DLOCK_H

#include "postgres.h"

#include "storage/lock.h"

#include "compat.h"
#include "fault.h"

/* The version of the shared library (the SQL side: dlock.control). */
#define DLOCK_VERSION "1.7"

/* Longest name, in bytes of its UTF-8 form (documented in doc/functions.md). */
#define DLOCK_NAME_MAX 255

/* Longest info (the holder's word, since 1.5), in bytes of its UTF-8 form. */
#define DLOCK_INFO_MAX 255

typedef enum DlockMode
{
	DLOCK_EXCLUSIVE = 0,
	DLOCK_SHARED = 1,
	DLOCK_UPDATE = 2			/* 1.7: shares with shared, excludes itself */
} DlockMode;

#define DLOCK_MODES 3

/*
 * The lock a hold of mode m takes on the name's key (objsubid 1).  Update
 * takes RowShareLock there, which shares with ShareLock (shared holders,
 * pg_advisory_lock_shared) and conflicts with ExclusiveLock (exclusive
 * holders, pg_advisory_lock), as ShareLock would; a mode of its own, so
 * that the lock manager tells an update hold from a shared one (no raw
 * call releases it, only pg_advisory_unlock_all and DISCARD ALL, which
 * release its gate too), and also its gate (below).
 */
#define DlockLockMode(m) \
	((m) == DLOCK_EXCLUSIVE ? ExclusiveLock : (m) == DLOCK_SHARED ? ShareLock : RowShareLock)

/*
 * Advisory locks of dlock's own (objsubid; pg_advisory_lock(bigint) uses 1,
 * the (int, int) forms 2): the ticket of a waited detached acquisition (3),
 * and the lease marker of a session hold with a lease (4 + mode), held in
 * AccessShareLock (which nothing else takes, so it never conflicts) for as
 * long as dlock's hold lasts.  The lock manager drops it with every session
 * lock released behind dlock's back (DISCARD ALL, pg_advisory_unlock_all),
 * so the reaper ends only a session whose own leased hold is still there.
 */
#define DLOCK_SUBID_KEY		1
#define DLOCK_SUBID_TICKET	3
#define DLOCK_SUBID_MARKER	4
#define DLOCK_MARKER_MODE	AccessShareLock

/*
 * Update mode (1.7): a hold takes, first, the name's update gate (objsubid
 * 7) in ExclusiveLock, so that one session at a time holds or raises the
 * name in update mode, then RowShareLock on the name's key.  Its lease marker
 * is objsubid 8 (4 + mode would be the line's 6).  Raising it to exclusive
 * is an exclusive hold of the name taken over it: it waits only for shared
 * holders, since no other updater can be there.
 */
#define DLOCK_SUBID_UPDATE	7
#define DLOCK_SUBID_UPDATE_MARKER 8
#define DLOCK_UPDATE_MODE	ExclusiveLock
#define DLOCK_MARKER_SUBID(m) \
	((m) == DLOCK_UPDATE ? DLOCK_SUBID_UPDATE_MARKER : DLOCK_SUBID_MARKER + (m))

/*
 * The line of a name's waited detached acquisitions (1.6, detached_wait.c):
 * callers wait for it in their own backends, in the lock manager's queue,
 * first come first served; the one that holds it is first in line and the
 * only one with a waiter process.  Taken in DLOCK_LINE_MODE(mode) of the
 * acquisition: both conflict with each other and themselves, and pg_locks
 * tells the two apart.
 */
#define DLOCK_SUBID_LINE	6
#define DLOCK_LINE_MODE(m)	((m) == DLOCK_SHARED ? ShareRowExclusiveLock : \
							 (m) == DLOCK_UPDATE ? ShareUpdateExclusiveLock : ExclusiveLock)

/*
 * Semaphores (1.5, semaphore.c): permit 1 of a name is the name's own lock
 * (objsubid 1); permit p > 1 is objsubid 1000 + p, and 1000 is the name's
 * turnstile, the queue its waiters for a permit line up in.
 */
#define DLOCK_PERMITS_MAX	1000
#define DLOCK_SUBID_TURNSTILE 1000

static inline uint16
dlock_permit_subid(int permit)
{
	return permit <= 1 ? DLOCK_SUBID_KEY : (uint16) (DLOCK_SUBID_TURNSTILE + permit);
}

#endif							/* DLOCK_H */
