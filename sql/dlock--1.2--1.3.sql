-- dlock 1.2 -> 1.3
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.3'" to load this file. \quit

-- 1.3: detached locks, held by a dlock background process for the role that
-- acquired them, until released with their token or until their lease runs
-- out (README.md "Detached locks").

-- The two-argument form is what dlock_acquire('job', '30s') resolves to
-- (no DEFAULT arguments to expand on every call); the full form takes the
-- rest, by position or by name.
CREATE FUNCTION dlock_acquire(name text, lease interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_acquire(name dlock_name, lease interval, timeout interval DEFAULT '0',
                              shared boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_extend(name text, token bigint, lease interval)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dlock_extend'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_release(name text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION dlock_acquire(text, interval) IS
'acquire a detached lock, held by the server until dlock_release or until the lease runs out; returns its fencing token, or NULL if it is taken';
COMMENT ON FUNCTION dlock_acquire(dlock_name, interval, interval, boolean) IS
'acquire a detached lock, waiting up to timeout (NULL: no limit); returns its fencing token, or NULL if not acquired in time';
COMMENT ON FUNCTION dlock_extend(text, bigint, interval) IS
'give the detached lock held with this token a new lease, counted from now; returns when it ends';
COMMENT ON FUNCTION dlock_release(text, bigint) IS
'release the detached lock held with this token; false (with a warning) if it is not held with it';

-- dlock_names gains the detached locks' columns; the view shows them.
DROP VIEW dlock_locks;
DROP FUNCTION dlock_names();

CREATE FUNCTION dlock_names(
    OUT pid integer, OUT database oid, OUT key bigint, OUT mode text, OUT name text,
    OUT session_holds integer, OUT xact_holds integer, OUT waiting text,
    OUT since timestamptz, OUT lease_expires timestamptz, OUT token bigint,
    OUT detached boolean, OUT username text, OUT application_name text,
    OUT client_addr text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dlock_names'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- A detached lock shows the role, application and client of the session
-- that acquired it; pid is the dlock process that holds (or awaits) it.
CREATE VIEW dlock_locks AS
SELECT db.datname AS database,
       n.name,
       (l.classid::bigint << 32) | l.objid::bigint AS key,
       CASE l.mode WHEN 'ExclusiveLock' THEN 'exclusive'
                   WHEN 'ShareLock' THEN 'shared' ELSE l.mode END AS mode,
       CASE WHEN n.detached THEN 'detached'
            WHEN NOT l.granted THEN n.waiting
            WHEN n.session_holds > 0 AND n.xact_holds > 0 THEN 'session+transaction'
            WHEN n.session_holds > 0 THEN 'session'
            WHEN n.xact_holds > 0 THEN 'transaction' END AS scope,
       l.granted,
       l.pid,
       CASE WHEN n.detached THEN n.username::name ELSE a.usename END AS username,
       CASE WHEN n.detached THEN n.application_name ELSE a.application_name END AS application_name,
       CASE WHEN n.detached THEN n.client_addr::inet ELSE a.client_addr END AS client_addr,
       CASE WHEN l.granted THEN n.since ELSE coalesce(l.waitstart, n.since) END AS since,
       CASE WHEN l.granted THEN n.lease_expires END AS lease_expires,
       CASE WHEN l.granted THEN n.token END AS token,
       CASE WHEN NOT l.granted
            THEN clock_timestamp() - coalesce(l.waitstart, n.since) END AS wait_time
  FROM pg_catalog.pg_locks l
  LEFT JOIN dlock_names() n
         ON n.pid = l.pid AND n.database = l.database
        AND n.key = ((l.classid::bigint << 32) | l.objid::bigint) AND n.mode = l.mode
        AND (l.granted OR n.waiting IS NOT NULL)
  LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
  LEFT JOIN pg_catalog.pg_database db ON db.oid = l.database
 WHERE l.locktype = 'advisory' AND l.objsubid = 1;

GRANT SELECT ON dlock_locks TO PUBLIC;

COMMENT ON VIEW dlock_locks IS
'held and awaited advisory locks with their dlock names, scope, lease and fencing token';
