-- semaphores (1.5): permits => N lets up to N hold one name at once, each
-- with a permit of its own.  The lock holder holds a permit for every
-- detached acquisition, so one session can show several holders.
CREATE FUNCTION attempt(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN 'ok: ' || coalesce(r, 'null');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]{8,}', 'N', 'g');
END $$;
-- the rows of a name: who (this session, or the lock holder), and its permit
CREATE FUNCTION rows_of(n text) RETURNS TABLE (scope text, granted boolean, permit integer)
LANGUAGE sql AS $$
  SELECT scope, granted, permit FROM dlock_locks WHERE name = n ORDER BY granted DESC, permit, scope
$$;
-- what pg_locks shows of a name: its objsubids (1: the name's lock, 1000 + p: permit p)
CREATE FUNCTION subids_of(n text) RETURNS TABLE (objsubid smallint, granted boolean)
LANGUAGE sql AS $$
  SELECT objsubid, granted FROM pg_locks
   WHERE locktype = 'advisory' AND (classid::bigint << 32 | objid::bigint) = (dlock_key(n) & x'ffffffffffffffff'::bigint)
   ORDER BY objsubid
$$;

-- bad values, each refused before anything is taken
SELECT attempt($$SELECT dlock_try('sem', permits => 0)$$);
SELECT attempt($$SELECT dlock_try('sem', permits => -3)$$);
SELECT attempt($$SELECT dlock_lock('sem', permits => 1001)$$);
SELECT attempt($$SELECT dlock_try_xact('sem', shared => true, permits => 2)$$);
SELECT attempt($$SELECT dlock_acquire('sem', '1 min', shared => true, permits => 2)$$);
SELECT count(*) FROM dlock_locks WHERE name = 'sem';

-- permits NULL or 1: the plain lock itself (permit NULL, objsubid 1)
SELECT dlock_try('one', permits => NULL) AS null_permits, dlock_try('one', permits => 1) AS one_permit;
SELECT * FROM rows_of('one');
SELECT * FROM subids_of('one');
SELECT dlock_unlock('one'), dlock_unlock('one');
-- and the plain lock is permit 1 of a semaphore of the same name
SELECT dlock_acquire('one', '1 min') IS NOT NULL AS plain_detached;
SELECT dlock_acquire('one', '1 min', permits => 2) IS NOT NULL AS second_permit;
SELECT dlock_acquire('one', '1 min', permits => 2) IS NULL AS third_refused;
SELECT * FROM rows_of('one');

-- three detached permits, a fourth refused; each its own token and row
SELECT dlock_acquire('sem', '1 min', permits => 3) AS t1 \gset
SELECT dlock_acquire('sem', '1 min', permits => 3) AS t2 \gset
SELECT dlock_acquire('sem', '1 min', permits => 3) AS t3 \gset
SELECT :t1 < :t2 AND :t2 < :t3 AS tokens_increase;
SELECT dlock_acquire('sem', '1 min', permits => 3) IS NULL AS fourth_refused;
SELECT * FROM rows_of('sem');
SELECT * FROM subids_of('sem');
-- this session neither: a try is false, a wait ends at its timeout
SELECT dlock_try('sem', permits => 3) AS try_busy;
SELECT dlock_lock('sem', timeout_ms => 100, permits => 3) AS lock_timed_out;
SELECT dlock_acquire('sem', '1 min', timeout_ms => 100, permits => 3) IS NULL AS acquire_timed_out;
SELECT * FROM subids_of('sem');
-- a caller with more permits gets one of the others (permit 4)
SELECT dlock_try('sem', permits => 4) AS bigger;
SELECT * FROM rows_of('sem');
SELECT dlock_unlock('sem');
-- a released permit is the next caller's, whichever it was
SELECT dlock_release('sem', :t2);
SELECT dlock_try('sem', permits => 3) AS freed;
SELECT * FROM rows_of('sem');
-- taken again by this session with permits => N: the same permit (one
-- permit of a name a session), where it is one of 1..N
SELECT dlock_lock('sem', permits => 3) AS again, dlock_try('sem', permits => 2) AS again_2;
SELECT * FROM rows_of('sem') WHERE scope = 'session';
-- a plain call asks for the name's own lock, which is not this session's
-- permit 2: refused, never true; so is permits => 1 (the plain lock)
SELECT dlock_try('sem') AS plain_again;
SELECT dlock_try('sem', permits => 1) AS one_again;
SELECT dlock_unlock('sem'), dlock_unlock('sem'), dlock_unlock('sem');
SELECT dlock_unlock('sem') AS not_held;

-- a raw advisory lock of the key is permit 1, and not this session's permit
-- (so the view shows it without a name or scope beside the permit)
SELECT pg_advisory_lock(dlock_key('raw')) IS NOT NULL AS raw_lock;
SELECT dlock_try('raw', permits => 3) AS permit_2;
SELECT name, scope, granted, permit FROM dlock_locks WHERE key = dlock_key('raw') ORDER BY permit NULLS FIRST;
SELECT dlock_unlock('raw'), pg_advisory_unlock(dlock_key('raw'));

-- transaction scope: released at the end of the transaction, and with a
-- rolled-back savepoint
BEGIN;
SELECT dlock_try_xact('sem', permits => 3) AS xact_permit;
SELECT * FROM rows_of('sem') WHERE scope <> 'detached';
SAVEPOINT s;
SELECT dlock_lock_xact('sem2', permits => 2, timeout => '1 s') AS in_savepoint;
SELECT * FROM rows_of('sem2');
ROLLBACK TO s;
SELECT * FROM rows_of('sem2');
COMMIT;
SELECT * FROM rows_of('sem') WHERE scope <> 'detached';

-- a lease, info and a token, as for a lock
SELECT dlock_try('sem', lease => '1 min', info => 'worker 7', permits => 3) AS leased;
SELECT permit, lease_expires > now() AS has_lease, info, token > :t3 AS newer_token
  FROM dlock_locks WHERE name = 'sem' AND scope = 'session';
SELECT dlock_token('sem') > :t3 AS dlock_token;
SELECT dlock_renew('sem', '2 min') > now() AS renewed;
SELECT dlock_unlock('sem');

-- statistics: under the name, as for a lock
SELECT acquisitions >= 6 AS acquired, busy >= 2 AS busy, timeouts >= 2 AS timeouts
  FROM dlock_stats WHERE name = 'sem';

-- the rest of the detached permits, released
SELECT dlock_release('sem', :t1), dlock_release('sem', :t3);
SELECT count(*) FROM dlock_locks WHERE name IN ('sem', 'one') AND scope = 'detached';
SELECT dlock_release('one', token) FROM dlock_locks WHERE name = 'one';
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid >= 1000;
