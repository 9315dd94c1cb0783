/*
 * detached.c: detached locks, the SQL functions dlock_acquire, dlock_extend
 * and dlock_release (doc/detached.md).
 *
 * A detached lock is held by a background process on behalf of the role
 * that acquired it (holder.c, waiter.c), not by this session: these
 * functions ask that process (request.c) and, for an acquisition that has
 * to wait, line up for the name and start one (detached_line.c,
 * detached_wait.c).  An acquisition is undone if the
 * transaction that made it rolls back (detached_xact.c).
 *
 * Layer 4 of the map in dlock.h (SQL functions): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/regproc.h"
#include "utils/timestamp.h"

#include "confirm.h"
#include "dlock.h"
#include "detached_caller.h"
#include "entries.h"
#include "leases.h"
#include "notify.h"
#include "slots.h"
#include "stats.h"
#include "subxact.h"

PG_FUNCTION_INFO_V1(dlock_acquire);
PG_FUNCTION_INFO_V1(dlock_extend);
PG_FUNCTION_INFO_V1(dlock_release);
PG_FUNCTION_INFO_V1(dlock_force_release);
/* the 1.5 SQL's symbols (its _ms arguments); the 1.4 names serve the 1.4 SQL */
PG_FUNCTION_INFO_V1(dlock_acquire_1_5);
PG_FUNCTION_INFO_V1(dlock_extend_1_5);
/* the positional forms for clients (1.6): every argument, durations in ms */
PG_FUNCTION_INFO_V1(dlock_acquire_ms);
PG_FUNCTION_INFO_V1(dlock_extend_ms);
/* several names at once (1.5) */
PG_FUNCTION_INFO_V1(dlock_acquire_many);

/* Longest lease of a detached lock (documented in doc/functions.md). */
#define DLOCK_DETACHED_MAX_LEASE_US ((int64) USECS_PER_DAY)

static bool exit_hook_set = false;

/* Who asks for an override, as its log line names them (dlock_force_release). */
static char force_caller[2 * NAMEDATALEN + 24];

/*
 * At exit: a request still out is left, a waited acquisition in progress is
 * given up, and acquisitions of a transaction that did not commit are
 * undone (a FATAL can land inside the abort that would have undone them).
 */
static void
detached_exit(int code, Datum arg)
{
	dlock_request_exit();
	dlock_wait_exit();
	dlock_line_exit();
	dlock_acquired_exit();
}

/* Before this backend's first request. */
static void
set_exit_hook(void)
{
	if (exit_hook_set)
		return;
	before_shmem_exit(detached_exit, (Datum) 0);
	exit_hook_set = true;
}

/* The lock holder's pid and procno, waiting a little for it after a start. */
static int
holder_pid(int *procno, const DlockName *name)
{
	int			tries;

	for (tries = 0;; tries++)
	{
		int			pid = dlock_detached->holder_pid;

		pg_read_barrier();
		if (pid != 0)
		{
			*procno = dlock_detached->holder_procno;
			return pid;
		}
		if (dlock_detached->max_holds == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot acquire detached lock \"%s\": detached locks are turned off",
							dlock_display_name(name)),
					 errhint("Set \"dlock.max_detached_locks\" above 0 and restart the server.")));
		if (tries >= 100)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot acquire detached lock \"%s\": the dlock lock holder process is not running",
							dlock_display_name(name)),
					 errhint("It starts with the server; the server log says why it did not.")));
		CHECK_FOR_INTERRUPTS();
		pg_usleep(100 * 1000L);
	}
}

/*
 * What a detached acquisition asks for besides the name, the same for one
 * name or several: dlock_acquire(name(s), lease, timeout, shared, lease_ms,
 * timeout_ms, info, min_hold, min_hold_ms, permits; one name only).  name:
 * for the hint of a missing lease.
 */
typedef struct DetachedArgs
{
	int64		lease_us;
	int64		timeout_us;		/* -1: no limit; 0: do not wait */
	bool		shared;
	DlockInfo	info;
	int64		min_hold_us;	/* -1: none */
	int			permits;		/* a semaphore's (> 1); 0: a lock */
	bool		notify;			/* announce its events (notify.c, 1.7) */
} DetachedArgs;

