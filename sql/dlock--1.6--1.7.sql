-- dlock 1.6 -> 1.7
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.7'" to load this file. \quit

-- 1.7: update mode.  mode => 'update' on dlock_try, dlock_lock and their
-- _xact forms takes a name as a reader that may go on to write: it shares
-- the name with shared holders and excludes other update and exclusive
-- holders, so that two would-be writers that each read first never
-- deadlock.  dlock_raise makes the hold exclusive (it waits for the shared
-- holders to leave, ahead of new shared requests), dlock_lower makes it
-- update again.  In the lock manager an update hold is RowShareLock on the
-- name's key and ExclusiveLock on its update gate (objsubid 7): both show
-- in pg_locks; dlock_locks shows one row, mode 'update'.  doc/functions.md
-- "Update mode".
--
-- 1.7: observers.  notify => true on dlock_try, dlock_lock, their _xact
-- forms and dlock_acquire announces what happens to that hold (granted,
-- released, lease expired, ended with its holder, force-released) with
-- NOTIFY on the channel "dlock" of its database, a JSON payload, sent by a
-- notifier process of dlock's at once.  doc/functions.md "Observers".
--
-- The new arguments mode (exclusive, shared or update: the mode in words)
-- and notify come last, with DEFAULT NULL, on the full one-name forms of
-- the lock functions, notify on dlock_acquire's, and mode on
-- dlock_unlock(name, shared): every call of 1.6 resolves as before.  A new
-- argument is a new signature, so each of these functions is made anew:
-- the old one is renamed, the new one made, what a DBA changed on the old
-- one (owner, privileges, settings) carried over, and the old one dropped,
-- as in the 1.4 to 1.5 update.  The one-argument forms, the text[] forms
-- and the positional forms for clients are unchanged.  The C functions
-- read mode and notify only where the call has them, so the 1.6 SQL runs
-- as before on the 1.7 library.

ALTER FUNCTION "@extschema@".dlock_try("@extschema@".dlock_name, boolean, interval, bigint, pg_catalog.text,
                                       bigint)
  RENAME TO dlock_try_1_6;
