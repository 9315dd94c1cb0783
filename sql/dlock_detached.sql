-- detached locks in one session: arguments, the view, one namespace with
-- the other scopes, tokens, roles, undo on rollback, expiry.  Waiting,
-- deadlocks and cancels are in the isolation specs; poolers and drivers in
-- test/pooler.py and test/drivers.py; restarts in test/t.
SET client_min_messages = warning;
DROP ROLE IF EXISTS dlock_other;
RESET client_min_messages;
\set VERBOSITY terse
CREATE ROLE dlock_other;
GRANT SELECT ON dlock_locks TO dlock_other;

-- runs a statement: its SQLSTATE and message (tokens as N), or 'ok: <result>'
CREATE FUNCTION attempt(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE q INTO r;
  RETURN 'ok: ' || coalesce(r, 'null');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9]{8,}', 'N', 'g');
END $$;
-- the detached holds of a name, as the view shows them
-- the detached locks of n once none is left, or after 5 s
CREATE FUNCTION detached_settled(n text) RETURNS SETOF dlock_locks LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..500 LOOP
    EXIT WHEN NOT EXISTS (SELECT 1 FROM dlock_locks WHERE name = n AND scope = 'detached');
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN QUERY SELECT * FROM dlock_locks WHERE name = n AND scope = 'detached';
END $$;
CREATE FUNCTION detached(n text) RETURNS TABLE (mode text, granted boolean, username name,
  own_app boolean, client_addr inet, lease interval, holder text) LANGUAGE sql AS $$
  SELECT l.mode, l.granted, l.username, l.application_name = current_setting('application_name'),
         l.client_addr, date_trunc('second', l.lease_expires - l.since + interval '0.5 s'),
         a.backend_type
    FROM dlock_locks l JOIN pg_stat_activity a USING (pid)
   WHERE l.name = n AND l.scope = 'detached' ORDER BY l.token
$$;

-- true once no dlock waiter process runs (within 5 s)
CREATE FUNCTION no_waiters() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..100 LOOP
    PERFORM pg_stat_clear_snapshot();
    IF NOT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'dlock waiter') THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN false;
END $$;

-- arguments
SELECT attempt($$SELECT dlock_acquire('d', NULL)$$);
SELECT attempt($$SELECT dlock_acquire('d', '50 ms')$$);
SELECT attempt($$SELECT dlock_acquire('d', '-1 s')$$);
SELECT attempt($$SELECT dlock_acquire('d', '25 hours')$$);
SELECT attempt($$SELECT dlock_acquire(NULL, '30 s')$$);
SELECT attempt($$SELECT dlock_acquire('', '30 s')$$);
SELECT attempt($$SELECT dlock_acquire('d', '30 s', '-1 s')$$);
SELECT attempt($$SELECT dlock_acquire('d', '30 s', '25 days')$$);
SELECT attempt($$SELECT dlock_acquire('d', '30 s', shared => NULL)$$);
SELECT attempt($$SELECT dlock_extend('d', NULL, '30 s')$$);
SELECT attempt($$SELECT dlock_extend('d', 1, NULL)$$);
SELECT attempt($$SELECT dlock_extend('d', 1, '2 days')$$);
SELECT attempt($$SELECT dlock_release('d', NULL)$$);
SELECT attempt($$SELECT dlock_extend('d', 1, '30 s')$$);
SELECT dlock_release('d', 1);
-- none of that left anything behind
SELECT count(*) FROM dlock_locks WHERE name = 'd';

-- acquire: a token, held by the lock holder process for this role
SELECT dlock_acquire('d', '30 s') AS t \gset
SELECT :t > 0 AS has_token, :t = (SELECT token FROM dlock_locks WHERE name = 'd') AS token_in_view;
SELECT * FROM detached('d');
SELECT count(*) AS in_pg_locks FROM pg_locks l JOIN pg_stat_activity a USING (pid)
 WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
   AND ((l.classid::bigint << 32) | l.objid::bigint) = dlock_key('d')
   AND a.backend_type = 'dlock lock holder';
-- the longest lease is a day
SELECT dlock_acquire('day', '1 day') IS NOT NULL AS day_ok;
SELECT lease FROM detached('day');

-- one namespace: it excludes every other holder of the name, in both modes
SELECT dlock_acquire('d', '30 s') AS again, dlock_acquire('d', '30 s', shared => true) AS again_shared;
SELECT dlock_try('d') AS session, dlock_try('d', shared => true) AS session_shared,
       dlock_try_xact('d') AS xact, pg_try_advisory_lock(dlock_key('d')) AS advisory,
       pg_try_advisory_lock_shared(dlock_key('d')) AS advisory_shared;
-- and the other way round
SELECT dlock_try('h');
SELECT dlock_acquire('h', '30 s') AS under_session, dlock_acquire('h', '30 s', shared => true) AS shared_under_session;
SELECT dlock_unlock('h');
SELECT pg_advisory_lock_shared(dlock_key('h'));
SELECT dlock_acquire('h', '30 s') AS under_advisory_shared;
SELECT dlock_acquire('h', '30 s', shared => true) AS hs \gset
SELECT :hs > :t AS shared_beside_shared;
SELECT pg_advisory_unlock_shared(dlock_key('h'));
SELECT dlock_release('h', :hs);
BEGIN;
SELECT dlock_try_xact('x');
SELECT dlock_acquire('x', '30 s') AS under_xact;
COMMIT;
SELECT dlock_acquire('x', '30 s') AS x \gset
SELECT dlock_release('x', :x);

