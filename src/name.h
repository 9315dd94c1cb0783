/*
 * name.h: lock names and keys, argument checks, and the helpers that turn
 * what dlock keeps into SQL values (name.c).  The ground: calls nothing of
 * dlock's but the hash.
 */
#ifndef DLOCK_NAME_H
#define DLOCK_NAME_H

#include "fmgr.h"
#include "miscadmin.h"
#include "datatype/timestamp.h"
#include "storage/lock.h"

#include "dlock.h"

/* Longest client address kept for the view (numeric IPv6 with a zone). */
#define DLOCK_CLIENT_MAX 64

/* A checked lock-name argument. */
typedef struct DlockName
{
	text	   *arg;			/* the argument, for messages */
	const char *utf8;			/* bytes that are hashed */
	int			len;
	int64		key;
} DlockName;

/*
 * A checked info argument (the holder's word): given or not (NULL, or an
 * argument the function's SQL version does not have); '' clears it.
 */
typedef struct DlockInfo
{
	bool		given;
	const char *utf8;
	int			len;
} DlockInfo;

/* names, keys and lock tags */
extern void dlock_name_null(void);
extern void dlock_name_text(text *t, DlockName *name);
extern int	dlock_names_arg(FunctionCallInfo fcinfo, int argno, DlockName **names);

/*
 * The last name checked, with its key (name.c): len is 0 until one was,
 * and the name is kept only where the server's encoding is UTF-8 (its
 * bytes are then the argument's).
 */
#define DLOCK_LAST_NAME_MAX 64
typedef struct DlockLastName
{
	int64		key;
	int			len;
	char		utf8[DLOCK_LAST_NAME_MAX];
} DlockLastName;
extern PGDLLIMPORT DlockLastName dlock_last_name;

/*
 * The lock-name argument: not null, and a name (dlock_name_text).  The name
 * a session takes over and over is the one checked last: its bytes are
 * compared, and nothing else needs doing.
 */
static inline void
dlock_name_arg(FunctionCallInfo fcinfo, int argno, DlockName *name)
{
	text	   *t;

	if (PG_ARGISNULL(argno))
		dlock_name_null();
	t = PG_GETARG_TEXT_PP(argno);
	if (likely((int) VARSIZE_ANY_EXHDR(t) == dlock_last_name.len) && dlock_last_name.len > 0 &&
		memcmp(VARDATA_ANY(t), dlock_last_name.utf8, dlock_last_name.len) == 0)
	{
		name->arg = t;
		name->utf8 = VARDATA_ANY(t);
		name->len = dlock_last_name.len;
		name->key = dlock_last_name.key;
		return;
	}
	dlock_name_text(t, name);
}
extern char *dlock_display_name(const DlockName *name);
/* the same tag as pg_advisory_lock(bigint) */
static inline void
dlock_set_locktag(LOCKTAG *tag, int64 key)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId,
						 (uint32) ((uint64) key >> 32), (uint32) key, DLOCK_SUBID_KEY);
}
extern void dlock_set_permit_tag(LOCKTAG *tag, Oid dbid, int64 key, int permit);
extern void dlock_set_turnstile_tag(LOCKTAG *tag, Oid dbid, int64 key);
extern void dlock_set_line_tag(LOCKTAG *tag, Oid dbid, int64 key);
extern void dlock_set_marker_tag(LOCKTAG *tag, Oid dbid, int64 key, uint8 mode);
extern void dlock_set_update_tag(LOCKTAG *tag, Oid dbid, int64 key);

/* arguments */
/* an argno that no function has: that argument is never given */
#define DLOCK_NO_ARG 100

extern int64 dlock_duration_arg(FunctionCallInfo fcinfo, int argno, int ms_argno,
								const char *what, int64 zero_default_us);
extern int64 dlock_timeout_arg(FunctionCallInfo fcinfo, int argno, int ms_argno,
							   int64 zero_default_us);
extern bool dlock_bool_arg(FunctionCallInfo fcinfo, int argno, const char *what);
extern uint8 dlock_mode_arg(FunctionCallInfo fcinfo, int shared_arg, int mode_arg);
extern int	dlock_permits_given(FunctionCallInfo fcinfo, int argno, bool shared);

/*
 * The permits argument (1.5): 0 for a lock (NULL, absent or 1), else how
 * many may hold the name at once.  Inline for the lock path, where a call
 * almost never gives one.
 */
static inline int
dlock_permits_arg(FunctionCallInfo fcinfo, int argno, bool shared)
{
	if (likely(argno >= PG_NARGS() || PG_ARGISNULL(argno)))
		return 0;
	return dlock_permits_given(fcinfo, argno, shared);
}
extern void dlock_info_arg(FunctionCallInfo fcinfo, int argno, DlockInfo *info);

/*
 * What can end this session (a lease) or speak for it (info) is accepted
 * only from code that runs for the session itself (name.c): not inside a
 * security-restricted operation, and not from a SECURITY DEFINER function
 * (or other local change of user) of a role that could not end this session
 * with pg_terminate_backend.  lease: a lease is given (else only info).
 * Cheap on the usual path: two flag tests.
 */
extern void dlock_refuse_foreign_code(bool lease);
extern bool dlock_code_is_foreign(void);

static inline void
dlock_check_own_session(bool lease)
{
	if (unlikely(InSecurityRestrictedOperation() || InLocalUserIdChange()))
		dlock_refuse_foreign_code(lease);
}

/*
 * Does this code run in the session as another role, one that could not
 * end the session (above)?  Two flag tests where it does not.
 */
static inline bool
dlock_foreign_code(void)
{
	return unlikely(InSecurityRestrictedOperation() || InLocalUserIdChange()) &&
		dlock_code_is_foreign();
}

/*
 * Does this code run as another role than the session's, by a local change
 * of user (a SECURITY DEFINER function) or in a security-restricted
 * operation?  Then what it takes counts against that role's limits.
 */
static inline Oid
dlock_limit_role(void)
{
	if (unlikely(InSecurityRestrictedOperation() || InLocalUserIdChange()))
		return GetUserId();
	return GetSessionUserId();
}
extern TimestampTz dlock_lease_end(TimestampTz now, int64 lease_us);

/* SQL values */
extern Datum dlock_name_datum(const char *name, int namelen, bool *isnull);
extern char *dlock_stored_name(const char *utf8, int len);
extern char *dlock_name_for_report(const char *utf8, int len);
extern Datum dlock_database_name(Oid dbid, bool as_text, bool *isnull);
extern void dlock_database_names_reset(void);
extern Datum dlock_interval_datum(int64 us);
struct PgBackendStatus;
extern void dlock_client_address(const struct PgBackendStatus *be, char *buf);

#endif							/* DLOCK_NAME_H */
