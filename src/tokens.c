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
 * The counter starts as soon as the server is a primary: the reaper starts
 * it at start-up and within a second of a promotion, or the first backend
 * that asks for a token does, whichever comes first (a standby hands out
 * none: its tokens could not be ordered with its primary's).  It starts
 * above both the ceiling on disk and the timeline's base, and a block of
 * dlock.token_reserve tokens is reserved above it; when a block is
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
 *
 * Layer 3 of the map in dlock.h (mechanisms): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xlog.h"
#include "access/xlogdefs.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "dlock.h"
#include "entries.h"
#include "name.h"
#include "slots.h"
#include "tokens.h"

PG_FUNCTION_INFO_V1(dlock_token);

/*
 * A fencing token is  timeline * DLOCK_TOKEN_SPAN + n,  n in 1 .. SPAN - 1
 * (above; doc/high-availability.md).  Decimal, so that a token shows
 * its timeline: 30000000000042 is the 42nd token of timeline 3.
 */
#define DLOCK_TOKEN_SPAN INT64CONST(10000000000000)	/* 10^13 */
#define DLOCK_TOKEN_MAX_TIMELINE (PG_INT64_MAX / DLOCK_TOKEN_SPAN - 1) /* 922336 */

/*
 * DlockTokens.token_state.  A hold that got no token keeps, in place of it,
 * DLOCK_NO_TOKEN(the state that was the reason): a number <= 0.
 */
#define DLOCK_TOKENS_NOT_STARTED	0	/* in recovery: a standby's holds */
#define DLOCK_TOKENS_ON				1
#define DLOCK_TOKENS_FILE_FAILED	2	/* tried again after DLOCK_TOKEN_RETRY_US */
#define DLOCK_TOKENS_USED_UP		3	/* this timeline's tokens are used up */
#define DLOCK_TOKENS_BAD_TIMELINE	4	/* beyond DLOCK_TOKEN_MAX_TIMELINE */
#define DLOCK_TOKENS_FILE_AHEAD		5	/* the file has a later timeline's
										 * tokens; until the next start */
#define DLOCK_NO_TOKEN(state)	(-(int64) (state))

/* A token file that could not be read or written is tried again after: */
#define DLOCK_TOKEN_RETRY_US ((int64) 10 * 1000 * 1000)

/* The file, relative to the data directory, that holds the token ceiling. */
#define DLOCK_TOKEN_FILE "pg_dlock_tokens"

/* The part of shared memory (shmem.c). */
typedef struct DlockTokens
{
	LWLock	   *token_lock;	/* serialises starting the counter and
								 * extending the token ceiling */
	pg_atomic_uint32 token_state;	/* DLOCK_TOKENS_* */
	pg_atomic_uint64 token_next;	/* next token to hand out */
	pg_atomic_uint64 token_ceiling; /* tokens < ceiling are reserved on disk */
	uint64		token_limit;	/* tokens of this timeline are below this */
	uint64		token_block;	/* dlock.token_reserve */
	TimeLineID	token_timeline; /* the timeline in tokens (the server's, plus
								 * token_offset) */
	uint32		token_offset;	/* added to the timeline: see tokens_start */
	pg_atomic_uint64 token_retry_at;	/* FILE_FAILED: when to try again */
} DlockTokens;

static DlockTokens *tokens = NULL;
int			dlock_token_reserve = DLOCK_TOKEN_RESERVE_DEFAULT;

Size
dlock_tokens_shmem_size(void)
{
	return MAXALIGN(sizeof(DlockTokens));
}

void
dlock_tokens_shmem_request(void)
{
	RequestNamedLWLockTranche("dlock", 1);
}

/* At start-up, with AddinShmemInitLock held (shmem.c). */
void
dlock_tokens_shmem_init(void)
{
	bool		found;

	tokens = ShmemInitStruct("dlock tokens", dlock_tokens_shmem_size(), &found);
	if (found)
		return;
	memset(tokens, 0, sizeof(DlockTokens));
	tokens->token_lock = &(GetNamedLWLockTranche("dlock"))->lock;
	tokens->token_block = dlock_token_reserve;
	/* tokens start with the first one asked for after recovery */
	pg_atomic_init_u32(&tokens->token_state, DLOCK_TOKENS_NOT_STARTED);
	pg_atomic_init_u64(&tokens->token_next, 0);
	pg_atomic_init_u64(&tokens->token_ceiling, 0);
	pg_atomic_init_u64(&tokens->token_retry_at, 0);
}

/*
 * On-disk form of the token ceiling.  Version 2 (dlock 1.2) adds the
 * system identifier of the cluster whose tokens these are, and the offset
 * that cluster adds to its timeline in tokens (not 0 only after pg_upgrade:
 * see tokens_start).  Version 1 (dlock 1.0, 1.1) is read as this cluster's,
 * with offset 0.
 */
typedef struct DlockTokenFile
{
	uint32		magic;
	uint32		version;
	uint64		ceiling;
	uint64		sysid;
	uint32		tli_offset;
	pg_crc32c	crc;
} DlockTokenFile;

typedef struct DlockTokenFileV1
{
	uint32		magic;
	uint32		version;
	uint64		ceiling;
	pg_crc32c	crc;
} DlockTokenFileV1;

#define DLOCK_TOKEN_MAGIC 0x646c6f63	/* "dloc" */
#define DLOCK_TOKEN_VERSION 2

static bool
crc_ok(const void *data, size_t len, pg_crc32c expected)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, len);
	FIN_CRC32C(crc);
	return EQ_CRC32C(crc, expected);
}

