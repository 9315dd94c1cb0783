-- dlock 1.3 -> 1.4
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.4'" to load this file. \quit

-- 1.4: lock statistics (README.md "Monitoring"), and dlock_locks says who
-- blocks each waiter and how long each holder has held.

CREATE FUNCTION dlock_stats(
    OUT database pg_catalog.name, OUT name pg_catalog.text, OUT key bigint, OUT mode pg_catalog.text,
    OUT acquisitions bigint, OUT immediate bigint, OUT waited bigint,
    OUT session_acquisitions bigint, OUT xact_acquisitions bigint,
    OUT detached_acquisitions bigint,
    OUT busy bigint, OUT timeouts bigint, OUT deadlocks bigint, OUT cancels bigint,
    OUT wait_time_total interval, OUT wait_time_max interval,
    OUT released bigint, OUT hold_time_total interval, OUT hold_time_max interval,
    OUT leases_expired bigint, OUT last_acquired pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'dlock_stats'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE VIEW dlock_stats AS SELECT * FROM "@extschema@".dlock_stats();
GRANT SELECT ON dlock_stats TO PUBLIC;

CREATE FUNCTION dlock_stats_info(
    OUT evictions bigint, OUT stats_reset pg_catalog.timestamptz,
    OUT entries integer, OUT max_entries integer)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'dlock_stats_info'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE VIEW dlock_stats_info AS SELECT * FROM "@extschema@".dlock_stats_info();
GRANT SELECT ON dlock_stats_info TO PUBLIC;

-- everything, or one name (strict: a NULL name resets nothing)
CREATE FUNCTION dlock_stats_reset()
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'dlock_stats_reset'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION dlock_stats_reset(name pg_catalog.text)
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'dlock_stats_reset'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- as pg_stat_statements_reset: superusers, and whom they grant it to
REVOKE ALL ON FUNCTION dlock_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION dlock_stats_reset(pg_catalog.text) FROM PUBLIC;

COMMENT ON VIEW dlock_stats IS
'lock statistics per database, name and mode: acquisitions, waits, timeouts, deadlocks, cancels, hold times, lease expiries';
COMMENT ON VIEW dlock_stats_info IS
'the dlock_stats table: entries evicted, when it was last reset, entries in use and its bound (dlock.max_stats)';
COMMENT ON FUNCTION dlock_stats_reset() IS
'forget all lock statistics, and the evictions; stats_reset becomes now';
COMMENT ON FUNCTION dlock_stats_reset(pg_catalog.text) IS
'forget the statistics of one name (both modes, this database)';

-- dlock_locks: read in one pass over the lock table (the 1.3 view joined
-- pg_locks with dlock_names(), which the planner could rescan for every
-- lock); the same columns, then blocked_by and hold_time.
-- (database and username are text here, name in the view: a row of the
-- function's result is stored, and two 64-byte names would double it)
CREATE FUNCTION dlock_locks(
    OUT database pg_catalog.text, OUT name pg_catalog.text, OUT key bigint, OUT mode pg_catalog.text, OUT scope pg_catalog.text,
    OUT granted boolean, OUT pid integer, OUT username pg_catalog.text, OUT application_name pg_catalog.text,
    OUT client_addr pg_catalog.inet, OUT since pg_catalog.timestamptz, OUT lease_expires pg_catalog.timestamptz,
    OUT token bigint, OUT wait_time interval, OUT hold_time interval)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'dlock_locks'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE OR REPLACE VIEW dlock_locks AS
SELECT database::pg_catalog.name COLLATE pg_catalog."C" AS database, name, key, mode, scope, granted, pid,
       username::pg_catalog.name COLLATE pg_catalog."C" AS username, application_name, client_addr, since, lease_expires,
       token, wait_time,
       CASE WHEN NOT granted THEN pg_catalog.pg_blocking_pids(pid) END AS blocked_by,
       hold_time
  FROM "@extschema@".dlock_locks();

COMMENT ON VIEW dlock_locks IS
'held and awaited advisory locks with their dlock names, scope, lease, fencing token, blockers and hold time';
