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
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "dlock.h"
#include "leases.h"
#include "notify.h"
#include "workers.h"

#define NOTIFIER_IDLE_US	(10 * USECS_PER_SEC)
#define NOTIFIER_TURN_US	USECS_PER_SEC

static int	my_index = -1;
static bool running = false;

static const char *const kind_names[] = {"granted", "released", "lease_expired", "ended", "forced"};
static const char *const scope_names[] = {"session", "transaction", "detached"};

/*
 * At exit: a batch that was being sent and not committed stays at the head
 * for the next notifier (at least once: one that dies right after its
 * commit has them sent again), unless it failed DLOCK_NOTIFY_TRIES times,
 * when its events are counted lost; events left go to the next notifier
 * the reaper starts.  One that never ran (it could not connect) leaves its
 * slot STARTING, for the reaper to see that it stopped.
 */
static void
notifier_exit(int code, Datum arg)
{
	DlockNotifier *n;
	bool		wake = false;

	if (my_index < 0 || dlock_notify == NULL || !running)
		return;
	n = &dlock_notify->n[my_index];
	SpinLockAcquire(&dlock_notify->mutex);
	if (n->sending > 0 && ++n->send_tries >= DLOCK_NOTIFY_TRIES)
	{
		n->head = (n->head + n->sending) % DLOCK_NOTIFY_RING;
		n->count -= n->sending;
		n->lost += n->sending;
		n->send_tries = 0;
	}
	n->sending = 0;
	n->procno = -1;
	if (n->count > 0 || n->lost > 0)
	{
		n->state = DLOCK_NOTIFIER_WANTED;
		n->retry_at = 0;
	}
	else
		n->state = DLOCK_NOTIFIER_FREE;
	/* the reaper: this database's events, or another's, may want a notifier */
	for (int i = 0; i < DLOCK_NOTIFIERS; i++)
		if (dlock_notify->n[i].state == DLOCK_NOTIFIER_WANTED)
			wake = true;
	SpinLockRelease(&dlock_notify->mutex);
	if (wake && dlock_reaper_wake->procno >= 0)
		SetLatch(&GetPGProcByNumber(dlock_reaper_wake->procno)->procLatch);
}

/*
 * UTF-8 text of an event as a JSON string of ASCII only: every character
 * beyond ASCII, and every control character, as \uXXXX (a pair of them
 * beyond U+FFFF).  So the payload is the same in every database and client
 * encoding, and no listener's conversion can fail on it.
 */
