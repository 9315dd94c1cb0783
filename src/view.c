/*
 * view.c: dlock_names(), the names half of the dlock_locks view.
 *
 * Returns what every backend's slot says it holds or awaits.  The view joins
 * this with pg_locks, which is the truth about what is held: a row here that
 * pg_locks does not confirm is simply not shown.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "dlock.h"

PG_FUNCTION_INFO_V1(dlock_names);

#define DLOCK_NAMES_COLS 15

/*
 * The stored UTF-8 name in the database encoding, or NULL where it has a
 * character the encoding lacks (a name taken in another database).
 */
static Datum
name_datum(const char *name, int namelen, bool *isnull)
{
	int			enc = GetDatabaseEncoding();
	Oid			proc;
	char	   *buf;
	int			done;

	*isnull = false;
	if (enc == PG_UTF8 || enc == PG_SQL_ASCII)
		return PointerGetDatum(cstring_to_text_with_len(name, namelen));
	if (pg_encoding_verifymbstr(PG_UTF8, name, namelen) != namelen ||
		!OidIsValid(proc = FindDefaultConversionProc(PG_UTF8, enc)))
	{
		*isnull = true;
		return (Datum) 0;
	}
	buf = palloc((Size) namelen * MAX_CONVERSION_GROWTH + 1);
	done = pg_do_encoding_conversion_buf(proc, PG_UTF8, enc,
										 (unsigned char *) name, namelen,
										 (unsigned char *) buf,
										 namelen * MAX_CONVERSION_GROWTH + 1,
										 true);
	if (done != namelen)
	{
		*isnull = true;
		return (Datum) 0;
	}
	return PointerGetDatum(cstring_to_text(buf));
}

/* A detached hold (holder.c), held or awaited by process pid. */
static void
put_hold(ReturnSetInfo *rsinfo, const DlockHold *h, int pid)
{
	Datum		values[DLOCK_NAMES_COLS];
	bool		nulls[DLOCK_NAMES_COLS];

	memset(nulls, 0, sizeof(nulls));
	values[0] = Int32GetDatum(pid);
	values[1] = ObjectIdGetDatum(h->dbid);
	values[2] = Int64GetDatum(h->key);
	values[3] = CStringGetTextDatum(h->mode == DLOCK_SHARED ? "ShareLock" : "ExclusiveLock");
	values[4] = name_datum(h->name, h->namelen, &nulls[4]);
	values[5] = Int32GetDatum(0);
	values[6] = Int32GetDatum(0);
	if (h->state == DLOCK_HOLD_WAITING)
		values[7] = CStringGetTextDatum("detached");
	else
		nulls[7] = true;
	values[8] = TimestampTzGetDatum(h->since);
	values[9] = TimestampTzGetDatum(h->lease_expires);
	nulls[9] = (h->state != DLOCK_HOLD_HELD);
	values[10] = Int64GetDatum(h->token);
	nulls[10] = (h->state != DLOCK_HOLD_HELD);
	values[11] = BoolGetDatum(true);
	values[12] = CStringGetTextDatum(h->rolname);
	values[13] = CStringGetTextDatum(h->appname);
	values[14] = CStringGetTextDatum(h->client);
	/* as pg_stat_activity: the address only to the role and pg_read_all_stats */
	nulls[14] = (h->client[0] == '\0' ||
				 !(has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS) ||
				   has_privs_of_role(GetUserId(), h->role)));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* The detached locks: the lock holder's, then each waiter's. */
static void
detached_rows(ReturnSetInfo *rsinfo)
{
	DlockHold	copy;
	int			pid;
	int			i;

	pid = dlock_shared->holder_pid;
	for (i = 0; pid != 0 && i < dlock_shared->max_holds; i++)
	{
		DlockHold  *h = dlock_hold(i);

		if (h->state == DLOCK_HOLD_FREE)	/* unlocked peek */
			continue;
		dlock_read_hold(h, &copy);
		if (copy.state != DLOCK_HOLD_FREE)
			put_hold(rsinfo, &copy, pid);
	}
	for (i = 0; i < dlock_shared->nwaiters; i++)
	{
		DlockWaiter *w = dlock_waiter(i);

		pid = w->worker_pid;
		if (pid == 0 || w->hold.state == DLOCK_HOLD_FREE)
			continue;
		dlock_read_hold(&w->hold, &copy);
		if (copy.state != DLOCK_HOLD_FREE)
			put_hold(rsinfo, &copy, pid);
	}
}

Datum
dlock_names(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DlockSlot  *copy;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	if (dlock_shared == NULL)
		return (Datum) 0;

	copy = palloc(dlock_shared->slot_size);
	for (i = 0; i < dlock_shared->nslots; i++)
	{
		DlockSlot  *slot = dlock_slot(i);
		int			j;

		if (slot->pid == 0)		/* unlocked peek; the copy is what counts */
			continue;
		dlock_read_slot(slot, copy);
		for (j = 0; j < copy->nused; j++)
		{
			DlockEntry *e = &copy->entries[j];
			Datum		values[DLOCK_NAMES_COLS];
			bool		nulls[DLOCK_NAMES_COLS];

			if (!e->inuse)
				continue;
			memset(nulls, 0, sizeof(nulls));
			values[0] = Int32GetDatum(copy->pid);
			values[1] = ObjectIdGetDatum(copy->dbid);
			values[2] = Int64GetDatum(e->key);
			values[3] = CStringGetTextDatum(e->mode == DLOCK_SHARED ?
											"ShareLock" : "ExclusiveLock");
			values[4] = name_datum(e->name, e->namelen, &nulls[4]);
			values[5] = Int32GetDatum(e->nsession);
			values[6] = Int32GetDatum(e->nxact);
			if (e->waiting == DLOCK_WAIT_NONE)
				nulls[7] = true;
			else
				values[7] = CStringGetTextDatum(e->waiting == DLOCK_WAIT_XACT ?
												"transaction" : "session");
			values[8] = TimestampTzGetDatum(e->since);
			values[9] = TimestampTzGetDatum(e->lease_expires);
			nulls[9] = (e->lease_expires == 0);
			values[10] = Int64GetDatum(e->token);
			nulls[10] = (e->token <= 0); /* none: DLOCK_NO_TOKEN() */
			values[11] = BoolGetDatum(false);
			nulls[12] = nulls[13] = nulls[14] = true;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	pfree(copy);
	detached_rows(rsinfo);
	return (Datum) 0;
}
