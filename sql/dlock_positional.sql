-- the positional forms for clients (1.6): dlock_try_ms, dlock_lock_ms, their
-- _xact forms, dlock_acquire_ms, dlock_extend_ms and dlock_renew_ms; every
-- argument by position, durations in milliseconds, NULL for "not given".
-- Here: each one, what NULL means, the errors, and how drivers' statements
-- resolve (doc/languages.md).
\set VERBOSITY terse
CREATE OR REPLACE FUNCTION attempt(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN 'ok: ' || coalesce(r, 'null');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- this session's holds of a name: scope, mode, lease in whole seconds, info, permit
CREATE FUNCTION held(n text)
RETURNS TABLE (scope text, mode text, lease interval, info text, permit integer) LANGUAGE sql AS $$
  SELECT scope, mode, date_trunc('second', lease_expires - now() + interval '0.5 s'), info, permit
    FROM dlock_locks WHERE name = n AND pid = pg_backend_pid() ORDER BY mode
$$;

-- one function of each name, with no DEFAULT arguments
SELECT p.oid::regprocedure AS function, p.pronargdefaults AS defaults, p.prorettype::regtype AS returns
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'dlock'
 WHERE p.proname LIKE 'dlock\_%\_ms' ORDER BY 1::text;

-- doc/functions.md "The positional forms for clients", as it is there
SELECT dlock_try_ms('job', false, 60000);                     -- name, shared, lease_ms
SELECT dlock_unlock('job', false);                            -- name, shared
SELECT dlock_lock_ms('job', 5000, false, NULL);               -- name, timeout_ms, shared, lease_ms
SELECT dlock_unlock('job', false);
SELECT dlock_lock_ms('job', 5000, false, NULL, 'worker 7', NULL);  -- ..., info, permits
SELECT dlock_unlock('job', false);
-- name, lease_ms, timeout_ms, shared:
SELECT dlock_acquire_ms('import', 30000, 0, false) AS token \gset
SELECT dlock_extend_ms('import', :token, 60000) > now();      -- name, token, lease_ms
SELECT dlock_release('import', :token);
-- ..., info, min_hold_ms, permits:
SELECT dlock_acquire_ms('import', 30000, 0, false, 'host-7', NULL, NULL) AS token \gset
SELECT dlock_extend_ms('import', :token, 60000, 'host-7, step 2') > now();  -- ..., info
SELECT dlock_release('import', :token);

-- the short shapes
SELECT dlock_try_ms('pos-h', true, 60000), dlock_lock_ms('pos-h', 0, true, NULL);
SELECT * FROM held('pos-h');
SELECT dlock_renew_ms('pos-h', 90000) > now() + interval '80 s' AS renewed;
SELECT dlock_unlock('pos-h', true), dlock_unlock('pos-h', true);
BEGIN;
SELECT dlock_try_xact_ms('pos-i', false, NULL), dlock_lock_xact_ms('pos-j', NULL, false, 45000);
SELECT * FROM held('pos-j');
COMMIT;
SELECT dlock_acquire_ms('pos-k', 1000, NULL, true) AS k \gset
SELECT dlock_extend_ms('pos-k', :k, 2000) > now() AS extended;
SELECT dlock_release('pos-k', :k);

-- session locks
SELECT dlock_try_ms('pos-a', false, 60000, 'worker 1', NULL);
SELECT * FROM held('pos-a');
SELECT dlock_renew_ms('pos-a', 120000, 'worker 1, later') > now() + interval '110 s' AS renewed;
SELECT * FROM held('pos-a');
SELECT dlock_renew_ms('pos-a', NULL, NULL) > now() + interval '110 s' AS renewed_as_long;
SELECT dlock_unlock('pos-a', false);
SELECT dlock_lock_ms('pos-b', 0, true, NULL, NULL, NULL), dlock_lock_ms('pos-b', NULL, true, 30000, NULL, NULL);
SELECT * FROM held('pos-b');
SELECT dlock_unlock('pos-b', true), dlock_unlock('pos-b', true);
-- a semaphore's permit
SELECT dlock_try_ms('pos-s', false, NULL, NULL, 3), dlock_lock_ms('pos-s2', 100, false, NULL, 'gpu job', 2);
SELECT * FROM held('pos-s');
SELECT * FROM held('pos-s2');
SELECT dlock_unlock('pos-s'), dlock_unlock('pos-s2');

-- transaction locks
BEGIN;
SELECT dlock_try_xact_ms('pos-c', false, 45000, NULL, NULL), dlock_lock_xact_ms('pos-d', 100, true, NULL, 'in a transaction', NULL);
SELECT * FROM held('pos-c');
SELECT * FROM held('pos-d');
COMMIT;
SELECT count(*) FROM dlock_locks WHERE name IN ('pos-c', 'pos-d');

-- detached locks; timeout_ms NULL does not wait, as leaving timeout out of dlock_acquire
SELECT dlock_acquire_ms('pos-e', 90000, NULL, false, 'importer', NULL, NULL) AS e \gset
SELECT mode, scope, date_trunc('second', lease_expires - since + interval '0.5 s') AS lease, info
  FROM dlock_locks WHERE name = 'pos-e';
SELECT dlock_acquire_ms('pos-e', 1000, NULL, false, NULL, NULL, NULL) IS NULL AS busy_no_wait;
SELECT dlock_acquire_ms('pos-e', 1000, 50, false, NULL, NULL, NULL) IS NULL AS busy_waited;
SELECT dlock_extend_ms('pos-e', :e, 600000, 'importer, step 2') > now() + interval '590 s' AS extended;
SELECT info FROM dlock_locks WHERE name = 'pos-e';
SELECT dlock_release('pos-e', :e);
-- a minimum hold and a detached permit
SELECT dlock_acquire_ms('pos-f', 60000, 0, false, NULL, 1500, NULL) AS f \gset
SELECT dlock_release('pos-f', :f);
SELECT count(*) AS kept_for_min_hold FROM dlock_locks WHERE name = 'pos-f';
SELECT dlock_acquire_ms('pos-g', 60000, 0, false, NULL, NULL, 2) AS g \gset
SELECT permit FROM dlock_locks WHERE name = 'pos-g';
SELECT dlock_release('pos-g', :g);

-- the errors, as the full forms give them
SELECT attempt($$SELECT dlock_try_ms('pos-x', NULL, NULL, NULL, NULL)$$);
SELECT attempt($$SELECT dlock_lock_ms('pos-x', -1, false, NULL, NULL, NULL)$$);
SELECT attempt($$SELECT dlock_lock_ms('pos-x', 3000000000, false, NULL, NULL, NULL)$$);
SELECT attempt($$SELECT dlock_try_ms('pos-x', false, 10, NULL, NULL)$$);
SELECT attempt($$SELECT dlock_try_ms('pos-x', false, -5, NULL, NULL)$$);
SELECT attempt($$SELECT dlock_try_ms('pos-x', false, NULL, repeat('i', 256), NULL)$$);
SELECT attempt($$SELECT dlock_try_ms('pos-x', false, NULL, NULL, 0)$$);
SELECT attempt($$SELECT dlock_try_ms('pos-x', true, NULL, NULL, 3)$$);
SELECT attempt($$SELECT dlock_try_ms(NULL, false, NULL, NULL, NULL)$$);
SELECT attempt($$SELECT dlock_acquire_ms('pos-x', NULL, NULL, false, NULL, NULL, NULL)$$);
SELECT attempt($$SELECT dlock_acquire_ms('pos-x', 90000000, NULL, false, NULL, NULL, NULL)$$);
SELECT attempt($$SELECT dlock_acquire_ms('pos-x', 1000, NULL, false, NULL, 90000000, NULL)$$);
SELECT attempt($$SELECT dlock_extend_ms('pos-x', 1, NULL, NULL)$$);
SELECT attempt($$SELECT dlock_extend_ms('pos-x', NULL, 1000, NULL)$$);
SELECT attempt($$SELECT dlock_extend_ms('pos-x', 1, 1000, NULL)$$);
SELECT attempt($$SELECT dlock_renew_ms('pos-x', 60000, NULL)$$);
SELECT attempt($$SELECT dlock_renew_ms('pos-x', NULL, NULL)$$);
-- nothing was taken by the refused calls (pos-f is kept for its minimum hold)
SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid() OR name LIKE 'pos-%';

-- how drivers' statements resolve: untyped parameters (node-postgres,
-- ruby-pg, PDO), and the types pgjdbc sends (varchar for a String, int8
-- for a long, int4 for an int)
PREPARE u_try AS SELECT dlock_try_ms($1, $2, $3, $4, $5);
PREPARE u_lock AS SELECT dlock_lock_ms($1, $2, $3, $4, $5, $6);
PREPARE u_acquire AS SELECT dlock_acquire_ms($1, $2, $3, $4, $5, $6, $7);
PREPARE u_extend AS SELECT dlock_extend_ms($1, $2, $3, $4);
PREPARE u_renew AS SELECT dlock_renew_ms($1, $2, $3);
PREPARE u_unlock AS SELECT dlock_unlock($1, $2);
PREPARE u_try3 AS SELECT dlock_try_ms($1, $2, $3);
PREPARE u_lock4 AS SELECT dlock_lock_ms($1, $2, $3, $4);
PREPARE u_unlock_named AS SELECT dlock_unlock($1, shared => $2);
PREPARE u_unlock_one AS SELECT dlock_unlock($1);
PREPARE j_try(varchar, boolean, bigint, varchar, integer) AS SELECT dlock_try_ms($1, $2, $3, $4, $5);
PREPARE j_lock(varchar, integer, boolean, bigint, varchar, bigint) AS SELECT dlock_lock_ms($1, $2, $3, $4, $5, $6);
SELECT name, parameter_types FROM pg_prepared_statements ORDER BY name;
EXECUTE u_try('pos-u', 'false', '60000', 'node', NULL);
EXECUTE u_lock('pos-u2', '100', 'true', NULL, NULL, NULL);
EXECUTE u_unlock('pos-u', 'false');
EXECUTE u_unlock('pos-u2', 'true');
EXECUTE j_try('pos-j', false, 60000, 'java', NULL);
EXECUTE j_lock('pos-j2', 100, false, NULL, NULL, 2);
SELECT dlock_unlock('pos-j'), dlock_unlock('pos-j2');
-- the calls of 1.5 resolve as before (an unknown-typed literal in an
-- interval position, named arguments, the one-argument forms)
SELECT dlock_lock('pos-v', '5s'), dlock_try('pos-v', false, '30s'), dlock_unlock('pos-v'), dlock_unlock('pos-v');
SELECT dlock_try('pos-v', shared => true, lease_ms => NULL), dlock_unlock('pos-v', shared => true);
SELECT dlock_acquire('pos-w', '30s') AS w \gset
SELECT dlock_release('pos-w', :w);
-- nothing is left once pos-f's minimum hold is over
DO $$ BEGIN
  FOR i IN 1..100 LOOP
    EXIT WHEN NOT EXISTS (SELECT FROM dlock_locks WHERE name = 'pos-f');
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid() OR name LIKE 'pos-%';
DROP FUNCTION attempt(text);
DROP FUNCTION held(text);
