/*
 * name.c: lock names, keys and argument checks, and the helpers that turn
 * what dlock keeps into SQL values (name.h).
 *
 * The key of a name is the first 8 bytes of the SHA-256 digest of the name's
 * UTF-8 bytes, read as a little-endian signed 64-bit integer.  Any client can
 * compute it (doc/functions.md "The key of a name" has the recipe and test vectors), and it is the key
 * of an ordinary bigint advisory lock: dlock_try('x') and
 * pg_try_advisory_lock(dlock_key('x')) take the same lock.
 *
 * Layer 1 of the map in dlock.h (the ground): calls no other file of dlock's
 * but sha256.c.
 */
#include "postgres.h"

#include <limits.h>

#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "common/hashfn.h"
#include "common/ip.h"
#include "common/int.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/backend_status.h"
#include "utils/array.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dlock.h"
#include "name.h"
#include "sha256.h"

PG_FUNCTION_INFO_V1(dlock_key);

static int64
dlock_key_bytes(const char *utf8, int len)
{
	uint8		digest[32];
	uint64		k = 0;
	int			i;

	dlock_sha256((const uint8 *) utf8, len, digest);
	for (i = 7; i >= 0; i--)
		k = (k << 8) | digest[i];
	return (int64) k;
}

/*
 * A small per-backend cache of recent names and their keys: applications
 * use a few names over and over, and a cheap hash plus a compare costs far
 * less than SHA-256.  Direct-mapped; names longer than CACHE_NAME_MAX are
 * always hashed.
 */
#define CACHE_SIZE 128
#define CACHE_NAME_MAX 64

typedef struct KeyCacheEntry
{
	int64		key;
	int			len;			/* 0: empty */
	char		name[CACHE_NAME_MAX];
} KeyCacheEntry;

static KeyCacheEntry *key_cache = NULL;

/* name.h: what dlock_name_arg compares first */
DlockLastName dlock_last_name = {0, 0, {0}};

static int64
key_of(const char *utf8, int len)
{
	KeyCacheEntry *c;

	if (len > CACHE_NAME_MAX)
		return dlock_key_bytes(utf8, len);
	if (unlikely(key_cache == NULL))
		key_cache = MemoryContextAllocZero(TopMemoryContext,
										   sizeof(KeyCacheEntry) * CACHE_SIZE);
	c = &key_cache[hash_bytes((const unsigned char *) utf8, len) % CACHE_SIZE];
	if (c->len != len || memcmp(c->name, utf8, len) != 0)
	{
		c->key = dlock_key_bytes(utf8, len);
		memcpy(c->name, utf8, len);
		c->len = len;
	}
	return c->key;
}

/* Permit p of a name (dlock.h): p 0 or 1 is the name's own lock. */
void
dlock_set_permit_tag(LOCKTAG *tag, Oid dbid, int64 key, int permit)
{
	SET_LOCKTAG_ADVISORY(*tag, dbid, (uint32) ((uint64) key >> 32), (uint32) key,
						 dlock_permit_subid(permit));
}

/* The turnstile of a semaphore's name (dlock.h). */
void
dlock_set_turnstile_tag(LOCKTAG *tag, Oid dbid, int64 key)
{
	SET_LOCKTAG_ADVISORY(*tag, dbid, (uint32) ((uint64) key >> 32), (uint32) key,
						 DLOCK_SUBID_TURNSTILE);
}

/* The line of a name's waited detached acquisitions (dlock.h). */
void
dlock_set_line_tag(LOCKTAG *tag, Oid dbid, int64 key)
{
	SET_LOCKTAG_ADVISORY(*tag, dbid, (uint32) ((uint64) key >> 32), (uint32) key,
						 DLOCK_SUBID_LINE);
}

/* The lease marker of a session hold of (key, mode) (dlock.h). */
void
dlock_set_marker_tag(LOCKTAG *tag, Oid dbid, int64 key, uint8 mode)
{
	SET_LOCKTAG_ADVISORY(*tag, dbid, (uint32) ((uint64) key >> 32), (uint32) key,
						 DLOCK_MARKER_SUBID(mode));
}

