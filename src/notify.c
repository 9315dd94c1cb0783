/*
 * notify.c: observers (1.7): a hold taken with notify => true has what
 * happens to it announced with NOTIFY, on the channel "dlock" of its
 * database, as a JSON payload (notifier.c writes it): granted, released,
 * lease expired, ended with its holder (a session or a holding process that
 * exited), force-released.
 *
 * NOTIFY is sent by a transaction of a process connected to the database,
 * and most of those who see an end happen cannot send one: a backend that
 * is exiting, or whose transaction aborts; the lock holder and the waiters,
 * which are connected to no database.  So whoever sees it puts the event in
 * shared memory, in the ring of a notifier of its database, and a notifier
 * process connected to that database sends it at once in a transaction of
 * its own: an event is sent when it happens, not when (or whether) the
 * transaction that saw it commits.  The lease reaper starts a notifier for a
 * database that has events and none; a notifier leaves after 10 s without
 * any.  Putting an event takes a spinlock and copies it: no allocation, no
 * error, so it is safe on any path, an exit too.  A hold without notify
 * costs one flag test where it ends.
 *
 * Layer 3 of the map in dlock.h (mechanisms): calls only files listed
 * before it there.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "entries.h"
#include "leases.h"
#include "name.h"
#include "notify.h"
#include "slots.h"

DlockNotifyShared *dlock_notify = NULL;
int			dlock_max_notifiers = 2;

/* this backend took a hold with notify (its exit looks for them) */
static bool notify_used = false;

Size
dlock_notify_shmem_size(void)
{
	return MAXALIGN(sizeof(DlockNotifyShared));
}

void
dlock_notify_shmem_init(void)
{
	bool		found;

	dlock_notify = ShmemInitStruct("dlock notify", dlock_notify_shmem_size(), &found);
	if (!found)
	{
		memset(dlock_notify, 0, sizeof(DlockNotifyShared));
		SpinLockInit(&dlock_notify->mutex);
		for (int i = 0; i < DLOCK_NOTIFIERS; i++)
			dlock_notify->n[i].procno = -1;
	}
}

/*
 * The notify argument of an acquisition (NULL or absent: false).  Events
 * need the notifier's shared memory, and a primary: NOTIFY cannot be sent
 * during recovery.
 */
bool
dlock_notify_arg(FunctionCallInfo fcinfo, int argno)
{
	if (argno >= PG_NARGS() || PG_ARGISNULL(argno) || !PG_GETARG_BOOL(argno))
		return false;
	dlock_require_preload("Events are handed to a notifier process through shared memory.");
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot announce lock events during recovery"),
				 errdetail("NOTIFY cannot be sent on a standby."),
				 errhint("Leave out notify => true here.")));
	notify_used = true;
	return true;
}

/*
 * Before the backend's exit releases its locks (ShutdownPostgres runs after
 * this): each hold taken with notify that the lock manager still has ends
 * with the session, as lease_expired if its lease ran out (the reaper ended
 * the session), else as ended.
 */
static void
notify_backend_exit(int code, Datum arg)
{
	int			n;
	TimestampTz now;

	if (!notify_used || dlock_my_slot == NULL)
		return;
	n = dlock_entry_nrefs();
	now = GetCurrentTimestamp();
	for (int ref = 0; ref < n; ref++)
	{
		DlockEntry *e;

		if (ref < dlock_my_cap && ref >= dlock_my_slot->nused)
		{
			ref = dlock_my_cap - 1; /* the rest of the slot is unused */
			continue;
		}
		e = dlock_entry_at(ref);
		if (!e->inuse || !e->notify || e->nsession + e->nxact == 0 || !dlock_entry_lock_held(e))
			continue;
		dlock_announce_entry(e, e->lease_expires != 0 && e->lease_expires <= now ?
							 DLOCK_EV_LEASE_EXPIRED : DLOCK_EV_ENDED,
							 e->nsession > 0 ? DLOCK_EV_SESSION : DLOCK_EV_XACT);
		/* announced once: not again by the abort that follows (locks.c) */
		dlock_change_begin(ref);
		e->notify = 0;
		dlock_change_end(ref);
	}
}