/*
 * The arguments of dlock_acquire(name(s), lease, timeout, shared, lease_ms,
 * timeout_ms, info, min_hold, min_hold_ms, permits), or with ms those of
 * dlock_acquire_ms(name, lease_ms, timeout_ms, shared, info, min_hold_ms,
 * permits), where a NULL is what leaving the argument out of the full form
 * does (timeout_ms NULL: do not wait).
 */
static void
detached_args(FunctionCallInfo fcinfo, const DlockName *name, bool ms, DetachedArgs *a)
{
	a->lease_us = ms ? dlock_lease_arg(fcinfo, DLOCK_NO_ARG, 1) : dlock_lease_arg(fcinfo, 1, 4);
	if (a->lease_us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a detached lock needs a lease"),
				 errhint("Pass one, as in dlock_acquire('%s', '30s') or dlock_acquire('%s', lease_ms => 30000); extend it with dlock_extend while the work goes on.",
						 dlock_display_name(name), dlock_display_name(name))));
	if (a->lease_us > DLOCK_DETACHED_MAX_LEASE_US)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease of a detached lock must be at most 1 day"),
				 errhint("Take a shorter lease and extend it with dlock_extend while the work goes on.")));
	if (ms)
	{
		a->timeout_us = PG_ARGISNULL(2) ? 0 : dlock_timeout_arg(fcinfo, DLOCK_NO_ARG, 2, 0);
		a->shared = dlock_bool_arg(fcinfo, 3, "shared");
		dlock_info_arg(fcinfo, 4, &a->info);
		a->min_hold_us = dlock_duration_arg(fcinfo, DLOCK_NO_ARG, 5, "min_hold", -1);
	}
	else
	{
		/* the full form's timeout DEFAULT '0' yields to a timeout_ms */
		a->timeout_us = PG_NARGS() > 2 ? dlock_timeout_arg(fcinfo, 2, 5, 0) : 0;
		a->shared = PG_NARGS() > 3 ? dlock_bool_arg(fcinfo, 3, "shared") : false;
		dlock_info_arg(fcinfo, 6, &a->info);
		a->min_hold_us = dlock_duration_arg(fcinfo, 7, 8, "min_hold", -1);
	}
	if (a->min_hold_us > DLOCK_DETACHED_MAX_LEASE_US)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_hold of a detached lock must be at most 1 day")));
	a->permits = dlock_permits_arg(fcinfo, ms ? 6 : 9, a->shared);
	/* (1.7) the full form's last argument */
	a->notify = !ms && dlock_notify_arg(fcinfo, 10);
}

/*
 * Acquire one detached lock as a asks, waiting until start + a->timeout_us:
 * its token, or 0 if it was not acquired (the call's NULL).
 */
static int64
acquire_one(const DlockName *name, const DetachedArgs *a, TimestampTz start)
{
	DlockHold	req;
	DlockHold  *h;
	int			pid;
	int			procno;

	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot acquire lock \"%s\" during recovery", dlock_display_name(name)),
				 errdetail("This server is a standby: detached locks are held on the primary only."),
				 errhint("Take the lock on the primary.")));
	dlock_backend_init();
	pid = holder_pid(&procno, name);
	set_exit_hook();
	dlock_acquired_reserve();

	/* the hold asked for, filled in before the request is free to write */
	h = &req;
	memset(h, 0, sizeof(*h));
	h->state = DLOCK_HOLD_FREE;
	h->mode = a->shared ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
	h->namelen = name->len;
	memcpy(h->name, name->utf8, name->len);
	h->infolen = a->info.len;
	memcpy(h->info, a->info.utf8, a->info.len);
	h->min_hold_us = Max(a->min_hold_us, 0);
	h->permits = (uint16) a->permits;
	h->notify = a->notify;
	h->dbid = MyDatabaseId;
	h->key = name->key;
	h->role = GetUserId();
	/* the session's user; the code's role where it runs as another (name.h) */
	h->limit_role = dlock_limit_role();
	h->client_role = MyBEEntry != NULL ? MyBEEntry->st_userid : GetSessionUserId();
	strlcpy(h->rolname, GetUserNameFromId(h->role, false), NAMEDATALEN);
	strlcpy(h->appname, application_name ? application_name : "", NAMEDATALEN);
	dlock_client_address(MyBEEntry, h->client);
	h->token = 0;
	/* its end and expiry are counted by the holding process if this is */
	h->counted = dlock_stats_tracking();

	/* asked without waiting, else in line for it and waited for */
	return dlock_detached_take(name, h, a->lease_us, a->timeout_us, pid, procno, start);
}