/* The update gate of a name (dlock.h, 1.7). */
void
dlock_set_update_tag(LOCKTAG *tag, Oid dbid, int64 key)
{
	SET_LOCKTAG_ADVISORY(*tag, dbid, (uint32) ((uint64) key >> 32), (uint32) key,
						 DLOCK_SUBID_UPDATE);
}

/* Text in the server's encoding to UTF-8, in place if it is UTF-8 already. */
static void
to_utf8(const char **s, int *len)
{
	if (GetDatabaseEncoding() != PG_UTF8)
	{
		const char *u = pg_server_to_any(*s, *len, PG_UTF8);

		if (u != *s)
		{
			*s = u;
			*len = strlen(u);
		}
	}
}

void
dlock_name_null(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			 errmsg("lock name must not be null")));
}

/*
 * Check and convert a lock name: not empty, at most DLOCK_NAME_MAX bytes
 * once in UTF-8.  Fills in the bytes and the key.
 */
void
dlock_name_text(text *t, DlockName *name)
{
	const char *s;
	int			len;

	s = VARDATA_ANY(t);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock name must not be empty")));

	/*
	 * A character takes at most 4 bytes in any server encoding and at least
	 * one in UTF-8, so a longer text cannot fit: refuse it before converting.
	 */
	if (len > 4 * DLOCK_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock name is too long"),
				 errdetail("A lock name is at most %d bytes in UTF-8.",
						   DLOCK_NAME_MAX)));
	to_utf8(&s, &len);
	if (len > DLOCK_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock name is too long"),
				 errdetail("The name is %d bytes in UTF-8; a lock name is at most %d.",
						   len, DLOCK_NAME_MAX)));
	name->arg = t;
	name->utf8 = s;
	name->len = len;
	name->key = key_of(s, len);
	/* (where the server's encoding is UTF-8, these are the argument's bytes) */
	if (len <= DLOCK_LAST_NAME_MAX && GetDatabaseEncoding() == PG_UTF8)
	{
		dlock_last_name.len = 0;
		dlock_last_name.key = name->key;
		memcpy(dlock_last_name.utf8, s, len);
		dlock_last_name.len = len;
	}
}

static int
name_key_cmp(const void *a, const void *b)
{
	int64		ka = ((const DlockName *) a)->key;
	int64		kb = ((const DlockName *) b)->key;

	return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/*
 * An array of lock names (text[], any dimensions): each checked as a name,
 * then sorted by key with repeats (the same key: the same lock) taken out,
 * the order in which several locks are taken.  Not null, not empty.
 * Returns how many; *names is palloc'd.
 */
int
dlock_names_arg(FunctionCallInfo fcinfo, int argno, DlockName **names)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;
	int			kept;
	DlockName  *out;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("array of lock names must not be null")));
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("array of lock names must not be empty")));
	out = palloc(sizeof(DlockName) * n);
	for (i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (nulls[i])
			dlock_name_null();
		dlock_name_text(DatumGetTextPP(elems[i]), &out[i]);
	}
	qsort(out, n, sizeof(DlockName), name_key_cmp);
	for (i = 1, kept = 1; i < n; i++)
		if (out[i].key != out[kept - 1].key)
			out[kept++] = out[i];
	*names = out;
	return kept;
}

/*
 * A duration argument in microseconds, or -1 if the call gives none.  It can
 * be given as an interval (argument argno) or, since 1.5, as a number of
 * milliseconds (argument ms_argno, bigint, named WHAT_ms), for the drivers
 * that cannot send an interval (pgjdbc sends strings as varchar).  Either is
 * absent when NULL or when the function's SQL version does not have that
 * argument (the one-argument forms, or a database still on an older version
 * of the extension): ms_argno -1 means there is no such argument.  Both given
 * is an error, except that an interval equal to zero_default_us (the full
 * dlock_acquire's DEFAULT '0' timeout, which cannot be told from an explicit
 * '0') yields to the milliseconds; -1 for none.  Months count as 30 days, as
 * in EXTRACT(EPOCH FROM interval).
 */
