-- versioned SQL: a database created with dlock 1.0 is brought to the
-- current version by ALTER EXTENSION dlock UPDATE, and ends up with exactly
-- the objects of a fresh CREATE EXTENSION.  (pg_regress created the current
-- version for this database.)
CREATE FUNCTION dlock_objects() RETURNS SETOF text LANGUAGE sql AS $$
  SELECT pg_describe_object(classid, objid, objsubid)
    FROM pg_depend
   WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
     AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dlock')
$$;
CREATE TEMP TABLE fresh AS SELECT dlock_objects() AS obj;
CREATE TEMP TABLE fresh_comments AS
  SELECT p.oid::regprocedure::text AS func, obj_description(p.oid, 'pg_proc') AS comment
    FROM pg_proc p WHERE p.proname LIKE 'dlock%';
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'dlock') AS is_default
  FROM pg_extension WHERE extname = 'dlock';
SELECT source, target, path FROM pg_extension_update_paths('dlock')
 WHERE path IS NOT NULL ORDER BY source, target;

CREATE TEMP TABLE fresh_view AS SELECT pg_get_viewdef('dlock_locks'::regclass) AS def;
-- after an update: the default version, the objects of a fresh install (any
-- other or missing one is listed) and the same view
CREATE FUNCTION as_fresh(OUT is_default boolean, OUT not_as_fresh text[], OUT same_view boolean)
LANGUAGE sql AS $$
  SELECT (SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'dlock')
            FROM pg_extension WHERE extname = 'dlock'),
         ARRAY((SELECT obj FROM fresh EXCEPT SELECT dlock_objects())
               UNION ALL
               (SELECT dlock_objects() EXCEPT SELECT obj FROM fresh)),
         pg_get_viewdef('dlock_locks'::regclass) = (SELECT def FROM fresh_view)
$$;
CREATE TEMP TABLE fresh_view_comments AS
  SELECT c.relname, obj_description(c.oid, 'pg_class') AS comment
    FROM pg_class c WHERE c.relname LIKE 'dlock%' AND c.relkind = 'v';
-- a detached lock is held by the server through all of this
SELECT dlock_acquire('held-across-versions', '10 minutes') AS across \gset

DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '1.0';
-- the 1.0 view over the new library shows the detached lock (no scope yet)
SELECT name, mode, scope, granted FROM dlock_locks WHERE name = 'held-across-versions';
SELECT extversion FROM pg_extension WHERE extname = 'dlock';
SELECT dlock_try('taken-under-1.0');
ALTER EXTENSION dlock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'dlock';
-- the same objects as a fresh install, none more, none less
(SELECT obj FROM fresh EXCEPT SELECT dlock_objects())
UNION ALL
(SELECT dlock_objects() EXCEPT SELECT obj FROM fresh);
-- and the same comments (1.2 says what a fencing token is)
SELECT f.func FROM fresh_comments f
  JOIN pg_proc p ON p.oid::regprocedure::text = f.func
 WHERE obj_description(p.oid, 'pg_proc') IS DISTINCT FROM f.comment;
SELECT obj_description('dlock_token(text)'::regprocedure, 'pg_proc') LIKE 'the fencing token%timeline * 10^13%' AS token_comment;
-- and the same view (1.3 shows detached locks)
SELECT pg_get_viewdef('dlock_locks'::regclass) = (SELECT def FROM fresh_view) AS same_view;
SELECT name, scope FROM dlock_locks WHERE name = 'held-across-versions';
-- a lock taken before the update is still held, named, and released
SELECT name, mode, scope FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_unlock('taken-under-1.0');
SELECT dlock_try('after-update', lease => '1 hour'), dlock_token('after-update') > 0 AS has_token;
SELECT dlock_unlock_all();
-- updating again is a no-op
ALTER EXTENSION dlock UPDATE;
-- from 1.1 and 1.2, too
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '1.1';
ALTER EXTENSION dlock UPDATE;
SELECT * FROM as_fresh();
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '1.2';
ALTER EXTENSION dlock UPDATE;
SELECT * FROM as_fresh();
-- from 1.3: a view of the user's over dlock_locks survives the update (1.4
-- adds its columns at the end), and statistics counted before it are there
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '1.3';
CREATE VIEW my_waiters AS SELECT name, pid, wait_time FROM dlock_locks WHERE NOT granted;
SELECT dlock_try('counted-across'), dlock_unlock('counted-across');
ALTER EXTENSION dlock UPDATE;
SELECT * FROM as_fresh();
SELECT f.relname FROM fresh_view_comments f
  JOIN pg_class c ON c.relname = f.relname AND c.relkind = 'v'
 WHERE obj_description(c.oid, 'pg_class') IS DISTINCT FROM f.comment;
SELECT count(*) FROM my_waiters;
SELECT acquisitions, released FROM dlock_stats WHERE name = 'counted-across';
SELECT has_function_privilege('public', 'dlock_stats_reset(text)', 'EXECUTE') AS public_may_reset_one,
       has_function_privilege('public', 'dlock_stats_reset()', 'EXECUTE') AS public_may_reset_all;
