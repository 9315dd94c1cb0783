/*
 * view_locks.c: the dlock_locks view (dlock_locks()).
 *
 * It joins what dlock_names() returns (view_names.c) with the lock
 * manager's advisory locks (what pg_locks shows), which are the truth about
 * what is held: a name that the lock manager does not confirm is not shown,
 * and a lock without a name is shown without one.  It also adds the role,
 * application and client of each process (what pg_stat_activity shows).  It
 * reads each source once and joins them in hash tables, so the view costs
 * the same per lock with 100 locks held or 100,000.
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
#include "catalog/pg_type.h"
#include "utils/acl.h"
#include "utils/array.h"
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

PG_FUNCTION_INFO_V1(dlock_locks);
/* the 1.5 SQL's symbol (its info column); the 1.4 name serves the 1.4 SQL */
PG_FUNCTION_INFO_V1(dlock_locks_1_5);

typedef struct NameKey
{
	int			pid;
	Oid			dbid;
	int64		key;
	uint8		mode;
} NameKey;

/* What the view needs of a backend's entry. */
typedef struct NameInfo
{
	const char *name;
	uint16		namelen;
	const char *info;
	uint16		infolen;
	uint8		waiting;
	int32		nsession;
	int32		nxact;
	TimestampTz since;
	TimestampTz lease_expires;
	int64		token;
	uint16		permit;
	uint16		permits;
} NameInfo;

typedef struct NameRow
{
	NameKey		k;
	bool		has_entry;
	bool		has_marker;		/* its process holds the lease marker */
	NameInfo	e;				/* a backend's entry, if has_entry */
	List	   *holds;			/* detached holds (palloc'd copies): the lock
								 * holder has one per shared acquisition */
} NameRow;

/*
 * The names, by (pid, database, key, mode): rows in an array, found through
 * an open-addressing index (linear probing, at most half full), built once
 * per query, sized from the slots up front.
 */
