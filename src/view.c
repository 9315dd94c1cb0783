/*
 * view.c: the dlock_locks view (dlock_locks()) and dlock_names().
 *
 * dlock_names() returns what every backend's slot and every detached hold
 * says is held or awaited.  dlock_locks() joins the same with the lock
 * manager's advisory locks (what pg_locks shows), which are the truth about
 * what is held: a name that the lock manager does not confirm is not shown,
 * and a lock without a name is shown without one.  It also adds the role,
 * application and client of each process (what pg_stat_activity shows).  It
 * reads each source once and joins them in hash tables, so the view costs
 * the same per lock with 100 locks held or 100,000.
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
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "dlock.h"

PG_FUNCTION_INFO_V1(dlock_names);
PG_FUNCTION_INFO_V1(dlock_locks);

#define DLOCK_NAMES_COLS 15

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
 * The name of database dbid as a "name" Datum (NULL: dropped), remembered
 * until dlock_database_names_reset: a view has few databases and many rows.
 */
static Oid	db_cache_oid[8];
static Datum db_cache_name[8];
static int	db_cache_n = 0;

void
dlock_database_names_reset(void)
{
	db_cache_n = 0;
}

Datum
dlock_database_name(Oid dbid, bool *isnull)
{
	char	   *dbname;
	Datum		d = (Datum) 0;
	int			i;

	for (i = 0; i < db_cache_n; i++)
		if (db_cache_oid[i] == dbid)
		{
			*isnull = (db_cache_name[i] == (Datum) 0);
			return db_cache_name[i];
		}
	dbname = get_database_name(dbid);
	if (dbname != NULL)
	{
		Name		n = (Name) palloc0(NAMEDATALEN);

		namestrcpy(n, dbname);
		d = NameGetDatum(n);
	}
	if (db_cache_n < (int) lengthof(db_cache_oid))
	{
		db_cache_oid[db_cache_n] = dbid;
		db_cache_name[db_cache_n++] = d;
	}
	*isnull = (d == (Datum) 0);
	return d;
}

/* An interval of us microseconds. */
Datum
dlock_interval_datum(int64 us)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = us;
	return IntervalPGetDatum(iv);
}

/* A "name" Datum of a C string. */
static Datum
name_of(const char *s)
{
	Name		n = (Name) palloc0(NAMEDATALEN);

	namestrcpy(n, s);
	return NameGetDatum(n);
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

/* May the current user see the client address of a session of role? */
static bool
may_see_client(Oid role)
{
	return has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS) ||
		has_privs_of_role(GetUserId(), role);
}

/*
 * Call fn for every name a backend's slot or a detached hold says is held
 * or awaited: with the entry (e) or the hold (h), the other NULL.  An entry
 * stays valid until the memory context is reset; a hold does not.
 */
typedef void (*name_fn) (void *arg, int pid, Oid dbid, const DlockEntry *e,
						 const DlockHold *h);

static void
for_each_name(name_fn fn, void *arg)
{
	DlockHold	hold;
	int			pid;
	int			i;

	if (dlock_shared == NULL)
		return;
	for (i = 0; i < dlock_shared->nslots; i++)
	{
		DlockSlot  *slot = dlock_slot(i);
		DlockEntry *kept;
		Oid			dbid;
		int			cap;
		int			n;
		int			j;

		if (slot->pid == 0 || slot->nused <= 0) /* unlocked peek; the copy
												 * is what counts */
			continue;
		/* room for what the peek saw and some more; again if it grew past */
		cap = Min(slot->nused + 16, dlock_shared->entries_per_slot);
		kept = palloc(sizeof(DlockEntry) * cap);
		while ((n = dlock_read_slot_entries(slot, kept, cap, &pid, &dbid)) < 0)
		{
			pfree(kept);
			cap = dlock_shared->entries_per_slot;
			kept = palloc(sizeof(DlockEntry) * cap);
		}
		/* the entries outlive this loop: fn may keep pointers to them */
		for (j = 0; j < n; j++)
			if (kept[j].inuse && pid != 0)
				fn(arg, pid, dbid, &kept[j], NULL);
	}

	/* the detached locks: the lock holder's, then each waiter's */
	pid = dlock_shared->holder_pid;
	for (i = 0; pid != 0 && i < dlock_shared->max_holds; i++)
	{
		DlockHold  *h = dlock_hold(i);

		if (h->state == DLOCK_HOLD_FREE)	/* unlocked peek */
			continue;
		dlock_read_hold(h, &hold);
		if (hold.state != DLOCK_HOLD_FREE)
			fn(arg, pid, hold.dbid, NULL, &hold);
	}
	for (i = 0; i < dlock_shared->nwaiters; i++)
	{
		DlockWaiter *w = dlock_waiter(i);

		pid = w->worker_pid;
		if (pid == 0 || w->hold.state == DLOCK_HOLD_FREE)
			continue;
		dlock_read_hold(&w->hold, &hold);
		if (hold.state != DLOCK_HOLD_FREE)
			fn(arg, pid, hold.dbid, NULL, &hold);
	}
}