/*
 * Read the token file into *f (version 1 is returned as version 2 with
 * sysid 0 and offset 0); a missing file is ceiling 0.  False, after a LOG
 * line, if the file cannot be read or is damaged.
 */
static bool
token_file_read(DlockTokenFile *f)
{
	union
	{
		DlockTokenFile v2;
		DlockTokenFileV1 v1;
	}			buf;
	FILE	   *fp = AllocateFile(DLOCK_TOKEN_FILE, PG_BINARY_R);
	size_t		n;
	bool		ok = false;

	memset(f, 0, sizeof(*f));
	if (fp == NULL)
	{
		if (errno == ENOENT)
			return true;		/* first start: the timeline's base decides */
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", DLOCK_TOKEN_FILE),
				 errdetail("Fencing tokens are disabled; dlock tries again within 10 seconds.")));
		return false;
	}
	memset(&buf, 0, sizeof(buf));
	n = fread(&buf, 1, sizeof(buf), fp);
	FreeFile(fp);
	if (n >= offsetof(DlockTokenFile, ceiling) && buf.v2.magic == DLOCK_TOKEN_MAGIC)
	{
		if (buf.v2.version == 1 && n == sizeof(DlockTokenFileV1))
		{
			ok = crc_ok(&buf.v1, offsetof(DlockTokenFileV1, crc), buf.v1.crc);
			f->ceiling = buf.v1.ceiling;
		}
		else if (buf.v2.version == DLOCK_TOKEN_VERSION && n == sizeof(DlockTokenFile))
		{
			ok = crc_ok(&buf.v2, offsetof(DlockTokenFile, crc), buf.v2.crc);
			*f = buf.v2;
		}
	}
	if (!ok)
	{
		memset(f, 0, sizeof(*f));
		ereport(LOG,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("file \"%s\" is damaged", DLOCK_TOKEN_FILE),
				 errdetail("Fencing tokens are disabled; locking works without them."),
				 errhint("Restore the file, or remove it to restart tokens at the start of the current timeline "
						 "(only if nothing outside the database keeps tokens of this timeline, and the cluster "
						 "was not made by pg_upgrade); dlock reads it again within 10 seconds.")));
	}
	return ok;
}

