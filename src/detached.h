/*
 * detached.h: detached locks as the rest of dlock sees them: a hold (what
 * the view shows), the transaction's part in them (xact.c), and their
 * settings.  (Not detached.c's own header: detached.c defines only SQL
 * functions.  What is declared here is defined in protocol.c,
 * detached_xact.c, detached_wait.c and holder.c, as marked.)  How they are held is the protocol's (protocol.h), which only
 * the caller's side and the holding processes include.
 */
#ifndef DLOCK_DETACHED_H
#define DLOCK_DETACHED_H

#include "access/xact.h"
#include "datatype/timestamp.h"
#include "port/atomics.h"

#include "name.h"

/* DlockHold.state */
#define DLOCK_HOLD_FREE		0
#define DLOCK_HOLD_WAITING	1	/* a waiter process is queued for it */
#define DLOCK_HOLD_HELD		2

/*
 * One detached lock: held (or awaited) by the lock holder or by a waiter
 * process for the role that acquired it.  Written only by the process that
 * holds it, inside its change counter, like a slot.
 */
typedef struct DlockHold
{
	pg_atomic_uint32 changecount;
	uint8		state;			/* DLOCK_HOLD_* */
	uint8		mode;			/* DlockMode */
	uint16		namelen;
	uint16		infolen;		/* 0: no info */
	uint16		permits;		/* a semaphore's permits asked for (> 1); 0:
								 * a lock */
	uint16		permit;			/* the permit held (1..permits); 0: a lock */
	bool		counted;		/* its acquisition was counted in dlock_stats,
								 * so its end and lease expiry are too */
	bool		released;		/* released before min_until: kept until then,
								 * when it ends as at a lease's end; no longer
								 * to be extended or released */
	bool		notify;			/* taken with notify => true: its events are
								 * announced (notify.c, 1.7) */
	Oid			dbid;
	Oid			role;			/* the current user: who may extend, release */
	Oid			limit_role;		/* whose limits it counts against: the
								 * session's user (SET ROLE does not move it),
								 * or the role a SECURITY DEFINER function or
								 * a security-restricted operation runs as
								 * (name.h dlock_limit_role) */
	Oid			client_role;	/* who may see the client's address: the
								 * role pg_stat_activity judges the session
								 * by (its st_userid) */
	int64		key;
	int64		token;
	TimestampTz since;			/* granted at, or waiting since */
	int64		min_hold_us;	/* asked for at acquisition; 0: none */
	TimestampTz min_until;		/* since + min_hold_us once granted; 0: none */
	TimestampTz lease_expires;	/* when it ends: never before min_until */
	char		name[DLOCK_NAME_MAX];	/* UTF-8, not terminated */
	char		info[DLOCK_INFO_MAX];	/* the holder's word, UTF-8, not
										 * terminated */
	char		rolname[NAMEDATALEN];
	char		appname[NAMEDATALEN];
	char		client[DLOCK_CLIENT_MAX];	/* "" for a Unix socket */
} DlockHold;

/*
 * Call fn for every detached lock held or awaited, with the pid of the
 * process that holds or awaits it (a caller in line: its own) and a
 * consistent copy of its hold, which lasts only until fn returns
 * (protocol.c).
 */
typedef void (*DlockHoldFn) (void *arg, int pid, const DlockHold *h);
extern void dlock_detached_each(DlockHoldFn fn, void *arg);

/* the transaction that acquired one (detached_xact.c) */
extern void dlock_detached_refuse_prepare(void);
extern void dlock_detached_xact_end(bool commit);
extern void dlock_detached_subxact_end(bool commit, SubTransactionId mySubid,
									   SubTransactionId parentSubid);

/* settings */
extern int	dlock_max_detached_locks;	/* protocol.c */
extern int	dlock_max_detached_locks_per_role;	/* holder.c */
extern int	dlock_max_detached_waiters_per_role;	/* detached_wait.c */

#endif							/* DLOCK_DETACHED_H */