static const char *
lock_mode_text(uint8 mode)
{
	return mode == DLOCK_SHARED ? "ShareLock" : "ExclusiveLock";
}

/* ---- dlock_names() ---- */

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
		values[3] = CStringGetTextDatum(lock_mode_text(e->mode));
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
		nulls[10] = (e->token <= 0);	/* none: DLOCK_NO_TOKEN() */
		values[11] = BoolGetDatum(false);
		nulls[12] = nulls[13] = nulls[14] = true;
	}
	else
	{
		values[2] = Int64GetDatum(h->key);
		values[3] = CStringGetTextDatum(lock_mode_text(h->mode));
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
		nulls[14] = (h->client[0] == '\0' || !may_see_client(h->role));
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

Datum
dlock_names(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for_each_name(put_name, rsinfo);
	return (Datum) 0;
}

/* ---- dlock_locks() ---- */

typedef struct NameKey
{
	int			pid;
	Oid			dbid;
	int64		key;
	uint8		mode;
} NameKey;

typedef struct NameRow
{
	NameKey		k;
	bool		used;
	const DlockEntry *e;		/* a backend's entry, or NULL */
	List	   *holds;			/* detached holds (palloc'd copies): the lock
								 * holder has one per shared acquisition */
} NameRow;

/*
 * The names, by (pid, database, key, mode): open addressing, linear
 * probing, at most half full (it grows), built once per query.
 */
typedef struct NameTable
{
	NameRow    *rows;
	uint32		mask;
	uint32		count;
} NameTable;

static inline uint32
name_home(const NameKey *k, uint32 mask)
{
	/* keys are SHA-256 bits already; the multiply mixes in the rest */
	return (uint32) ((((uint64) k->key ^ ((uint64) k->pid << 8) ^ ((uint64) k->dbid << 40) ^
					   k->mode) * UINT64CONST(0x9E3779B97F4A7C15)) >> 32) & mask;
}

static inline bool
name_key_eq(const NameKey *a, const NameKey *b)
{
	return a->key == b->key && a->pid == b->pid && a->dbid == b->dbid && a->mode == b->mode;
}

static void
name_table_init(NameTable *t, uint32 size)
{
	t->rows = palloc0(sizeof(NameRow) * size);
	t->mask = size - 1;
	t->count = 0;
}

static NameRow *
name_find(NameTable *t, const NameKey *k, bool enter)
{
	uint32		i;

	if (enter && (t->count + 1) * 2 > t->mask + 1)
	{
		NameTable	bigger;
		uint32		j;

		name_table_init(&bigger, (t->mask + 1) * 2);
		for (j = 0; j <= t->mask; j++)
			if (t->rows[j].used)
			{
				i = name_home(&t->rows[j].k, bigger.mask);
				while (bigger.rows[i].used)
					i = (i + 1) & bigger.mask;
				bigger.rows[i] = t->rows[j];
			}
		bigger.count = t->count;
		pfree(t->rows);
		*t = bigger;
	}
	for (i = name_home(k, t->mask);; i = (i + 1) & t->mask)
	{
		NameRow    *row = &t->rows[i];

		if (!row->used)
		{
			if (!enter)
				return NULL;
			row->used = true;
			row->k = *k;
			t->count++;
			return row;
		}
		if (name_key_eq(&row->k, k))
			return row;
	}
}

static void
index_name(void *arg, int pid, Oid dbid, const DlockEntry *e, const DlockHold *h)
{
	NameTable  *names = (NameTable *) arg;
	NameKey		k;
	NameRow    *row;

	k.pid = pid;
	k.dbid = dbid;
	k.key = e ? e->key : h->key;
	k.mode = e ? e->mode : h->mode;
	row = name_find(names, &k, true);
	if (e != NULL)
		row->e = e;
	else
	{
		DlockHold  *copy = palloc(sizeof(DlockHold));

		*copy = *h;
		row->holds = lappend(row->holds, copy);
	}
}

/* What pg_stat_activity says of one process. */
typedef struct ActivityRow
{
	int			pid;
	bool		user_null;
	Datum		user;			/* name */
	Datum		appname;		/* text */
	Datum		client;			/* inet; (Datum) 0: NULL */
} ActivityRow;

static HTAB *
activity_by_pid(void)
{
	HASHCTL		ctl;
	HTAB	   *tab;
	int			n = pgstat_fetch_stat_numbackends();
	int			i;

	ctl.keysize = sizeof(int);
	ctl.entrysize = sizeof(ActivityRow);
	ctl.hcxt = CurrentMemoryContext;
	tab = hash_create("dlock_locks activity", Max(n, 16), &ctl,
					  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (i = 1; i <= n; i++)
	{
		LocalPgBackendStatus *local = dlock_local_beentry(i);
		PgBackendStatus *be;
		ActivityRow *a;
		char		client[DLOCK_CLIENT_MAX];
		char	   *user;

		if (local == NULL)
			continue;
		be = &local->backendStatus;
		a = hash_search(tab, &be->st_procpid, HASH_ENTER, NULL);
		user = OidIsValid(be->st_userid) ? GetUserNameFromId(be->st_userid, true) : NULL;
		a->user_null = (user == NULL);
		if (user != NULL)
			a->user = name_of(user);
		a->appname = CStringGetTextDatum(be->st_appname ? be->st_appname : "");
		dlock_client_address(be, client);
		a->client = (client[0] == '\0' || !may_see_client(be->st_userid)) ? (Datum) 0 :
			DirectFunctionCall1(inet_in, CStringGetDatum(client));
	}
	return tab;
}

#define DLOCK_LOCKS_COLS 15

static void
put_lock(ReturnSetInfo *rsinfo, const LockInstanceData *l, const NameKey *kp,
		 LOCKMODE lockmode, bool granted, const DlockEntry *e, const DlockHold *h,
		 HTAB *activity, TimestampTz now)
{
	Datum		values[DLOCK_LOCKS_COLS];
	bool		nulls[DLOCK_LOCKS_COLS];
	NameKey		k = *kp;
	ActivityRow *a;
	TimestampTz since = 0;

	memset(nulls, 0, sizeof(nulls));
	/* database, name, key, mode */
	values[0] = dlock_database_name(k.dbid, &nulls[0]);
	if (e != NULL)
		values[1] = dlock_name_datum(e->name, e->namelen, &nulls[1]);
	else if (h != NULL)
		values[1] = dlock_name_datum(h->name, h->namelen, &nulls[1]);
	else
		nulls[1] = true;
	values[2] = Int64GetDatum(k.key);
	values[3] = CStringGetTextDatum(lockmode == ExclusiveLock ? "exclusive" :
									lockmode == ShareLock ? "shared" :
									GetLockmodeName(DEFAULT_LOCKMETHOD, lockmode));
	/* scope */
	if (h != NULL)
		values[4] = CStringGetTextDatum("detached");
	else if (e == NULL)
		nulls[4] = true;
	else if (!granted)
		values[4] = CStringGetTextDatum(e->waiting == DLOCK_WAIT_XACT ? "transaction" : "session");
	else if (e->nsession > 0 && e->nxact > 0)
		values[4] = CStringGetTextDatum("session+transaction");
	else if (e->nsession > 0)
		values[4] = CStringGetTextDatum("session");
	else if (e->nxact > 0)
		values[4] = CStringGetTextDatum("transaction");
	else
		nulls[4] = true;
	values[5] = BoolGetDatum(granted);
	values[6] = Int32GetDatum(l->pid);
	/* username, application_name, client_addr */
	if (h != NULL)
	{
		values[7] = name_of(h->rolname);
		values[8] = CStringGetTextDatum(h->appname);
		if (h->client[0] == '\0' || !may_see_client(h->role))
			nulls[9] = true;
		else
			values[9] = DirectFunctionCall1(inet_in, CStringGetDatum(h->client));
	}
	else if ((a = hash_search(activity, &k.pid, HASH_FIND, NULL)) != NULL)
	{
		values[7] = a->user;
		nulls[7] = a->user_null;
		values[8] = a->appname;
		values[9] = a->client;
		nulls[9] = (a->client == (Datum) 0);
	}
	else
		nulls[7] = nulls[8] = nulls[9] = true;
	/* since: the grant; for a waiter the start of its wait */
	if (e != NULL)
		since = e->since;
	else if (h != NULL)
		since = h->since;
	if (!granted && l->waitStart != 0)
		since = l->waitStart;
	values[10] = TimestampTzGetDatum(since);
	nulls[10] = (since == 0);
	/* lease_expires, token: of a granted hold */
	nulls[11] = nulls[12] = true;
	if (granted && e != NULL)
	{
		values[11] = TimestampTzGetDatum(e->lease_expires);
		nulls[11] = (e->lease_expires == 0);
		values[12] = Int64GetDatum(e->token);
		nulls[12] = (e->token <= 0);	/* none: DLOCK_NO_TOKEN() */
	}
	else if (granted && h != NULL && h->state == DLOCK_HOLD_HELD)
	{
		values[11] = TimestampTzGetDatum(h->lease_expires);
		values[12] = Int64GetDatum(h->token);
		nulls[11] = nulls[12] = false;
	}
	/* wait_time of a waiter, hold_time of a holder */
	values[13] = dlock_interval_datum(Max(now - since, 0));
	nulls[13] = (granted || since == 0);
	values[14] = values[13];
	nulls[14] = (!granted || since == 0);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * The rows of one process's hold of, or wait for, a lock in one mode: one
 * per detached hold it has of it (the lock holder holds one lock for every
 * shared acquisition), else one, named by the backend's entry if it has one
 * (for a wait, only an entry that waits).
 */
static void
put_locks(ReturnSetInfo *rsinfo, const LockInstanceData *l, LOCKMODE lockmode,
		  bool granted, NameTable *names, HTAB *activity, TimestampTz now)
{
	NameKey		k;
	NameRow    *row = NULL;
	int			n = 0;
	ListCell   *lc;

	k.pid = l->pid;
	k.dbid = l->locktag.locktag_field1;
	k.key = (int64) (((uint64) l->locktag.locktag_field2 << 32) | l->locktag.locktag_field3);
	k.mode = lockmode == ShareLock ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
	if (lockmode == ShareLock || lockmode == ExclusiveLock)
		row = name_find(names, &k, false);
	if (row != NULL)
		foreach(lc, row->holds)
		{
			const DlockHold *h = (const DlockHold *) lfirst(lc);

			if (granted ? h->state == DLOCK_HOLD_HELD : h->state == DLOCK_HOLD_WAITING)
			{
				put_lock(rsinfo, l, &k, lockmode, granted, NULL, h, activity, now);
				n++;
			}
		}
	if (n > 0)
		return;
	put_lock(rsinfo, l, &k, lockmode, granted,
			 row != NULL && row->e != NULL &&
			 (granted || row->e->waiting != DLOCK_WAIT_NONE) ? row->e : NULL,
			 NULL, activity, now);
}

/*
 * dlock_locks(): every advisory lock of dlock's key space (objsubid 1) the
 * lock manager has, one row per process and mode held or awaited, as
 * pg_locks shows them, with the dlock name and the rest of the view's
 * columns.
 */
Datum
dlock_locks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	NameTable	names;
	HTAB	   *activity;
	LockData   *ld;
	TimestampTz now;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	dlock_database_names_reset();
	name_table_init(&names, 1024);
	for_each_name(index_name, &names);
	activity = activity_by_pid();

	ld = GetLockStatusData();
	/* after everything was read: no hold or wait began later than this */
	now = GetCurrentTimestamp();
	for (i = 0; i < ld->nelements; i++)
	{
		LockInstanceData *l = &ld->locks[i];
		LOCKMODE	m;

		if (l->locktag.locktag_type != LOCKTAG_ADVISORY ||
			l->locktag.locktag_field4 != 1 ||
			l->locktag.locktag_lockmethodid != USER_LOCKMETHOD)
			continue;
		for (m = 1; m < MAX_LOCKMODES; m++)
			if (l->holdMask & LOCKBIT_ON(m))
				put_locks(rsinfo, l, m, true, &names, activity, now);
		if (l->waitLockMode != NoLock)
			put_locks(rsinfo, l, l->waitLockMode, false, &names, activity, now);
	}
	return (Datum) 0;
}
