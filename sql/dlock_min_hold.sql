-- min_hold (1.5): a detached lock released before acquisition + min_hold
-- is kept until then (a scheduled job runs at most once per min_hold)
CREATE FUNCTION attempt(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN 'ok: ' || coalesce(r, 'null');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]{8,}', 'N', 'g');
END $$;
-- a detached lock's row: held, and for how long from its start (whole seconds)
CREATE FUNCTION row_of(n text) RETURNS TABLE (granted boolean, until interval) LANGUAGE sql AS $$
  SELECT granted, date_trunc('second', lease_expires - since + interval '0.5 s')
    FROM dlock_locks WHERE name = n AND scope = 'detached'
$$;

-- bad values, each refused before anything is taken
SELECT attempt($$SELECT dlock_acquire('mh', '1 min', min_hold => '-1 s')$$);
SELECT attempt($$SELECT dlock_acquire('mh', '1 min', min_hold => '25 hours')$$);
SELECT attempt($$SELECT dlock_acquire('mh', '1 min', min_hold_ms => 86400001)$$);
SELECT attempt($$SELECT dlock_acquire('mh', '1 min', min_hold => '1 s', min_hold_ms => 1000)$$);
SELECT attempt($$SELECT dlock_acquire('mh', '1 min', min_hold_ms => -1)$$);
SELECT count(*) FROM dlock_locks WHERE name = 'mh';
-- NULL is "not given": released at once
SELECT dlock_acquire('mh', '1 min', min_hold => NULL) AS t \gset
SELECT dlock_release('mh', :t);
SELECT count(*) FROM dlock_locks WHERE name = 'mh';

-- released before its minimum hold ends: kept until then, then gone
SELECT dlock_acquire('nightly', '1 min', min_hold => '2 s') AS t \gset
SELECT * FROM row_of('nightly');
SELECT dlock_release('nightly', :t) AS released;
SELECT * FROM row_of('nightly');
-- it is still held: nobody takes it meanwhile, this session neither
SELECT dlock_acquire('nightly', '1 min') IS NULL AS busy;
SELECT pg_try_advisory_lock(dlock_key('nightly')) AS raw_try;
-- and it is no longer the caller's: released once, extended never
SET client_min_messages = error;	-- its WARNING names the token
SELECT dlock_release('nightly', :t) AS released_again;
RESET client_min_messages;
SELECT attempt(format($$SELECT dlock_extend('nightly', %s, '1 min')$$, :t));

-- a lease shorter than the minimum hold: the lock lasts the minimum hold;
-- an extension never ends it before its minimum hold either
SELECT dlock_acquire('lasting', '1 s', min_hold => '2 s') AS l \gset
SELECT * FROM row_of('lasting');
SELECT dlock_extend('lasting', :l, '1 s') IS NOT NULL AS extended;
SELECT * FROM row_of('lasting');

-- a transaction that acquired it and rolls back takes it back at once,
-- minimum hold or not: it was never acquired
BEGIN;
SELECT dlock_acquire('undone', '1 min', min_hold => '1 min') IS NOT NULL AS acquired;
ROLLBACK;

-- the minimum holds end: the locks are free (within the lock holder's poll)
SELECT pg_sleep(2.3);
SELECT name, count(*) FROM dlock_locks WHERE name IN ('nightly', 'lasting', 'undone') GROUP BY 1;
SELECT dlock_acquire('nightly', '1 min') AS t2 \gset
SELECT dlock_release('nightly', :t2) AS released_after;

-- released after its minimum hold: at once; an extension past the minimum
-- hold is a plain lease again
SELECT dlock_acquire('short', '1 min', min_hold_ms => 100) AS t \gset
SELECT dlock_acquire('longer', '1 s', min_hold_ms => 100) AS g \gset
SELECT dlock_extend('longer', :g, '2 min') IS NOT NULL AS extended;
SELECT * FROM row_of('longer');
SELECT pg_sleep(0.2);
SELECT dlock_release('short', :t), dlock_release('longer', :g);
SELECT count(*) FROM dlock_locks WHERE name IN ('short', 'longer');
DROP FUNCTION attempt(text);
DROP FUNCTION row_of(text);