static bool ask_holder(DlockRequest **rp, const DlockName *name, int64 token, int op,
					   int64 lease_us, const DlockInfo *info, TimestampTz deadline);

/*
 * The lease of (name, token), a hold taken with an interim lease, counted
 * from now: false if the hold is gone (its lease ran out, it was released)
 * or its process did not answer by deadline (0: none).
 */
static bool
start_lease(const DlockName *name, int64 token, int64 lease_us, TimestampTz deadline)
{
	DlockRequest *r;

	if (!ask_holder(&r, name, token, DLOCK_OP_EXTEND, lease_us, NULL, deadline))
		return false;
	if (r->result == DLOCK_RES_ERROR)
		dlock_error_raise(&r->error);
	return r->result == DLOCK_RES_OK;
}

/*
 * acquire_one with dlock.synchronous_grants: the lock taken, its grant
 * confirmed by the synchronous standbys (within the call's timeout, and at
 * least a second), then its lease counted from now (an extend).  Every
 * failure after the grant is an ERROR, which undoes the acquisition with
 * the transaction: the confirmation's, and an extend that finds the hold
 * gone (its lease ran out while the standbys took their time, an operator
 * released it) or that does not get through by the deadline.
 */
static int64
acquire_confirmed(const DlockName *name, const DetachedArgs *a, TimestampTz start)
{
	TimestampTz deadline;
	int64		token;

	token = acquire_one(name, a, start);
	if (token == 0)
		return 0;
	deadline = dlock_confirm_deadline(a->timeout_us > 0 ? start + a->timeout_us : 0);
	dlock_confirm_grant(name, 1, deadline);
	if (!start_lease(name, token, a->lease_us, deadline))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("lock \"%s\" was lost while the synchronous standbys confirmed its grant",
						dlock_display_name(name)),
				 errdetail("Its lease ran out, or an operator released it, before the confirmation came, "
						   "or the lock holder process did not answer by the call's deadline; nothing is held."),
				 errhint("Give it a lease longer than the synchronous standbys take to answer.")));
	return token;
}

/* dlock_acquire and dlock_acquire_ms (detached_args) -> token, or NULL */
static Datum
acquire_detached(FunctionCallInfo fcinfo, bool ms)
{
	DlockName	name;
	DetachedArgs a;
	TimestampTz start = GetCurrentTimestamp();
	int64		token;

	dlock_name_arg(fcinfo, 0, &name);
	detached_args(fcinfo, &name, ms, &a);
	if (likely(!dlock_synchronous_grants))
		token = acquire_one(&name, &a, start);
	else
		token = acquire_confirmed(&name, &a, start);
	if (token == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(token);
}

Datum
dlock_acquire(PG_FUNCTION_ARGS)
{
	return acquire_detached(fcinfo, false);
}

Datum
dlock_acquire_ms(PG_FUNCTION_ARGS)
{
	return acquire_detached(fcinfo, true);
}

/*
 * Send an extend or release of (name, token) to the process that holds it.
 * false if no process holds a detached lock with that token.
 */
static bool
ask_holder(DlockRequest **rp, const DlockName *name, int64 token, int op,
		   int64 lease_us, const DlockInfo *info, TimestampTz deadline)
{
	DlockRequest *r;
	int			pid = 0;
	int			procno = -1;
	int			i;

	set_exit_hook();
	if (!dlock_request_idle(rp, deadline))
		return false;
	r = *rp;
	r->op = op;
	r->lease_us = lease_us;
	r->hold.dbid = MyDatabaseId;
	r->hold.key = name->key;
	r->hold.token = token;
	r->hold.role = GetUserId();
	/* EXTEND: the new info, if given */
	r->set_info = info != NULL && info->given;
	if (r->set_info)
	{
		r->hold.infolen = info->len;
		memcpy(r->hold.info, info->utf8, info->len);
	}
	r->superuser = superuser();
	if (op == DLOCK_OP_FORCE_RELEASE)
		strlcpy(r->caller, force_caller, sizeof(r->caller));
	r->holder_role[0] = '\0';
	r->expires = 0;
	/* a lock that had to wait is held by its waiter; the others by the holder */
	for (i = 0; i < dlock_detached->nwaiters; i++)
	{
		DlockWaiter *w = dlock_waiter(i);
		uint32		st = DLOCK_W_STATE(pg_atomic_read_u64(&w->tstate));
		int			wpid;
		int			wprocno;

		pg_read_barrier();
		wpid = w->worker_pid;
		wprocno = w->worker_procno;
		/*
		 * WAITING too: a waiter shows its hold as held, with its token,
		 * just before it says GRANTED, and answers once it has.
		 */
		if ((st == DLOCK_W_WAITING || st == DLOCK_W_GRANTED || st == DLOCK_W_HELD ||
			 st == DLOCK_W_UNDO) &&
			w->hold.token == token && token > 0 && wpid != 0)
		{
			pid = wpid;
			procno = wprocno;
			break;
		}
	}
	if (pid == 0)
	{
		pid = dlock_detached->holder_pid;
		procno = dlock_detached->holder_procno;
	}
	if (pid == 0)
	{
		r->result = DLOCK_RES_NOT_HELD;
		return false;
	}
	return dlock_request_send(r, pid, procno, deadline);
}

static void
check_token_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("token must not be null"),
				 errhint("Pass the token dlock_acquire returned.")));
}

