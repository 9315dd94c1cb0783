/*
 * notify.h: observers (1.7, notify.c): what happened to a hold taken with
 * notify => true, announced with NOTIFY on the channel "dlock" of its
 * database, by a notifier process of that database (notifier.c), whoever
 * saw it happen: the holding backend, the lease reaper's victim as it
 * exits, the lock holder, a waiter process.
 */
#ifndef DLOCK_NOTIFY_H
#define DLOCK_NOTIFY_H

#include "fmgr.h"
#include "datatype/timestamp.h"
#include "storage/spin.h"

#include "detached.h"
#include "slots.h"

/* The channel (doc/functions.md "Observers"). */
#define DLOCK_NOTIFY_CHANNEL "dlock"

/* What happened (the payload's "event"). */
typedef enum DlockEventKind
{
	DLOCK_EV_GRANTED = 0,
	DLOCK_EV_RELEASED,
	DLOCK_EV_LEASE_EXPIRED,
	DLOCK_EV_ENDED,				/* its holder's session or process ended */
	DLOCK_EV_FORCED,			/* dlock_force_release */
	DLOCK_EV_NONE = -1			/* announced already (serve.c) */
} DlockEventKind;

/* The hold's scope (the payload's "scope"). */
#define DLOCK_EV_SESSION	0
#define DLOCK_EV_XACT		1
#define DLOCK_EV_DETACHED	2

/*
 * Databases with events at once (a slot each), events each keeps; the
 * notifier processes running at once are dlock.max_notifiers of them.
 */
#define DLOCK_NOTIFIERS		8
#define DLOCK_NOTIFY_RING	64
#define DLOCK_NOTIFY_TRIES	3	/* starts, and sends of one batch, before its events are lost */

typedef struct DlockEvent
{
	TimestampTz at;
	int64		token;			/* <= 0: none */
	int32		pid;
	uint8		kind;
	uint8		mode;
	uint8		scope;
	uint16		namelen;
	uint16		infolen;
	char		name[DLOCK_NAME_MAX];
	char		info[DLOCK_INFO_MAX];
} DlockEvent;

/* (The numbers are names, not an order.) */
#define DLOCK_NOTIFIER_FREE		0
#define DLOCK_NOTIFIER_WANTED	1	/* events wait, no process: the reaper starts one */
#define DLOCK_NOTIFIER_STARTING	2
#define DLOCK_NOTIFIER_RUNNING	3

typedef struct DlockNotifier
{
	Oid			dbid;
	int			state;
	int			procno;			/* RUNNING: its process */
	int			head;
	int			count;
	int			sending;		/* events at the head being sent: removed at the
								 * commit that sent them */
	int			start_tries;	/* starts that never ran, since one did */
	int			send_tries;		/* failed sends of the batch at the head */
	uint32		gen;			/* one more at every start: the notifier of
								 * that start only takes the slot */
	uint64		lost;			/* events lost (ring full, failed sends) */
	TimestampTz retry_at;		/* WANTED after a failed start: not before */
	DlockEvent	ring[DLOCK_NOTIFY_RING];
} DlockNotifier;

typedef struct DlockNotifyShared
{
	slock_t		mutex;
	uint64		lost_no_room;	/* events of a database beyond DLOCK_NOTIFIERS,
								 * or of one whose notifier never ran */
	DlockNotifier n[DLOCK_NOTIFIERS];
} DlockNotifyShared;

extern DlockNotifyShared *dlock_notify;
extern int	dlock_max_notifiers;

extern Size dlock_notify_shmem_size(void);
extern void dlock_notify_shmem_init(void);
extern bool dlock_notify_arg(FunctionCallInfo fcinfo, int argno);
extern void dlock_notify_backend_setup(void);
extern void dlock_announce(Oid dbid, int kind, int mode, int scope, int pid, int64 token,
						   const char *name, int namelen, const char *info, int infolen);
extern void dlock_announce_entry(const DlockEntry *e, int kind, int scope);
extern void dlock_announce_hold(const DlockHold *h, int kind);
extern TimestampTz dlock_notify_start_wanted(TimestampTz now);

#endif							/* DLOCK_NOTIFY_H */
