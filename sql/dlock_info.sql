-- info, the holder's word (1.5): a short text given with any acquisition,
-- shown in dlock_locks.info, changed by dlock_renew and dlock_extend
CREATE FUNCTION attempt(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN 'ok: ' || coalesce(r, 'null');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]{8,}', 'N', 'g');
END $$;
-- this session's rows of a name
CREATE FUNCTION mine(n text) RETURNS TABLE (scope text, mode text, info text) LANGUAGE sql AS $$
  SELECT scope, mode, info FROM dlock_locks WHERE name = n AND pid = pg_backend_pid() ORDER BY mode
$$;
-- the rows of a detached lock
CREATE FUNCTION detached(n text) RETURNS TABLE (scope text, granted boolean, info text) LANGUAGE sql AS $$
  SELECT scope, granted, info FROM dlock_locks WHERE name = n AND scope = 'detached'
$$;

-- given with a session lock, shown; no info is NULL
SELECT dlock_try('leader', info => 'host-a:8080'), dlock_try('plain');
SELECT * FROM mine('leader');
SELECT * FROM mine('plain');
-- taken again without info: kept; with info: replaced; '' clears it
SELECT dlock_try('leader');
SELECT * FROM mine('leader');
SELECT dlock_lock('leader', timeout => '1s', info => 'host-a:9090');
SELECT * FROM mine('leader');
SELECT dlock_try('leader', info => '');
SELECT * FROM mine('leader');
SELECT dlock_unlock('leader'), dlock_unlock('leader'), dlock_unlock('leader'), dlock_unlock('plain');
-- a new hold starts without the info of the last one
SELECT dlock_try('leader');
SELECT * FROM mine('leader');
SELECT dlock_unlock('leader');
-- shared, and each mode of a name has its own
SELECT dlock_try('both', shared => true, info => 'reader'), dlock_try('both', info => 'writer');
SELECT * FROM mine('both');
SELECT dlock_unlock_all();

-- transaction scope, and a session hold taken in it too: one row, its info
BEGIN;
SELECT dlock_try_xact('tx', info => 'batch 7'), dlock_lock_xact('tx2', '1s', info => 'batch 8');
SELECT * FROM mine('tx');
SELECT * FROM mine('tx2');
SELECT dlock_try('tx', info => 'now both');
SELECT * FROM mine('tx');
COMMIT;
SELECT * FROM mine('tx');
SELECT dlock_unlock('tx');
SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid();

-- the limit: 255 bytes in UTF-8 (names have the same)
SELECT attempt($$SELECT dlock_try('long', info => repeat('x', 255))$$);
SELECT length(info), octet_length(info) FROM dlock_locks WHERE name = 'long';
SELECT attempt($$SELECT dlock_try('long', info => repeat('x', 256))$$);
SELECT attempt($$SELECT dlock_try('long2', info => repeat('é', 128))$$);
SELECT attempt($$SELECT dlock_try('long2', info => repeat('é', 127))$$);
SELECT attempt($$SELECT dlock_try('long3', info => repeat('x', 100000))$$);
-- refused before anything is taken: the one that failed holds nothing
SELECT name, info IS NOT NULL AS has_info FROM dlock_locks WHERE pid = pg_backend_pid() ORDER BY name;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT dlock_unlock_all();
-- with a lease too, from every form; NULL is "not given"
SELECT dlock_try('l', lease => '1 min', info => 'w1'), dlock_try('l2', info => NULL);
SELECT * FROM mine('l');
SELECT * FROM mine('l2');

-- dlock_renew: a new info with the lease renewed, or alone for a hold
-- without a lease (NULL result: there is no lease)
SELECT dlock_renew('l', info => 'w2') > now() AS renewed;
SELECT * FROM mine('l');
SELECT dlock_renew('l', '2 min', info => 'w3') > now() + interval '1 min' AS renewed_longer;
SELECT * FROM mine('l');
SELECT dlock_try('nolease');
SELECT dlock_renew('nolease', info => 'only the word') AS no_lease;
SELECT * FROM mine('nolease');
SELECT attempt($$SELECT dlock_renew('nolease')$$);
SELECT attempt($$SELECT dlock_renew('not-held', info => 'x')$$);
SELECT attempt($$SELECT dlock_renew('nolease', info => repeat('x', 256))$$);
SELECT * FROM mine('nolease');
-- a hold without a lease stays without one when only its info changes
SELECT lease_expires IS NULL AS still_no_lease FROM dlock_locks WHERE name = 'nolease';
SELECT dlock_unlock_all();

-- beyond dlock.max_locks_per_session (64 here) a lock has no name in the
-- view, so it cannot have info either
SELECT count(*) FROM (SELECT dlock_try('many-' || i) FROM generate_series(1, 64) i) s;
SELECT attempt($$SELECT dlock_try('many-65', info => 'x')$$);
SELECT dlock_try('many-65');
SELECT attempt($$SELECT dlock_try('many-65', info => 'x')$$);
SELECT attempt($$SELECT dlock_renew('many-65', info => 'x')$$);
SELECT dlock_unlock_all();

-- detached locks: given at dlock_acquire, changed by dlock_extend
SELECT dlock_acquire('job', '1 min', info => 'worker-3') AS t \gset
SELECT * FROM detached('job');
SELECT dlock_extend('job', :t, '1 min') > now() AS extended;
SELECT * FROM detached('job');
SELECT dlock_extend('job', :t, lease_ms => 60000, info => 'worker-3, step 2') > now() AS extended;
SELECT * FROM detached('job');
SELECT attempt(format($$SELECT dlock_extend('job', %s, '1 min', info => repeat('x', 256))$$, :t));
SELECT * FROM detached('job');
SELECT dlock_extend('job', :t, '1 min', info => '') > now() AS cleared;
SELECT * FROM detached('job');
SELECT dlock_release('job', :t);
-- shared detached locks: one row each, each with its own
SELECT dlock_acquire('sjob', '1 min', shared => true, info => 'one') AS s1 \gset
SELECT dlock_acquire('sjob', '1 min', shared => true, info => 'two') AS s2 \gset
SELECT info FROM detached('sjob') ORDER BY info;
SELECT dlock_release('sjob', :s1), dlock_release('sjob', :s2);

-- in dlock_locks, where 1.5 put it: after hold_time, before permit (the
-- columns of 1.6 come after)
SELECT attnum, attname FROM pg_attribute WHERE attrelid = 'dlock_locks'::regclass
   AND attname IN ('hold_time', 'info', 'permit') ORDER BY attnum;
DROP FUNCTION attempt(text);
DROP FUNCTION mine(text);
DROP FUNCTION detached(text);
