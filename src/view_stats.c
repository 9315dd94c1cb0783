/*
 * view_stats.c: the dlock_stats view (dlock_stats()), dlock_stats_info()
 * and dlock_stats_reset(), over the table in shared memory (stats_table.h).
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "dlock.h"
#include "name.h"
#include "slots.h"
#include "stats.h"
#include "stats_table.h"

PG_FUNCTION_INFO_V1(dlock_stats);
PG_FUNCTION_INFO_V1(dlock_stats_info);
PG_FUNCTION_INFO_V1(dlock_stats_reset);

static void
require_stats(void)
{
	dlock_require_preload("Lock statistics are kept in shared memory.");
}

/* The columns of dlock_stats(): 21 in the 1.4 and 1.5 SQL, 22 (force_released) since 1.6. */
#define DLOCK_STATS_COLS 22

/* dlock_stats(): every entry, copied part by part */
Datum
dlock_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DlockStatsRecord *copy;
	int			p;

	require_stats();
	dlock_stats_flush();		/* this session's own counts, too */
	InitMaterializedSRF(fcinfo, 0);
	dlock_database_names_reset();
	copy = palloc(sizeof(DlockStatsRecord) * dlock_stats_tab->cap);
	for (p = 0; p < DLOCK_STATS_PARTS; p++)
	{
		int			n = 0;
		int			i;

		LWLockAcquire(dlock_stats_tab->parts[p].lock, LW_SHARED);
		for (i = 0; i < dlock_stats_tab->cap; i++)
		{
			DlockStatsEntry *e = dlock_stats_entry(p, i);

			if (!e->inuse)
				continue;
			/* the key and name do not change under the shared lock */
			memcpy(&copy[n], &e->r, offsetof(DlockStatsRecord, c));
			memcpy(copy[n].name, e->r.name, e->r.namelen);
			SpinLockAcquire(&e->mutex);
			copy[n].c = e->r.c;
			SpinLockRelease(&e->mutex);
			n++;
		}
		LWLockRelease(dlock_stats_tab->parts[p].lock);

		for (i = 0; i < n; i++)
		{
			DlockStatsRecord *r = &copy[i];
			DlockStatsCounters *c = &r->c;
			Datum		values[DLOCK_STATS_COLS];
			bool		nulls[DLOCK_STATS_COLS];
			int			k = 0;

			memset(nulls, 0, sizeof(nulls));
			values[k] = dlock_database_name(r->dbid, false, &nulls[k]);
			k++;
			values[k] = dlock_name_datum(r->name, r->namelen, &nulls[k]);
			k++;
			values[k++] = Int64GetDatum(r->key);
			values[k++] = CStringGetTextDatum(r->mode == DLOCK_SHARED ? "shared" :
													r->mode == DLOCK_UPDATE ? "update" : "exclusive");
			values[k++] = Int64GetDatum(c->acquisitions);
			values[k++] = Int64GetDatum(c->acquisitions - c->waited);
			values[k++] = Int64GetDatum(c->waited);
			values[k++] = Int64GetDatum(c->scope[DLOCK_SCOPE_SESSION]);
			values[k++] = Int64GetDatum(c->scope[DLOCK_SCOPE_XACT]);
			values[k++] = Int64GetDatum(c->scope[DLOCK_SCOPE_DETACHED]);
			values[k++] = Int64GetDatum(c->busy);
			values[k++] = Int64GetDatum(c->timeouts);
			values[k++] = Int64GetDatum(c->deadlocks);
			values[k++] = Int64GetDatum(c->cancels);
			values[k++] = dlock_interval_datum(c->wait_time_total);
			values[k++] = dlock_interval_datum(c->wait_time_max);
			values[k++] = Int64GetDatum(c->released);
			values[k++] = dlock_interval_datum(c->hold_time_total);
			values[k++] = dlock_interval_datum(c->hold_time_max);
			values[k++] = Int64GetDatum(c->leases_expired);
			values[k] = TimestampTzGetDatum(c->last_acquired);
			nulls[k] = (c->last_acquired == 0);
			k++;
			values[k++] = Int64GetDatum(c->force_released);
			Assert(k == DLOCK_STATS_COLS);
			Assert(rsinfo->setDesc->natts <= DLOCK_STATS_COLS);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	pfree(copy);
	return (Datum) 0;
}

/* dlock_stats_info(): evictions, last reset, entries in use and the bound */
Datum
dlock_stats_info(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	int64		evictions = 0;
	int			entries = 0;
	int			p;

	require_stats();
	dlock_stats_flush();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	for (p = 0; p < DLOCK_STATS_PARTS; p++)
	{
		LWLockAcquire(dlock_stats_tab->parts[p].lock, LW_SHARED);
		evictions += dlock_stats_tab->parts[p].evictions;
		entries += dlock_stats_tab->parts[p].count;
		LWLockRelease(dlock_stats_tab->parts[p].lock);
	}
	values[0] = Int64GetDatum(evictions);
	SpinLockAcquire(&dlock_stats_tab->reset_lock);
	values[1] = TimestampTzGetDatum(dlock_stats_tab->stats_reset);
	SpinLockRelease(&dlock_stats_tab->reset_lock);
	values[2] = Int32GetDatum(entries);
	values[3] = Int32GetDatum(dlock_stats_tab->cap * DLOCK_STATS_PARTS);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * dlock_stats_reset(): forget every entry (and the evictions; the reset
 * time is now).  dlock_stats_reset(name), strict: the entries of one name in
 * this database, in both modes.
 */
Datum
dlock_stats_reset(PG_FUNCTION_ARGS)
{
	int			p;

	require_stats();
	dlock_stats_flush();		/* what this session counted is reset too */
	if (PG_NARGS() == 0)
	{
		for (p = 0; p < DLOCK_STATS_PARTS; p++)
		{
			int			i;

			LWLockAcquire(dlock_stats_tab->parts[p].lock, LW_EXCLUSIVE);
			for (i = 0; i < dlock_stats_tab->cap; i++)
				if (dlock_stats_entry(p, i)->inuse)
					dlock_stats_entry_remove(p, i);
			dlock_stats_tab->parts[p].evictions = 0;
			dlock_stats_tab->parts[p].new_usage = 0;
			LWLockRelease(dlock_stats_tab->parts[p].lock);
		}
		SpinLockAcquire(&dlock_stats_tab->reset_lock);
		dlock_stats_tab->stats_reset = GetCurrentTimestamp();
		SpinLockRelease(&dlock_stats_tab->reset_lock);
	}
	else
	{
		DlockName	name;
		uint8		mode;

		dlock_name_arg(fcinfo, 0, &name);
		for (mode = DLOCK_EXCLUSIVE; mode < DLOCK_MODES; mode++)
		{
			uint32		h = dlock_stats_hash(MyDatabaseId, name.key, mode);
			int			x;

			p = h % DLOCK_STATS_PARTS;
			LWLockAcquire(dlock_stats_tab->parts[p].lock, LW_EXCLUSIVE);
			x = dlock_stats_find(p, h, MyDatabaseId, name.key, mode);
			if (x >= 0)
				dlock_stats_entry_remove(p, x);
			LWLockRelease(dlock_stats_tab->parts[p].lock);
		}
	}
	PG_RETURN_VOID();
}