/*
 * dlock_extend(name, token, lease, lease_ms, info), and with ms
 * dlock_extend_ms(name, token, lease_ms, info) -> the new expiry
 */
/*
 * Why a token may hold nothing: also an acquisition whose transaction did
 * not commit, which the lock holder undid (a driver with autocommit off
 * that never commits: psycopg2's default).
 */
#define NOT_HELD_DETAIL "It was released, or its lease ran out, or the transaction that acquired it rolled back or never committed, or the token is another lock's."
#define NOT_HELD_HINT "If the token came from a dlock_acquire whose transaction did not commit (autocommit off), that acquisition was undone: commit right after dlock_acquire."
/*
 * A hold released before its minimum hold ended, kept until then (until):
 * an ERROR for dlock_extend, a WARNING for dlock_release.
 */
static void
report_released(int elevel, const DlockName *name, int64 token, TimestampTz until)
{
	ereport(elevel,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("detached lock \"%s\" was released already with token " INT64_FORMAT,
					dlock_display_name(name), token),
			 errdetail("Its minimum hold keeps it held until %s; nobody gets it before then.",
					   timestamptz_to_str(until)),
			 errhint("An operator can end it now with dlock_force_release.")));
}

static Datum
extend(FunctionCallInfo fcinfo, bool ms)
{
	DlockName	name;
	int64		token;
	int64		lease_us;
	DlockRequest *r;
	TimestampTz expired;
	DlockInfo	info;

	dlock_name_arg(fcinfo, 0, &name);
	check_token_arg(fcinfo, 1);
	token = PG_GETARG_INT64(1);
	lease_us = ms ? dlock_lease_arg(fcinfo, DLOCK_NO_ARG, 2) : dlock_lease_arg(fcinfo, 2, 3);
	dlock_info_arg(fcinfo, ms ? 3 : 4, &info);
	if (lease_us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease must not be null"),
				 errhint("Pass the new lease, counted from now, as in dlock_extend('%s', %lld, '30s') or dlock_extend('%s', %lld, lease_ms => 30000).",
						 dlock_display_name(&name), (long long) token,
						 dlock_display_name(&name), (long long) token)));
	if (lease_us > DLOCK_DETACHED_MAX_LEASE_US)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease of a detached lock must be at most 1 day"),
				 errhint("Extend it again before it runs out.")));
	dlock_backend_init();
	(void) ask_holder(&r, &name, token, DLOCK_OP_EXTEND, lease_us, &info, 0);
	switch (r->result)
	{
		case DLOCK_RES_OK:
			PG_RETURN_TIMESTAMPTZ(r->expires);
		case DLOCK_RES_EXPIRED:
			expired = r->expires;
			break;
		case DLOCK_RES_NOT_YOURS:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("cannot extend detached lock \"%s\": it was acquired by role \"%s\"",
							dlock_display_name(&name), r->holder_role),
					 errdetail("Only the role that acquired a detached lock, or a superuser, can extend or release it.")));
			break;
		case DLOCK_RES_NOT_HELD:
			if (r->expires != 0)
				report_released(ERROR, &name, token, r->expires);
			if (dlock_expiry_find(MyDatabaseId, name.key, token, &expired))
				break;
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("detached lock \"%s\" is not held with token " INT64_FORMAT,
							dlock_display_name(&name), token),
					 errdetail(NOT_HELD_DETAIL),
					 errhint(NOT_HELD_HINT)));
			break;
		default:
			dlock_error_raise(&r->error);
	}
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("lease of lock \"%s\" has expired", dlock_display_name(&name)),
			 errdetail("The lease expired at %s; the server released the lock.",
					   timestamptz_to_str(expired)),
			 errhint("Acquire it again; work done under token " INT64_FORMAT " may have to be checked.",
					 token)));
	PG_RETURN_NULL();			/* not reached */
}

