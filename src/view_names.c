/*
 * view_names.c: dlock_names(), what every backend's slot and every
 * detached hold says is held or awaited (the names half of the dlock_locks
 * view, view_locks.c).
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "commands/dbcommands.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "common/ip.h"
#include "pgstat.h"
#include "utils/acl.h"
#include "utils/backend_status.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "dlock.h"
#include "name.h"
#include "slots.h"
#include "view.h"

PG_FUNCTION_INFO_V1(dlock_names);

#define DLOCK_NAMES_COLS 15

/* The hold of a detached lock, to a DlockNameFn. */
typedef struct EachHold
{
	DlockNameFn fn;
	void	   *arg;
} EachHold;

static void
each_hold(void *arg, int pid, const DlockHold *h)
{
	EachHold   *x = (EachHold *) arg;

	x->fn(x->arg, pid, h->dbid, NULL, h);
}

/* (view.h) */
void
dlock_view_each_name(DlockNameFn fn, void *arg)
{
	DlockEntry *buf;
	EachHold	x;
	int			pid;
	int			i;

	if (!dlock_preloaded())
		return;
	/* one buffer for every slot: what fn is given lives until the next slot */
	buf = palloc(sizeof(DlockEntry) * Max(dlock_slots->entries_per_slot, 1));
	for (i = 0; i < dlock_slots->nslots; i++)
	{
		DlockSlot  *slot = dlock_slot(i);
		Oid			dbid;
		int			n;
		int			j;

		if (slot->pid == 0 || slot->nused <= 0) /* unlocked peek; the copy
												 * is what counts */
			continue;
		n = dlock_slot_read_entries(slot, buf, dlock_slots->entries_per_slot, &pid, &dbid);
		for (j = 0; j < n; j++)
			if (buf[j].inuse && pid != 0)
				fn(arg, pid, dbid, &buf[j], NULL);
	}
	pfree(buf);

	/* the detached locks */
	x.fn = fn;
	x.arg = arg;
	dlock_detached_each(each_hold, &x);
}

/* May the current user see the client address of a session of role? */
bool
dlock_view_may_see_client(Oid role)
{
	return has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS) ||
		has_privs_of_role(GetUserId(), role);
}

static const char *
mode_text(uint8 mode)
{
	return mode == DLOCK_SHARED ? "ShareLock" : mode == DLOCK_UPDATE ? "update" : "ExclusiveLock";
}

static void
put_name(void *arg, int pid, Oid dbid, const DlockEntry *e, const DlockHold *h)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[DLOCK_NAMES_COLS];
	bool		nulls[DLOCK_NAMES_COLS];

	memset(nulls, 0, sizeof(nulls));
	values[0] = Int32GetDatum(pid);
	values[1] = ObjectIdGetDatum(dbid);
	if (e != NULL)
	{
		values[2] = Int64GetDatum(e->key);
		values[3] = CStringGetTextDatum(mode_text(e->mode));
		values[4] = dlock_name_datum(e->name, e->namelen, &nulls[4]);
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
		nulls[10] = (e->token <= 0);	/* <= 0: none */
		values[11] = BoolGetDatum(false);
		nulls[12] = nulls[13] = nulls[14] = true;
	}
	else
	{
		values[2] = Int64GetDatum(h->key);
		values[3] = CStringGetTextDatum(mode_text(h->mode));
		values[4] = dlock_name_datum(h->name, h->namelen, &nulls[4]);
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
		nulls[14] = (h->client[0] == '\0' || !dlock_view_may_see_client(h->client_role));
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

Datum
dlock_names(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	dlock_view_each_name(put_name, rsinfo);
	return (Datum) 0;
}
