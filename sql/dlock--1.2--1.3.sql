-- dlock 1.2 -> 1.3
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.3'" to load this file. \quit

-- 1.3: detached locks, held by a dlock background process for the role that
-- acquired them, until released with their token or until their lease runs
-- out (README.md "Detached locks").

-- The two-argument form is what dlock_acquire('job', '30s') resolves to
-- (no DEFAULT arguments to expand on every call); the full form takes the
-- rest, by position or by name.
CREATE FUNCTION dlock_acquire(name pg_catalog.text, lease interval)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_acquire(name "@extschema@".dlock_name, lease interval, timeout interval DEFAULT '0',
                              shared boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_extend(name pg_catalog.text, token bigint, lease interval)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_extend'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_release(name pg_catalog.text, token bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION dlock_acquire(pg_catalog.text, interval) IS
'acquire a detached lock, held by the server until dlock_release or until the lease runs out; returns its fencing token, or NULL if it is taken';
COMMENT ON FUNCTION dlock_acquire("@extschema@".dlock_name, interval, interval, boolean) IS
'acquire a detached lock, waiting up to timeout (NULL: no limit); returns its fencing token, or NULL if not acquired in time';
COMMENT ON FUNCTION dlock_extend(pg_catalog.text, bigint, interval) IS
'give the detached lock held with this token a new lease, counted from now; returns when it ends';
COMMENT ON FUNCTION dlock_release(pg_catalog.text, bigint) IS
'release the detached lock held with this token; false (with a warning) if it is not held with it';

-- dlock_names gains the detached locks' columns; the view shows them.
DROP VIEW dlock_locks;
DROP FUNCTION dlock_names();

CREATE FUNCTION dlock_names(
    OUT pid integer, OUT database pg_catalog.oid, OUT key bigint, OUT mode pg_catalog.text, OUT name pg_catalog.text,
    OUT session_holds integer, OUT xact_holds integer, OUT waiting pg_catalog.text,
    OUT since pg_catalog.timestamptz, OUT lease_expires pg_catalog.timestamptz, OUT token bigint,
    OUT detached boolean, OUT username pg_catalog.text, OUT application_name pg_catalog.text,
    OUT client_addr pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'dlock_names'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- A detached lock shows the role, application and client of the session
-- that acquired it; pid is the dlock process that holds (or awaits) it.
CREATE VIEW dlock_locks AS
SELECT db.datname AS database,
       n.name,
       (l.classid::bigint OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::bigint AS key,
       CASE WHEN l.mode OPERATOR(pg_catalog.=) 'ExclusiveLock' THEN 'exclusive'
            WHEN l.mode OPERATOR(pg_catalog.=) 'ShareLock' THEN 'shared' ELSE l.mode END AS mode,
       CASE WHEN n.detached THEN 'detached'
            WHEN NOT l.granted THEN n.waiting
            WHEN n.session_holds OPERATOR(pg_catalog.>) 0 AND n.xact_holds OPERATOR(pg_catalog.>) 0
              THEN 'session+transaction'
            WHEN n.session_holds OPERATOR(pg_catalog.>) 0 THEN 'session'
            WHEN n.xact_holds OPERATOR(pg_catalog.>) 0 THEN 'transaction' END AS scope,
       l.granted,
       l.pid,
       CASE WHEN n.detached THEN n.username::pg_catalog.name ELSE a.usename END AS username,
       CASE WHEN n.detached THEN n.application_name ELSE a.application_name END AS application_name,
       CASE WHEN n.detached THEN n.client_addr::pg_catalog.inet ELSE a.client_addr END AS client_addr,
       CASE WHEN l.granted THEN n.since ELSE coalesce(l.waitstart, n.since) END AS since,
       CASE WHEN l.granted THEN n.lease_expires END AS lease_expires,
       CASE WHEN l.granted THEN n.token END AS token,
       CASE WHEN NOT l.granted
            THEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) coalesce(l.waitstart, n.since)
       END AS wait_time
  FROM pg_catalog.pg_locks l
  LEFT JOIN "@extschema@".dlock_names() n
         ON n.pid OPERATOR(pg_catalog.=) l.pid AND n.database OPERATOR(pg_catalog.=) l.database
        AND n.key OPERATOR(pg_catalog.=)
            ((l.classid::bigint OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::bigint)
        AND n.mode OPERATOR(pg_catalog.=) l.mode
        AND (l.granted OR n.waiting IS NOT NULL)
  LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid
  LEFT JOIN pg_catalog.pg_database db ON db.oid OPERATOR(pg_catalog.=) l.database
 WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.objsubid OPERATOR(pg_catalog.=) 1;

GRANT SELECT ON dlock_locks TO PUBLIC;

COMMENT ON VIEW dlock_locks IS
'held and awaited advisory locks with their dlock names, scope, lease and fencing token';
