-- durations in milliseconds (1.5): timeout_ms and lease_ms, as bigint, on
-- every function that takes a timeout or a lease, for drivers that cannot
-- send an interval (doc/languages.md).  The isolation spec
-- "timeout" waits; here: arguments, errors and how calls resolve.
\set VERBOSITY terse
CREATE FUNCTION attempt(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN 'ok: ' || coalesce(r, 'null');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- this session's holds of a name: scope, mode, and the lease in whole seconds
CREATE FUNCTION held(n text) RETURNS TABLE (scope text, mode text, lease interval) LANGUAGE sql AS $$
  SELECT scope, mode, date_trunc('second', lease_expires - now() + interval '0.5 s')
    FROM dlock_locks WHERE name = n AND pid = pg_backend_pid() ORDER BY mode
$$;

-- each function, with its durations in milliseconds
SELECT dlock_try('ms-a', lease_ms => 60000);
SELECT * FROM held('ms-a');
SELECT dlock_renew('ms-a', lease_ms => 120000) > now() + interval '110 s' AS renewed;
SELECT * FROM held('ms-a');
SELECT dlock_unlock('ms-a');
SELECT dlock_lock('ms-b', timeout_ms => 0, lease_ms => 30000, shared => true);
SELECT * FROM held('ms-b');
SELECT dlock_unlock('ms-b', true);
BEGIN;
SELECT dlock_try_xact('ms-c', lease_ms => 45000), dlock_lock_xact('ms-d', timeout_ms => 100);
SELECT * FROM held('ms-c');
COMMIT;
SELECT count(*) FROM dlock_locks WHERE name IN ('ms-c', 'ms-d');
SELECT dlock_acquire('ms-e', lease_ms => 90000) AS e \gset
SELECT mode, scope, date_trunc('second', lease_expires - since + interval '0.5 s') AS lease
  FROM dlock_locks WHERE name = 'ms-e';
SELECT dlock_extend('ms-e', :e, lease_ms => 600000) > now() + interval '590 s' AS extended;
SELECT dlock_acquire('ms-e', lease_ms => 1000, timeout_ms => 50) IS NULL AS busy;
SELECT dlock_release('ms-e', :e);
-- the interval forms work as before, and NULL milliseconds are "not given"
SELECT dlock_try('ms-f', lease => '1 min', lease_ms => NULL), dlock_unlock('ms-f');
SELECT dlock_lock('ms-f', timeout => '1s', timeout_ms => NULL), dlock_unlock('ms-f');

-- one duration given twice is refused
SELECT attempt($$SELECT dlock_try('ms-g', lease => '1 min', lease_ms => 60000)$$);
SELECT attempt($$SELECT dlock_lock('ms-g', timeout => '1s', timeout_ms => 1000)$$);
SELECT attempt($$SELECT dlock_renew('ms-g', lease => '1 min', lease_ms => 60000)$$);
SELECT attempt($$SELECT dlock_acquire('ms-g', '1 min', lease_ms => 60000)$$);
SELECT attempt($$SELECT dlock_extend('ms-g', 1, '1 min', 60000)$$);
-- except dlock_acquire's timeout, whose DEFAULT '0' cannot be told from an
-- explicit '0': there the milliseconds win over '0', and only over '0'
SELECT attempt($$SELECT dlock_acquire('ms-g', lease_ms => 1000, timeout => '1s', timeout_ms => 1000)$$);
SELECT dlock_acquire('ms-g', lease_ms => 1000, timeout => '0', timeout_ms => 10) > 0 AS acquired;
SELECT count(*) FROM dlock_locks WHERE name = 'ms-g';
SELECT dlock_release('ms-g', dlock_token) FROM (SELECT token AS dlock_token FROM dlock_locks WHERE name = 'ms-g') t;
-- nothing was taken by the refused calls
SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid();
\set VERBOSITY default
-- the refusal says what to do
SELECT dlock_lock('ms-g', timeout => '1s', timeout_ms => 1000);
\set VERBOSITY terse

-- out of range, negative, too short
SELECT attempt($$SELECT dlock_try('ms-h', lease_ms => -1)$$);
SELECT attempt($$SELECT dlock_lock('ms-h', timeout_ms => -1)$$);
SELECT attempt($$SELECT dlock_try('ms-h', lease_ms => 99)$$);
SELECT attempt($$SELECT dlock_try('ms-h', lease_ms => 9223372036854775807)$$);
SELECT attempt($$SELECT dlock_lock('ms-h', timeout_ms => 2147483648)$$);
SELECT dlock_lock('ms-h', timeout_ms => 2147483647), dlock_unlock('ms-h');
SELECT attempt($$SELECT dlock_acquire('ms-h', lease_ms => 86400001)$$);
SELECT attempt($$SELECT dlock_acquire('ms-h')$$);
SELECT attempt($$SELECT dlock_acquire('ms-h', NULL, lease_ms => NULL)$$);
SELECT attempt($$SELECT dlock_extend('ms-h', 1)$$);
SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid();

-- how calls resolve: a positional unknown-typed literal is an interval as
-- before; only the names timeout_ms and lease_ms take milliseconds
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_lock('a', '5s'), dlock_try('a', false, '1 min');
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_lock('a', timeout_ms => 5000), dlock_acquire('a', lease_ms => 30000);
-- a bare number for an interval means seconds ('200' is 200 s)
SELECT '200'::interval AS "a bare number";
-- untyped parameters (what node-postgres and ruby-pg send) resolve by the
-- argument's name
PREPARE untyped AS SELECT dlock_lock($1, timeout_ms => $2, lease_ms => $3);
EXECUTE untyped('ms-i', '250', '60000');
SELECT * FROM held('ms-i');
SELECT dlock_unlock('ms-i');
-- pgjdbc's defaults: a String is varchar, a long is int8; the name takes
-- varchar, an interval argument does not (cast it: timeout => ?::interval),
-- the _ms arguments take int8
PREPARE jdbc(varchar, int8) AS SELECT dlock_lock($1, timeout_ms => $2);
EXECUTE jdbc('ms-j', 100);
SELECT dlock_unlock('ms-j');
SELECT attempt($$SELECT dlock_lock('ms-j', timeout => '1s'::varchar)$$);
PREPARE jdbc_cast(varchar, varchar) AS SELECT dlock_lock($1, timeout => $2::interval);
EXECUTE jdbc_cast('ms-j', '1 second');
SELECT dlock_unlock('ms-j');
-- an int argument (what psycopg 3 sends for a small Python int) widens to bigint
PREPARE small(text, int4) AS SELECT dlock_try($1, lease_ms => $2);
EXECUTE small('ms-k', 5000);
SELECT * FROM held('ms-k');
SELECT dlock_unlock('ms-k');
DROP FUNCTION held(text);
DROP FUNCTION attempt(text);
