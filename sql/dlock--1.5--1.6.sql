-- dlock 1.5 -> 1.6
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.6'" to load this file. \quit

-- 1.6: new functions and views, and new last columns of dlock_locks and
-- dlock_stats; every call of 1.5 resolves as before (the new functions
-- have names of their own), and every column of 1.5 stays where it was.

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

-- dlock_locks and dlock_stats gain last columns.  Their functions get new
-- signatures as in the 1.4 to 1.5 update: the old one renamed, the new one
-- created, the view replaced in place (views of yours over it stay, and so
-- do the grants on it), the privileges carried below, the old one dropped.
ALTER FUNCTION "@extschema@".dlock_locks() RENAME TO dlock_locks_1_5;
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

CREATE OR REPLACE VIEW "@extschema@".dlock_locks AS
SELECT database::pg_catalog.name COLLATE pg_catalog."C" AS database, name, key, mode, scope,
       granted, pid, username::pg_catalog.name COLLATE pg_catalog."C" AS username,
       application_name, client_addr, since, lease_expires, token, wait_time,
       CASE WHEN NOT granted THEN COALESCE(waits_for, pg_catalog.pg_blocking_pids(pid))
       END AS blocked_by,
       hold_time, info, permit, permits, session_state, min_hold_until, released
  FROM "@extschema@".dlock_locks();

COMMENT ON VIEW "@extschema@".dlock_locks IS
'held and awaited advisory locks with their dlock names, scope, lease, fencing token, blockers, hold time, info, semaphore permit and permits, session state, and a detached lock''s minimum hold';

ALTER FUNCTION "@extschema@".dlock_stats() RENAME TO dlock_stats_1_5;
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

CREATE OR REPLACE VIEW "@extschema@".dlock_stats AS
SELECT database, name, key, mode, acquisitions, immediate, waited, session_acquisitions,
       xact_acquisitions, detached_acquisitions, busy, timeouts, deadlocks, cancels,
       wait_time_total, wait_time_max, released, hold_time_total, hold_time_max,
       leases_expired, last_acquired, force_released
  FROM "@extschema@".dlock_stats();

-- What a DBA changed on a full form (its owner, privileges and settings:
-- GRANT, REVOKE, ALTER FUNCTION ... SET) goes to the positional forms that
-- stand beside it, as in the 1.4 to 1.5 update: a role refused EXECUTE on
-- dlock_acquire must not get it back through dlock_acquire_ms.  The initial
-- privileges pg_init_privs recorded for the full form are copied too.
DO $carry$
DECLARE
  f pg_catalog.record;
  a pg_catalog.record;
  new_acl pg_catalog.aclitem[];