typedef struct NameTable
{
	NameRow    *rows;
	int			nrows;
	int			maxrows;
	int32	   *index;			/* -1: empty */
	uint32		mask;
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
name_table_init(NameTable *t, int maxrows)
{
	uint32		size = 64;

	while (size < (uint32) maxrows * 2)
		size *= 2;
	t->rows = palloc(sizeof(NameRow) * maxrows);
	t->nrows = 0;
	t->maxrows = maxrows;
	t->index = palloc(sizeof(int32) * size);
	memset(t->index, -1, sizeof(int32) * size);
	t->mask = size - 1;
}

static NameRow *
name_find(NameTable *t, const NameKey *k, bool enter)
{
	uint32		i;

	if (enter && t->nrows == t->maxrows)
	{
		/* more than the slots said at the start: twice the room */
		NameTable	bigger;
		int			j;

		name_table_init(&bigger, t->maxrows * 2);
		memcpy(bigger.rows, t->rows, sizeof(NameRow) * t->nrows);
		for (j = 0; j < t->nrows; j++)
		{
			for (i = name_home(&t->rows[j].k, bigger.mask); bigger.index[i] >= 0;
				 i = (i + 1) & bigger.mask)
				;
			bigger.index[i] = j;
		}
		bigger.nrows = t->nrows;
		pfree(t->rows);
		pfree(t->index);
		*t = bigger;
	}
	for (i = name_home(k, t->mask);; i = (i + 1) & t->mask)
	{
		NameRow    *row;

		if (t->index[i] < 0)
		{
			if (!enter)
				return NULL;
			t->index[i] = t->nrows;
			row = &t->rows[t->nrows++];
			row->k = *k;
			row->has_entry = false;
			row->has_marker = false;
			row->holds = NIL;
			return row;
		}
		row = &t->rows[t->index[i]];
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

	memset(&k, 0, sizeof(k));
	k.pid = pid;
	k.dbid = dbid;
	k.key = e ? e->key : h->key;
	k.mode = e ? e->mode : h->mode;
	row = name_find(names, &k, true);
	if (e != NULL)
	{
		char	   *name = palloc(Max(e->namelen + e->infolen, 1));

		memcpy(name, e->name, e->namelen);
		memcpy(name + e->namelen, e->info, e->infolen);
		row->has_entry = true;
		row->e.name = name;
		row->e.namelen = e->namelen;
		row->e.info = name + e->namelen;
		row->e.infolen = e->infolen;
		row->e.waiting = e->waiting;
		row->e.nsession = e->nsession;
		row->e.nxact = e->nxact;
		row->e.since = e->since;
		row->e.lease_expires = e->lease_expires;
		row->e.token = e->token;
		row->e.permit = e->permit;
		row->e.permits = e->permits;
	}
	else
	{
		DlockHold  *copy = palloc(sizeof(DlockHold));

		*copy = *h;
		row->holds = lappend(row->holds, copy);
	}
}

/* Names in the slots now (unlocked peek), to size the table. */
static int
names_expected(void)
{
	int			n = 64;
	int			i;

	for (i = 0; dlock_preloaded() && i < dlock_slots->nslots; i++)
	{
		DlockSlot  *slot = dlock_slot(i);

		if (slot->pid != 0 && slot->nused > 0)
			n += slot->nused;
	}
	return n;
}

/* What pg_stat_activity says of one process. */
typedef struct ActivityRow
{
	int			pid;
	bool		user_null;
	Datum		user;			/* text */
	Datum		appname;		/* text */
	Datum		client;			/* inet; (Datum) 0: NULL */
	Datum		state;			/* text, as pg_stat_activity.state; (Datum) 0:
								 * NULL */
} ActivityRow;

/* A session's state as pg_stat_activity shows it, or NULL. */
static const char *
state_text(BackendState st)
{
	switch (st)
	{
#if PG_VERSION_NUM >= 180000
		case STATE_STARTING:
			return "starting";
#endif
		case STATE_IDLE:
			return "idle";
		case STATE_RUNNING:
			return "active";
		case STATE_IDLEINTRANSACTION:
			return "idle in transaction";
		case STATE_FASTPATH:
			return "fastpath function call";
		case STATE_IDLEINTRANSACTION_ABORTED:
			return "idle in transaction (aborted)";
		case STATE_DISABLED:
			return "disabled";
		default:
			return NULL;
	}
}

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
			a->user = CStringGetTextDatum(user);
		a->appname = CStringGetTextDatum(be->st_appname ? be->st_appname : "");
		dlock_client_address(be, client);
		a->client = (client[0] == '\0' || !dlock_view_may_see_client(be->st_userid)) ? (Datum) 0 :
			DirectFunctionCall1(inet_in, CStringGetDatum(client));
		/* seen by whom may see the client (pg_stat_activity's rule) */
		a->state = (state_text(be->st_state) == NULL || !dlock_view_may_see_client(be->st_userid)) ?
			(Datum) 0 : CStringGetTextDatum(state_text(be->st_state));
	}
	return tab;
}

/*
 * The columns of dlock_locks(): 15 in the 1.4 SQL, 17 (info, permit) in
 * 1.5, 22 (permits, session_state, min_hold_until, released, waits_for)
 * since 1.6.
 */
#define DLOCK_LOCKS_COLS 22

/*
 * The first in line of a semaphore holds its turnstile (dlock.h) and sleeps
 * until a permit is released, in no lock wait that pg_blocking_pids sees:
 * whom it waits for are the holders of the name's permits (its own lock is
 * permit 1), by (database, key), for the view's blocked_by.
 */
typedef struct HeadKey
{
	Oid			dbid;
	int64		key;
} HeadKey;

typedef struct HeadHolders
{
	HeadKey		k;
	int			n;
	int			max;
	Datum	   *pids;
} HeadHolders;

static inline bool
advisory_of_dlock(const LockInstanceData *l)
{
	return l->locktag.locktag_type == LOCKTAG_ADVISORY &&
		l->locktag.locktag_lockmethodid == USER_LOCKMETHOD;
}

static inline void
head_key(const LockInstanceData *l, HeadKey *k)
{
	memset(k, 0, sizeof(*k));
	k->dbid = l->locktag.locktag_field1;
	k->key = (int64) (((uint64) l->locktag.locktag_field2 << 32) | l->locktag.locktag_field3);
}