/* When a backend first uses dlock (entries.h; registered in _PG_init). */
void
dlock_notify_backend_setup(void)
{
	if (dlock_my_slot != NULL && dlock_notify != NULL)
		before_shmem_exit(notify_backend_exit, (Datum) 0);
}

static void
wake_reaper(void)
{
	int			p = dlock_reaper_wake->procno;

	if (p >= 0)
		SetLatch(&GetPGProcByNumber(p)->procLatch);
}

/*
 * Put an event in the ring of its database's notifier and wake it (or the
 * reaper, to start one).  Never fails: a full ring, or no notifier free for
 * another database, loses the event and counts it (the notifier says how
 * many were lost).
 */
void
dlock_announce(Oid dbid, int kind, int mode, int scope, int pid, int64 token,
			   const char *name, int namelen, const char *info, int infolen)
{
	DlockNotifyShared *s = dlock_notify;
	DlockNotifier *n = NULL;
	TimestampTz at = GetCurrentTimestamp();
	int			state;
	int			procno;
	int			i;

	if (s == NULL)
		return;
	namelen = Min(Max(namelen, 0), DLOCK_NAME_MAX);
	infolen = Min(Max(infolen, 0), DLOCK_INFO_MAX);
	SpinLockAcquire(&s->mutex);
	for (i = 0; i < DLOCK_NOTIFIERS; i++)
		if (s->n[i].state != DLOCK_NOTIFIER_FREE && s->n[i].dbid == dbid)
		{
			n = &s->n[i];
			break;
		}
	for (i = 0; n == NULL && i < DLOCK_NOTIFIERS; i++)
		if (s->n[i].state == DLOCK_NOTIFIER_FREE)
		{
			n = &s->n[i];
			n->dbid = dbid;
			n->state = DLOCK_NOTIFIER_WANTED;
			n->procno = -1;
			n->head = n->count = n->sending = 0;
			n->start_tries = n->send_tries = 0;
			n->lost = 0;
			n->retry_at = 0;
		}
	if (n == NULL)
	{
		s->lost_no_room++;
		SpinLockRelease(&s->mutex);
		return;
	}
	if (n->count < DLOCK_NOTIFY_RING)
	{
		DlockEvent *ev = &n->ring[(n->head + n->count) % DLOCK_NOTIFY_RING];

		ev->at = at;
		ev->token = token;
		ev->pid = pid;
		ev->kind = (uint8) kind;
		ev->mode = (uint8) mode;
		ev->scope = (uint8) scope;
		ev->namelen = (uint16) namelen;
		ev->infolen = (uint16) infolen;
		memcpy(ev->name, name, namelen);
		if (infolen > 0)
			memcpy(ev->info, info, infolen);
		n->count++;
	}
	else
		n->lost++;
	state = n->state;
	procno = n->procno;
	SpinLockRelease(&s->mutex);
	if (state == DLOCK_NOTIFIER_RUNNING && procno >= 0)
		SetLatch(&GetPGProcByNumber(procno)->procLatch);
	else if (state == DLOCK_NOTIFIER_WANTED)
		wake_reaper();
}

/* A backend's hold (its entry) that was taken with notify. */
void
dlock_announce_entry(const DlockEntry *e, int kind, int scope)
{
	dlock_announce(MyDatabaseId, kind, e->mode, scope, MyProcPid, e->token,
				   e->name, e->namelen, e->info, e->infolen);
}

/* A detached hold taken with notify, by the process that holds it. */
void
dlock_announce_hold(const DlockHold *h, int kind)
{
	if (h->notify)
		dlock_announce(h->dbid, kind, h->mode, DLOCK_EV_DETACHED, MyProcPid, h->token,
					   h->name, h->namelen, h->info, h->infolen);
}

/*
 * The lease reaper: start a notifier for each database whose events wait
 * without one, dlock.max_notifiers at most at once (the others when one
 * leaves: a notifier leaves soon when another database waits); notice a
 * start that never ran (the postmaster had no room, or the fork failed),
 * which is tried again a second later, and after DLOCK_NOTIFY_TRIES its
 * events are lost; log events lost for want of a slot.  Returns when to
 * look again (PG_INT64_MAX: nothing to look at).
 */
static BackgroundWorkerHandle *handles[DLOCK_NOTIFIERS];