/* Durably record that tokens below ceiling may have been handed out. */
static bool
token_file_write(uint64 ceiling, uint32 tli_offset)
{
	DlockTokenFile f;
	const char *tmp = DLOCK_TOKEN_FILE ".tmp";
	FILE	   *fp;
	bool		ok;

	memset(&f, 0, sizeof(f));
	f.magic = DLOCK_TOKEN_MAGIC;
	f.version = DLOCK_TOKEN_VERSION;
	f.ceiling = ceiling;
	f.sysid = GetSystemIdentifier();
	f.tli_offset = tli_offset;
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
 * The token file read or written without raising an error: one raised
 * inside (AllocateFile's "exceeded maxAllocatedDescs" when the caller has
 * many files open, out of memory) becomes a LOG line and false, the answer
 * of a file that failed.  A token that cannot be reserved is then not given,
 * and the acquisition goes on without one, so an error can never come
 * between a grant and its record.
 *
 * Why this is safe without a subtransaction: both functions raise errors
 * only before AllocateFile has opened anything (or, from inside an
 * ereport(LOG), with it already freed), and hold no lock or buffer of their
 * own; the caller holds token_lock, which stays held and is released by the
 * caller as usual.  errfinish() zeroed the interrupt holdoff counts that
 * LWLockAcquire raised, so they are put back.
 */
static bool
token_file_io(DlockTokenFile *file, bool do_write, uint64 ceiling, uint32 tli_offset)
{
	DlockTokenFile *volatile f = file;
	volatile bool write = do_write;
	MemoryContext cxt = CurrentMemoryContext;
	uint32		holdoff = InterruptHoldoffCount;
	uint32		cancel_holdoff = QueryCancelHoldoffCount;
	volatile bool ok = false;

	PG_TRY();
	{
		DLOCK_FAULT("token.file");
		ok = write ? token_file_write(ceiling, tli_offset) : token_file_read(f);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		InterruptHoldoffCount = holdoff;
		QueryCancelHoldoffCount = cancel_holdoff;
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(LOG,
				(errcode(edata->sqlerrcode),
				 errmsg("could not %s file \"%s\": %s", write ? "write" : "read",
						DLOCK_TOKEN_FILE, edata->message ? edata->message : ""),
				 errdetail("Locks are taken without fencing tokens meanwhile.")));
		FreeErrorData(edata);
		if (!write)
			memset(f, 0, sizeof(*f));
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

static void
log_used_up(DlockTokens *s)
{
	ereport(LOG,
			(errmsg("fencing tokens of timeline %u are used up", s->token_timeline),
			 errdetail("Locks are taken without fencing tokens until the server writes on a new timeline.")));
}

/* A token file that failed: is it time to try again (or did the clock go back)? */
static bool
retry_due(DlockTokens *s)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz at = (TimestampTz) pg_atomic_read_u64(&s->token_retry_at);

	return now >= at || now < at - DLOCK_TOKEN_RETRY_US;
}

/*
 * Start the counter on the timeline this server writes on (once per life of
 * the shared memory, in the first backend that asks for a token after
 * recovery; again, now and then, while the file fails).  Returns the new
 * state.  wait: false to give up at once if another backend is at it.
 *
 * The high part of a token is the timeline plus an offset, 0 unless the
 * file comes from another cluster (another system identifier): pg_upgrade
 * makes a new cluster, on timeline 1, and the old cluster's file copied
 * into it is how its tokens stay above the old ones.  The offset is then
 * the last token timeline of that file, kept in the file from then on, so
 * that every later timeline of the new cluster (its standbys' too, which
 * were copied with either file) is above it.
 */
/*
 * token_lock, waited for interruptibly: its holder may be writing and
 * fsyncing the token file, slowly, and a cancel or terminate of a caller
 * that waits meanwhile must not wait with it (an acquisition that draws a
 * token does so where an error gives its grant back).
 */
static void
token_lock_acquire(DlockTokens *s)
{
	while (!LWLockConditionalAcquire(s->token_lock, LW_EXCLUSIVE))
	{
		CHECK_FOR_INTERRUPTS();
		pg_usleep(1000L);
	}
}

static uint32
tokens_start(DlockTokens *s, bool wait)
{
	uint32		state;

	if (wait)
		token_lock_acquire(s);
	else if (!LWLockConditionalAcquire(s->token_lock, LW_EXCLUSIVE))
		return pg_atomic_read_u32(&s->token_state);	/* someone else is at it */
	state = pg_atomic_read_u32(&s->token_state);
	if (state == DLOCK_TOKENS_NOT_STARTED ||
		(state == DLOCK_TOKENS_FILE_FAILED && retry_due(s)))
	{
		TimeLineID	tli = GetWALInsertionTimeLine();
		DlockTokenFile f;

		if (!token_file_io(&f, false, 0, 0))
			state = DLOCK_TOKENS_FILE_FAILED;
		else
		{
			uint64		offset = f.tli_offset;
			uint64		ttl;

			if (f.sysid != 0 && f.sysid != GetSystemIdentifier() && f.ceiling > 0)
			{
				offset = (f.ceiling - 1) / DLOCK_TOKEN_SPAN;
				ereport(LOG,
						(errmsg("file \"%s\" comes from another cluster; fencing tokens go on above its tokens",
								DLOCK_TOKEN_FILE),
						 errdetail("The file is from database system %llu, with tokens of timeline %llu; "
								   "tokens of this cluster are timeline + %llu.",
								   (unsigned long long) f.sysid,
								   (unsigned long long) offset, (unsigned long long) offset)));
			}
			ttl = (uint64) tli + offset;
			s->token_timeline = (TimeLineID) Min(ttl, (uint64) PG_UINT32_MAX);
			if (ttl > DLOCK_TOKEN_MAX_TIMELINE)
			{
				ereport(LOG,
						(errmsg("fencing tokens are not available on timeline %llu",
								(unsigned long long) ttl),
						 errdetail("Tokens have room for timelines up to %u.",
								   (unsigned int) DLOCK_TOKEN_MAX_TIMELINE)));
				state = DLOCK_TOKENS_BAD_TIMELINE;
			}
			else
			{
				uint64		limit = (ttl + 1) * DLOCK_TOKEN_SPAN;
				uint64		start = Max(f.ceiling, ttl * DLOCK_TOKEN_SPAN + 1);
				uint64		c = Min(start + s->token_block, limit);

				s->token_limit = limit;
				s->token_offset = (uint32) offset;
				if (f.ceiling > limit)
				{
					ereport(LOG,
							(errmsg("file \"%s\" holds fencing tokens of timeline %llu, later than this server's timeline %llu",
									DLOCK_TOKEN_FILE,
									(unsigned long long) ((f.ceiling - 1) / DLOCK_TOKEN_SPAN),
									(unsigned long long) ttl),
							 errdetail("Fencing tokens are disabled: new ones could be lower than tokens already handed out.")));
					state = DLOCK_TOKENS_FILE_AHEAD;
				}
				else if (start >= limit)
				{
					ereport(LOG,
							(errmsg("fencing tokens of timeline %llu are used up", (unsigned long long) ttl),
							 errdetail("File \"%s\" says tokens up to %lld may have been handed out, the last token of timeline %llu.",
									   DLOCK_TOKEN_FILE, (long long) (f.ceiling - 1),
									   (unsigned long long) ttl)));
					state = DLOCK_TOKENS_USED_UP;
				}
				else if (!token_file_io(NULL, true, c, s->token_offset))
					state = DLOCK_TOKENS_FILE_FAILED;
				else
				{
					pg_atomic_write_u64(&s->token_next, start);
					pg_atomic_write_u64(&s->token_ceiling, c);
					pg_write_barrier();
					state = DLOCK_TOKENS_ON;
				}
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
 * Start tokens now if this server is a primary and they have not started:
 * called by the reaper at start and after a promotion, so that the token
 * file holds the timeline the server writes on even before the first lock
 * (pg_upgrade takes the offset of a new cluster from that file).
 */
void
dlock_tokens_prepare(void)
{
	DlockTokens *s = tokens;

	if (pg_atomic_read_u32(&s->token_state) == DLOCK_TOKENS_NOT_STARTED &&
		!RecoveryInProgress())
		(void) tokens_start(s, true);
}

/*
 * Token t was drawn at or above the ceiling: reserve the next block on disk
 * before handing it out.  One write covers every token drawn so far,
 * however far earlier failures to write have pushed the counter.
 */
static int64
tokens_reserve(DlockTokens *s, uint64 t)
{
	int64		result = (int64) t;

	token_lock_acquire(s);
	if (t >= pg_atomic_read_u64(&s->token_ceiling))
	{
		if (t >= s->token_limit)
		{
			if (pg_atomic_read_u32(&s->token_state) == DLOCK_TOKENS_ON)
			{
				pg_atomic_write_u32(&s->token_state, DLOCK_TOKENS_USED_UP);
				log_used_up(s);
			}
			result = DLOCK_NO_TOKEN(DLOCK_TOKENS_USED_UP);
		}
		else
		{
			uint64		c = Min(Max(pg_atomic_read_u64(&s->token_ceiling), t) + s->token_block,
								s->token_limit);

			if (token_file_io(NULL, true, c, s->token_offset))
				pg_atomic_write_u64(&s->token_ceiling, c);
			else
				result = DLOCK_NO_TOKEN(DLOCK_TOKENS_FILE_FAILED);
		}
	}
	LWLockRelease(s->token_lock);
	return result;
}

/*
 * The fencing token of a new hold: positive, or DLOCK_NO_TOKEN(why).  The usual case is one atomic add and one read.
 */
int64
dlock_token_next(void)
{
	DlockTokens *s = tokens;
	uint32		state;
	uint64		t;

	if (s == NULL)
		return DLOCK_NO_TOKEN(DLOCK_TOKENS_FILE_FAILED);
	state = pg_atomic_read_u32(&s->token_state);
	if (unlikely(state != DLOCK_TOKENS_ON))
	{
		if (state == DLOCK_TOKENS_NOT_STARTED)
		{
			if (RecoveryInProgress())
				return DLOCK_NO_TOKEN(DLOCK_TOKENS_NOT_STARTED);
			state = tokens_start(s, true);
		}
		else if (state == DLOCK_TOKENS_FILE_FAILED)
		{
			/*
			 * Once the retry time has come (or the clock went back), one
			 * backend tries; the others go on without waiting for it.
			 */
			if (retry_due(s))
				state = tokens_start(s, false);
		}
		if (state != DLOCK_TOKENS_ON)
			return DLOCK_NO_TOKEN(state);
	}
	/* a full barrier: reads next and ceiling after the state said ON */
	t = pg_atomic_fetch_add_u64(&s->token_next, 1);
	if (likely(t < pg_atomic_read_u64(&s->token_ceiling)))
		return (int64) t;
	return tokens_reserve(s, t);
}

/*
 * dlock_token_next without anything that can fail, for the fast path: true
 * with the token where the counter runs and the token is below the
 * reserved ceiling (no file to write).  Else false, and *taken is what
 * dlock_token_next_finish must be given where an error is allowed: a token
 * drawn past the ceiling (>= 0), or none drawn (-1).
 */
bool
dlock_token_next_nofail(int64 *taken)
{
	DlockTokens *s = tokens;
	uint64		t;

	*taken = -1;
	if (unlikely(s == NULL) ||
		unlikely(pg_atomic_read_u32(&s->token_state) != DLOCK_TOKENS_ON))
		return false;
	/* a full barrier: reads the ceiling after the state said ON */
	t = pg_atomic_fetch_add_u64(&s->token_next, 1);
	*taken = (int64) t;
	return likely(t < pg_atomic_read_u64(&s->token_ceiling));
}

int64
dlock_token_next_finish(int64 taken)
{
	if (taken < 0)
		return dlock_token_next();
	return tokens_reserve(tokens, (uint64) taken);
}

/* Why a hold has no token: the DETAIL (and HINT) of dlock_token's error. */
int
dlock_token_none_detail(int64 token)
{
	DlockTokens *s = tokens;

	switch ((uint32) -token)
	{
		case DLOCK_TOKENS_NOT_STARTED:
			return errdetail("The lock was taken while the server was a standby; only a primary hands out fencing tokens.");
		case DLOCK_TOKENS_USED_UP:
			errhint("Tokens go on after the server moves to a new timeline (a promotion or a point-in-time recovery).");
			return errdetail("The fencing tokens of timeline %u are used up.", s->token_timeline);
		case DLOCK_TOKENS_FILE_AHEAD:
			return errdetail("File \"%s\" holds tokens of a later timeline than this server's (%u); the server log says more.",
							 DLOCK_TOKEN_FILE, s->token_timeline);
		case DLOCK_TOKENS_BAD_TIMELINE:
			return errdetail("Fencing tokens are on timeline %u; they have room for timelines up to %u.",
							 s->token_timeline, (unsigned int) DLOCK_TOKEN_MAX_TIMELINE);
		default:
			return errdetail("dlock could not reserve tokens in file \"%s\"; the server log says why.",
							 DLOCK_TOKEN_FILE);
	}
}

/* dlock_token(name): the fencing token of this session's hold of name */
Datum
dlock_token(PG_FUNCTION_ARGS)
{
	DlockName	name;
	int			refs[DLOCK_MODES];
	DlockEntry *e;

	dlock_name_arg(fcinfo, 0, &name);
	dlock_require_preload("Fencing tokens are handed out from a counter in shared memory.");
	dlock_backend_init();
	if (dlock_entries_held(&name, refs) == 0)
		dlock_entries_not_held(&name);
	e = dlock_entry_at(refs[0]);
	if (e->token <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lock \"%s\" has no fencing token", dlock_display_name(&name)),
				 dlock_token_none_detail(e->token)));
	PG_RETURN_INT64(e->token);
}
