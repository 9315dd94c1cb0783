-- dlock_stats in one session: what is counted, reset, tracking off, the
-- bound and eviction (waits ended by others, deadlocks: isolation spec
-- stats; kept across restarts: TAP 016; counters under load: stress)
SET client_min_messages = warning;
RESET client_min_messages;
SELECT dlock_stats_reset();

CREATE FUNCTION st(n text) RETURNS TABLE (mode text, acq bigint, imm bigint, waited bigint,
    sess bigint, xact bigint, det bigint, busy bigint, timeouts bigint, deadlocks bigint,
    cancels bigint, released bigint, expired bigint)
LANGUAGE sql AS $$
  SELECT mode, acquisitions, immediate, waited, session_acquisitions, xact_acquisitions,
         detached_acquisitions, busy, timeouts, deadlocks, cancels, released, leases_expired
    FROM dlock_stats WHERE name = n AND database = current_database() ORDER BY mode
$$;

\d dlock_stats
\d dlock_stats_info

-- session scope, re-entered: two acquisitions, one hold
SELECT clock_timestamp() AS t0 \gset
SELECT dlock_try('s'), dlock_lock('s'), dlock_unlock('s'), dlock_unlock('s');
SELECT * FROM st('s');
SELECT key = dlock_key('s') AS key_ok, last_acquired BETWEEN :'t0' AND clock_timestamp() AS last_ok,
       hold_time_total >= '0' AND hold_time_total = hold_time_max AS hold_ok,
       wait_time_total = '0' AND wait_time_max = '0' AS no_wait
  FROM dlock_stats WHERE name = 's';