CREATE FUNCTION "@extschema@".dlock_try(name "@extschema@".dlock_name, shared boolean DEFAULT false,
                          lease interval DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                          info pg_catalog.text DEFAULT NULL, permits bigint DEFAULT NULL,
                          mode pg_catalog.text DEFAULT NULL, notify boolean DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

ALTER FUNCTION "@extschema@".dlock_lock("@extschema@".dlock_name, interval, boolean, interval, bigint, bigint,
                                        pg_catalog.text, bigint)
  RENAME TO dlock_lock_1_6;
CREATE FUNCTION "@extschema@".dlock_lock(name "@extschema@".dlock_name, timeout interval DEFAULT NULL,
                           shared boolean DEFAULT false, lease interval DEFAULT NULL,
                           timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                           info pg_catalog.text DEFAULT NULL, permits bigint DEFAULT NULL,
                           mode pg_catalog.text DEFAULT NULL, notify boolean DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

ALTER FUNCTION "@extschema@".dlock_try_xact("@extschema@".dlock_name, boolean, interval, bigint,
                                            pg_catalog.text, bigint)
  RENAME TO dlock_try_xact_1_6;
CREATE FUNCTION "@extschema@".dlock_try_xact(name "@extschema@".dlock_name, shared boolean DEFAULT false,
                               lease interval DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                               info pg_catalog.text DEFAULT NULL, permits bigint DEFAULT NULL,
                               mode pg_catalog.text DEFAULT NULL, notify boolean DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

ALTER FUNCTION "@extschema@".dlock_lock_xact("@extschema@".dlock_name, interval, boolean, interval, bigint,
                                             bigint, pg_catalog.text, bigint)
  RENAME TO dlock_lock_xact_1_6;
CREATE FUNCTION "@extschema@".dlock_lock_xact(name "@extschema@".dlock_name, timeout interval DEFAULT NULL,
                                shared boolean DEFAULT false, lease interval DEFAULT NULL,
                                timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL,
                                info pg_catalog.text DEFAULT NULL, permits bigint DEFAULT NULL,
                                mode pg_catalog.text DEFAULT NULL, notify boolean DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

ALTER FUNCTION "@extschema@".dlock_acquire("@extschema@".dlock_name, interval, interval, boolean, bigint, bigint,
                                           pg_catalog.text, interval, bigint, bigint)
  RENAME TO dlock_acquire_1_6;
CREATE FUNCTION "@extschema@".dlock_acquire(name "@extschema@".dlock_name, lease interval DEFAULT NULL,
                              timeout interval DEFAULT '0', shared boolean DEFAULT false,
                              lease_ms bigint DEFAULT NULL, timeout_ms bigint DEFAULT NULL,
                              info pg_catalog.text DEFAULT NULL,
                              min_hold interval DEFAULT NULL, min_hold_ms bigint DEFAULT NULL,
                              permits bigint DEFAULT NULL, notify boolean DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION "@extschema@".dlock_acquire("@extschema@".dlock_name, interval, interval, boolean, bigint, bigint,
                                  pg_catalog.text, interval, bigint, bigint, boolean) IS
'acquire a detached lock, waiting up to timeout (default: do not wait; NULL: no limit); returns its fencing token, or NULL if not acquired in time; lease_ms and timeout_ms: the same in milliseconds (timeout_ms NULL: not given); held at least min_hold, even if released earlier; permits: one of that many permits of a semaphore; notify: announce what happens to it on the channel dlock';

ALTER FUNCTION "@extschema@".dlock_unlock("@extschema@".dlock_name, boolean) RENAME TO dlock_unlock_1_6;
CREATE FUNCTION "@extschema@".dlock_unlock(name "@extschema@".dlock_name, shared boolean DEFAULT false,
                             mode pg_catalog.text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unlock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- What a DBA changed on the 1.6 functions (their owner, privileges and
-- settings: GRANT, REVOKE, ALTER FUNCTION ... SET), and the initial
-- privileges pg_init_privs recorded for them, go to the new ones: a role
-- refused EXECUTE on dlock_lock must not get it back through the update.
DO $carry$
DECLARE
  f pg_catalog.record;
  a pg_catalog.record;
  new_acl pg_catalog.aclitem[];
BEGIN
  FOR f IN
    SELECT o.oid AS old_oid, v.new::pg_catalog.regprocedure AS new_fn, o.proowner,
           coalesce(o.proacl, pg_catalog.acldefault('f', o.proowner)) AS old_acl, o.proconfig,
           pg_catalog.pg_get_userbyid(o.proowner) AS owner_name
      FROM (VALUES
        ('"@extschema@".dlock_try_1_6("@extschema@".dlock_name,boolean,interval,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_try("@extschema@".dlock_name,boolean,interval,bigint,pg_catalog.text,bigint,pg_catalog.text,boolean)'),
        ('"@extschema@".dlock_lock_1_6("@extschema@".dlock_name,interval,boolean,interval,bigint,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_lock("@extschema@".dlock_name,interval,boolean,interval,bigint,bigint,pg_catalog.text,bigint,pg_catalog.text,boolean)'),
        ('"@extschema@".dlock_try_xact_1_6("@extschema@".dlock_name,boolean,interval,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_try_xact("@extschema@".dlock_name,boolean,interval,bigint,pg_catalog.text,bigint,pg_catalog.text,boolean)'),
        ('"@extschema@".dlock_lock_xact_1_6("@extschema@".dlock_name,interval,boolean,interval,bigint,bigint,pg_catalog.text,bigint)',
         '"@extschema@".dlock_lock_xact("@extschema@".dlock_name,interval,boolean,interval,bigint,bigint,pg_catalog.text,bigint,pg_catalog.text,boolean)'),
        ('"@extschema@".dlock_unlock_1_6("@extschema@".dlock_name,boolean)',
         '"@extschema@".dlock_unlock("@extschema@".dlock_name,boolean,pg_catalog.text)'),
        ('"@extschema@".dlock_acquire_1_6("@extschema@".dlock_name,interval,interval,boolean,bigint,bigint,pg_catalog.text,interval,bigint,bigint)',
         '"@extschema@".dlock_acquire("@extschema@".dlock_name,interval,interval,boolean,bigint,bigint,pg_catalog.text,interval,bigint,bigint,boolean)')
      ) AS v(old, new)
      JOIN pg_catalog.pg_proc o ON o.oid OPERATOR(pg_catalog.=) v.old::pg_catalog.regprocedure
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

DROP FUNCTION "@extschema@".dlock_try_1_6("@extschema@".dlock_name, boolean, interval, bigint, pg_catalog.text,
                                          bigint);
DROP FUNCTION "@extschema@".dlock_lock_1_6("@extschema@".dlock_name, interval, boolean, interval, bigint, bigint,
                                           pg_catalog.text, bigint);
DROP FUNCTION "@extschema@".dlock_try_xact_1_6("@extschema@".dlock_name, boolean, interval, bigint,
                                               pg_catalog.text, bigint);
DROP FUNCTION "@extschema@".dlock_lock_xact_1_6("@extschema@".dlock_name, interval, boolean, interval, bigint,
                                                bigint, pg_catalog.text, bigint);
DROP FUNCTION "@extschema@".dlock_unlock_1_6("@extschema@".dlock_name, boolean);
DROP FUNCTION "@extschema@".dlock_acquire_1_6("@extschema@".dlock_name, interval, interval, boolean, bigint, bigint,
                                              pg_catalog.text, interval, bigint, bigint);

-- dlock_raise (1.7): this session's update hold of name made exclusive, in
-- its scope (an exclusive hold taken over it: it waits for the shared
-- holders only); true when raised, false at the timeout (NULL: no limit).
CREATE FUNCTION "@extschema@".dlock_raise(name pg_catalog.text, timeout interval DEFAULT NULL,
                            timeout_ms bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_raise'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION "@extschema@".dlock_raise(pg_catalog.text, interval, bigint) IS
'raise this session''s update hold of a name to exclusive: waits for its shared holders, ahead of new ones; false at the timeout';

-- dlock_lower (1.7): the raise undone; the update hold goes on.
CREATE FUNCTION "@extschema@".dlock_lower(name pg_catalog.text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lower'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION "@extschema@".dlock_lower(pg_catalog.text) IS
'lower this session''s raised update hold of a name back to update mode';
