/*
 * notifier.c: a notifier process (1.7): it sends the events of one
 * database (notify.c) with NOTIFY on the channel "dlock", each as a JSON
 * object:
 *
 *   {"event": "granted", "name": "...", "mode": "exclusive",
 *    "scope": "session", "token": 123, "pid": 4567, "info": "...",
 *    "at": "2026-11-28 16:40:00.123456+00"}
 *
 * event: granted, released, lease_expired, ended (its holder's session or
 * holding process ended), forced (dlock_force_release); "lost" with
 * "count" when its ring was full and events were dropped (read dlock_locks
 * again).  token and info are null where there is none; pid is the holding
 * backend's, or for a detached lock its holding process's.
 *
 * Started by the lease reaper for a database with events and no notifier
 * (notify.c); it leaves after 10 s without an event.  Each batch of events
 * is one transaction, so listeners get them in order, at its commit.
 *
 * Layer 6 of the map in dlock.h (processes): calls only files listed
 * before it there.
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "dlock.h"
#include "leases.h"
#include "notify.h"
#include "workers.h"

#define NOTIFIER_IDLE_US	(10 * USECS_PER_SEC)

static int	my_index = -1;
static bool running = false;

static const char *const kind_names[] = {"granted", "released", "lease_expired", "ended", "forced"};
static const char *const scope_names[] = {"session", "transaction", "detached"};

/*
 * At exit: events left for the database go to the next notifier the reaper
 * starts; one that never ran (its database is gone, or it could not
 * connect) leaves them, lost.
 */
static void
notifier_exit(int code, Datum arg)
{
	DlockNotifier *n;
	bool		wake = false;

	if (my_index < 0 || dlock_notify == NULL)
		return;
	n = &dlock_notify->n[my_index];
	SpinLockAcquire(&dlock_notify->mutex);
	if (n->state == DLOCK_NOTIFIER_RUNNING || n->state == DLOCK_NOTIFIER_STARTING)
	{
		n->procno = -1;
		if (running && n->count > 0)
		{
			n->state = DLOCK_NOTIFIER_WANTED;
			wake = true;
		}
		else
			n->state = DLOCK_NOTIFIER_FREE;
	}
	SpinLockRelease(&dlock_notify->mutex);
	if (wake && dlock_reaper_wake->procno >= 0)
		SetLatch(&GetPGProcByNumber(dlock_reaper_wake->procno)->procLatch);
}

/* UTF-8 text of an event as a JSON string, in the database's encoding. */
static void
json_text(StringInfo buf, const char *s, int len)
{
	char	   *t = pnstrdup(s, len);
	char	   *c = pg_any_to_server(t, len, PG_UTF8);

	escape_json(buf, c);
}

static char *
payload(const DlockEvent *ev)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"event\": \"%s\", \"name\": ", kind_names[ev->kind]);
	json_text(&buf, ev->name, ev->namelen);
	appendStringInfo(&buf, ", \"mode\": \"%s\", \"scope\": \"%s\", \"token\": ",
					 ev->mode == DLOCK_SHARED ? "shared" : ev->mode == DLOCK_UPDATE ? "update" : "exclusive",
					 scope_names[ev->scope]);
	if (ev->token > 0)
		appendStringInfo(&buf, INT64_FORMAT, ev->token);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfo(&buf, ", \"pid\": %d, \"info\": ", ev->pid);
	if (ev->infolen > 0)
		json_text(&buf, ev->info, ev->infolen);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoString(&buf, ", \"at\": ");
	escape_json(&buf, timestamptz_to_str(ev->at));
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

void
dlock_notifier_main(Datum arg)
{
	DlockNotifier *n;
	Oid			dbid;
	TimestampTz last;
	MemoryContext cxt;
	DlockEvent *batch;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	my_index = DatumGetInt32(arg);
	if (my_index < 0 || my_index >= DLOCK_NOTIFIERS || dlock_notify == NULL)
		proc_exit(0);
	n = &dlock_notify->n[my_index];
	on_shmem_exit(notifier_exit, (Datum) 0);
	SpinLockAcquire(&dlock_notify->mutex);
	dbid = n->dbid;
	SpinLockRelease(&dlock_notify->mutex);
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);
	pgstat_report_appname("dlock notifier");

	SpinLockAcquire(&dlock_notify->mutex);
	n->procno = GetNumberFromPGProc(MyProc);
	n->state = DLOCK_NOTIFIER_RUNNING;
	SpinLockRelease(&dlock_notify->mutex);
	running = true;

	cxt = AllocSetContextCreate(TopMemoryContext, "dlock notifier", ALLOCSET_DEFAULT_SIZES);
	batch = MemoryContextAlloc(TopMemoryContext, sizeof(DlockEvent) * DLOCK_NOTIFY_RING);
	last = GetCurrentTimestamp();
	for (;;)
	{
		int			k = 0;
		uint64		lost;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		SpinLockAcquire(&dlock_notify->mutex);
		while (n->count > 0)
		{
			batch[k++] = n->ring[n->head];
			n->head = (n->head + 1) % DLOCK_NOTIFY_RING;
			n->count--;
		}
		lost = n->lost;
		n->lost = 0;
		SpinLockRelease(&dlock_notify->mutex);

		if (k > 0 || lost > 0)
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);

			/* an error or a death here loses this batch: the locks are not touched */
			DLOCK_FAULT("notifier.send");

			SetCurrentStatementStartTimestamp();
			StartTransactionCommand();
			pgstat_report_activity(STATE_RUNNING, "dlock notifier: NOTIFY dlock");
			for (int i = 0; i < k; i++)
				Async_Notify(DLOCK_NOTIFY_CHANNEL, payload(&batch[i]));
			if (lost > 0)
				Async_Notify(DLOCK_NOTIFY_CHANNEL,
							 psprintf("{\"event\": \"lost\", \"count\": " UINT64_FORMAT "}", lost));
			CommitTransactionCommand();
			pgstat_report_activity(STATE_IDLE, NULL);
			MemoryContextSwitchTo(old);
			MemoryContextReset(cxt);
			last = GetCurrentTimestamp();
			continue;
		}
		if (GetCurrentTimestamp() - last >= NOTIFIER_IDLE_US)
		{
			bool		leave;

			SpinLockAcquire(&dlock_notify->mutex);
			leave = n->count == 0;
			if (leave)
			{
				n->state = DLOCK_NOTIFIER_FREE;
				n->procno = -1;
			}
			SpinLockRelease(&dlock_notify->mutex);
			if (leave)
			{
				my_index = -1;
				proc_exit(0);
			}
			continue;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000, PG_WAIT_EXTENSION);
	}
}
