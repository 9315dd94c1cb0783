/*
 * tokens.c: fencing tokens, the counter and the file that keeps it.
 *
 * A token is  timeline * DLOCK_TOKEN_SPAN + n : the high part is the
 * timeline the server writes WAL on, the low part a counter of that
 * timeline, 1 .. DLOCK_TOKEN_SPAN - 1.  PostgreSQL gives every promotion and
 * every end of archive recovery a timeline larger than any it knows, so the
 * first token of a new primary is above every token of every earlier
 * timeline, whatever the old primary did after the standby was copied and
 * even while it still runs: nothing needs to be replicated.
 *
 * Within a timeline, tokens come from one counter in shared memory, so they
 * increase across all acquisitions of the server.  The file pg_dlock_tokens
 * in the data directory holds a ceiling: every token handed out is below it.
 * The counter starts when the first token is asked for after recovery (a
 * standby hands out none: its tokens could not be ordered with its
 * primary's), above both the ceiling on disk and the timeline's base, and a
 * block of dlock.token_reserve tokens is reserved above it; when a block is
 * used up, the next one is reserved (written and fsynced) before a token from
 * it is handed out.  Reservations never go past the timeline's last token.
 *
 * Invariant: no token is handed out that is not below a ceiling already
 * durable on disk and inside the range of the timeline the server writes
 * on, so tokens increase across restarts, crashes and promotions, and never
 * wrap.  When a token cannot be given (the file cannot be read or written,
 * which is tried again every DLOCK_TOKEN_RETRY_US; the file holds tokens of
 * a later timeline, as after pg_upgrade; the timeline's tokens are used up;
 * a standby), the acquisition goes on without one, and dlock_token says why,
 * rather than hand out one that could repeat.
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xlog.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "utils/timestamp.h"

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
			*ceiling = 0;		/* first start: the timeline's base decides */
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
				 errhint("Restore the file, or remove it to restart tokens at the start of the current timeline "
						 "(only if nothing outside the database keeps tokens of this timeline); "
						 "dlock reads it again within 10 seconds.")));
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

/* Why a hold has no token, from the state of the counter. */
static int64
no_token(uint32 state)
{
	switch (state)
	{
		case DLOCK_TOKENS_USED_UP:
			return DLOCK_NO_TOKEN_USED_UP;
		case DLOCK_TOKENS_BAD_TIMELINE:
			return DLOCK_NO_TOKEN_TIMELINE;
		case DLOCK_TOKENS_FILE_AHEAD:
			return DLOCK_NO_TOKEN_FILE_AHEAD;
		default:
			return DLOCK_NO_TOKEN_FILE;
	}
}

static void
log_used_up(DlockShared *s)
{
	ereport(LOG,
			(errmsg("fencing tokens of timeline %u are used up", s->token_timeline),
			 errdetail("Locks are taken without fencing tokens until the server writes on a new timeline.")));
}

/*
 * Start the counter on the timeline this server writes on (once per life of
 * the shared memory, in the first backend that asks for a token after
 * recovery).  Returns the new state.
 */
static uint32
tokens_start(DlockShared *s)
{
	uint32		state;

	LWLockAcquire(s->token_lock, LW_EXCLUSIVE);
	state = pg_atomic_read_u32(&s->token_state);
	if (state == DLOCK_TOKENS_NOT_STARTED ||
		(state == DLOCK_TOKENS_FILE_FAILED &&
		 GetCurrentTimestamp() >= (TimestampTz) pg_atomic_read_u64(&s->token_retry_at)))
	{
		TimeLineID	tli = GetWALInsertionTimeLine();
		uint64		ceiling;

		s->token_timeline = tli;
		if (tli > DLOCK_TOKEN_MAX_TIMELINE)
		{
			ereport(LOG,
					(errmsg("fencing tokens are not available on timeline %u", tli),
					 errdetail("Tokens have room for timelines up to %u.",
							   (unsigned int) DLOCK_TOKEN_MAX_TIMELINE)));
			state = DLOCK_TOKENS_BAD_TIMELINE;
		}
		else if (!token_file_read(&ceiling))
			state = DLOCK_TOKENS_FILE_FAILED;
		else
		{
			uint64		limit = ((uint64) tli + 1) * DLOCK_TOKEN_SPAN;
			uint64		start = Max(ceiling, (uint64) tli * DLOCK_TOKEN_SPAN + 1);
			uint64		c = Min(start + s->token_block, limit);

			s->token_limit = limit;
			if (ceiling > limit)
			{
				/* pg_upgrade (which restarts at timeline 1), or a copied file */
				ereport(LOG,
						(errmsg("file \"%s\" holds fencing tokens of timeline %u, later than this server's timeline %u",
								DLOCK_TOKEN_FILE, (unsigned int) ((ceiling - 1) / DLOCK_TOKEN_SPAN), tli),
						 errdetail("Fencing tokens are disabled: new ones could be lower than tokens already handed out."),
						 errhint("After pg_upgrade, move the new cluster to a later timeline before its first start, as dlock's README describes under \"Upgrading with pg_upgrade\".")));
				state = DLOCK_TOKENS_FILE_AHEAD;
			}
			else if (start >= limit)
			{
				ereport(LOG,
						(errmsg("fencing tokens of timeline %u are used up", tli),
						 errdetail("File \"%s\" says tokens up to %lld may have been handed out, the last token of timeline %u.",
								   DLOCK_TOKEN_FILE, (long long) (ceiling - 1), tli)));
				state = DLOCK_TOKENS_USED_UP;
			}
			else if (!token_file_write(c))
				state = DLOCK_TOKENS_FILE_FAILED;
			else
			{
				pg_atomic_write_u64(&s->token_next, start);
				pg_atomic_write_u64(&s->token_ceiling, c);
				pg_write_barrier();
				state = DLOCK_TOKENS_ON;
			}
		}
		/* a file that failed is tried again, now and then */
		if (state == DLOCK_TOKENS_FILE_FAILED)
			pg_atomic_write_u64(&s->token_retry_at,
								(uint64) (GetCurrentTimestamp() + DLOCK_TOKEN_RETRY_US));
		pg_atomic_write_u32(&s->token_state, state);
	}
	LWLockRelease(s->token_lock);
	return state;
}