int64
dlock_duration_arg(FunctionCallInfo fcinfo, int argno, int ms_argno, const char *what,
				   int64 zero_default_us)
{
	Interval   *iv;
	int64		days;
	int64		us = -1;
	int64		ms;

	if (argno < PG_NARGS() && !PG_ARGISNULL(argno))
	{
		iv = PG_GETARG_INTERVAL_P(argno);
		days = (int64) iv->month * DAYS_PER_MONTH + iv->day;
		if (pg_mul_s64_overflow(days, USECS_PER_DAY, &us) ||
			pg_add_s64_overflow(us, iv->time, &us))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s is out of range", what)));
		if (us < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must not be negative", what)));
	}
	if (ms_argno < 0 || ms_argno >= PG_NARGS() || PG_ARGISNULL(ms_argno))
		return us;
	if (us >= 0 && us != zero_default_us)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s and %s_ms cannot both be given", what, what),
				 errhint("Give the %s once: as an interval (%s => '5s') or in milliseconds (%s_ms => 5000).",
						 what, what, what)));
	ms = PG_GETARG_INT64(ms_argno);
	if (ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s_ms must not be negative", what)));
	if (pg_mul_s64_overflow(ms, 1000, &us))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s_ms is out of range", what)));
	return us;
}

/*
 * A wait's timeout argument (interval) and timeout_ms argument in
 * microseconds, or -1 (NULL: no limit); at most what the lock manager's
 * lock_timeout can say, INT_MAX milliseconds.
 */
int64
dlock_timeout_arg(FunctionCallInfo fcinfo, int argno, int ms_argno, int64 zero_default_us)
{
	int64		timeout_us = dlock_duration_arg(fcinfo, argno, ms_argno, "timeout",
												zero_default_us);

	if (timeout_us > (int64) INT_MAX * 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout is out of range"),
				 errdetail("The longest timeout is %d milliseconds (about 24 days); NULL waits without a limit.",
						   INT_MAX)));
	return timeout_us;
}

/* now + lease_us, or an error if that is past the end of timestamptz */
TimestampTz
dlock_lease_end(TimestampTz now, int64 lease_us)
{
	TimestampTz end;

	if (pg_add_s64_overflow(now, lease_us, &end) || !IS_VALID_TIMESTAMP(end))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease is out of range")));
	return end;
}

/*
 * The info argument (the holder's word, since 1.5): not given when NULL or
 * when the function's SQL version does not have it; at most DLOCK_INFO_MAX
 * bytes once in UTF-8, as names.  Keeping it needs shared memory, which the
 * caller checks (a lower layer cannot).
 */
void
dlock_info_arg(FunctionCallInfo fcinfo, int argno, DlockInfo *info)
{
	text	   *t;
	const char *s;
	int			len;

	info->given = false;
	info->utf8 = NULL;
	info->len = 0;
	if (argno >= PG_NARGS() || PG_ARGISNULL(argno))
		return;
	t = PG_GETARG_TEXT_PP(argno);
	s = VARDATA_ANY(t);
	len = VARSIZE_ANY_EXHDR(t);
	if (len <= 4 * DLOCK_INFO_MAX)
		to_utf8(&s, &len);
	if (len > DLOCK_INFO_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("info is too long"),
				 errdetail("The info of a lock is at most %d bytes in UTF-8.", DLOCK_INFO_MAX)));
	info->given = true;
	info->utf8 = s;
	info->len = len;
}

/*
 * Code that runs in this session as another role, on that role's behalf:
 * may it give one of this session's locks a lease (which ends the session,
 * or its transaction, when it runs out) or info (the holder's word)?  Only
 * where that role could end the session itself, by pg_terminate_backend's
 * rule: a superuser, or a role with the privileges of the session's role
 * (or of pg_signal_backend, for a session that is not a superuser's).  A
 * security-restricted operation (ANALYZE, VACUUM, CREATE INDEX, REFRESH
 * MATERIALIZED VIEW, ... running a table owner's expressions) never may:
 * it runs in whoever's session maintains the table.  SET ROLE is the
 * session's own doing and is no local change of user.
 */
static bool
could_end_session(Oid runs_as)
{
	Oid			session_role = MyProc != NULL ? MyProc->roleId : GetSessionUserId();

	return runs_as == GetSessionUserId() ||
		(superuser_arg(session_role) ? superuser_arg(runs_as) :
		 (has_privs_of_role(runs_as, session_role) ||
		  has_privs_of_role(runs_as, ROLE_PG_SIGNAL_BACKEND)));
}

