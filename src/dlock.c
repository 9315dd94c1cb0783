/*
 * dlock.c: module start-up, settings, shared memory and fencing tokens.
 */
#include "postgres.h"

#include <unistd.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "postmaster/bgworker.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "dlock.h"

PG_MODULE_MAGIC;

DlockShared *dlock_shared = NULL;
int			dlock_max_locks_per_session = 64;
static int	dlock_token_reserve = DLOCK_TOKEN_RESERVE_DEFAULT;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

/* On-disk form of the token ceiling. */
typedef struct DlockTokenFile
{
	uint32		magic;
	uint32		version;
	uint64		ceiling;
	pg_crc32c	crc;
} DlockTokenFile;

#define DLOCK_TOKEN_MAGIC 0x646c6f63	/* "dloc" */
#define DLOCK_TOKEN_VERSION 1

static Size
dlock_slot_size(void)
{
	return MAXALIGN(offsetof(DlockSlot, entries) +
					sizeof(DlockEntry) * dlock_max_locks_per_session);
}

static Size
dlock_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(DlockShared)),
					mul_size(MaxBackends, dlock_slot_size()));
}

DlockSlot *
dlock_slot(int i)
{
	return (DlockSlot *) ((char *) dlock_shared + MAXALIGN(sizeof(DlockShared)) +
						  dlock_shared->slot_size * i);
}

/*
 * Copy a slot consistently: retry while its owner is in the middle of a
 * change.  The owner's changes are a few stores, so this rarely loops; if
 * the owner is descheduled or stopped in between, the reader sleeps a little
 * between tries and can be cancelled.
 */
void
dlock_read_slot(DlockSlot *src, DlockSlot *copy)
{
	int			tries = 0;

	for (;;)
	{
		uint32		before = pg_atomic_read_u32(&src->changecount);
		int			n;

		if (++tries % 1000 == 0)
		{
			CHECK_FOR_INTERRUPTS();
			pg_usleep(1000L);
		}
		if (before & 1)
		{
			pg_spin_delay();
			continue;
		}
		pg_read_barrier();
		copy->pid = src->pid;
		copy->dbid = src->dbid;
		n = src->nused;
		if (n < 0 || n > dlock_shared->entries_per_slot)
			n = 0;				/* torn read; the recheck below retries */
		copy->nused = n;
		memcpy(copy->entries, src->entries, sizeof(DlockEntry) * n);
		pg_read_barrier();
		if (pg_atomic_read_u32(&src->changecount) == before)
			return;
	}
}

/* ---- fencing tokens ---- */

static bool
token_file_read(uint64 *ceiling)
{
	DlockTokenFile f;
	pg_crc32c	crc;
	FILE	   *fp = AllocateFile(DLOCK_TOKEN_FILE, PG_BINARY_R);
	size_t		n;

	if (fp == NULL)
	{
		if (errno == ENOENT)
		{
			*ceiling = 1;		/* first start: tokens begin at 1 */
			return true;
		}
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("dlock: could not open \"%s\": %m", DLOCK_TOKEN_FILE)));
		return false;
	}
	n = fread(&f, 1, sizeof(f), fp);
	FreeFile(fp);
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &f, offsetof(DlockTokenFile, crc));
	FIN_CRC32C(crc);
	if (n != sizeof(f) || f.magic != DLOCK_TOKEN_MAGIC ||
		f.version != DLOCK_TOKEN_VERSION || !EQ_CRC32C(crc, f.crc))
	{
		ereport(LOG,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("dlock: \"%s\" is damaged; fencing tokens are disabled",
						DLOCK_TOKEN_FILE),
				 errhint("Restore the file, or remove it to restart tokens from 1 "
						 "(only if nothing outside the database keeps old tokens).")));
		return false;
	}
	*ceiling = f.ceiling;
	return true;
}

/* Durably record that tokens below ceiling may have been handed out. */
static bool
token_file_write(uint64 ceiling)
{
	DlockTokenFile f;
	const char *tmp = DLOCK_TOKEN_FILE ".tmp";
	FILE	   *fp;
	bool		ok;

	memset(&f, 0, sizeof(f));
	f.magic = DLOCK_TOKEN_MAGIC;
	f.version = DLOCK_TOKEN_VERSION;
	f.ceiling = ceiling;
	INIT_CRC32C(f.crc);
	COMP_CRC32C(f.crc, &f, offsetof(DlockTokenFile, crc));
	FIN_CRC32C(f.crc);

	fp = AllocateFile(tmp, PG_BINARY_W);
	if (fp == NULL)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("dlock: could not create \"%s\": %m", tmp)));
		return false;
	}
	ok = fwrite(&f, 1, sizeof(f), fp) == sizeof(f) && fflush(fp) == 0 &&
		pg_fsync(fileno(fp)) == 0;
	if (!ok)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("dlock: could not write \"%s\": %m", tmp)));
	if (FreeFile(fp) != 0)
		ok = false;
	if (!ok)
		return false;
	return durable_rename(tmp, DLOCK_TOKEN_FILE, LOG) == 0;
}

