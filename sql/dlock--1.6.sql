-- dlock 1.6: named, lease-aware advisory locks (the whole of 1.6 at once)
\echo Use "CREATE EXTENSION dlock" to load this file. \quit

-- CREATE EXTENSION dlock runs this file alone; the chain dlock--1.0.sql,
-- dlock--1.0--1.1.sql, ... dlock--1.5--1.6.sql makes the same objects, and
-- runs only for CREATE EXTENSION dlock VERSION '1.0' (or another old one)
-- and for ALTER EXTENSION dlock UPDATE.  sql/dlock_upgrade.sql checks that
-- both end alike.
--
-- This script runs as a superuser with the extension's schema first on
-- search_path, a schema that other roles may be able to create objects in.
-- So every operator is written OPERATOR(pg_catalog.x), every function,
-- type and collation is schema-qualified (dlock's own with the
-- extension's schema), no construct that looks an operator up implicitly
-- (IN, CASE x WHEN, IS DISTINCT FROM, LIKE, ...) is used, and nothing is
-- CREATE OR REPLACE'd: an object of that name made by someone else first
-- makes the script fail.  test/scripts.py checks every script for this,
-- and runs them all with traps planted (doc/security.md).
--
-- Every function but dlock_key and the views' functions takes an advisory
-- lock or changes this session's record of them: VOLATILE and PARALLEL
-- UNSAFE, like pg_advisory_lock.  None of the lock functions is STRICT: a
-- NULL argument is an error, not a NULL.

CREATE FUNCTION "@extschema@".dlock_key(name pg_catalog.text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_key'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION "@extschema@".dlock_key(pg_catalog.text) IS
'the advisory-lock key of a name: the first 8 bytes of SHA-256 of its UTF-8 bytes, little-endian, as bigint';

-- The lock functions come in forms for one name and for several.  The full
-- one-name form takes the name as dlock_name, a domain over text with no
-- constraints of its own, and has DEFAULT arguments, so that any argument
-- can be left out or given by name (dlock_try('job', lease => '30s')).  The
-- one-argument form takes text and is what a call with only a name resolves
-- to: PostgreSQL re-reads and re-plans DEFAULT arguments on every statement
-- that leaves them out, which costs more than taking the lock.  Both run the
-- same C function.  The text[] forms take several names at once, all or
-- none; a name given as a literal or a text parameter still resolves to the
-- one-name functions (the string category is preferred over an array).
CREATE DOMAIN "@extschema@".dlock_name AS pg_catalog.text;

COMMENT ON DOMAIN "@extschema@".dlock_name IS
'a lock name: text; the type of the name argument of the full forms of the dlock lock functions';

-- Session locks.  (The _1_5 C symbols are those of the 1.5 argument lists;
-- the 1.4 names serve the 1.4 SQL, doc/upgrades.md.)
CREATE FUNCTION "@extschema@".dlock_try(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_try(name "@extschema@".dlock_name, shared boolean DEFAULT false,
                          lease interval DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                          info pg_catalog.text DEFAULT NULL, permits bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock(name "@extschema@".dlock_name, timeout interval DEFAULT NULL,
                           shared boolean DEFAULT false, lease interval DEFAULT NULL,
                           timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                           info pg_catalog.text DEFAULT NULL, permits bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Transaction locks.
CREATE FUNCTION "@extschema@".dlock_try_xact(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_try_xact(name "@extschema@".dlock_name, shared boolean DEFAULT false,
                               lease interval DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                               info pg_catalog.text DEFAULT NULL, permits bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_xact(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_xact(name "@extschema@".dlock_name, timeout interval DEFAULT NULL,
                                shared boolean DEFAULT false, lease interval DEFAULT NULL,
                                timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                                info pg_catalog.text DEFAULT NULL, permits bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Releasing.
CREATE FUNCTION "@extschema@".dlock_unlock(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unlock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_unlock(name "@extschema@".dlock_name, shared boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unlock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_unlock_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'dlock_unlock_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Leases and tokens of this session's holds.
CREATE FUNCTION "@extschema@".dlock_renew(name pg_catalog.text, lease interval DEFAULT NULL,
                            lease_ms bigint DEFAULT NULL, info pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_renew_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_token(name pg_catalog.text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION "@extschema@".dlock_token(pg_catalog.text) IS
'the fencing token of this session''s hold of a name: timeline * 10^13 + a counter of that timeline; compare tokens as bigint, larger is later';

-- Detached locks, held by a dlock background process for the role that
-- acquired them, until released with their token or until their lease runs
-- out (doc/detached.md).  The two-argument form is what
-- dlock_acquire('job', '30s') resolves to; the full form takes the rest, by
-- position or by name.
CREATE FUNCTION "@extschema@".dlock_acquire(name pg_catalog.text, lease interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_acquire(name "@extschema@".dlock_name, lease interval DEFAULT NULL,
                              timeout interval DEFAULT '0', shared boolean DEFAULT false,
                              lease_ms bigint DEFAULT NULL, timeout_ms bigint DEFAULT NULL,
                              info pg_catalog.text DEFAULT NULL,
                              min_hold interval DEFAULT NULL, min_hold_ms bigint DEFAULT NULL,
                              permits bigint DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_extend(name pg_catalog.text, token bigint, lease interval DEFAULT NULL,
                             lease_ms bigint DEFAULT NULL, info pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_extend_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_release(name pg_catalog.text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION "@extschema@".dlock_acquire(pg_catalog.text, interval) IS
'acquire a detached lock, held by the server until dlock_release or until the lease runs out; returns its fencing token, or NULL if it is taken';
COMMENT ON FUNCTION "@extschema@".dlock_acquire("@extschema@".dlock_name, interval, interval, boolean, bigint, bigint,
                                  pg_catalog.text, interval, bigint, bigint) IS
'acquire a detached lock, waiting up to timeout (default: do not wait; NULL: no limit); returns its fencing token, or NULL if not acquired in time; lease_ms and timeout_ms: the same in milliseconds (timeout_ms NULL: not given); held at least min_hold, even if released earlier; permits: one of that many permits of a semaphore';
COMMENT ON FUNCTION "@extschema@".dlock_extend(pg_catalog.text, bigint, interval, bigint, pg_catalog.text) IS
'give the detached lock held with this token a new lease, counted from now (lease, or lease_ms in milliseconds), and new info if given; returns when it ends';
COMMENT ON FUNCTION "@extschema@".dlock_release(pg_catalog.text, bigint) IS
'release the detached lock held with this token; false (with a warning) if it is not held with it';

-- dlock_force_release (1.6): an operator's override.  The detached lock
-- held with this token is released now, whichever role acquired it, in its
-- minimum hold too; logged, and counted in dlock_stats.force_released.
-- Never PUBLIC's: superusers may call it, and the roles the DBA grants
-- EXECUTE (the function refuses to run while PUBLIC may).  STRICT, as
-- pg_terminate_backend: a NULL (a waiter's token, read from dlock_locks)
-- ends nothing and answers NULL.
CREATE FUNCTION "@extschema@".dlock_force_release(name pg_catalog.text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_force_release'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION "@extschema@".dlock_force_release(pg_catalog.text, bigint) FROM PUBLIC;

COMMENT ON FUNCTION "@extschema@".dlock_force_release(pg_catalog.text, bigint) IS
'an operator''s override: release the detached lock held with this token now, whoever acquired it, in its minimum hold too (logged, counted); not for PUBLIC';

-- Several names at once: all of them or none, taken in key order.  (No
-- dlock_release(text[], bigint[]): with it, dlock_release('job', $1) with an
-- unknown-typed parameter, as node-postgres sends one, would be ambiguous.
-- Release several with unnest, doc/functions.md "Several names at once".)
CREATE FUNCTION "@extschema@".dlock_try(names pg_catalog.text[], shared boolean DEFAULT false,
                          lease interval DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                          info pg_catalog.text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock(names pg_catalog.text[], timeout interval DEFAULT NULL,
                           shared boolean DEFAULT false, lease interval DEFAULT NULL,
                           timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                           info pg_catalog.text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_try_xact(names pg_catalog.text[], shared boolean DEFAULT false,
                               lease interval DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                               info pg_catalog.text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_xact(names pg_catalog.text[], timeout interval DEFAULT NULL,
                                shared boolean DEFAULT false, lease interval DEFAULT NULL,
                                timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                                info pg_catalog.text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_unlock(names pg_catalog.text[], shared boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unlock_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_acquire(names pg_catalog.text[], lease interval DEFAULT NULL,
                              timeout interval DEFAULT '0', shared boolean DEFAULT false,
                              lease_ms bigint DEFAULT NULL, timeout_ms bigint DEFAULT NULL,
                              info pg_catalog.text DEFAULT NULL,
                              min_hold interval DEFAULT NULL, min_hold_ms bigint DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'dlock_acquire_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION "@extschema@".dlock_acquire(pg_catalog.text[], interval, interval, boolean, bigint, bigint,
                                  pg_catalog.text, interval, bigint) IS
'acquire a detached lock of every one of the names, in key order, or none: their fencing tokens in the order of the names, or NULL';
COMMENT ON FUNCTION "@extschema@".dlock_try(pg_catalog.text[], boolean, interval, bigint, pg_catalog.text) IS
'take every one of the named locks now, or none';
COMMENT ON FUNCTION "@extschema@".dlock_lock(pg_catalog.text[], interval, boolean, interval, bigint, bigint,
                               pg_catalog.text) IS
'take every one of the named locks, in key order, waiting up to timeout for all of them; none if not all';
COMMENT ON FUNCTION "@extschema@".dlock_try_xact(pg_catalog.text[], boolean, interval, bigint, pg_catalog.text) IS
'take every one of the named transaction locks now, or none';
COMMENT ON FUNCTION "@extschema@".dlock_lock_xact(pg_catalog.text[], interval, boolean, interval, bigint, bigint,
                                    pg_catalog.text) IS
'take every one of the named transaction locks, in key order, waiting up to timeout for all of them; none if not all';
COMMENT ON FUNCTION "@extschema@".dlock_unlock(pg_catalog.text[], boolean) IS
'release one session hold of each of the named locks; true if each was held';

-- The positional forms for clients (1.6): dlock_try_ms, dlock_lock_ms, their
-- _xact forms, dlock_acquire_ms, dlock_extend_ms and dlock_renew_ms take
-- every argument by position, durations as bigint milliseconds, and have
-- no DEFAULT arguments and a name of their own.  A driver's statement
-- SELECT dlock_try_ms($1, $2, $3, $4, $5) then resolves among one function
-- with nothing to expand: the full forms' DEFAULT lists and named
-- arguments cost PostgreSQL more to parse than the lock costs to take
-- (doc/languages.md).  A NULL argument is what leaving it out
-- of the full form does: timeout_ms NULL waits without a limit in
-- dlock_lock_ms and does not wait in dlock_acquire_ms, lease_ms NULL takes
-- no lease (dlock_renew_ms: the length it had), info and permits NULL are
-- not given; shared must not be NULL.
CREATE FUNCTION "@extschema@".dlock_try_ms(name pg_catalog.text, shared boolean, lease_ms bigint,
                             info pg_catalog.text, permits bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_ms(name pg_catalog.text, timeout_ms bigint, shared boolean,
                              lease_ms bigint, info pg_catalog.text, permits bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_try_xact_ms(name pg_catalog.text, shared boolean, lease_ms bigint,
                                  info pg_catalog.text, permits bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_xact_ms(name pg_catalog.text, timeout_ms bigint, shared boolean,
                                   lease_ms bigint, info pg_catalog.text, permits bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_acquire_ms(name pg_catalog.text, lease_ms bigint, timeout_ms bigint,
                                 shared boolean, info pg_catalog.text, min_hold_ms bigint,
                                 permits bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_extend_ms(name pg_catalog.text, token bigint, lease_ms bigint,
                                info pg_catalog.text)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_extend_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_renew_ms(name pg_catalog.text, lease_ms bigint, info pg_catalog.text)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_renew_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION "@extschema@".dlock_try_ms(pg_catalog.text, boolean, bigint, pg_catalog.text, bigint) IS
'dlock_try for clients, every argument by position: (name, shared, lease_ms, info, permits); NULL: not given';
COMMENT ON FUNCTION "@extschema@".dlock_lock_ms(pg_catalog.text, bigint, boolean, bigint, pg_catalog.text, bigint) IS
'dlock_lock for clients, every argument by position: (name, timeout_ms, shared, lease_ms, info, permits); timeout_ms NULL: no limit';
COMMENT ON FUNCTION "@extschema@".dlock_try_xact_ms(pg_catalog.text, boolean, bigint, pg_catalog.text, bigint) IS
'dlock_try_xact for clients, every argument by position: (name, shared, lease_ms, info, permits); NULL: not given';
COMMENT ON FUNCTION "@extschema@".dlock_lock_xact_ms(pg_catalog.text, bigint, boolean, bigint, pg_catalog.text, bigint) IS
'dlock_lock_xact for clients, every argument by position: (name, timeout_ms, shared, lease_ms, info, permits); timeout_ms NULL: no limit';
COMMENT ON FUNCTION "@extschema@".dlock_acquire_ms(pg_catalog.text, bigint, bigint, boolean, pg_catalog.text, bigint, bigint) IS
'dlock_acquire for clients, every argument by position: (name, lease_ms, timeout_ms, shared, info, min_hold_ms, permits); timeout_ms NULL: do not wait';
COMMENT ON FUNCTION "@extschema@".dlock_extend_ms(pg_catalog.text, bigint, bigint, pg_catalog.text) IS
'dlock_extend for clients, every argument by position: (name, token, lease_ms, info)';
COMMENT ON FUNCTION "@extschema@".dlock_renew_ms(pg_catalog.text, bigint, pg_catalog.text) IS
'dlock_renew for clients, every argument by position: (name, lease_ms, info); lease_ms NULL: the length it had';

-- Each comes in a short shape too, without info and permits (and
-- min_hold_ms): the one the README's examples send.  A driver's untyped
-- parameter costs the server as much to parse and bind as the lock costs
-- to take, so the shape a client sends most has the fewest.  A name with
-- shapes of different lengths and no defaults still resolves by the count
-- of arguments alone.  And dlock_unlock(name, shared) by position, with the
-- name as text: dlock_unlock($1, $2) resolves to it, not to the full form
-- (whose name is a dlock_name, a domain, dearer to bind).
CREATE FUNCTION "@extschema@".dlock_try_ms(name pg_catalog.text, shared boolean, lease_ms bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_ms(name pg_catalog.text, timeout_ms bigint, shared boolean,
                              lease_ms bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_try_xact_ms(name pg_catalog.text, shared boolean, lease_ms bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_xact_ms(name pg_catalog.text, timeout_ms bigint, shared boolean,
                                   lease_ms bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_acquire_ms(name pg_catalog.text, lease_ms bigint, timeout_ms bigint,
                                 shared boolean)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_extend_ms(name pg_catalog.text, token bigint, lease_ms bigint)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_extend_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_renew_ms(name pg_catalog.text, lease_ms bigint)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_renew_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_unlock(name pg_catalog.text, shared boolean)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unlock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION "@extschema@".dlock_try_ms(pg_catalog.text, boolean, bigint) IS
'dlock_try for clients, every argument by position: (name, shared, lease_ms); NULL: not given';
COMMENT ON FUNCTION "@extschema@".dlock_lock_ms(pg_catalog.text, bigint, boolean, bigint) IS
'dlock_lock for clients, every argument by position: (name, timeout_ms, shared, lease_ms); timeout_ms NULL: no limit';
COMMENT ON FUNCTION "@extschema@".dlock_try_xact_ms(pg_catalog.text, boolean, bigint) IS
'dlock_try_xact for clients, every argument by position: (name, shared, lease_ms); NULL: not given';
COMMENT ON FUNCTION "@extschema@".dlock_lock_xact_ms(pg_catalog.text, bigint, boolean, bigint) IS
'dlock_lock_xact for clients, every argument by position: (name, timeout_ms, shared, lease_ms); timeout_ms NULL: no limit';
COMMENT ON FUNCTION "@extschema@".dlock_acquire_ms(pg_catalog.text, bigint, bigint, boolean) IS
'dlock_acquire for clients, every argument by position: (name, lease_ms, timeout_ms, shared); timeout_ms NULL: do not wait';
COMMENT ON FUNCTION "@extschema@".dlock_extend_ms(pg_catalog.text, bigint, bigint) IS
'dlock_extend for clients, every argument by position: (name, token, lease_ms)';
COMMENT ON FUNCTION "@extschema@".dlock_renew_ms(pg_catalog.text, bigint) IS
'dlock_renew for clients, every argument by position: (name, lease_ms); lease_ms NULL: the length it had';
COMMENT ON FUNCTION "@extschema@".dlock_unlock(pg_catalog.text, boolean) IS
'release one session hold of a lock; the positional form for clients (the name as text)';

-- What every backend says it holds or awaits (the 1.3 reader; dlock_locks
-- reads the lock table itself since 1.4).
CREATE FUNCTION "@extschema@".dlock_names(
    OUT pid integer, OUT database pg_catalog.oid, OUT key bigint, OUT mode pg_catalog.text,
    OUT name pg_catalog.text, OUT session_holds integer, OUT xact_holds integer,
    OUT waiting pg_catalog.text, OUT since pg_catalog.timestamptz,
    OUT lease_expires pg_catalog.timestamptz, OUT token bigint, OUT detached boolean,
    OUT username pg_catalog.text, OUT application_name pg_catalog.text,
    OUT client_addr pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'dlock_names'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- dlock_locks: every held or awaited lock of dlock's, read in one pass over
-- the lock table (pg_locks is the truth), with its name, scope, lease, token,
-- who blocks each waiter, the holder's info and permit, the N of a
-- semaphore, the session's state and a detached lock's minimum hold (1.6:
-- the last four columns; and a semaphore's first in line, who waits for a
-- permit in no lock wait, is blocked by its permits' holders: waits_for).
-- (database and
-- username are text in the function, name in the view: a row of the
-- function's result is stored, and two 64-byte names would double it.)
CREATE FUNCTION "@extschema@".dlock_locks(
    OUT database pg_catalog.text, OUT name pg_catalog.text, OUT key bigint,
    OUT mode pg_catalog.text, OUT scope pg_catalog.text, OUT granted boolean, OUT pid integer,
    OUT username pg_catalog.text, OUT application_name pg_catalog.text,
    OUT client_addr pg_catalog.inet, OUT since pg_catalog.timestamptz,
    OUT lease_expires pg_catalog.timestamptz, OUT token bigint, OUT wait_time interval,
    OUT hold_time interval, OUT info pg_catalog.text, OUT permit integer,
    OUT permits integer, OUT session_state pg_catalog.text,
    OUT min_hold_until pg_catalog.timestamptz, OUT released boolean,
    OUT waits_for integer[])
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'dlock_locks_1_5'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE VIEW "@extschema@".dlock_locks AS
SELECT database::pg_catalog.name COLLATE pg_catalog."C" AS database, name, key, mode, scope,
       granted, pid, username::pg_catalog.name COLLATE pg_catalog."C" AS username,
       application_name, client_addr, since, lease_expires, token, wait_time,
       CASE WHEN NOT granted THEN COALESCE(waits_for, pg_catalog.pg_blocking_pids(pid))
       END AS blocked_by,
       hold_time, info, permit, permits, session_state, min_hold_until, released
  FROM "@extschema@".dlock_locks();

GRANT SELECT ON "@extschema@".dlock_locks TO PUBLIC;

COMMENT ON VIEW "@extschema@".dlock_locks IS
'held and awaited advisory locks with their dlock names, scope, lease, fencing token, blockers, hold time, info, semaphore permit and permits, session state, and a detached lock''s minimum hold';

-- dlock_summary (1.6): one row per lock (database and key), for a person
-- at a glance: how many hold and wait (of how many permits), in which
-- modes, the longest hold and wait, the next lease to run out, who holds,
-- who waits first.  (A lock a
-- row of dlock_locks shows without a name, a raw pg_advisory_lock of the
-- key, is the same lock: its name is taken from the rows that have it.)
CREATE VIEW "@extschema@".dlock_summary AS
SELECT database, pg_catalog.max(name) AS name, key,
       pg_catalog.count(*) FILTER (WHERE granted) AS holders,
       pg_catalog.count(*) FILTER (WHERE NOT granted) AS waiters,
       pg_catalog.max(permits) AS permits,
       pg_catalog.array_agg(DISTINCT mode) FILTER (WHERE granted) AS held_modes,
       pg_catalog.max(hold_time) AS longest_hold,
       pg_catalog.max(wait_time) AS longest_wait,
       pg_catalog.min(lease_expires) FILTER (WHERE granted) AS next_lease_end,
       pg_catalog.array_agg(pid ORDER BY since) FILTER (WHERE granted) AS holder_pids,
       (pg_catalog.array_agg(pid ORDER BY since) FILTER (WHERE NOT granted))[1] AS first_waiter_pid
  FROM "@extschema@".dlock_locks
 GROUP BY database, key;

GRANT SELECT ON "@extschema@".dlock_summary TO PUBLIC;

COMMENT ON VIEW "@extschema@".dlock_summary IS
'one row per lock name: holders, waiters, a semaphore''s permits, modes held, longest hold and wait, next lease end, who holds, who waits first';

-- Lock statistics (doc/monitoring.md).
CREATE FUNCTION "@extschema@".dlock_stats(
    OUT database pg_catalog.name, OUT name pg_catalog.text, OUT key bigint,
    OUT mode pg_catalog.text, OUT acquisitions bigint, OUT immediate bigint, OUT waited bigint,
    OUT session_acquisitions bigint, OUT xact_acquisitions bigint,
    OUT detached_acquisitions bigint,
    OUT busy bigint, OUT timeouts bigint, OUT deadlocks bigint, OUT cancels bigint,
    OUT wait_time_total interval, OUT wait_time_max interval,
    OUT released bigint, OUT hold_time_total interval, OUT hold_time_max interval,
    OUT leases_expired bigint, OUT last_acquired pg_catalog.timestamptz,
    OUT force_released bigint)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'dlock_stats'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE VIEW "@extschema@".dlock_stats AS
SELECT database, name, key, mode, acquisitions, immediate, waited, session_acquisitions,
       xact_acquisitions, detached_acquisitions, busy, timeouts, deadlocks, cancels,
       wait_time_total, wait_time_max, released, hold_time_total, hold_time_max,
       leases_expired, last_acquired, force_released
  FROM "@extschema@".dlock_stats();
GRANT SELECT ON "@extschema@".dlock_stats TO PUBLIC;

CREATE FUNCTION "@extschema@".dlock_stats_info(
    OUT evictions bigint, OUT stats_reset pg_catalog.timestamptz,
    OUT entries integer, OUT max_entries integer)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'dlock_stats_info'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE VIEW "@extschema@".dlock_stats_info AS
SELECT evictions, stats_reset, entries, max_entries FROM "@extschema@".dlock_stats_info();
GRANT SELECT ON "@extschema@".dlock_stats_info TO PUBLIC;

-- everything, or one name (strict: a NULL name resets nothing)
CREATE FUNCTION "@extschema@".dlock_stats_reset()
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'dlock_stats_reset'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION "@extschema@".dlock_stats_reset(name pg_catalog.text)
RETURNS pg_catalog.void
AS 'MODULE_PATHNAME', 'dlock_stats_reset'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- as pg_stat_statements_reset: superusers, and whom they grant it to
REVOKE ALL ON FUNCTION "@extschema@".dlock_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION "@extschema@".dlock_stats_reset(pg_catalog.text) FROM PUBLIC;
-- The override and the statistics reset are kept, too, from every role that
-- default privileges (ALTER DEFAULT PRIVILEGES ... GRANT EXECUTE ON
-- FUNCTIONS) gave them at their creation: nobody has them but their owner
-- until the DBA grants them.
DO $only_owner$
DECLARE
  g pg_catalog.record;
BEGIN
  FOR g IN
    SELECT DISTINCT p.oid::pg_catalog.regprocedure AS fn, x.grantee
      FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) x
     WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
             '"@extschema@".dlock_force_release(pg_catalog.text,bigint)'::pg_catalog.regprocedure,
             '"@extschema@".dlock_stats_reset()'::pg_catalog.regprocedure,
             '"@extschema@".dlock_stats_reset(pg_catalog.text)'::pg_catalog.regprocedure]::pg_catalog.oid[])
       AND x.grantee OPERATOR(pg_catalog.<>) p.proowner
       AND x.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
  LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %I CASCADE', g.fn,
                              pg_catalog.pg_get_userbyid(g.grantee));
  END LOOP;
END
$only_owner$;

COMMENT ON VIEW "@extschema@".dlock_stats IS
'lock statistics per database, name and mode: acquisitions, waits, timeouts, deadlocks, cancels, hold times, lease expiries';
COMMENT ON VIEW "@extschema@".dlock_stats_info IS
'the dlock_stats table: entries evicted, when it was last reset, entries in use and its bound (dlock.max_stats)';
COMMENT ON FUNCTION "@extschema@".dlock_stats_reset() IS
'forget all lock statistics, and the evictions; stats_reset becomes now';
COMMENT ON FUNCTION "@extschema@".dlock_stats_reset(pg_catalog.text) IS
'forget the statistics of one name (both modes, this database)';