/* A small hash table of this call's, keyed by the bytes of its key. */
static HTAB *
call_hash(const char *name, Size keysize, Size entrysize)
{
	HASHCTL		ctl;

	ctl.keysize = keysize;
	ctl.entrysize = entrysize;
	ctl.hcxt = CurrentMemoryContext;
	return hash_create(name, 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* The holders of each semaphore whose turnstile is held; NULL if none is. */
static HTAB *
semaphore_heads(const LockData *ld)
{
	HTAB	   *tab = NULL;
	int			i;

	for (i = 0; i < ld->nelements; i++)
	{
		const LockInstanceData *l = &ld->locks[i];
		HeadKey		k;
		HeadHolders *hh;
		bool		found;

		if (!advisory_of_dlock(l) || l->locktag.locktag_field4 != DLOCK_SUBID_TURNSTILE ||
			l->holdMask == 0)
			continue;
		if (tab == NULL)
			tab = call_hash("dlock_locks semaphore heads", sizeof(HeadKey), sizeof(HeadHolders));
		head_key(l, &k);
		hh = hash_search(tab, &k, HASH_ENTER, &found);
		if (!found)
		{
			hh->n = 0;
			hh->max = 0;
			hh->pids = NULL;
		}
	}
	if (tab == NULL)
		return NULL;
	for (i = 0; i < ld->nelements; i++)
	{
		const LockInstanceData *l = &ld->locks[i];
		uint16		subid = l->locktag.locktag_field4;
		HeadKey		k;
		HeadHolders *hh;
		int			j;

		if (!advisory_of_dlock(l) || l->holdMask == 0 ||
			!(subid == DLOCK_SUBID_KEY ||
			  (subid > DLOCK_SUBID_TURNSTILE && subid <= DLOCK_SUBID_TURNSTILE + DLOCK_PERMITS_MAX)))
			continue;
		head_key(l, &k);
		if ((hh = hash_search(tab, &k, HASH_FIND, NULL)) == NULL)
			continue;
		for (j = 0; j < hh->n; j++)
			if (DatumGetInt32(hh->pids[j]) == l->pid)
				break;
		if (j < hh->n)
			continue;
		if (hh->n == hh->max)
		{
			hh->max = Max(hh->max * 2, 8);
			hh->pids = hh->pids == NULL ? palloc(sizeof(Datum) * hh->max) :
				repalloc(hh->pids, sizeof(Datum) * hh->max);
		}
		hh->pids[hh->n++] = Int32GetDatum(l->pid);
	}
	return tab;
}

/*
 * What every row of one dlock_locks() call shares.  Each row's own values
 * are made in rowcxt, reset after the row is stored: a row's memory is
 * reused by the next instead of growing with the number of locks.
 */
typedef struct LocksCall
{
	ReturnSetInfo *rsinfo;
	NameTable  *names;
	HTAB	   *activity;
	TimestampTz now;
	MemoryContext rowcxt;
	Datum		exclusive;
	Datum		shared;
	Datum		scope_detached;
	Datum		scope_session;
	Datum		scope_xact;
	Datum		scope_both;
	HTAB	   *heads;			/* semaphore_heads(); NULL: none */
	const HeadHolders *waits_for;	/* of the row put now: a semaphore's first
									 * in line; NULL: not one */
	bool		line_row;		/* the row put now is a caller's in the line of
								 * a detached lock: its pid is the caller's */
	bool		update_row;		/* the row put now is of an update hold */
	Datum		update;
	HTAB	   *update_waits;	/* (pid, database, key) waiting for an update
								 * hold's RowShareLock; NULL: none */
} LocksCall;

static void
put_lock(LocksCall *call, const LockInstanceData *l, const NameKey *kp,
		 LOCKMODE lockmode, bool granted, const NameInfo *e, const DlockHold *h, int permit)
{
	Datum		values[DLOCK_LOCKS_COLS];
	bool		nulls[DLOCK_LOCKS_COLS];
	NameKey		k = *kp;
	ActivityRow *a = NULL;
	TimestampTz since = 0;
	MemoryContext oldcxt;

	memset(nulls, 0, sizeof(nulls));
	/* database (its cache lives as long as the call), name, key, mode */
	values[0] = dlock_database_name(k.dbid, true, &nulls[0]);
	oldcxt = MemoryContextSwitchTo(call->rowcxt);
	if (e != NULL)
		values[1] = dlock_name_datum(e->name, e->namelen, &nulls[1]);
	else if (h != NULL)
		values[1] = dlock_name_datum(h->name, h->namelen, &nulls[1]);
	else
		nulls[1] = true;
	values[2] = Int64GetDatum(k.key);
	values[3] = call->update_row ? call->update :
		lockmode == ExclusiveLock ? call->exclusive :
		lockmode == ShareLock ? call->shared :
		CStringGetTextDatum(GetLockmodeName(DEFAULT_LOCKMETHOD, lockmode));
	/* scope */
	if (h != NULL)
		values[4] = call->scope_detached;
	else if (e == NULL)
		nulls[4] = true;
	else if (!granted)
		values[4] = e->waiting == DLOCK_WAIT_XACT ? call->scope_xact : call->scope_session;
	else if (e->nsession > 0 && e->nxact > 0)
		values[4] = call->scope_both;
	else if (e->nsession > 0)
		values[4] = call->scope_session;
	else if (e->nxact > 0)
		values[4] = call->scope_xact;
	else
		nulls[4] = true;
	values[5] = BoolGetDatum(granted);
	values[6] = Int32GetDatum(l->pid);
	/* username, application_name, client_addr */
	if (h != NULL)
	{
		values[7] = CStringGetTextDatum(h->rolname);
		values[8] = CStringGetTextDatum(h->appname);
		if (h->client[0] == '\0' || !dlock_view_may_see_client(h->client_role))
			nulls[9] = true;
		else
			values[9] = DirectFunctionCall1(inet_in, CStringGetDatum(h->client));
	}
	else if ((a = hash_search(call->activity, &k.pid, HASH_FIND, NULL)) != NULL)
	{
		values[7] = a->user;
		nulls[7] = a->user_null;
		values[8] = a->appname;
		values[9] = a->client;
		nulls[9] = (a->client == (Datum) 0);
	}
	else
		nulls[7] = nulls[8] = nulls[9] = true;
	/*
	 * session_state: of the session whose row it is (a caller in a detached
	 * lock's line too); not of dlock's processes, which hold and await
	 * detached locks for others
	 */
	nulls[18] = true;
	if (a == NULL && call->line_row)
		a = hash_search(call->activity, &k.pid, HASH_FIND, NULL);
	if ((h == NULL || call->line_row) && a != NULL && a->state != (Datum) 0)
	{
		values[18] = a->state;
		nulls[18] = false;
	}
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
		nulls[12] = (e->token <= 0);	/* <= 0: none */
	}
	else if (granted && h != NULL && h->state == DLOCK_HOLD_HELD)
	{
		values[11] = TimestampTzGetDatum(h->lease_expires);
		values[12] = Int64GetDatum(h->token);
		nulls[11] = nulls[12] = false;
	}
	/* wait_time of a waiter, hold_time of a holder */
	values[13] = dlock_interval_datum(Max(call->now - since, 0));
	nulls[13] = (granted || since == 0);
	values[14] = values[13];
	nulls[14] = (!granted || since == 0);
	/* info: the holder's word, or a waiter's */
	nulls[15] = true;
	if (e != NULL && e->infolen > 0)
		values[15] = dlock_name_datum(e->info, e->infolen, &nulls[15]);
	else if (h != NULL && h->infolen > 0)
		values[15] = dlock_name_datum(h->info, h->infolen, &nulls[15]);
	/* permit: of a semaphore's holder */
	values[16] = Int32GetDatum(permit);
	nulls[16] = (permit == 0);
	/* permits: the N asked for, of a semaphore's holder or waiter */
	values[17] = Int32GetDatum(h != NULL ? h->permits : e != NULL ? e->permits : 0);
	nulls[17] = (DatumGetInt32(values[17]) == 0);
	/* min_hold_until, released: of a detached hold in its minimum hold */
	nulls[19] = nulls[20] = true;
	if (granted && h != NULL && h->state == DLOCK_HOLD_HELD)
	{
		values[19] = TimestampTzGetDatum(h->min_until);
		nulls[19] = (h->min_until <= call->now);
		values[20] = BoolGetDatum(h->released);
		nulls[20] = false;
	}
	/* waits_for: of a semaphore's first in line, the holders of its permits */
	nulls[21] = true;
	if (call->waits_for != NULL)
	{
		Datum	   *pids = palloc(sizeof(Datum) * Max(call->waits_for->n, 1));
		int			n = 0;
		int			j;

		for (j = 0; j < call->waits_for->n; j++)
			if (DatumGetInt32(call->waits_for->pids[j]) != l->pid)
				pids[n++] = call->waits_for->pids[j];
		values[21] = PointerGetDatum(construct_array(pids, n, INT4OID, sizeof(int32), true,
													 TYPALIGN_INT));
		nulls[21] = false;
	}
	tuplestore_putvalues(call->rsinfo->setResult, call->rsinfo->setDesc, values, nulls);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(call->rowcxt);
}

/*
 * A caller in the line of a detached lock (dlock.h DLOCK_SUBID_LINE): a
 * wait for the lock, in the mode of its line, shown from its place in line.
 * The first in line holds the line: its waiter process shows the wait.
 */
static void
put_line_wait(LocksCall *call, const LockInstanceData *l, LOCKMODE lockmode, bool granted)
{
	NameKey		k;
	NameRow    *row;
	ListCell   *lc;

	if (granted)
		return;
	k.pid = l->pid;
	k.dbid = l->locktag.locktag_field1;
	k.key = (int64) (((uint64) l->locktag.locktag_field2 << 32) | l->locktag.locktag_field3);
	k.mode = lockmode == DLOCK_LINE_MODE(DLOCK_SHARED) ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
	row = name_find(call->names, &k, false);
	if (row == NULL)
		return;					/* in line after the names were read */
	foreach(lc, row->holds)
	{
		const DlockHold *h = (const DlockHold *) lfirst(lc);

		if (h->state == DLOCK_HOLD_WAITING)
		{
			call->line_row = true;
			put_lock(call, l, &k, DlockLockMode(k.mode), false, NULL, h, 0);
			call->line_row = false;
			return;
		}
	}
}

/* Does row hold its lock (granted), or wait for it, by its entry? */
static inline bool
entry_has(const NameRow *row, bool granted)
{
	return row != NULL && row->has_entry &&
		(granted ? row->e.nsession + row->e.nxact > 0 : row->e.waiting != DLOCK_WAIT_NONE);
}

/*
 * An update hold (1.7, dlock.h) is shown once, in update mode, by its gate:
 * held, the hold; awaited, its wait.  Its RowShareLock on the key is not a
 * row of its own, but while the process waits for it (the gate is its
 * already) that wait is the hold's row, and its gate none.  Without an
 * entry (a prepared transaction's, one beyond dlock.max_locks_per_session)
 * the row has no name; a hold with a lease is the entry's only while its
 * lease marker is held (put_locks).
 */
static void
put_update(LocksCall *call, const LockInstanceData *l, const NameKey *kp, bool granted)
{
	NameKey		k = *kp;
	NameRow    *row;

	k.mode = DLOCK_UPDATE;
	row = name_find(call->names, &k, false);
	if (!entry_has(row, granted) ||
		(granted && row->e.lease_expires != 0 && row->e.nxact == 0 && !row->has_marker))
		row = NULL;
	call->update_row = true;
	put_lock(call, l, &k, DLOCK_UPDATE_MODE, granted, row != NULL ? &row->e : NULL, NULL, 0);
	call->update_row = false;
}

/* The processes waiting for an update hold's RowShareLock on a key, by (pid, database, key). */
static HTAB *
update_waits(const LockData *ld)
{
	HTAB	   *tab = NULL;

	for (int i = 0; i < ld->nelements; i++)
	{
		const LockInstanceData *l = &ld->locks[i];
		NameKey		k;

		if (!advisory_of_dlock(l) || l->locktag.locktag_field4 != DLOCK_SUBID_KEY ||
			l->waitLockMode != DlockLockMode(DLOCK_UPDATE))
			continue;
		if (tab == NULL)
			tab = call_hash("dlock_locks update waits", sizeof(NameKey), sizeof(NameKey));
		memset(&k, 0, sizeof(k));
		k.pid = l->pid;
		k.dbid = l->locktag.locktag_field1;
		k.key = (int64) (((uint64) l->locktag.locktag_field2 << 32) | l->locktag.locktag_field3);
		k.mode = DLOCK_UPDATE;
		(void) hash_search(tab, &k, HASH_ENTER, NULL);
	}
	return tab;
}

/*
 * The rows of one process's hold of, or wait for, a lock in one mode: one
 * per detached hold it has of it (the lock holder holds one lock for every
 * shared acquisition), else one, named by the backend's entry if it has one
 * (for a wait, only an entry that waits).  A semaphore's turnstile (dlock.h)
 * is shown as a wait for the name, by its holder too (first in line), and
 * only where the process waits for the name; a permit p > 1 as the name's,
 * with its permit.
 */
static void
put_locks(LocksCall *call, const LockInstanceData *l, LOCKMODE lockmode, bool granted)
{
	NameKey		k;
	NameRow    *row = NULL;
	int			n = 0;
	ListCell   *lc;
	uint16		subid = l->locktag.locktag_field4;
	bool		turnstile = (subid == DLOCK_SUBID_TURNSTILE);
	int			permit = subid > DLOCK_SUBID_TURNSTILE ? subid - DLOCK_SUBID_TURNSTILE : 0;

	/* a turnstile held: by the first in line, who waits for the permits' holders */
	call->waits_for = NULL;
	if (turnstile && granted && call->heads != NULL)
	{
		HeadKey		hk;

		head_key(l, &hk);
		call->waits_for = hash_search(call->heads, &hk, HASH_FIND, NULL);
	}
	if (turnstile)
		granted = false;
	memset(&k, 0, sizeof(k));	/* (a hash key below: no stray padding) */
	if (subid == DLOCK_SUBID_LINE)
	{
		put_line_wait(call, l, lockmode, granted);
		return;
	}

	k.pid = l->pid;
	k.dbid = l->locktag.locktag_field1;
	k.key = (int64) (((uint64) l->locktag.locktag_field2 << 32) | l->locktag.locktag_field3);
	if (subid == DLOCK_SUBID_UPDATE)
	{
		/* an update hold's gate: held, the hold (unless it waits for its RowShareLock) */
		if (lockmode == DLOCK_UPDATE_MODE)
		{
			NameKey		kw = k;

			kw.mode = DLOCK_UPDATE;
			if (granted && call->update_waits != NULL &&
				hash_search(call->update_waits, &kw, HASH_FIND, NULL) != NULL)
				return;
			put_update(call, l, &k, granted);
		}
		return;
	}
	if (subid == DLOCK_SUBID_KEY && lockmode == DlockLockMode(DLOCK_UPDATE))
	{
		/* an update hold's RowShareLock: its gate shows it; a wait for it, here */
		if (!granted)
			put_update(call, l, &k, false);
		return;
	}
	k.mode = lockmode == ShareLock ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
	if (lockmode == ShareLock || lockmode == ExclusiveLock)
		row = name_find(call->names, &k, false);
	if (row != NULL)
		foreach(lc, row->holds)
		{
			const DlockHold *h = (const DlockHold *) lfirst(lc);

			/* a hold is of the lock, or of the permit, this row is of */
			if (granted ? h->state == DLOCK_HOLD_HELD &&
				dlock_permit_subid(h->permit) == subid :
				h->state == DLOCK_HOLD_WAITING && (turnstile || h->permits <= 1))
			{
				put_lock(call, l, &k, lockmode, granted, NULL, h, granted ? h->permit : 0);
				n++;
			}
		}
	if (n > 0)
		return;
	/* a turnstile held or awaited by a process that is not in line: not shown */
	if (turnstile && (row == NULL || !row->has_entry || row->e.waiting == DLOCK_WAIT_NONE))
		return;
	/*
	 * The entry is of the lock it holds: the name's own lock (a plain hold,
	 * or permit 1) or its permit, and only while it holds it.  The name's
	 * own lock held beside a permit p > 1, or while the entry only waits (a
	 * raw pg_advisory_lock of the key), is another hold, shown without a
	 * name.
	 */
	if (row != NULL && row->has_entry && granted &&
		(dlock_permit_subid(row->e.permit) != subid ||
		 row->e.nsession + row->e.nxact == 0))
		row = NULL;
	/* permit 1 is the name's lock: a permit where the entry says so */
	if (permit == 0 && granted && row != NULL && row->has_entry && row->e.permit == 1)
		permit = 1;
	/*
	 * A session hold with a lease is the entry's only while its lease marker
	 * is held: one of the same key taken afresh after
	 * pg_advisory_unlock_all() is another hold, shown without a name.
	 */
	if (row != NULL && row->has_entry && granted && row->e.lease_expires != 0 &&
		row->e.nxact == 0 && row->e.nsession > 0 && !row->has_marker)
		row = NULL;
	put_lock(call, l, &k, lockmode, granted,
			 row != NULL && row->has_entry &&
			 (granted || row->e.waiting != DLOCK_WAIT_NONE) ? &row->e : NULL,
			 NULL, permit);
}

/* Note the lease markers the lock manager has (dlock.h), on their names. */
static void
note_markers(NameTable *names, const LockData *ld)
{
	int			i;

	for (i = 0; i < ld->nelements; i++)
	{
		const LockInstanceData *l = &ld->locks[i];
		NameKey		k;
		NameRow    *row;

		if (l->locktag.locktag_type != LOCKTAG_ADVISORY ||
			l->locktag.locktag_lockmethodid != USER_LOCKMETHOD ||
			(l->locktag.locktag_field4 != DLOCK_MARKER_SUBID(DLOCK_EXCLUSIVE) &&
			 l->locktag.locktag_field4 != DLOCK_MARKER_SUBID(DLOCK_SHARED) &&
			 l->locktag.locktag_field4 != DLOCK_MARKER_SUBID(DLOCK_UPDATE)) ||
			(l->holdMask & LOCKBIT_ON(DLOCK_MARKER_MODE)) == 0)
			continue;
		memset(&k, 0, sizeof(k));
		k.pid = l->pid;
		k.dbid = l->locktag.locktag_field1;
		k.key = (int64) (((uint64) l->locktag.locktag_field2 << 32) | l->locktag.locktag_field3);
		k.mode = l->locktag.locktag_field4 == DLOCK_SUBID_UPDATE_MARKER ? DLOCK_UPDATE :
			l->locktag.locktag_field4 - DLOCK_SUBID_MARKER;
		row = name_find(names, &k, false);
		if (row != NULL)
			row->has_marker = true;
	}
}

/*
 * dlock_locks(): every advisory lock of dlock's key space (objsubid 1, a
 * semaphore's permits and turnstile, the line of a detached lock) the lock manager has, one row per process and mode held or awaited, as
 * pg_locks shows them, with the dlock name and the rest of the view's
 * columns.
 */
Datum
dlock_locks(PG_FUNCTION_ARGS)
{
	NameTable	names;
	LocksCall	call;
	LockData   *ld;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	dlock_database_names_reset();
	name_table_init(&names, names_expected());
	dlock_view_each_name(index_name, &names);
	call.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	call.names = &names;
	call.activity = activity_by_pid();
	call.rowcxt = AllocSetContextCreate(CurrentMemoryContext, "dlock_locks row",
										ALLOCSET_SMALL_SIZES);
	call.exclusive = CStringGetTextDatum("exclusive");
	call.shared = CStringGetTextDatum("shared");
	call.update = CStringGetTextDatum("update");
	call.update_row = false;
	call.scope_detached = CStringGetTextDatum("detached");
	call.scope_session = CStringGetTextDatum("session");
	call.scope_xact = CStringGetTextDatum("transaction");
	call.scope_both = CStringGetTextDatum("session+transaction");

	ld = GetLockStatusData();
	/* after everything was read: no hold or wait began later than this */
	call.now = GetCurrentTimestamp();
	note_markers(&names, ld);
	call.heads = semaphore_heads(ld);
	call.update_waits = update_waits(ld);
	call.waits_for = NULL;
	call.line_row = false;
	for (i = 0; i < ld->nelements; i++)
	{
		LockInstanceData *l = &ld->locks[i];
		LOCKMODE	m;

		if (l->locktag.locktag_type != LOCKTAG_ADVISORY ||
			(l->locktag.locktag_field4 != DLOCK_SUBID_KEY &&
			 l->locktag.locktag_field4 != DLOCK_SUBID_LINE &&
			 l->locktag.locktag_field4 != DLOCK_SUBID_UPDATE &&
			 (l->locktag.locktag_field4 < DLOCK_SUBID_TURNSTILE ||
			  l->locktag.locktag_field4 > DLOCK_SUBID_TURNSTILE + DLOCK_PERMITS_MAX)) ||
			l->locktag.locktag_lockmethodid != USER_LOCKMETHOD)
			continue;
		for (m = 1; m < MAX_LOCKMODES; m++)
			if (l->holdMask & LOCKBIT_ON(m))
				put_locks(&call, l, m, true);
		if (l->waitLockMode != NoLock)
			put_locks(&call, l, l->waitLockMode, false);
	}
	MemoryContextDelete(call.rowcxt);
	return (Datum) 0;
}

Datum
dlock_locks_1_5(PG_FUNCTION_ARGS)
{
	return dlock_locks(fcinfo);
}