/* (name.h) */
bool
dlock_code_is_foreign(void)
{
	if (InSecurityRestrictedOperation())
		return true;
	return InLocalUserIdChange() && !could_end_session(GetUserId());
}

void
dlock_refuse_foreign_code(bool lease)
{
	Oid			runs_as = GetUserId();
	Oid			session_role = MyProc != NULL ? MyProc->roleId : GetSessionUserId();
	const char *runs_as_name;
	const char *session_name;

	if (InSecurityRestrictedOperation())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 lease ?
				 errmsg("cannot give a lock a lease within a security-restricted operation") :
				 errmsg("cannot give a lock info within a security-restricted operation"),
				 errdetail("ANALYZE, VACUUM, CREATE INDEX, REFRESH MATERIALIZED VIEW and the like run a table owner's code in the session of whoever runs them; a lease given there would end that session."),
				 errhint("Take the lock without a lease or info there, or outside the operation.")));
	if (could_end_session(runs_as))
		return;
	runs_as_name = GetUserNameFromId(runs_as, true);
	session_name = GetUserNameFromId(session_role, true);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 lease ?
			 errmsg("cannot give a lock a lease from code running as role \"%s\" in a session it could not end",
					runs_as_name ? runs_as_name : "?") :
			 errmsg("cannot give a lock info from code running as role \"%s\" in a session it could not end",
					runs_as_name ? runs_as_name : "?"),
			 errdetail("A SECURITY DEFINER function of role \"%s\" runs in this session of role \"%s\", which that role could not end with pg_terminate_backend; a lease given here would end it.",
					   runs_as_name ? runs_as_name : "?", session_name ? session_name : "?"),
			 errhint("Give leases and info in code that runs as the session's user, or make the function's owner a member of the session's role.")));
}

/* A boolean argument; false for an argument the call does not have */
bool
dlock_bool_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (argno >= PG_NARGS())
		return false;
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	return PG_GETARG_BOOL(argno);
}

/*
 * The mode of a call (1.7): shared (argno shared_arg, a boolean), or the
 * mode argument (mode_arg, text: exclusive, shared or update), which says
 * it in words; both may be given only where they agree.  A mode argument
 * the call does not have, or NULL, is not given.
 */
uint8
dlock_mode_arg(FunctionCallInfo fcinfo, int shared_arg, int mode_arg)
{
	bool		shared = dlock_bool_arg(fcinfo, shared_arg, "shared");
	char	   *m;
	uint8		mode;

	if (mode_arg >= PG_NARGS() || PG_ARGISNULL(mode_arg))
		return shared ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
	m = text_to_cstring(PG_GETARG_TEXT_PP(mode_arg));
	if (strcmp(m, "exclusive") == 0)
		mode = DLOCK_EXCLUSIVE;
	else if (strcmp(m, "shared") == 0)
		mode = DLOCK_SHARED;
	else if (strcmp(m, "update") == 0)
		mode = DLOCK_UPDATE;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid lock mode \"%s\"", m),
				 errhint("The mode is one of exclusive, shared and update.")));
	if (shared && mode != DLOCK_SHARED)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("shared => true contradicts mode => '%s'", m),
				 errhint("Give the mode in one of the two arguments.")));
	pfree(m);
	return mode;
}

/*
 * The permits argument given (dlock_permits_arg): how many may hold the
 * name at once; 1 is the plain lock (permit 1 is the name's own lock), 0
 * returned.  shared: the call's mode, which a semaphore cannot have.
 */
int
dlock_permits_given(FunctionCallInfo fcinfo, int argno, bool shared)
{
	int64		n = PG_GETARG_INT64(argno);

	if (n < 1 || n > DLOCK_PERMITS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits must be between 1 and %d, not " INT64_FORMAT, DLOCK_PERMITS_MAX, n)));
	if (n > 1 && shared)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a semaphore's permits cannot be shared"),
				 errdetail("Each permit is held by one holder at a time."),
				 errhint("Leave out \"shared\", or leave out \"permits\" for a shared lock.")));
	return n > 1 ? (int) n : 0;
}

/* dlock_key(name text) returns bigint */
Datum
dlock_key(PG_FUNCTION_ARGS)
{
	DlockName	name;

	dlock_name_arg(fcinfo, 0, &name);
	PG_RETURN_INT64(name.key);
}