TimestampTz
dlock_notify_start_wanted(TimestampTz now)
{
	DlockNotifyShared *s = dlock_notify;
	TimestampTz again = PG_INT64_MAX;
	static uint64 lost_logged = 0;
	uint64		lost;
	int			running = 0;

	if (s == NULL)
		return again;
	SpinLockAcquire(&s->mutex);
	for (int i = 0; i < DLOCK_NOTIFIERS; i++)
		if (s->n[i].state == DLOCK_NOTIFIER_STARTING || s->n[i].state == DLOCK_NOTIFIER_RUNNING)
			running++;
	lost = s->lost_no_room;
	SpinLockRelease(&s->mutex);
	if (lost != lost_logged)
	{
		ereport(LOG,
				(errmsg("dlock: " UINT64_FORMAT " lock events were lost without a notifier", lost - lost_logged),
				 errdetail("More than %d databases had events at once, or a database's notifier could not start.",
						   DLOCK_NOTIFIERS)));
		lost_logged = lost;
	}

	for (int i = 0; i < DLOCK_NOTIFIERS; i++)
	{
		DlockNotifier *n = &s->n[i];
		BackgroundWorker worker;
		bool		start = false;
		uint32		gen = 0;
		pid_t		pid;

		/* a start that never ran: again a second later, or its events lost */
		if (handles[i] != NULL &&
			GetBackgroundWorkerPid(handles[i], &pid) == BGWH_STOPPED)
		{
			pfree(handles[i]);
			handles[i] = NULL;
			SpinLockAcquire(&s->mutex);
			if (n->state == DLOCK_NOTIFIER_STARTING)
			{
				running--;
				if (++n->start_tries >= DLOCK_NOTIFY_TRIES)
				{
					s->lost_no_room += n->count + n->lost;
					n->state = DLOCK_NOTIFIER_FREE;
				}
				else
				{
					n->state = DLOCK_NOTIFIER_WANTED;
					n->retry_at = now + USECS_PER_SEC;
				}
			}
			SpinLockRelease(&s->mutex);
		}

		SpinLockAcquire(&s->mutex);
		/* a start the reaper lost the handle of (it restarted): given up after 10 s */
		if (n->state == DLOCK_NOTIFIER_STARTING && handles[i] == NULL && n->retry_at <= now)
		{
			running--;
			n->state = ++n->start_tries >= DLOCK_NOTIFY_TRIES ? DLOCK_NOTIFIER_FREE : DLOCK_NOTIFIER_WANTED;
			if (n->state == DLOCK_NOTIFIER_FREE)
				s->lost_no_room += n->count + n->lost;
		}
		if (n->state == DLOCK_NOTIFIER_WANTED)
		{
			if (n->retry_at > now)
				again = Min(again, n->retry_at);
			else if (running >= dlock_max_notifiers)
				again = Min(again, now + USECS_PER_SEC);
			else
			{
				n->state = DLOCK_NOTIFIER_STARTING;
				n->retry_at = now + 10 * USECS_PER_SEC;
				n->gen++;
				gen = n->gen;
				start = true;
				running++;
			}
		}
		else if (n->state == DLOCK_NOTIFIER_STARTING)
			again = Min(again, now + USECS_PER_SEC);
		SpinLockRelease(&s->mutex);
		if (!start)
			continue;
		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = BGW_NEVER_RESTART;
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "dlock");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "dlock_notifier_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "dlock notifier");
		snprintf(worker.bgw_type, BGW_MAXLEN, "dlock notifier");
		worker.bgw_main_arg = Int32GetDatum(i);
		memcpy(worker.bgw_extra, &gen, sizeof(gen));
		worker.bgw_notify_pid = MyProcPid;
		if (handles[i] != NULL)
			pfree(handles[i]);
		handles[i] = NULL;
		if (RegisterDynamicBackgroundWorker(&worker, &handles[i]))
		{
			again = Min(again, now + USECS_PER_SEC);
			continue;
		}
		/* no background worker slot free: again in a second */
		SpinLockAcquire(&s->mutex);
		n->state = DLOCK_NOTIFIER_WANTED;
		n->retry_at = now + USECS_PER_SEC;
		SpinLockRelease(&s->mutex);
		running--;
		again = Min(again, n->retry_at);
	}
	return again;
}
