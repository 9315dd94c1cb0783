/*
 * tokens.c: fencing tokens, the counter and the file that keeps it.
 *
 * Tokens come from one counter in shared memory, so they increase across
 * all acquisitions of the cluster.  The file pg_dlock_tokens in the data
 * directory holds a ceiling: every token handed out is below it.  At every
 * start (clean or after a crash) the counter resumes at the ceiling on disk
 * and a new block of dlock.token_reserve tokens is reserved above it; when a
 * block is used up, the next one is reserved (written and fsynced) before a
 * token from it is handed out.
 *
 * Invariant: no token is handed out that is not below a ceiling already
 * durable on disk, so tokens increase across restarts and crashes too.  If
 * the file cannot be read or written, acquisitions go on without a token
 * (dlock_token says why) rather than hand out one that could repeat.
 */
#include "postgres.h"

#include <unistd.h>

#include "port/pg_crc32c.h"
#include "storage/fd.h"

#include "dlock.h"

PG_FUNCTION_INFO_V1(dlock_token);

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
				 errmsg("could not open file \"%s\": %m", DLOCK_TOKEN_FILE),
				 errdetail("Fencing tokens are disabled.")));
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
				 errmsg("file \"%s\" is damaged", DLOCK_TOKEN_FILE),
				 errdetail("Fencing tokens are disabled; locking works without them."),
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
				 errmsg("could not create file \"%s\": %m", tmp)));
		return false;
	}
	ok = fwrite(&f, 1, sizeof(f), fp) == sizeof(f) && fflush(fp) == 0 &&
		pg_fsync(fileno(fp)) == 0;
	if (!ok)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", tmp)));
	if (FreeFile(fp) != 0)
		ok = false;
	if (!ok)
		return false;
	return durable_rename(tmp, DLOCK_TOKEN_FILE, LOG) == 0;
}

/*
 * At start-up (in the postmaster, at start and after every crash): resume
 * above whatever an earlier life may have handed out, and reserve a block.
 * Sets *next to the first token to hand out; false if tokens are disabled.
 */
bool
dlock_tokens_start(uint64 *next)
{
	uint64		start = 0;
	bool		ok;

	ok = token_file_read(&start) &&
		start <= PG_INT64_MAX - 2 * dlock_shared->token_block &&
		token_file_write(start + dlock_shared->token_block);
	*next = start;
	return ok;
}

/*
 * The next fencing token, or 0 if tokens are unavailable.
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

/* dlock_token(name): the fencing token of this session's hold of name */
Datum
dlock_token(PG_FUNCTION_ARGS)
{
	DlockName	name;
	int			refs[2];
	DlockEntry *e;

	dlock_name_arg(fcinfo, 0, &name);
	dlock_require_preload("Fencing tokens are handed out from a counter in shared memory.");
	dlock_backend_init();
	if (dlock_held_entries(&name, refs) == 0)
		dlock_not_held(&name);
	e = dlock_entry_at(refs[0]);
	if (e->token == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lock \"%s\" has no fencing token", dlock_display_name(&name)),
				 errdetail("dlock could not reserve tokens in file \"%s\"; the server log says why.",
						   DLOCK_TOKEN_FILE)));
	PG_RETURN_INT64(e->token);
}