/* ---- SQL values ---- */

char *
dlock_display_name(const DlockName *name)
{
	return text_to_cstring(name->arg);
}

/*
 * The stored UTF-8 name in the database encoding, or NULL where it has a
 * character the encoding lacks (a name taken in another database).
 */
Datum
dlock_name_datum(const char *name, int namelen, bool *isnull)
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

/*
 * A stored UTF-8 name (or info) as a C string in the database encoding, for
 * a message; a character the encoding lacks is shown as \x and its bytes.
 * Never raises an error about the encoding.
 */
static char *
escaped_name(const char *utf8, int len)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) utf8[i];

		if (c >= 0x20 && c < 0x7f)
			appendStringInfoChar(&buf, (char) c);
		else
			appendStringInfo(&buf, "\\x%02x", c);
	}
	return buf.data;
}

char *
dlock_stored_name(const char *utf8, int len)
{
	bool		isnull;
	Datum		d = dlock_name_datum(utf8, len, &isnull);

	if (!isnull)
		return TextDatumGetCString(d);
	return escaped_name(utf8, len);
}

/*
 * dlock_stored_name for a report already under way (emit_log_hook): no
 * catalog lookup, so a name that is not ASCII is shown as \x and its bytes
 * unless the database is UTF-8 (or SQL_ASCII); so too where the client's
 * encoding is another, which might lack a character of the name (the report
 * would then fail to be converted, and the client get 22P05 instead).
 */
char *
dlock_name_for_report(const char *utf8, int len)
{
	int			enc = GetDatabaseEncoding();

	if ((enc == PG_UTF8 || enc == PG_SQL_ASCII) && pg_get_client_encoding() == enc)
		return pnstrdup(utf8, len);
	return escaped_name(utf8, len);
}

/*
 * The name of database dbid as a "name" Datum, or as_text a "text" one
 * (NULL: dropped), remembered until dlock_database_names_reset: a view has
 * few databases and many rows.
 */
static Oid	db_cache_oid[8];
static Datum db_cache_name[8][2];
static int	db_cache_n = 0;

void
dlock_database_names_reset(void)
{
	db_cache_n = 0;
}

Datum
dlock_database_name(Oid dbid, bool as_text, bool *isnull)
{
	char	   *dbname;
	Datum		d[2] = {(Datum) 0, (Datum) 0};
	int			i;

	for (i = 0; i < db_cache_n; i++)
		if (db_cache_oid[i] == dbid)
		{
			*isnull = (db_cache_name[i][as_text] == (Datum) 0);
			return db_cache_name[i][as_text];
		}
	dbname = get_database_name(dbid);
	if (dbname != NULL)
	{
		Name		n = (Name) palloc0(NAMEDATALEN);

		namestrcpy(n, dbname);
		d[0] = NameGetDatum(n);
		d[1] = CStringGetTextDatum(dbname);
	}
	if (db_cache_n < (int) lengthof(db_cache_oid))
	{
		db_cache_oid[db_cache_n] = dbid;
		db_cache_name[db_cache_n][0] = d[0];
		db_cache_name[db_cache_n][1] = d[1];
		db_cache_n++;
	}
	*isnull = (d[as_text] == (Datum) 0);
	return d[as_text];
}

/* An interval of us microseconds. */
Datum
dlock_interval_datum(int64 us)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = us;
	return IntervalPGetDatum(iv);
}

/*
 * A client's address as pg_stat_activity.client_addr shows it; "" for a
 * Unix socket or none.
 */
void
dlock_client_address(const PgBackendStatus *be, char *buf)
{
	buf[0] = '\0';
	if (be == NULL)
		return;
	if (be->st_clientaddr.addr.ss_family != AF_INET &&
		be->st_clientaddr.addr.ss_family != AF_INET6)
		return;
	if (pg_getnameinfo_all(&be->st_clientaddr.addr, be->st_clientaddr.salen,
						   buf, DLOCK_CLIENT_MAX, NULL, 0, NI_NUMERICHOST) != 0)
	{
		buf[0] = '\0';
		return;
	}
	clean_ipv6_addr(be->st_clientaddr.addr.ss_family, buf);
}