-- transaction scope, and the shared mode is a row of its own
BEGIN;
SELECT dlock_try_xact('s', shared => true), dlock_lock_xact('s', shared => true);
SELECT * FROM st('s');
COMMIT;
SELECT * FROM st('s');
-- a hold's time runs from its first grant to its end
SELECT dlock_try('held');
SELECT pg_sleep(0.2);
SELECT dlock_unlock('held');
SELECT hold_time_total >= '0.2 s' AND hold_time_total < '10 s' AS held_long_enough FROM dlock_stats WHERE name = 'held';
-- the same when take, sleep and release are one query string (one statement
-- start for all three): the lock path's clock is the time, not the statement's
-- (the lock path's coarse clock lags by a few ticks, of 1 to 10 ms)
SELECT dlock_try('one-string') \; SELECT pg_sleep(0.5) \; SELECT dlock_unlock('one-string');
SELECT hold_time_total >= '0.4 s' AND hold_time_total < '10 s' AS held_long_enough FROM dlock_stats WHERE name = 'one-string';
-- and in a procedure that commits (one statement, several transactions)
CREATE PROCEDURE dlock_after_commit() LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep(0.5);
  COMMIT;
  PERFORM dlock_try_xact('in-procedure');
  RAISE NOTICE 'held since after the commit: %', (SELECT since >= statement_timestamp() + interval '0.4 s'
    FROM dlock_locks WHERE name = 'in-procedure' AND pid = pg_backend_pid());
  COMMIT;
END $$;
CALL dlock_after_commit();
DROP PROCEDURE dlock_after_commit();
-- since is never before the start of the statement that took the lock, nor
-- after the grant (the coarse clock lags by up to a tick)
DO $$
DECLARE ok boolean := true;
BEGIN
  FOR i IN 1..200 LOOP
    PERFORM dlock_try('since');
    ok := ok AND (SELECT since BETWEEN statement_timestamp() AND clock_timestamp()
                    FROM dlock_locks WHERE name = 'since' AND pid = pg_backend_pid());
    PERFORM dlock_unlock('since');
  END LOOP;
  RAISE NOTICE 'since within the statement, never after the grant: %', ok;
END $$;
-- a hold with a lease starts on the precise clock, and its end is read on
-- it too: 50 holds of at least 5 ms add up to at least 250 ms
DO $$
BEGIN
  FOR i IN 1..50 LOOP
    PERFORM dlock_try('leased-short', lease => '1 min');
    PERFORM pg_sleep(0.005);
    PERFORM dlock_unlock('leased-short');
  END LOOP;
END $$;
SELECT released, hold_time_total >= '0.25 s' AS timed_precisely FROM dlock_stats WHERE name = 'leased-short';
-- a subtransaction's lock ends with its rollback
BEGIN;
SAVEPOINT a;
SELECT dlock_try_xact('sub');
ROLLBACK TO a;
COMMIT;
SELECT * FROM st('sub');

-- taken by another holder (a detached lock, held by the server): busy,
-- then a wait that times out, then lock_timeout and statement_timeout
SELECT dlock_acquire('taken', '1 minute') AS tok \gset
SELECT dlock_try('taken') AS try, dlock_acquire('taken', '1 minute') AS acquire_again;
SELECT dlock_lock('taken', '0.1 s') AS timed_out;
-- (19 adds the lock being waited for to these errors as CONTEXT)
\set SHOW_CONTEXT never
SET lock_timeout = '100ms';
SELECT dlock_lock('taken');
RESET lock_timeout;
SET statement_timeout = '100ms';
SELECT dlock_lock('taken');
RESET statement_timeout;
\set SHOW_CONTEXT errors
SELECT * FROM st('taken');
SELECT wait_time_total >= '0.3 s' AS waited_all, wait_time_max >= '0.1 s' AS longest,
       wait_time_max <= wait_time_total AS max_le_total
  FROM dlock_stats WHERE name = 'taken';
-- a wait that gets the lock: the detached lock's lease runs out meanwhile
SELECT dlock_extend('taken', :tok, '0.3 s') IS NOT NULL AS shortened;
SELECT dlock_lock('taken', '10 s') AS got_it;
SELECT dlock_unlock('taken');
SELECT * FROM st('taken');
SELECT wait_time_max >= '0.1 s' AS waited FROM dlock_stats WHERE name = 'taken';

-- detached: immediate, busy, released with its hold time, and an expiry
SELECT dlock_acquire('d', '1 minute') AS d \gset
SELECT dlock_acquire('d', '1 minute') AS busy_again;
SELECT dlock_release('d', :d);
SELECT dlock_acquire('d-short', '0.1 s') IS NOT NULL AS acquired;
SELECT pg_sleep(1.5);
SELECT * FROM st('d');
SELECT * FROM st('d-short');

-- a transaction-scope lease enforced by the reaper: the transaction is cancelled
BEGIN;
SELECT dlock_try_xact('lx', lease => '0.1 s');
-- (the client is told why: 57L02, the lock's name; its DETAIL has the time)
\set VERBOSITY sqlstate
SELECT pg_sleep(5);
\set VERBOSITY terse
\echo :LAST_ERROR_SQLSTATE :LAST_ERROR_MESSAGE
\set VERBOSITY default
ROLLBACK;
-- the reaper counts the expiry right after its signal: wait for it (5 s at most)
DO $$
BEGIN
	FOR i IN 1..50 LOOP
		EXIT WHEN (SELECT leases_expired FROM dlock_stats WHERE name = 'lx') > 0;
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;
SELECT * FROM st('lx');

-- reset: one name (both modes, this database), then everything
SELECT count(*) AS names_before FROM dlock_stats WHERE database = current_database() \gset
SELECT dlock_stats_reset('s');
SELECT count(*) FROM st('s');
SELECT count(*) = :names_before - 2 AS only_s_gone FROM dlock_stats WHERE database = current_database();
SELECT stats_reset AS r0 FROM dlock_stats_info \gset
SELECT dlock_stats_reset();
SELECT count(*) FROM dlock_stats;
SELECT evictions, stats_reset > :'r0' AS reset_moved, entries FROM dlock_stats_info;
-- a NULL name resets nothing (strict); a bad name: the usual error
SELECT dlock_try('kept-by-null'), dlock_unlock('kept-by-null');
SELECT dlock_stats_reset(NULL);
SELECT count(*) FROM st('kept-by-null');
SELECT dlock_stats_reset('');

-- tracking off (superusers only): nothing counted
SET dlock.track_stats = off;
SELECT dlock_try('untracked'), dlock_unlock('untracked');
RESET dlock.track_stats;
SELECT count(*) FROM st('untracked');
-- a hold is counted to its end if its start was, whatever the setting says by then
SET dlock.track_stats = off;
SELECT dlock_try('started-off');
SELECT dlock_acquire('detached-off', '0.1 s') IS NOT NULL AS acquired;
RESET dlock.track_stats;
SELECT dlock_unlock('started-off');
SELECT dlock_try('started-on');
SET dlock.track_stats = off;
SELECT dlock_unlock('started-on');
RESET dlock.track_stats;
SELECT pg_sleep(1.2);   -- the detached lock's lease runs out: not counted either
SELECT name, acquisitions, released, leases_expired FROM dlock_stats
 WHERE name IN ('started-off', 'started-on', 'detached-off') ORDER BY name;

-- who may do what: everyone reads, reset and tracking are the superuser's
CREATE ROLE dlock_stats_user;
SET ROLE dlock_stats_user;
SELECT dlock_try('by-user'), dlock_unlock('by-user');
SELECT name, acquisitions FROM dlock_stats WHERE name = 'by-user';
SELECT max_entries >= 5000 AS bounded FROM dlock_stats_info;
SELECT dlock_stats_reset();
SET dlock.track_stats = off;
RESET ROLE;
DROP ROLE dlock_stats_user;

-- the bound: more names than dlock.max_stats evicts the least used, keeps
-- the busy ones, and counts what went
SELECT count(dlock_try('hot') AND dlock_unlock('hot')) FROM generate_series(1, 200);
SELECT count(dlock_try('cold-' || g) AND dlock_unlock('cold-' || g))
  FROM generate_series(1, (SELECT max_entries + 1000 FROM dlock_stats_info)) g;
SELECT evictions > 0 AS evicted, entries <= max_entries AS within_bound,
       entries = (SELECT count(*) FROM dlock_stats) AS view_agrees
  FROM dlock_stats_info;
SELECT acquisitions FROM dlock_stats WHERE name = 'hot';
SELECT count(*) < 1000 AS first_cold_ones_gone FROM dlock_stats WHERE name ~ '^cold-[0-9]{1,3}$';

SELECT dlock_stats_reset();
DROP FUNCTION st(text);