static void
json_text(StringInfo buf, const char *s, int len)
{
	const unsigned char *p = (const unsigned char *) s;
	const unsigned char *end = p + len;

	appendStringInfoChar(buf, '"');
	while (p < end)
	{
		uint32		c = *p;
		int			n = pg_utf_mblen(p);

		if (n < 1 || p + n > end || (c >= 0x80 && (n == 1 || !pg_utf8_islegal(p, n))))
		{
			/* not UTF-8 (never from dlock's checks): the replacement character */
			c = 0xFFFD;
			n = 1;
		}
		else if (n > 1)
			c = utf8_to_unicode(p);
		p += n;
		if (c == '"')
			appendStringInfoString(buf, "\\\"");
		else if (c == '\\')
			appendStringInfoString(buf, "\\\\");
		else if (c >= 0x20 && c < 0x7f)
			appendStringInfoChar(buf, (char) c);
		else if (c < 0x10000)
			appendStringInfo(buf, "\\u%04x", c);
		else
		{
			c -= 0x10000;
			appendStringInfo(buf, "\\u%04x\\u%04x", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
		}
	}
	appendStringInfoChar(buf, '"');
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
	appendStringInfo(&buf, ", \"at\": \"%s\"}", timestamptz_to_str(ev->at));
	return buf.data;
}

/* Another database's events wait for a notifier (dlock.max_notifiers are running). */
static bool
others_wait(void)
{
	bool		wait = false;

	SpinLockAcquire(&dlock_notify->mutex);
	for (int i = 0; i < DLOCK_NOTIFIERS; i++)
		if (i != my_index && dlock_notify->n[i].state == DLOCK_NOTIFIER_WANTED)
			wait = true;
	SpinLockRelease(&dlock_notify->mutex);
	return wait;
}

void
dlock_notifier_main(Datum arg)
{
	DlockNotifier *n;
	Oid			dbid;
	uint32		gen;
	bool		mine;
	TimestampTz last;
	TimestampTz started;
	MemoryContext cxt;
	DlockEvent *batch;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	my_index = DatumGetInt32(arg);
	if (my_index < 0 || my_index >= DLOCK_NOTIFIERS || dlock_notify == NULL)
		proc_exit(0);
	n = &dlock_notify->n[my_index];
	on_shmem_exit(notifier_exit, (Datum) 0);
	memcpy(&gen, MyBgworkerEntry->bgw_extra, sizeof(gen));
	SpinLockAcquire(&dlock_notify->mutex);
	dbid = n->dbid;
	mine = n->state == DLOCK_NOTIFIER_STARTING && n->gen == gen;
	SpinLockRelease(&dlock_notify->mutex);
	if (!mine)
	{
		/* a start the reaper gave up on, and began again: not ours */
		my_index = -1;
		proc_exit(0);
	}
	/* a database that does not allow connections has its events too */
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, BGWORKER_BYPASS_ALLOWCONN);
	pgstat_report_appname("dlock notifier");

	SpinLockAcquire(&dlock_notify->mutex);
	mine = n->state == DLOCK_NOTIFIER_STARTING && n->gen == gen;
	if (mine)
	{
		n->procno = GetNumberFromPGProc(MyProc);
		n->state = DLOCK_NOTIFIER_RUNNING;
		n->start_tries = 0;
	}
	SpinLockRelease(&dlock_notify->mutex);
	if (!mine)
	{
		my_index = -1;
		proc_exit(0);
	}
	running = true;
	started = GetCurrentTimestamp();

	cxt = AllocSetContextCreate(TopMemoryContext, "dlock notifier", ALLOCSET_DEFAULT_SIZES);
	batch = MemoryContextAlloc(TopMemoryContext, sizeof(DlockEvent) * DLOCK_NOTIFY_RING);
	last = GetCurrentTimestamp();
	for (;;)
	{
		int			k;
		uint64		lost;
		TimestampTz idle;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		/*
		 * The events at the head, copied one at a time (the spinlock is
		 * every database's), left in the ring until the commit that sends
		 * them (notifier_exit)
		 */
		SpinLockAcquire(&dlock_notify->mutex);
		k = n->count;
		n->sending = k;
		lost = n->lost;
		SpinLockRelease(&dlock_notify->mutex);
		for (int i = 0; i < k; i++)
		{
			SpinLockAcquire(&dlock_notify->mutex);
			batch[i] = n->ring[(n->head + i) % DLOCK_NOTIFY_RING];
			SpinLockRelease(&dlock_notify->mutex);
		}

		if (k > 0 || lost > 0)
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);

			/* an error or a death here: the batch is sent again, or counted lost */
			DLOCK_FAULT("notifier.send");
			SetCurrentStatementStartTimestamp();
			StartTransactionCommand();
			pgstat_report_activity(STATE_RUNNING, "dlock notifier: NOTIFY dlock");
			if (lost > 0)
				Async_Notify(DLOCK_NOTIFY_CHANNEL,
							 psprintf("{\"event\": \"lost\", \"count\": " UINT64_FORMAT "}", lost));
			for (int i = 0; i < k; i++)
				Async_Notify(DLOCK_NOTIFY_CHANNEL, payload(&batch[i]));
			CommitTransactionCommand();
			pgstat_report_activity(STATE_IDLE, NULL);
			MemoryContextSwitchTo(old);
			MemoryContextReset(cxt);
			SpinLockAcquire(&dlock_notify->mutex);
			n->head = (n->head + k) % DLOCK_NOTIFY_RING;
			n->count -= k;
			n->sending = 0;
			n->lost -= lost;
			n->send_tries = 0;
			SpinLockRelease(&dlock_notify->mutex);
			last = GetCurrentTimestamp();
			/* a busy database yields after a second when another waits */
			if (last - started >= NOTIFIER_TURN_US && others_wait())
				proc_exit(0);
			continue;
		}

		/*
		 * Idle: gone after 10 s, or at once when another database waits
		 * for a notifier (dlock.max_notifiers run); its own events then
		 * wait their turn (notifier_exit).
		 */
		idle = GetCurrentTimestamp() - last;
		if (idle >= NOTIFIER_IDLE_US || others_wait())
			proc_exit(0);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, PG_WAIT_EXTENSION);
	}
}