/*
 * Token t was drawn at or above the ceiling: reserve the next block on disk
 * before handing it out.  One write covers every token drawn so far,
 * however far earlier failures to write have pushed the counter.
 */
static int64
tokens_reserve(DlockShared *s, uint64 t)
{
	int64		result = (int64) t;

	LWLockAcquire(s->token_lock, LW_EXCLUSIVE);
	if (t >= pg_atomic_read_u64(&s->token_ceiling))
	{
		if (t >= s->token_limit)
		{
			if (pg_atomic_read_u32(&s->token_state) == DLOCK_TOKENS_ON)
			{
				pg_atomic_write_u32(&s->token_state, DLOCK_TOKENS_USED_UP);
				log_used_up(s);
			}
			result = DLOCK_NO_TOKEN_USED_UP;
		}
		else
		{
			uint64		c = Min(Max(pg_atomic_read_u64(&s->token_ceiling), t) + s->token_block,
								s->token_limit);

			if (token_file_write(c))
				pg_atomic_write_u64(&s->token_ceiling, c);
			else
				result = DLOCK_NO_TOKEN_FILE;
		}
	}
	LWLockRelease(s->token_lock);
	return result;
}

/*
 * The fencing token of a new hold: positive, or one of the DLOCK_NO_TOKEN_*
 * reasons.  The usual case is one atomic add and one read.
 */
int64
dlock_next_token(void)
{
	DlockShared *s = dlock_shared;
	uint32		state;
	uint64		t;

	if (s == NULL)
		return DLOCK_NO_TOKEN_FILE;
	state = pg_atomic_read_u32(&s->token_state);
	if (unlikely(state != DLOCK_TOKENS_ON))
	{
		if (state == DLOCK_TOKENS_NOT_STARTED || state == DLOCK_TOKENS_FILE_FAILED)
		{
			if (RecoveryInProgress())
				return DLOCK_NO_TOKEN_RECOVERY;
			/* a failed file: only once its retry time has come */
			if (state == DLOCK_TOKENS_NOT_STARTED ||
				GetCurrentTimestamp() >= (TimestampTz) pg_atomic_read_u64(&s->token_retry_at))
				state = tokens_start(s);
		}
		if (state != DLOCK_TOKENS_ON)
			return no_token(state);
	}
	/* a full barrier: reads next and ceiling after the state said ON */
	t = pg_atomic_fetch_add_u64(&s->token_next, 1);
	if (likely(t < pg_atomic_read_u64(&s->token_ceiling)))
		return (int64) t;
	return tokens_reserve(s, t);
}

/* The error of dlock_token for a hold without a token. */
static void
no_token_error(const DlockName *name, int64 why)
{
	DlockShared *s = dlock_shared;

	switch (why)
	{
		case DLOCK_NO_TOKEN_RECOVERY:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("lock \"%s\" has no fencing token", dlock_display_name(name)),
					 errdetail("The lock was taken while the server was a standby; only a primary hands out fencing tokens.")));
			break;
		case DLOCK_NO_TOKEN_USED_UP:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("lock \"%s\" has no fencing token", dlock_display_name(name)),
					 errdetail("The fencing tokens of timeline %u are used up.", s->token_timeline),
					 errhint("Tokens go on after the server moves to a new timeline (a promotion or a point-in-time recovery).")));
			break;
		case DLOCK_NO_TOKEN_FILE_AHEAD:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("lock \"%s\" has no fencing token", dlock_display_name(name)),
					 errdetail("File \"%s\" holds tokens of a later timeline than this server's (%u); the server log says more.",
							   DLOCK_TOKEN_FILE, s->token_timeline)));
			break;
		case DLOCK_NO_TOKEN_TIMELINE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("lock \"%s\" has no fencing token", dlock_display_name(name)),
					 errdetail("The server writes on timeline %u; fencing tokens have room for timelines up to %u.",
							   s->token_timeline, (unsigned int) DLOCK_TOKEN_MAX_TIMELINE)));
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("lock \"%s\" has no fencing token", dlock_display_name(name)),
					 errdetail("dlock could not reserve tokens in file \"%s\"; the server log says why.",
							   DLOCK_TOKEN_FILE)));
	}
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
	if (e->token <= 0)
		no_token_error(&name, e->token);
	PG_RETURN_INT64(e->token);
}