/*
 * The next fencing token, or 0 if tokens are unavailable.  Tokens come from
 * one counter, so they increase across all acquisitions of the cluster; the
 * counter never passes a ceiling that is already on disk, and every start
 * (clean or after a crash) resumes at the last ceiling, so they increase
 * across restarts too.
 */
uint64
dlock_next_token(void)
{
	DlockShared *s = dlock_shared;
	uint64		t;

	if (s == NULL || !s->tokens_ok)
		return 0;
	t = pg_atomic_fetch_add_u64(&s->token_next, 1);
	if (likely(t < pg_atomic_read_u64(&s->token_ceiling)))
		return t;

	/*
	 * This block is used up: reserve more on disk first.  One write covers
	 * every token handed out so far, however far earlier failures to write
	 * have pushed the counter.
	 */
	LWLockAcquire(s->token_lock, LW_EXCLUSIVE);
	if (t >= pg_atomic_read_u64(&s->token_ceiling))
	{
		uint64		c = Max(pg_atomic_read_u64(&s->token_ceiling), t) + s->token_block;

		if (c > (uint64) PG_INT64_MAX || !token_file_write(c))
		{
			LWLockRelease(s->token_lock);
			return 0;
		}
		pg_atomic_write_u64(&s->token_ceiling, c);
	}
	LWLockRelease(s->token_lock);
	return t;
}

/* ---- shared memory ---- */

static void
dlock_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(dlock_shmem_size());
	RequestNamedLWLockTranche("dlock", 1);
}

static void
dlock_shmem_startup(void)
{
	bool		found;
	DlockShared *s;
	int			i;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	s = ShmemInitStruct("dlock", dlock_shmem_size(), &found);
	if (!found)
	{
		uint64		start = 0;

		memset(s, 0, dlock_shmem_size());
		s->token_lock = &(GetNamedLWLockTranche("dlock"))->lock;
		s->reaper_pgprocno = -1;
		pg_atomic_init_u64(&s->reaper_wakeup, 0);
		s->nslots = MaxBackends;
		s->entries_per_slot = dlock_max_locks_per_session;
		s->slot_size = dlock_slot_size();
		s->token_block = dlock_token_reserve;

		/*
		 * Runs in the postmaster at start and after every crash: resume above
		 * whatever an earlier life may have handed out, and reserve a block.
		 */
		s->tokens_ok = token_file_read(&start) &&
			start <= PG_INT64_MAX - 2 * s->token_block &&
			token_file_write(start + s->token_block);
		pg_atomic_init_u64(&s->token_next, start);
		pg_atomic_init_u64(&s->token_ceiling, s->tokens_ok ? start + s->token_block : 0);

		dlock_shared = s;
		for (i = 0; i < s->nslots; i++)
			pg_atomic_init_u32(&dlock_slot(i)->changecount, 0);
	}
	dlock_shared = s;
	LWLockRelease(AddinShmemInitLock);
}

void
_PG_init(void)
{
	BackgroundWorker worker;

	/*
	 * Without preloading there is no shared memory to size, and a
	 * PGC_POSTMASTER setting cannot be defined after start-up: plain locking
	 * needs nothing more.
	 */
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomIntVariable("dlock.max_locks_per_session",
							"Named locks each session can show in dlock_locks and give leases to.",
							"Locks beyond this still work; they appear without a name and cannot have a lease.",
							&dlock_max_locks_per_session,
							64, 1, 4096,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.token_reserve",
							"Fencing tokens reserved on disk at a time.",
							"The token file is written and fsynced at every start and once every this many tokens; "
							"after a restart or crash, tokens resume above the last reservation.",
							&dlock_token_reserve,
							DLOCK_TOKEN_RESERVE_DEFAULT, 1, INT_MAX,
							PGC_POSTMASTER, GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("dlock");

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = dlock_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = dlock_shmem_startup;

	memset(&worker, 0, sizeof(worker));
	/* a connection to no database: only so that pg_stat_activity shows it */
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "dlock");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "dlock_reaper_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "dlock lease reaper");
	snprintf(worker.bgw_type, BGW_MAXLEN, "dlock lease reaper");
	RegisterBackgroundWorker(&worker);
}