-- shared: each holder has its own token; exclusive waits for all of them
SELECT dlock_acquire('s', '30 s', shared => true) AS s1 \gset
SELECT dlock_acquire('s', '30 s', shared => true) AS s2 \gset
SELECT :s2 > :s1 AS ordered;
SELECT dlock_acquire('s', '30 s') AS exclusive_refused;
SELECT dlock_try('s', shared => true) AS session_shared, dlock_try('s') AS session_exclusive;
SELECT dlock_unlock('s', shared => true);
SELECT mode, count(*) FROM detached('s') GROUP BY mode;
SELECT dlock_release('s', :s1);
SELECT dlock_acquire('s', '30 s') AS still_refused;
SELECT dlock_release('s', :s2);
SELECT dlock_acquire('s', '30 s') AS s3 \gset
SELECT dlock_acquire('s', '30 s', shared => true) AS shared_refused;
SELECT dlock_release('s', :s3);

-- tokens are ordered with every other dlock token
SELECT dlock_try('tok');
SELECT dlock_acquire('tok2', '30 s') > dlock_token('tok') AS after_session_token;
SELECT dlock_unlock('tok');

-- extend: a new lease from now
SELECT dlock_extend('d', :t, '1 hour') > now() + interval '59 minutes' AS extended;
SELECT lease FROM detached('d');
-- with the wrong token or name: an error; release: false and a warning
SELECT attempt(format($$SELECT dlock_extend('d', %s, '1 min')$$, :t + 1000));
SELECT attempt(format($$SELECT dlock_extend('other', %s, '1 min')$$, :t));
-- (its DETAIL and HINT: also an acquisition whose transaction never committed)
\set VERBOSITY default
SELECT dlock_release('d', 42);
\set VERBOSITY terse
SET client_min_messages = error;
SELECT dlock_release('d', :t + 1000) AS wrong_token, dlock_release('other', :t) AS wrong_name;
RESET client_min_messages;
SELECT count(*) AS still_held FROM detached('d');

-- another role can neither extend nor release it
SET ROLE dlock_other;
SELECT attempt(format($$SELECT dlock_extend('d', %s, '1 min')$$, :t));
SELECT dlock_release('d', :t);
-- its own lock is its own
SELECT dlock_acquire('o', '30 s') AS o \gset
SELECT username FROM dlock_locks WHERE name = 'o';
RESET ROLE;
-- a superuser can do both
SELECT dlock_extend('o', :o, '1 min') IS NOT NULL AS superuser_extends;
SELECT dlock_release('o', :o) AS superuser_releases;

-- release
SELECT dlock_release('d', :t);
SELECT attempt(format($$SELECT dlock_extend('d', %s, '1 min')$$, :t));
SET client_min_messages = error;
SELECT dlock_release('d', :t) AS released_twice;
RESET client_min_messages;
SELECT pg_try_advisory_lock(dlock_key('d')) AS free_again;
SELECT pg_advisory_unlock(dlock_key('d'));

-- an acquisition is undone when its transaction rolls back
BEGIN;
SELECT dlock_acquire('r', '30 s') IS NOT NULL AS acquired;
ROLLBACK;
-- (the lock holder undoes it at its next step: a moment later on a busy machine)
SELECT count(*) AS after_rollback FROM detached_settled('r');
SELECT attempt($$SELECT dlock_acquire('r', '30 s') / 0$$);
SELECT count(*) AS after_error FROM detached_settled('r');
BEGIN;
SELECT dlock_acquire('r', '30 s') IS NOT NULL AS kept;
SAVEPOINT sp;
SELECT dlock_acquire('r2', '30 s') IS NOT NULL AS undone;
ROLLBACK TO sp;
SAVEPOINT sp2;
SELECT dlock_acquire('r3', '30 s') IS NOT NULL AS kept_too;
RELEASE sp2;
COMMIT;
SELECT name FROM dlock_locks WHERE name IN ('r', 'r2', 'r3') ORDER BY name;
-- a prepared transaction could be rolled back later, by anyone: refused
BEGIN;
SELECT dlock_acquire('p', '30 s') IS NOT NULL AS acquired;
PREPARE TRANSACTION 'dlock_detached';
SELECT count(*) AS after_prepare_refused FROM detached_settled('p');
SELECT dlock_release(name, token) FROM dlock_locks WHERE name IN ('r', 'r3') ORDER BY name;

-- when the lease runs out the server releases the lock; extend says so
SELECT dlock_acquire('e', '200 ms') AS e \gset
SELECT pg_sleep(1.2);
SELECT count(*) AS after_expiry FROM detached('e');
SELECT attempt(format($$SELECT dlock_extend('e', %s, '1 min')$$, :e));
SELECT dlock_release('e', :e);

-- a wait that times out returns NULL and leaves no waiter behind
SELECT dlock_acquire('w', '30 s') AS w \gset
SELECT dlock_acquire('w', '30 s', '300 ms') AS timed_out;
SELECT no_waiters();
SELECT dlock_release('w', :w);

-- cleanup: everything this test acquired is released
SELECT dlock_release(name, token) FROM dlock_locks WHERE scope = 'detached' ORDER BY name;
SELECT count(*) FROM dlock_locks;
DROP FUNCTION detached(text);
DROP FUNCTION detached_settled(text);
DROP FUNCTION no_waiters();
DROP FUNCTION attempt(text);
REVOKE SELECT ON dlock_locks FROM dlock_other;
DROP ROLE dlock_other;
