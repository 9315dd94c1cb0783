/*
 * dlock.c: module start-up (_PG_init): the settings, the hooks, the
 * background workers.  The top of the house: nothing in dlock calls it.
 *
 * Each setting's variable lives in the file that uses it, declared in its
 * concern's header; shared memory is requested and made in shmem.c.
 *
 * Layer 7 of the map in dlock.h (module start): calls only files
 * listed before it there.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "postmaster/bgworker.h"
#include "tcop/utility.h"
#include "utils/guc.h"

#include "confirm.h"
#include "dlock.h"
#include "detached.h"
#include "entries.h"
#include "hints.h"
#include "leases.h"
#include "locks.h"
#include "notify.h"
#include "semaphore.h"
#include "shmem.h"
#include "slots.h"
#include "stats.h"
#include "stats_table.h"
#include "tokens.h"
#include "xact.h"

DLOCK_MODULE_MAGIC;

static ProcessUtility_hook_type prev_process_utility = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

void		_PG_init(void);

/*
 * DISCARD ALL releases every session-level advisory lock behind dlock's
 * back (pgbouncer's server_reset_query, for one): the session's holds are
 * forgotten at once, so that neither the view nor the lease reaper takes a
 * lock of the same key taken afresh afterwards for the old hold.
 *
 * COMMIT after a lease ran out is refused here already, before any
 * pre-commit callback runs: another extension's may commit elsewhere (the
 * remote transactions of postgres_fdw) and run before dlock's, which is
 * registered earlier when the session used dlock first.  The block is marked
 * to end at this point ('T': to commit; 'E' would be a rollback), so the
 * error ends it as a refused commit does.  A lease can also run out between
 * here and the pre-commit steps (deferred triggers run there): dlock's
 * callback is made the first to run for that (xact.c).
 */
static void
dlock_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					  ProcessUtilityContext context, ParamListInfo params,
					  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	bool		commit = IsA(stmt, TransactionStmt) &&
		((TransactionStmt *) stmt)->kind == TRANS_STMT_COMMIT;

	/* dlock's pre-commit check before any other extension's */
	if (commit)
		dlock_xact_callback_first();
	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
							 queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
	if (IsA(stmt, DiscardStmt) && ((DiscardStmt *) stmt)->target == DISCARD_ALL)
	{
		dlock_entries_forget_released();
		/* the session's locks and permits went: their waiters' turn */
		dlock_permit_wake_all();
	}
	else if (commit && TransactionBlockStatusCode() == 'T')
		dlock_lease_refuse_commit(false);
}

/*
 * Every report of this backend, before it is logged and sent: the end of a
 * session or a statement that the lease reaper caused says so (leases.c),
 * and a call that does not match says what dlock takes (hints.c).
 */
static void
dlock_emit_log(ErrorData *edata)
{
	dlock_lease_explain(edata);
	dlock_explain_call(edata);
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

void
_PG_init(void)
{
	BackgroundWorker worker;

	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = dlock_process_utility;
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = dlock_emit_log;
	/* what a backend sets up when it first uses dlock (entries.h) */
	dlock_on_backend_setup(dlock_xact_setup);
	dlock_on_backend_setup(dlock_stats_backend_setup);
	dlock_on_backend_setup(dlock_permits_backend_setup);
	dlock_on_backend_setup(dlock_notify_backend_setup);

	DefineCustomIntVariable("dlock.max_held_locks",
							"Named locks one session can hold or wait for through dlock at once.",
							"-1 (the default) is a quarter of the server's lock table "
							"(max_locks_per_transaction * (max_connections + other processes + max_prepared_transactions)), "
							"so that no single session can fill it.",
							&dlock_max_held_locks,
							-1, -1, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	/* a per-session choice, so it exists with or without preloading */
	DefineCustomBoolVariable("dlock.allow_standby_locks",
							 "Allows taking dlock locks on a hot standby.",
							 "Such a lock excludes only other sessions of the same standby, never the primary's, "
							 "and has no fencing token.",
							 &dlock_allow_standby_locks,
							 false,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("dlock.synchronous_grants",
							 "Answers a lock granted on a primary only once its synchronous standbys confirm it, as a commit.",
							 "The granting session writes WAL after the grant and waits until the standbys in "
							 "synchronous_standby_names have flushed it, so that a primary replaced by one of them "
							 "grants nothing more.  Without synchronous_standby_names nothing waits.",
							 &dlock_synchronous_grants,
							 false,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

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
							"The token file is written and fsynced when a primary starts or is promoted and once every "
							"this many tokens; after a restart or crash, tokens resume above the last reservation.",
							&dlock_token_reserve,
							DLOCK_TOKEN_RESERVE_DEFAULT, 1, INT_MAX,
							PGC_POSTMASTER, GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.max_detached_locks",
							"Detached locks the lock holder process can hold at once.",
							"Counts locks that dlock_acquire got without waiting; a lock it had to wait for "
							"is held by its own background worker.  0 turns detached locks off.",
							&dlock_max_detached_locks,
							1000, 0, 1000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.max_detached_locks_per_role",
							"Detached locks the lock holder process holds for one role at most.",
							"-1 (the default) is half of dlock.max_detached_locks, so that no single role "
							"can take them all.",
							&dlock_max_detached_locks_per_role,
							-1, -1, 1000000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.max_detached_waiters_per_role",
							"Background workers one role's detached locks take at most (the first in line for a name, a lock that had to wait).",
							"-1 (the default) is half of max_worker_processes, so that no single role "
							"can take every background worker slot.",
							&dlock_max_detached_waiters_per_role,
							-1, -1, 1000000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.max_stats",
							"Entries (database, name and mode) the dlock_stats view keeps.",
							"When a new name finds no room, the least used 5% of its part of the table are evicted.",
							&dlock_max_stats,
							5000, 100, 1000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("dlock.max_notifiers",
							"Notifier processes running at once (observers: one per database with events).",
							"Each takes a background worker slot while it runs; a database whose events wait "
							"for one gets it when another leaves (at once, when it has nothing to send).",
							&dlock_max_notifiers,
							2, 1, DLOCK_NOTIFIERS,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("dlock.track_stats",
							 "Counts acquisitions, waits, holds and lease expiries in dlock_stats.",
							 NULL,
							 &dlock_track_stats,
							 true,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("dlock");

	dlock_shmem_install();

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

	if (dlock_max_detached_locks > 0)
	{
		/* on a primary only: a standby hands out no tokens */
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "dlock_holder_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "dlock lock holder");
		snprintf(worker.bgw_type, BGW_MAXLEN, "dlock lock holder");
		RegisterBackgroundWorker(&worker);
	}
}