Datum
dlock_extend(PG_FUNCTION_ARGS)
{
	return extend(fcinfo, false);
}

Datum
dlock_extend_ms(PG_FUNCTION_ARGS)
{
	return extend(fcinfo, true);
}

/*
 * Release (name, token), op: DLOCK_OP_RELEASE or DLOCK_OP_FORCE_RELEASE
 * (an operator's override, logged by the process that releases it): true,
 * or false with a WARNING that says why not.
 */
static bool
release_one(const DlockName *namep, int64 token, int op)
{
	DlockName	name = *namep;
	DlockRequest *r;
	TimestampTz expired;

	(void) ask_holder(&r, &name, token, op, 0, NULL, 0);
	switch (r->result)
	{
		case DLOCK_RES_OK:
			return true;
		case DLOCK_RES_EXPIRED:
			ereport(WARNING,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("lease of lock \"%s\" has expired", dlock_display_name(&name)),
					 errdetail("The lease expired at %s; the server released the lock.",
							   timestamptz_to_str(r->expires))));
			break;
		case DLOCK_RES_NOT_YOURS:
			ereport(WARNING,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("cannot release detached lock \"%s\": it was acquired by role \"%s\"",
							dlock_display_name(&name), r->holder_role),
					 errdetail("Only the role that acquired a detached lock, or a superuser, can extend or release it.")));
			break;
		case DLOCK_RES_NOT_HELD:
			if (r->expires != 0)
				report_released(WARNING, &name, token, r->expires);
			else if (dlock_expiry_find(MyDatabaseId, name.key, token, &expired))
				ereport(WARNING,
						(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
						 errmsg("lease of lock \"%s\" has expired", dlock_display_name(&name)),
						 errdetail("The lease expired at %s; the server released the lock.",
								   timestamptz_to_str(expired))));
			else
				ereport(WARNING,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("detached lock \"%s\" is not held with token " INT64_FORMAT,
								dlock_display_name(&name), token),
						 errdetail(NOT_HELD_DETAIL),
						 errhint(NOT_HELD_HINT)));
			break;
		default:
			dlock_error_raise(&r->error);
	}
	return false;
}

/* dlock_release(name, token) -> released? */
Datum
dlock_release(PG_FUNCTION_ARGS)
{
	DlockName	name;
	int64		token;

	dlock_name_arg(fcinfo, 0, &name);
	check_token_arg(fcinfo, 1);
	token = PG_GETARG_INT64(1);
	dlock_require_preload("Detached locks are held by a background worker.");
	dlock_backend_init();
	PG_RETURN_BOOL(release_one(&name, token, DLOCK_OP_RELEASE));
}

/* May PUBLIC execute function fn? */
static bool
function_public(Oid fn)
{
#if PG_VERSION_NUM >= 160000
	return object_aclcheck(ProcedureRelationId, fn, ACL_ID_PUBLIC, ACL_EXECUTE) == ACLCHECK_OK;
#else
	return pg_proc_aclcheck(fn, ACL_ID_PUBLIC, ACL_EXECUTE) == ACLCHECK_OK;
#endif
}

/*
 * dlock_force_release(name, token) -> released?  An operator's override:
 * the detached lock held with this token is released now, whichever role
 * acquired it, in its minimum hold too; logged, and counted in dlock_stats.
 * Only superusers and the roles the DBA granted EXECUTE may call it (the
 * script revokes it from PUBLIC); a grant to PUBLIC is refused here.
 */