DROP VIEW my_waiters;
-- from 1.4: its full forms (no _ms arguments) run on the 1.5 library, and a
-- function of the user's that calls them keeps working across the update
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '1.4';
CREATE FUNCTION my_job() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RETURN dlock_lock('my-job', timeout => '1s', lease => '1 min');
END $$;
SELECT my_job(), dlock_try('old-forms', true, '1 min'), dlock_renew('old-forms', '2 min') > now();
SELECT dlock_acquire('old-detached', '1 min', '1s', false) AS old_detached \gset
SELECT dlock_extend('old-detached', :old_detached, '2 min') > now() AS extended;
-- what a DBA changed on a 1.4 function its 1.5 successor keeps (and the
-- 1.7 one after it, with the mode argument), and the 1.6
-- positional forms beside it get (dlock_lock_ms, dlock_try_ms): privileges
-- (still dumped by pg_dump: no initial privileges recorded) and settings;
-- and the others keep theirs even where default privileges would give a
-- new function others (here: no EXECUTE for PUBLIC)
CREATE ROLE regress_dlock_worker;
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dlock_lock(dlock_name, interval, boolean, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dlock_lock(dlock_name, interval, boolean, interval)
  TO regress_dlock_worker WITH GRANT OPTION;
ALTER FUNCTION dlock_try(dlock_name, boolean, interval) SET search_path = pg_catalog, public;
ALTER EXTENSION dlock UPDATE;
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
SELECT * FROM as_fresh();
SELECT p.oid::regprocedure AS function,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may,
       has_function_privilege('regress_dlock_worker', p.oid, 'EXECUTE WITH GRANT OPTION') AS worker_may_grant,
       p.proconfig,
       EXISTS (SELECT FROM pg_init_privs i
                WHERE i.classoid = 'pg_proc'::regclass AND i.objoid = p.oid) AS initial_privs
  FROM pg_proc p WHERE p.proname IN ('dlock_lock', 'dlock_try', 'dlock_renew', 'dlock_locks',
                                     'dlock_lock_ms', 'dlock_try_ms')
 ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT count(*) AS renamed_left FROM pg_proc WHERE proname LIKE 'dlock%1_4' OR proname LIKE 'dlock%1_6';
SELECT prosrc, count(*) FROM pg_proc WHERE prosrc LIKE 'dlock%1_5' GROUP BY 1 ORDER BY 1;
GRANT EXECUTE ON FUNCTION dlock_lock(dlock_name, interval, boolean, interval, bigint, bigint, text, bigint, text, boolean)
  TO PUBLIC;
REVOKE ALL ON FUNCTION dlock_lock(dlock_name, interval, boolean, interval, bigint, bigint, text, bigint, text, boolean)
  FROM regress_dlock_worker CASCADE;
ALTER FUNCTION dlock_try(dlock_name, boolean, interval, bigint, text, bigint, text, boolean) RESET ALL;
-- (the text[] forms got the same from the one-name forms)
GRANT EXECUTE ON FUNCTION dlock_lock(text[], interval, boolean, interval, bigint, bigint, text) TO PUBLIC;
REVOKE ALL ON FUNCTION dlock_lock(text[], interval, boolean, interval, bigint, bigint, text)
  FROM regress_dlock_worker CASCADE;
ALTER FUNCTION dlock_try(text[], boolean, interval, bigint, text) RESET ALL;
-- (and the positional forms from the full ones)
GRANT EXECUTE ON FUNCTION dlock_lock_ms(text, bigint, boolean, bigint, text, bigint),
  dlock_lock_ms(text, bigint, boolean, bigint) TO PUBLIC;
REVOKE ALL ON FUNCTION dlock_lock_ms(text, bigint, boolean, bigint, text, bigint),
  dlock_lock_ms(text, bigint, boolean, bigint) FROM regress_dlock_worker CASCADE;
ALTER FUNCTION dlock_try_ms(text, boolean, bigint, text, bigint) RESET ALL;
ALTER FUNCTION dlock_try_ms(text, boolean, bigint) RESET ALL;
DROP ROLE regress_dlock_worker;
SELECT my_job(), dlock_try('old-forms', lease_ms => 60000),
       dlock_extend('old-detached', :old_detached, lease_ms => 60000) > now() AS extended_ms;
SELECT name, mode, scope FROM dlock_locks WHERE name IN ('my-job', 'old-forms', 'old-detached') ORDER BY 1, 2, 3;
SELECT dlock_unlock_all(), dlock_release('old-detached', :old_detached);
DROP FUNCTION my_job();
-- from 1.5 and 1.6: a session hold taken before the update is still held,
-- and released by the new dlock_unlock; update mode works after it
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '1.5';
ALTER EXTENSION dlock UPDATE;
SELECT * FROM as_fresh();
DROP EXTENSION dlock;
CREATE EXTENSION dlock VERSION '1.6';
SELECT dlock_try('held-over-1.7', true);
ALTER EXTENSION dlock UPDATE;
SELECT * FROM as_fresh();
SELECT dlock_try('u', mode => 'update'), dlock_raise('u'), dlock_lower('u'),
       dlock_unlock('u', mode => 'update'), dlock_unlock('held-over-1.7', true);
SELECT dlock_release('held-across-versions', :across);
DROP FUNCTION as_fresh();
DROP FUNCTION dlock_objects();
