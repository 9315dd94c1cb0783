-- several names at once (1.5): dlock_try, dlock_lock, their _xact forms and
-- dlock_unlock given a text[] take (release) all of the names or none
CREATE FUNCTION attempt(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN 'ok: ' || coalesce(r, 'null');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- this session's holds: name, scope, mode, info
CREATE FUNCTION mine() RETURNS TABLE (name text, scope text, mode text, info text) LANGUAGE sql AS $$
  SELECT name, scope, mode, info FROM dlock_locks WHERE pid = pg_backend_pid() ORDER BY name, mode
$$;

-- how calls resolve: a name (a literal, even one that looks like an array)
-- goes to the one-name functions as before; an array to the new ones
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_try('job'), dlock_try('{a,b}'), dlock_try(ARRAY['a', 'b']);
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_lock('job', '1s'), dlock_lock(ARRAY['a'], '1s'), dlock_unlock(ARRAY['a']);
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_try_xact('{a}'::text[], true), dlock_lock_xact('{a}'::text[], timeout_ms => 10);

-- parameters of unknown type (node-postgres sends every one so): each call
-- of the README's examples still resolves, to the one-name functions
PREPARE u1 AS SELECT dlock_try($1), dlock_try($1, shared => $2, lease_ms => $3), dlock_unlock($1), dlock_unlock($1, shared => $2);
PREPARE u2 AS SELECT dlock_lock($1, timeout_ms => $2), dlock_lock_xact($1, timeout_ms => $2), dlock_try_xact($1);
PREPARE u3 AS SELECT dlock_acquire($1, lease_ms => $2, timeout_ms => $3), dlock_acquire($1, $4), dlock_extend($1, $5, lease_ms => $2), dlock_release($1, $5);
PREPARE u4 AS SELECT dlock_renew($1, $2), dlock_token($1), dlock_key($1), dlock_lock($1, $2);
SELECT name, parameter_types FROM pg_prepared_statements WHERE name LIKE 'u_' ORDER BY name;
DEALLOCATE ALL;

-- all of them, in one call; each name once
SELECT dlock_try(ARRAY['c', 'a', 'b', 'a']);
SELECT * FROM mine();
SELECT dlock_unlock(ARRAY['a', 'b', 'c']);
SELECT * FROM mine();
-- with a lease and info for each, shared, waiting
SELECT dlock_lock(ARRAY['x', 'y'], timeout => '1s', shared => true, lease => '1 min', info => 'batch 4');
SELECT name, scope, mode, info, lease_expires > now() AS leased FROM dlock_locks
 WHERE pid = pg_backend_pid() ORDER BY name;
SELECT dlock_unlock(ARRAY['x', 'y'], shared => true);

-- none when one is taken: 'b' is held by a detached lock (another holder)
SELECT dlock_acquire('b', '1 min') AS tb \gset
SELECT dlock_try('a');	-- already held by this session once
SELECT dlock_try(ARRAY['a', 'b', 'c']);
SELECT * FROM mine();
SELECT dlock_lock(ARRAY['a', 'b', 'c'], timeout => '200ms');
SELECT dlock_lock(ARRAY['a', 'b', 'c'], timeout_ms => 0);
SELECT * FROM mine();
-- 'a' is held exactly as before: once
SELECT dlock_unlock('a');
SELECT * FROM mine();
-- transaction scope: none kept, and the transaction goes on with what it had
BEGIN;
SELECT dlock_try_xact('before');
SELECT dlock_try_xact(ARRAY['a', 'b', 'c']);
SELECT dlock_lock_xact(ARRAY['a', 'b', 'c'], timeout => '100ms');
SELECT * FROM mine();
SELECT dlock_try_xact(ARRAY['a', 'c'], info => 'both');
SELECT * FROM mine();
COMMIT;
SELECT * FROM mine();
-- and in a savepoint rolled back, the transaction locks go with it
BEGIN;
SAVEPOINT s;
SELECT dlock_try_xact(ARRAY['p', 'q']);
ROLLBACK TO s;
SELECT * FROM mine();
COMMIT;
-- a call told false leaves the holds it found as they were, lease and
-- info too (they are given only once every name is granted); key order
-- here: a < c < a2 < b
SELECT dlock_try('a', info => 'mine');
SELECT dlock_try(ARRAY['a', 'b'], lease => '1 s', info => 'batch');
SELECT name, info, lease_expires IS NULL AS no_lease FROM dlock_locks WHERE pid = pg_backend_pid();
BEGIN;
SELECT dlock_try_xact('a2');
SELECT dlock_try_xact(ARRAY['a2', 'b'], lease => '1 s', info => 'batch');
SELECT name, info, lease_expires IS NULL AS no_lease FROM dlock_locks WHERE pid = pg_backend_pid() ORDER BY name;
COMMIT;
-- granted: every name's lease counts from the end of the call
SELECT dlock_try(ARRAY['a', 'c'], lease => '1 min', info => 'batch');
SELECT string_agg(name || ': ' || info, ', ' ORDER BY name) AS holds,
       count(DISTINCT lease_expires) AS expiries FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_unlock_all();
SELECT dlock_release('b', :tb);

-- bad input: refused before anything is taken
SELECT attempt($$SELECT dlock_try(NULL::text[])$$);
SELECT attempt($$SELECT dlock_try(ARRAY[]::text[])$$);
SELECT attempt($$SELECT dlock_try(ARRAY['a', NULL])$$);
SELECT attempt($$SELECT dlock_try(ARRAY['a', ''])$$);
SELECT attempt($$SELECT dlock_try(ARRAY['a', repeat('x', 256)])$$);
SELECT attempt($$SELECT dlock_unlock(ARRAY[]::text[])$$);
SELECT attempt($$SELECT dlock_lock(ARRAY['a'], timeout => '1s', timeout_ms => 1000)$$);
SELECT * FROM mine();
-- a two-dimensional array is its names
SELECT dlock_try(ARRAY[['m1', 'm2'], ['m3', 'm4']]);
SELECT count(*) FROM mine();
SELECT dlock_unlock(ARRAY[['m1', 'm2'], ['m3', 'm4']]);
-- dlock_unlock: false (with the lock manager's WARNING) if one was not held;
-- the others are released
SELECT dlock_try('u1');
SELECT dlock_unlock(ARRAY['u1', 'u2']);
SELECT * FROM mine();

-- an error in the middle gives back what the call took: here the second
-- name finds no room for its info (dlock.max_locks_per_session is 64)
SELECT count(*) FROM (SELECT dlock_try('many-' || i) FROM generate_series(1, 63) i) s;
SELECT attempt($$SELECT dlock_try(ARRAY['e1', 'e2'], info => 'x')$$);
SELECT count(*) FROM mine() WHERE name IN ('e1', 'e2');
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
BEGIN;
SELECT attempt($$SELECT dlock_try_xact(ARRAY['e1', 'e2'], info => 'x')$$);
SELECT count(*) FROM mine() WHERE name IN ('e1', 'e2');
COMMIT;
SELECT dlock_unlock_all();

-- detached locks: dlock_acquire given several names returns their tokens in
-- the order given (a name twice: its token twice), or NULL and none
-- (an acquisition given back is undone by the lock holder right after: the
-- rows once that is done, 5 s at most)
CREATE FUNCTION detached() RETURNS TABLE (name text, mode text, info text) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..500 LOOP
    EXIT WHEN NOT EXISTS (SELECT FROM dlock_locks l WHERE l.scope = 'detached' AND l.name ~ '^[er]');
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN QUERY SELECT l.name, l.mode, l.info FROM dlock_locks l WHERE l.scope = 'detached' ORDER BY l.name;
END $$;
SELECT dlock_acquire(ARRAY['d3', 'd1', 'd3', 'd2'], '1 min', info => 'several') AS t \gset
SELECT cardinality(:'t'::bigint[]) AS n, (:'t'::bigint[])[1] = (:'t'::bigint[])[3] AS same_token,
       (SELECT array_agg(token ORDER BY ord) FROM unnest(ARRAY['d3', 'd1', 'd3', 'd2']) WITH ORDINALITY u(n, ord)
          JOIN dlock_locks l ON l.name = u.n AND l.scope = 'detached') = :'t'::bigint[] AS tokens_in_order;
SELECT * FROM detached();
-- one taken: NULL, and nothing kept (no wait, then a short one)
SELECT dlock_acquire(ARRAY['e0', 'd2', 'e9'], '1 min') IS NULL AS busy;
SELECT dlock_acquire(ARRAY['e0', 'd2', 'e9'], '1 min', timeout => '200ms', min_hold => '1 min') IS NULL AS timed_out;
SELECT * FROM detached();
-- released with unnest (there is no dlock_release of arrays: an untyped
-- dlock_release('d', NULL) would be ambiguous with one)
SELECT bool_and(dlock_release(n, t)) FROM unnest(ARRAY['d1', 'd3', 'd2'], (:'t'::bigint[])[2:4]) AS u(n, t);
SELECT attempt($$SELECT dlock_release('d', NULL)$$);
SELECT * FROM detached();
-- a name waited for longer than the lease: the names granted before it are
-- still held when the call returns, each with its lease from then
SELECT dlock_acquire('b', '2 s') AS tb3 \gset
SELECT dlock_acquire(ARRAY['a', 'b'], lease => '1 s', timeout => '10 s') AS tab \gset
SELECT name, granted, lease_expires <= now() + interval '1 s' AS the_lease_asked
  FROM dlock_locks WHERE scope = 'detached' ORDER BY name;
SELECT bool_and(dlock_release(n, t)) FROM unnest(ARRAY['a', 'b'], :'tab'::bigint[]) AS u(n, t);
-- in a transaction that rolls back, none is kept
BEGIN;
SELECT dlock_acquire(ARRAY['r1', 'r2'], '1 min') IS NOT NULL AS acquired;
ROLLBACK;
SELECT * FROM detached();
-- bad input
SELECT attempt($$SELECT dlock_acquire(ARRAY['a', 'b'])$$);
SELECT attempt($$SELECT dlock_acquire(ARRAY[]::text[], '1 min')$$);
DROP FUNCTION detached();
DROP FUNCTION attempt(text);
DROP FUNCTION mine();
