-- dlock 1.0: named, lease-aware advisory locks
\echo Use "CREATE EXTENSION dlock" to load this file. \quit

-- All functions but dlock_key and dlock_names take an advisory lock or change
-- this session's record of them: VOLATILE and PARALLEL UNSAFE, like
-- pg_advisory_lock.  None is STRICT: a NULL argument is an error, not a NULL.

CREATE FUNCTION dlock_key(name pg_catalog.text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_key'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION dlock_key(pg_catalog.text) IS
'the advisory-lock key of a name: the first 8 bytes of SHA-256 of its UTF-8 bytes, little-endian, as bigint';

-- The lock functions come in two forms each.  The full form takes the name
-- as dlock_name, a domain over text with no constraints of its own, and has
-- DEFAULT arguments, so that any argument can be left out or given by name
-- (dlock_try('job', lease => '30s')).  The one-argument form takes text and
-- is what a call with only a name resolves to: PostgreSQL re-reads and
-- re-plans DEFAULT arguments on every statement that leaves them out, which
-- costs more than taking the lock (test/bench).  A literal or a text value
-- goes to the one-argument form; anything with more arguments goes to the
-- full form.  Both run the same C function and behave alike.
CREATE DOMAIN "@extschema@".dlock_name AS pg_catalog.text;

COMMENT ON DOMAIN "@extschema@".dlock_name IS
'a lock name: text; the type of the name argument of the full forms of the dlock lock functions';

CREATE FUNCTION dlock_try(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_try(name "@extschema@".dlock_name, shared boolean DEFAULT false, lease interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_lock(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_lock(name "@extschema@".dlock_name, timeout interval DEFAULT NULL,
                           shared boolean DEFAULT false, lease interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_try_xact(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_try_xact(name "@extschema@".dlock_name, shared boolean DEFAULT false, lease interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_lock_xact(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_lock_xact(name "@extschema@".dlock_name, timeout interval DEFAULT NULL,
                                shared boolean DEFAULT false, lease interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_unlock(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unlock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_unlock(name "@extschema@".dlock_name, shared boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unlock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_unlock_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'dlock_unlock_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_renew(name pg_catalog.text, lease interval DEFAULT NULL)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_renew'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_token(name pg_catalog.text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- What every backend says it holds or awaits; use the dlock_locks view.
CREATE FUNCTION dlock_names(
    OUT pid integer, OUT database pg_catalog.oid, OUT key bigint, OUT mode pg_catalog.text, OUT name pg_catalog.text,
    OUT session_holds integer, OUT xact_holds integer, OUT waiting pg_catalog.text,
    OUT since pg_catalog.timestamptz, OUT lease_expires pg_catalog.timestamptz, OUT token bigint)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'dlock_names'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- One row per held or awaited 64-bit advisory lock (pg_locks is the truth);
-- the name and the rest come from dlock where it knows them.
CREATE VIEW "@extschema@".dlock_locks AS
SELECT db.datname AS database,
       n.name,
       (l.classid::bigint OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::bigint AS key,
       CASE WHEN l.mode OPERATOR(pg_catalog.=) 'ExclusiveLock' THEN 'exclusive'
            WHEN l.mode OPERATOR(pg_catalog.=) 'ShareLock' THEN 'shared' ELSE l.mode END AS mode,
       CASE WHEN NOT l.granted THEN n.waiting
            WHEN n.session_holds OPERATOR(pg_catalog.>) 0 AND n.xact_holds OPERATOR(pg_catalog.>) 0
              THEN 'session+transaction'
            WHEN n.session_holds OPERATOR(pg_catalog.>) 0 THEN 'session'
            WHEN n.xact_holds OPERATOR(pg_catalog.>) 0 THEN 'transaction' END AS scope,
       l.granted,
       l.pid,
       a.usename AS username,
       a.application_name,
       a.client_addr,
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
