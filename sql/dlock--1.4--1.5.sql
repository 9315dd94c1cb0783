-- dlock 1.4 -> 1.5
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.5'" to load this file. \quit

-- 1.5: semaphores: permits => N on dlock_try, dlock_lock, their _xact
-- forms and dlock_acquire lets up to N hold one name at once, each with a
-- permit of its own (a lock in the lock manager; the new last column
-- dlock_locks.permit).  Not "limit": LIMIT is a reserved word, and
-- dlock_lock('x', limit => 3) is a syntax error in PostgreSQL.  README.md
-- "Semaphores".
--
-- 1.5: several names at once (below).
--
-- 1.5: min_hold on dlock_acquire: a release before acquisition + min_hold
-- keeps the lock until then (ShedLock's lockAtLeastFor: a scheduled job
-- runs at most once per min_hold, README.md "Scheduled jobs").
--
-- 1.5: info, the holder's word: a short text (at most 255 bytes in UTF-8)
-- given with any acquisition (info => ...), changed by dlock_renew and
-- dlock_extend, and shown in the new last column of dlock_locks, for
-- leader election (README.md "Leader election") and "who has it, and how
-- do I reach it".
--
-- 1.5: every duration can also be given in milliseconds, as a bigint named
-- timeout_ms or lease_ms, for drivers that cannot send an interval (pgjdbc
-- sends a Java String as varchar, which does not cast to interval
-- implicitly) and for clients where a bare number is the natural way to
-- say a duration (a number bound to an interval argument means seconds).
-- README.md "From your language".
--
-- The new arguments come last, with DEFAULT NULL, on the full forms only:
-- no new overload, so every existing call resolves as before (a new
-- overload with the same leading arguments would make a positional call
-- with an unknown-typed literal, dlock_lock('job', '5s'), ambiguous).  The
-- one-argument forms are unchanged.  Adding arguments needs a new function:
-- each old one is renamed, the new one created, what a DBA changed on the
-- old one carried over (below), and the old one dropped.  A view or a
-- SQL-standard function body of yours that calls one of these full forms
-- would have to be dropped first (the update says so, naming the old
-- function as dlock_..._1_4).
--
-- The new functions use new C symbols (dlock_try_1_5, ...): a backend that
-- still runs the 1.4 library, which would ignore timeout_ms and lease_ms,
-- fails the update (and any call of these) with "could not find function"
-- instead of giving a wrong answer.  The 1.4 symbols stay, for the 1.4 SQL.

