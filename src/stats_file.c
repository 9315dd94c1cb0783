/*
 * stats_file.c: the statistics table across a clean restart.
 *
 * The table is written to DLOCK_STATS_FILE when the server shuts down
 * cleanly, read back (and the file removed) when it starts: kept across a
 * clean restart, empty after a crash or an immediate shutdown.  The records
 * are DlockStatsRecord (stats_table.h).
 *
 * Layer 3 of the map in dlock.h (mechanisms): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include <unistd.h>

#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"

#include "dlock.h"
#include "stats_file.h"
#include "stats_table.h"

#define DLOCK_STATS_FILE "pg_stat/dlock.stat"
#define DLOCK_STATS_MAGIC 0x444c5303	/* "DLS" 3 (1.6): records with their owner,
										 * counters with force_released (2: a
										 * layout of 1.6 in development, never
										 * released) */
#define DLOCK_STATS_MAGIC_1 0x444c5301	/* "DLS" 1: dlock 1.4 and 1.5 */

/*
 * A record of a version 1 file: no owner (read as InvalidOid), and the
 * counters of 1.5 (none of overrides: read as 0).
 */
typedef struct DlockStatsCounters1
{
	int64		acquisitions;
	int64		waited;
	int64		scope[3];
	int64		busy;
	int64		timeouts;
	int64		deadlocks;
	int64		cancels;
	int64		released;
	int64		leases_expired;
	int64		wait_time_total;
	int64		wait_time_max;
	int64		hold_time_total;
	int64		hold_time_max;
	TimestampTz last_acquired;
	double		usage;
} DlockStatsCounters1;

typedef struct DlockStatsRecord1
{
	Oid			dbid;
	uint8		mode;
	uint8		pad;
	uint16		namelen;
	int64		key;
	DlockStatsCounters1 c;
	char		name[DLOCK_NAME_MAX];
} DlockStatsRecord1;

typedef struct DlockStatsFileHeader
{
	uint32		magic;
	uint32		record_size;
	int64		evictions;
	TimestampTz stats_reset;
	int32		count;
} DlockStatsFileHeader;

static void
stats_load(void)
{
	FILE	   *file;
	DlockStatsFileHeader hdr;
	DlockStatsRecord rec;
	DlockStatsRecord1 rec1;
	bool		v1;
	int			i;
	int			loaded = 0;

	file = AllocateFile(DLOCK_STATS_FILE, PG_BINARY_R);
	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", DLOCK_STATS_FILE)));
		return;
	}
	if (fread(&hdr, sizeof(hdr), 1, file) != 1 ||
		!((hdr.magic == DLOCK_STATS_MAGIC && hdr.record_size == sizeof(DlockStatsRecord)) ||
		  (hdr.magic == DLOCK_STATS_MAGIC_1 && hdr.record_size == sizeof(DlockStatsRecord1))) ||
		hdr.count < 0)
	{
		ereport(LOG,
				(errmsg("ignoring dlock statistics file \"%s\": not written by this version of dlock",
						DLOCK_STATS_FILE)));
		goto done;
	}
	dlock_stats_tab->stats_reset = hdr.stats_reset;
	dlock_stats_tab->parts[0].evictions = hdr.evictions;
	for (i = 0; i < hdr.count; i++)
	{
		DlockStatsEntry *e;
		int			p;

		v1 = hdr.magic == DLOCK_STATS_MAGIC_1;
		if (v1 ? fread(&rec1, sizeof(rec1), 1, file) != 1 : fread(&rec, sizeof(rec), 1, file) != 1)
		{
			ereport(LOG,
					(errmsg("dlock statistics file \"%s\" is truncated; kept %d of %d entries",
							DLOCK_STATS_FILE, loaded, hdr.count)));
			break;
		}
		if (v1)
		{
			memset(&rec, 0, sizeof(rec));
			rec.dbid = rec1.dbid;
			rec.mode = rec1.mode;
			rec.namelen = rec1.namelen;
			rec.owner = InvalidOid;
			rec.key = rec1.key;
			/* the counters of 1.5 are the first of today's, in order */
			StaticAssertStmt(offsetof(DlockStatsCounters, force_released) ==
							 sizeof(DlockStatsCounters1),
							 "the counters of a version 1 file lead today's");
			memcpy(&rec.c, &rec1.c, sizeof(rec1.c));
			memcpy(rec.name, rec1.name, sizeof(rec.name));
		}
		if (rec.namelen > DLOCK_NAME_MAX || rec.mode > DLOCK_UPDATE)
			continue;
		p = dlock_stats_hash(rec.dbid, rec.key, rec.mode) % DLOCK_STATS_PARTS;
		/* dlock.max_stats may have been lowered: the rest does not fit */
		if (dlock_stats_tab->parts[p].count >= dlock_stats_tab->cap ||
			dlock_stats_find(p, dlock_stats_hash(rec.dbid, rec.key, rec.mode), rec.dbid, rec.key, rec.mode) >= 0)
			continue;
		e = dlock_stats_entry_new(p, rec.dbid, rec.key, rec.mode, rec.name, rec.namelen, rec.owner);
		if (e != NULL)
		{
			e->r.c = rec.c;
			if (!(e->r.c.usage >= 0 && e->r.c.usage < 1e300))	/* NaN too */
				e->r.c.usage = 0;
			loaded++;
		}
	}