Datum
dlock_force_release(PG_FUNCTION_ARGS)
{
	DlockName	name;
	int64		token;

	if (function_public(fcinfo->flinfo->fn_oid))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("dlock_force_release must not be executable by PUBLIC"),
				 errdetail("It releases any role's detached lock."),
				 errhint("REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC, and grant it to the roles of your operators.",
						 format_procedure(fcinfo->flinfo->fn_oid))));
	dlock_name_arg(fcinfo, 0, &name);
	check_token_arg(fcinfo, 1);
	token = PG_GETARG_INT64(1);
	dlock_require_preload("Detached locks are held by a background worker.");
	dlock_backend_init();
	/* the role it runs as, and the session's user where another (a definer's function) */
	if (GetSessionUserId() == GetUserId())
		snprintf(force_caller, sizeof(force_caller), "\"%s\"",
				 GetUserNameFromId(GetUserId(), false));
	else
		snprintf(force_caller, sizeof(force_caller), "\"%s\" (session user \"%s\")",
				 GetUserNameFromId(GetUserId(), false),
				 GetUserNameFromId(GetSessionUserId(), false));
	PG_RETURN_BOOL(release_one(&name, token, DLOCK_OP_FORCE_RELEASE));
}

Datum
dlock_acquire_1_5(PG_FUNCTION_ARGS)
{
	return dlock_acquire(fcinfo);
}

Datum
dlock_extend_1_5(PG_FUNCTION_ARGS)
{
	return dlock_extend(fcinfo);
}

/*
 * Several names at once (1.5).  dlock_acquire given a text[] acquires a
 * detached lock of each name, in key order, or none: the tokens in the
 * order of the names given (a name given twice: one lock, its token
 * twice), or NULL.  The acquisitions are made in an internal
 * subtransaction; when one is not granted (busy, the deadline, an error),
 * rolling it back undoes all of them as a rollback does: at once, whatever
 * their min_hold.  While later names are waited for, the earlier ones hold
 * the longest lease; once all are granted each is extended to the lease
 * asked for, counted from then, so that none can run out before the call
 * returns (one that did, or that a waiter let go meanwhile, fails the
 * extension, and the call returns NULL).  The call's timeout bounds the
 * extensions too, as it bounds a slow lock holder for one name.
 */
typedef struct AcquireAll
{
	const DlockName *names;
	int			n;
	const DetachedArgs *a;
	TimestampTz start;
	int64	   *tokens;
} AcquireAll;

static bool
acquire_all(void *arg)
{
	AcquireAll *all = (AcquireAll *) arg;
	DetachedArgs interim = *all->a;
	TimestampTz deadline = all->a->timeout_us > 0 ? all->start + all->a->timeout_us : 0;

	interim.lease_us = DLOCK_DETACHED_MAX_LEASE_US;
	for (int i = 0; i < all->n; i++)
	{
		DLOCK_FAULT("detached.many");
		all->tokens[i] = acquire_one(&all->names[i], &interim, all->start);
		if (all->tokens[i] == 0)
			return false;
	}
	/*
	 * dlock.synchronous_grants: one confirmation after the last grant, and
	 * the leases started within its deadline
	 */
	if (unlikely(dlock_synchronous_grants))
	{
		deadline = dlock_confirm_deadline(deadline);
		dlock_confirm_grant(all->names, all->n, deadline);
	}
	for (int i = 0; i < all->n; i++)
		if (!start_lease(&all->names[i], all->tokens[i], all->a->lease_us, deadline))
			return false;		/* ran out, let go, or the deadline */
	return true;
}

static int
name_of_key(const DlockName *names, int n, int64 key)
{
	int			lo = 0;
	int			hi = n - 1;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (names[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

Datum
dlock_acquire_many(PG_FUNCTION_ARGS)
{
	DlockName  *names;
	int			n;
	DetachedArgs a;
	AcquireAll	all;
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	Datum	   *out;

	n = dlock_names_arg(fcinfo, 0, &names);
	detached_args(fcinfo, &names[0], false, &a);
	all.names = names;
	all.n = n;
	all.a = &a;
	all.start = GetCurrentTimestamp();
	all.tokens = palloc0(sizeof(int64) * n);
	if (!dlock_in_subxact(acquire_all, &all))
		PG_RETURN_NULL();

	/* the tokens in the order of the names given */
	arr = PG_GETARG_ARRAYTYPE_P(0);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nelems);
	out = palloc(sizeof(Datum) * nelems);
	for (int i = 0; i < nelems; i++)
	{
		DlockName	name;

		dlock_name_text(DatumGetTextPP(elems[i]), &name);
		out[i] = Int64GetDatum(all.tokens[name_of_key(names, n, name.key)]);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(out, nelems, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE));
}