ALTER FUNCTION dlock_try("@extschema@".dlock_name, boolean, interval) RENAME TO dlock_try_1_4;
CREATE FUNCTION dlock_try(name "@extschema@".dlock_name, shared boolean DEFAULT false, lease interval DEFAULT NULL,
                          lease_ms bigint DEFAULT NULL, info pg_catalog.text DEFAULT NULL,
                          permits bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

ALTER FUNCTION dlock_lock("@extschema@".dlock_name, interval, boolean, interval) RENAME TO dlock_lock_1_4;
CREATE FUNCTION dlock_lock(name "@extschema@".dlock_name, timeout interval DEFAULT NULL,
                           shared boolean DEFAULT false, lease interval DEFAULT NULL,
                           timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                           info pg_catalog.text DEFAULT NULL, permits bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

ALTER FUNCTION dlock_try_xact("@extschema@".dlock_name, boolean, interval) RENAME TO dlock_try_xact_1_4;
CREATE FUNCTION dlock_try_xact(name "@extschema@".dlock_name, shared boolean DEFAULT false, lease interval DEFAULT NULL,
                               lease_ms bigint DEFAULT NULL, info pg_catalog.text DEFAULT NULL,
                               permits bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

ALTER FUNCTION dlock_lock_xact("@extschema@".dlock_name, interval, boolean, interval) RENAME TO dlock_lock_xact_1_4;
CREATE FUNCTION dlock_lock_xact(name "@extschema@".dlock_name, timeout interval DEFAULT NULL,
                                shared boolean DEFAULT false, lease interval DEFAULT NULL,
                                timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                                info pg_catalog.text DEFAULT NULL, permits bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

ALTER FUNCTION dlock_renew(pg_catalog.text, interval) RENAME TO dlock_renew_1_4;
CREATE FUNCTION dlock_renew(name pg_catalog.text, lease interval DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                            info pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_renew_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The lease of the full form gets a DEFAULT too, so that it can be given as
-- lease_ms alone; a call with neither is refused by the function, with a
-- hint.  The two-argument form, dlock_acquire('job', '30s'), is unchanged.
ALTER FUNCTION dlock_acquire("@extschema@".dlock_name, interval, interval, boolean) RENAME TO dlock_acquire_1_4;
CREATE FUNCTION dlock_acquire(name "@extschema@".dlock_name, lease interval DEFAULT NULL, timeout interval DEFAULT '0',
                              shared boolean DEFAULT false,
                              lease_ms bigint DEFAULT NULL, timeout_ms bigint DEFAULT NULL,
                              info pg_catalog.text DEFAULT NULL,
                              min_hold interval DEFAULT NULL, min_hold_ms bigint DEFAULT NULL,
                              permits bigint DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

ALTER FUNCTION dlock_extend(pg_catalog.text, bigint, interval) RENAME TO dlock_extend_1_4;
CREATE FUNCTION dlock_extend(name pg_catalog.text, token bigint, lease interval DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                             info pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_extend_1_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION dlock_acquire("@extschema@".dlock_name, interval, interval, boolean, bigint, bigint, pg_catalog.text, interval, bigint, bigint) IS
'acquire a detached lock, waiting up to timeout (default: do not wait; NULL: no limit); returns its fencing token, or NULL if not acquired in time; lease_ms and timeout_ms: the same in milliseconds (timeout_ms NULL: not given); held at least min_hold, even if released earlier; permits: one of that many permits of a semaphore';
COMMENT ON FUNCTION dlock_extend(pg_catalog.text, bigint, interval, bigint, pg_catalog.text) IS
'give the detached lock held with this token a new lease, counted from now (lease, or lease_ms in milliseconds), and new info if given; returns when it ends';

-- dlock_locks gains its last column, info.  Its function gets a new
-- signature the same way (renamed, created, the view replaced in place so
-- that views of yours over dlock_locks stay, the old one dropped).
ALTER FUNCTION dlock_locks() RENAME TO dlock_locks_1_4;
CREATE FUNCTION dlock_locks(
    OUT database pg_catalog.text, OUT name pg_catalog.text, OUT key bigint, OUT mode pg_catalog.text, OUT scope pg_catalog.text,
    OUT granted boolean, OUT pid integer, OUT username pg_catalog.text, OUT application_name pg_catalog.text,
    OUT client_addr pg_catalog.inet, OUT since pg_catalog.timestamptz, OUT lease_expires pg_catalog.timestamptz,
    OUT token bigint, OUT wait_time interval, OUT hold_time interval, OUT info pg_catalog.text,
    OUT permit integer)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'dlock_locks_1_5'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE OR REPLACE VIEW dlock_locks AS
SELECT database::pg_catalog.name COLLATE pg_catalog."C" AS database, name, key, mode, scope, granted, pid,
       username::pg_catalog.name COLLATE pg_catalog."C" AS username, application_name, client_addr, since, lease_expires,
       token, wait_time,
       CASE WHEN NOT granted THEN pg_catalog.pg_blocking_pids(pid) END AS blocked_by,
       hold_time, info, permit
  FROM "@extschema@".dlock_locks();

COMMENT ON VIEW dlock_locks IS
'held and awaited advisory locks with their dlock names, scope, lease, fencing token, blockers, hold time, info and semaphore permit';

-- Several names at once: the same four calls, dlock_acquire and
-- dlock_unlock given a text[], all of the names or none, taken in key
-- order.  New overloads:
-- a name given as a literal or a text parameter still resolves to the
-- one-name functions (the string category is preferred over an array).
CREATE FUNCTION dlock_try(names pg_catalog.text[], shared boolean DEFAULT false, lease interval DEFAULT NULL,
                          lease_ms bigint DEFAULT NULL, info pg_catalog.text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_lock(names pg_catalog.text[], timeout interval DEFAULT NULL,
                           shared boolean DEFAULT false, lease interval DEFAULT NULL,
                           timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                           info pg_catalog.text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_try_xact(names pg_catalog.text[], shared boolean DEFAULT false, lease interval DEFAULT NULL,
                               lease_ms bigint DEFAULT NULL, info pg_catalog.text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_lock_xact(names pg_catalog.text[], timeout interval DEFAULT NULL,
                                shared boolean DEFAULT false, lease interval DEFAULT NULL,
                                timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                                info pg_catalog.text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_unlock(names pg_catalog.text[], shared boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unlock_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION dlock_acquire(names pg_catalog.text[], lease interval DEFAULT NULL, timeout interval DEFAULT '0',
                              shared boolean DEFAULT false,
                              lease_ms bigint DEFAULT NULL, timeout_ms bigint DEFAULT NULL,
                              info pg_catalog.text DEFAULT NULL,
                              min_hold interval DEFAULT NULL, min_hold_ms bigint DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'dlock_acquire_many'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- (No dlock_release(text[], bigint[]): with it, dlock_release('job', $1)
-- with an unknown-typed parameter, as node-postgres sends one, would be
-- ambiguous.  Release several with unnest, README.md "Several names".)

COMMENT ON FUNCTION dlock_acquire(pg_catalog.text[], interval, interval, boolean, bigint, bigint, pg_catalog.text, interval, bigint) IS
'acquire a detached lock of every one of the names, in key order, or none: their fencing tokens in the order of the names, or NULL';
COMMENT ON FUNCTION dlock_try(pg_catalog.text[], boolean, interval, bigint, pg_catalog.text) IS
'take every one of the named locks now, or none';
COMMENT ON FUNCTION dlock_lock(pg_catalog.text[], interval, boolean, interval, bigint, bigint, pg_catalog.text) IS
'take every one of the named locks, in key order, waiting up to timeout for all of them; none if not all';
COMMENT ON FUNCTION dlock_try_xact(pg_catalog.text[], boolean, interval, bigint, pg_catalog.text) IS
'take every one of the named transaction locks now, or none';
COMMENT ON FUNCTION dlock_lock_xact(pg_catalog.text[], interval, boolean, interval, bigint, bigint, pg_catalog.text) IS
'take every one of the named transaction locks, in key order, waiting up to timeout for all of them; none if not all';
COMMENT ON FUNCTION dlock_unlock(pg_catalog.text[], boolean) IS
'release one session hold of each of the named locks; true if each was held';

-- What a DBA changed on the 1.4 functions goes to their 1.5 successors, as
-- an ALTER would have kept it: the owner, the privileges (GRANT, REVOKE;
-- also where ALTER DEFAULT PRIVILEGES would give the new function others)
-- and the settings (ALTER FUNCTION ... SET).  The initial privileges that
-- pg_init_privs recorded for the old function become the new one's, so
-- that pg_dump dumps the DBA's changes as it did.  The new text[] forms
-- get the same from the one-name function they stand beside (move false:
-- its initial privileges are copied).  A grant made by another grantor
-- than the owner is made again by the owner.
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
        ('"@extschema@".dlock_try_1_4("@extschema@".dlock_name,boolean,interval)',
         '"@extschema@".dlock_try("@extschema@".dlock_name,boolean,interval,bigint,pg_catalog.text,bigint)', true),
        ('"@extschema@".dlock_lock_1_4("@extschema@".dlock_name,interval,boolean,interval)',
         '"@extschema@".dlock_lock("@extschema@".dlock_name,interval,boolean,interval,bigint,bigint,pg_catalog.text,bigint)', true),
        ('"@extschema@".dlock_try_xact_1_4("@extschema@".dlock_name,boolean,interval)',
         '"@extschema@".dlock_try_xact("@extschema@".dlock_name,boolean,interval,bigint,pg_catalog.text,bigint)', true),
        ('"@extschema@".dlock_lock_xact_1_4("@extschema@".dlock_name,interval,boolean,interval)',
         '"@extschema@".dlock_lock_xact("@extschema@".dlock_name,interval,boolean,interval,bigint,bigint,pg_catalog.text,bigint)', true),
        ('"@extschema@".dlock_renew_1_4(pg_catalog.text,interval)',
         '"@extschema@".dlock_renew(pg_catalog.text,interval,bigint,pg_catalog.text)', true),
        ('"@extschema@".dlock_acquire_1_4("@extschema@".dlock_name,interval,interval,boolean)',
         '"@extschema@".dlock_acquire("@extschema@".dlock_name,interval,interval,boolean,bigint,bigint,pg_catalog.text,interval,bigint,bigint)', true),
        ('"@extschema@".dlock_extend_1_4(pg_catalog.text,bigint,interval)',
         '"@extschema@".dlock_extend(pg_catalog.text,bigint,interval,bigint,pg_catalog.text)', true),
        ('"@extschema@".dlock_locks_1_4()', '"@extschema@".dlock_locks()', true),
        ('"@extschema@".dlock_try_1_4("@extschema@".dlock_name,boolean,interval)',
         '"@extschema@".dlock_try(pg_catalog.text[],boolean,interval,bigint,pg_catalog.text)', false),
        ('"@extschema@".dlock_lock_1_4("@extschema@".dlock_name,interval,boolean,interval)',
         '"@extschema@".dlock_lock(pg_catalog.text[],interval,boolean,interval,bigint,bigint,pg_catalog.text)', false),
        ('"@extschema@".dlock_try_xact_1_4("@extschema@".dlock_name,boolean,interval)',
         '"@extschema@".dlock_try_xact(pg_catalog.text[],boolean,interval,bigint,pg_catalog.text)', false),
        ('"@extschema@".dlock_lock_xact_1_4("@extschema@".dlock_name,interval,boolean,interval)',
         '"@extschema@".dlock_lock_xact(pg_catalog.text[],interval,boolean,interval,bigint,bigint,pg_catalog.text)', false),
        ('"@extschema@".dlock_unlock("@extschema@".dlock_name,boolean)',
         '"@extschema@".dlock_unlock(pg_catalog.text[],boolean)', false),
        ('"@extschema@".dlock_acquire_1_4("@extschema@".dlock_name,interval,interval,boolean)',
         '"@extschema@".dlock_acquire(pg_catalog.text[],interval,interval,boolean,bigint,bigint,pg_catalog.text,interval,bigint)', false)
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

DROP FUNCTION dlock_try_1_4("@extschema@".dlock_name, boolean, interval);
DROP FUNCTION dlock_lock_1_4("@extschema@".dlock_name, interval, boolean, interval);
DROP FUNCTION dlock_try_xact_1_4("@extschema@".dlock_name, boolean, interval);
DROP FUNCTION dlock_lock_xact_1_4("@extschema@".dlock_name, interval, boolean, interval);
DROP FUNCTION dlock_renew_1_4(pg_catalog.text, interval);
DROP FUNCTION dlock_acquire_1_4("@extschema@".dlock_name, interval, interval, boolean);
DROP FUNCTION dlock_extend_1_4(pg_catalog.text, bigint, interval);
DROP FUNCTION dlock_locks_1_4();