done:
	FreeFile(file);
	/* read once: after a crash the statistics start empty */
	if (unlink(DLOCK_STATS_FILE) != 0)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not remove file \"%s\": %m", DLOCK_STATS_FILE)));
}

/* Did the server just shut down cleanly (a shutdown checkpoint)? */
static bool
clean_shutdown(void)
{
	volatile bool clean = false;

	PG_TRY();
	{
		bool		crc_ok;
		ControlFileData *cf = get_controlfile(DataDir, &crc_ok);

		clean = crc_ok && (cf->state == DB_SHUTDOWNED ||
						   cf->state == DB_SHUTDOWNED_IN_RECOVERY);
		pfree(cf);
	}
	PG_CATCH();
	{
		/* unreadable: as after a crash, nothing is kept */
		EmitErrorReport();
		FlushErrorState();
	}
	PG_END_TRY();
	return clean;
}

/* At postmaster exit: write the table, unless it was a crash or immediate stop. */
static void
stats_shutdown(int code, Datum arg)
{
	FILE	   *file;
	DlockStatsFileHeader hdr;
	int			p;
	int			i;

	if (code != 0 || dlock_stats_tab == NULL || !clean_shutdown())
		return;
	file = AllocateFile(DLOCK_STATS_FILE ".tmp", PG_BINARY_W);
	if (file == NULL)
		goto error;
	memset(&hdr, 0, sizeof(hdr));
	hdr.magic = DLOCK_STATS_MAGIC;
	hdr.record_size = sizeof(DlockStatsRecord);
	hdr.stats_reset = dlock_stats_tab->stats_reset;
	for (p = 0; p < DLOCK_STATS_PARTS; p++)
	{
		hdr.evictions += dlock_stats_tab->parts[p].evictions;
		hdr.count += dlock_stats_tab->parts[p].count;
	}
	if (fwrite(&hdr, sizeof(hdr), 1, file) != 1)
		goto error;
	for (p = 0; p < DLOCK_STATS_PARTS; p++)
		for (i = 0; i < dlock_stats_tab->cap; i++)
		{
			DlockStatsEntry *e = dlock_stats_entry(p, i);

			if (e->inuse && fwrite(&e->r, sizeof(e->r), 1, file) != 1)
				goto error;
		}
	if (FreeFile(file) != 0)
	{
		file = NULL;
		goto error;
	}
	(void) durable_rename(DLOCK_STATS_FILE ".tmp", DLOCK_STATS_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", DLOCK_STATS_FILE ".tmp")));
	if (file)
		FreeFile(file);
	unlink(DLOCK_STATS_FILE ".tmp");
}

/*
 * In the postmaster, once the table was made (shmem.c): read what the last
 * clean shutdown kept, and save the table at exit.
 */
void
dlock_stats_file_start(void)
{
	stats_load();
	on_shmem_exit(stats_shutdown, (Datum) 0);
}