BEGIN
  FOR f IN
    SELECT o.oid AS old_oid, v.new::pg_catalog.regprocedure AS new_fn, o.proowner,
           coalesce(o.proacl, pg_catalog.acldefault('f', o.proowner)) AS old_acl, o.proconfig,
           pg_catalog.pg_get_userbyid(o.proowner) AS owner_name, v.move
      FROM (VALUES
        ('"@extschema@".dlock_try("@extschema@".dlock_name,boolean,interval,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_try_ms(pg_catalog.text,boolean,bigint,pg_catalog.text,bigint)', false),
        ('"@extschema@".dlock_try("@extschema@".dlock_name,boolean,interval,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_try_ms(pg_catalog.text,boolean,bigint)', false),
        ('"@extschema@".dlock_lock("@extschema@".dlock_name,interval,boolean,interval,bigint,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_lock_ms(pg_catalog.text,bigint,boolean,bigint,pg_catalog.text,bigint)', false),
        ('"@extschema@".dlock_lock("@extschema@".dlock_name,interval,boolean,interval,bigint,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_lock_ms(pg_catalog.text,bigint,boolean,bigint)', false),
        ('"@extschema@".dlock_try_xact("@extschema@".dlock_name,boolean,interval,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_try_xact_ms(pg_catalog.text,boolean,bigint,pg_catalog.text,bigint)', false),
        ('"@extschema@".dlock_try_xact("@extschema@".dlock_name,boolean,interval,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_try_xact_ms(pg_catalog.text,boolean,bigint)', false),
        ('"@extschema@".dlock_lock_xact("@extschema@".dlock_name,interval,boolean,interval,bigint,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_lock_xact_ms(pg_catalog.text,bigint,boolean,bigint,pg_catalog.text,bigint)', false),
        ('"@extschema@".dlock_lock_xact("@extschema@".dlock_name,interval,boolean,interval,bigint,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_lock_xact_ms(pg_catalog.text,bigint,boolean,bigint)', false),
        ('"@extschema@".dlock_acquire("@extschema@".dlock_name,interval,interval,boolean,bigint,bigint,pg_catalog.text,interval,bigint,bigint)',
         '"@extschema@".dlock_acquire_ms(pg_catalog.text,bigint,bigint,boolean,pg_catalog.text,bigint,bigint)', false),
        ('"@extschema@".dlock_acquire("@extschema@".dlock_name,interval,interval,boolean,bigint,bigint,pg_catalog.text,interval,bigint,bigint)',
         '"@extschema@".dlock_acquire_ms(pg_catalog.text,bigint,bigint,boolean)', false),
        ('"@extschema@".dlock_extend(pg_catalog.text,bigint,interval,bigint,pg_catalog.text)',
         '"@extschema@".dlock_extend_ms(pg_catalog.text,bigint,bigint,pg_catalog.text)', false),
        ('"@extschema@".dlock_extend(pg_catalog.text,bigint,interval,bigint,pg_catalog.text)',
         '"@extschema@".dlock_extend_ms(pg_catalog.text,bigint,bigint)', false),
        ('"@extschema@".dlock_renew(pg_catalog.text,interval,bigint,pg_catalog.text)',
         '"@extschema@".dlock_renew_ms(pg_catalog.text,bigint,pg_catalog.text)', false),
        ('"@extschema@".dlock_renew(pg_catalog.text,interval,bigint,pg_catalog.text)',
         '"@extschema@".dlock_renew_ms(pg_catalog.text,bigint)', false),
        ('"@extschema@".dlock_unlock("@extschema@".dlock_name,boolean)',
         '"@extschema@".dlock_unlock(pg_catalog.text,boolean)', false),
        ('"@extschema@".dlock_locks_1_5()', '"@extschema@".dlock_locks()', true),
        ('"@extschema@".dlock_stats_1_5()', '"@extschema@".dlock_stats()', true)
      ) AS v(old, new, move)
      JOIN pg_catalog.pg_proc o ON o.oid OPERATOR(pg_catalog.=) v.old::pg_catalog.regprocedure
     ORDER BY v.move DESC
  LOOP
    IF f.proowner OPERATOR(pg_catalog.<>)
       (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) f.new_fn) THEN
      EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', f.new_fn, f.owner_name);
    END IF;
    SELECT coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner)) INTO new_acl
      FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) f.new_fn;
    -- (both are not null: coalesce)
    IF NOT (f.old_acl OPERATOR(pg_catalog.=) new_acl) THEN
      EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC CASCADE', f.new_fn);
      FOR a IN SELECT DISTINCT x.grantee FROM pg_catalog.aclexplode(new_acl) x
                WHERE x.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %I CASCADE', f.new_fn,
                                  pg_catalog.pg_get_userbyid(a.grantee));
      END LOOP;
      EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %I CASCADE', f.new_fn, f.owner_name);
      FOR a IN SELECT x.grantee, x.is_grantable FROM pg_catalog.aclexplode(f.old_acl) x LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', f.new_fn,
                       CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'
                            ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
                       CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
      END LOOP;
    END IF;
    -- the initial privileges, and (PostgreSQL 17 and later) the roles they
    -- name as shared dependencies of kind 'i', those of the old function
    DELETE FROM pg_catalog.pg_init_privs i
     WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND i.objoid OPERATOR(pg_catalog.=) f.new_fn AND i.objsubid OPERATOR(pg_catalog.=) 0;
    INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
    SELECT f.new_fn, i.classoid, i.objsubid, i.privtype, i.initprivs FROM pg_catalog.pg_init_privs i
     WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND i.objoid OPERATOR(pg_catalog.=) f.old_oid AND i.objsubid OPERATOR(pg_catalog.=) 0;
    DELETE FROM pg_catalog.pg_shdepend s
     WHERE s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND s.objid OPERATOR(pg_catalog.=) f.new_fn AND s.objsubid OPERATOR(pg_catalog.=) 0
       AND s.deptype OPERATOR(pg_catalog.=) 'i';
    INSERT INTO pg_catalog.pg_shdepend (dbid, classid, objid, objsubid, refclassid, refobjid, deptype)
    SELECT s.dbid, s.classid, f.new_fn, s.objsubid, s.refclassid, s.refobjid, s.deptype
      FROM pg_catalog.pg_shdepend s
     WHERE s.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND s.objid OPERATOR(pg_catalog.=) f.old_oid AND s.objsubid OPERATOR(pg_catalog.=) 0
       AND s.deptype OPERATOR(pg_catalog.=) 'i';
    IF f.proconfig IS NOT NULL THEN
      -- copied as stored: ALTER FUNCTION ... SET would re-quote a list
      -- setting (search_path) given as one string
      UPDATE pg_catalog.pg_proc p SET proconfig = f.proconfig WHERE p.oid OPERATOR(pg_catalog.=) f.new_fn;
    END IF;
  END LOOP;
END
$carry$;

DROP FUNCTION "@extschema@".dlock_locks_1_5();
DROP FUNCTION "@extschema@".dlock_stats_1_5();

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
-- and from every role that default privileges (ALTER DEFAULT PRIVILEGES ...
-- GRANT EXECUTE ON FUNCTIONS) gave it at its creation: nobody has it but
-- its owner until the DBA grants it
DO $only_owner$
DECLARE
  g pg_catalog.record;
BEGIN
  FOR g IN
    SELECT DISTINCT p.oid::pg_catalog.regprocedure AS fn, x.grantee
      FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) x
     WHERE p.oid OPERATOR(pg_catalog.=)
           '"@extschema@".dlock_force_release(pg_catalog.text,bigint)'::pg_catalog.regprocedure
       AND x.grantee OPERATOR(pg_catalog.<>) p.proowner
       AND x.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
  LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM %I CASCADE', g.fn,
                              pg_catalog.pg_get_userbyid(g.grantee));
  END LOOP;
END
$only_owner$;

COMMENT ON FUNCTION "@extschema@".dlock_force_release(pg_catalog.text, bigint) IS
'an operator''s override: release the detached lock held with this token now, whoever acquired it, in its minimum hold too (logged, counted); not for PUBLIC';

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
