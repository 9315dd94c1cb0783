-- leases in one session: setting, renewing, the view (enforcement by the
-- reaper is in the isolation specs and test/fault.py)
SET client_min_messages = warning;
RESET client_min_messages;

CREATE FUNCTION lease_left(n text) RETURNS interval LANGUAGE sql AS $$
  SELECT date_trunc('second', lease_expires - clock_timestamp() + interval '0.5 s')
    FROM dlock_locks WHERE name = n AND pid = pg_backend_pid() AND mode = 'exclusive'
$$;

SELECT dlock_try('job', lease => '10 minutes');
SELECT lease_left('job');
-- renew: to a new length, or (NULL) by the same length again
SELECT dlock_renew('job', '1 hour') BETWEEN now() + interval '1 hour' AND clock_timestamp() + interval '1 hour' AS renewed;
SELECT lease_left('job');
SELECT dlock_renew('job') IS NOT NULL;
SELECT lease_left('job');
-- shorter is allowed too
SELECT dlock_renew('job', '2 minutes') IS NOT NULL;
SELECT lease_left('job');
-- re-entering with a lease restarts it; re-entering without one keeps it
SELECT dlock_try('job', lease => '20 minutes');
SELECT lease_left('job');
SELECT dlock_try('job');
SELECT lease_left('job');
SELECT dlock_unlock('job'), dlock_unlock('job'), dlock_unlock('job');
SELECT dlock_renew('job', '1s');

-- a lock taken without a lease can be given one
SELECT dlock_lock('later', '1s');
SELECT lease_left('later');
SELECT dlock_renew('later', '5 minutes') IS NOT NULL;
SELECT lease_left('later');
SELECT dlock_unlock('later');

-- a lease on a wait starts when the lock is granted
SELECT dlock_lock('waited', '1s', lease => '3 minutes');
SELECT lease_left('waited');
SELECT dlock_unlock('waited');

-- renew covers both modes of a name
SELECT dlock_try('two', lease => '1 minute'), dlock_try('two', true, '2 minutes');
SELECT dlock_renew('two', '7 minutes') IS NOT NULL;
SELECT mode, date_trunc('second', lease_expires - clock_timestamp() + interval '0.5 s') AS left
  FROM dlock_locks WHERE name = 'two' ORDER BY mode;
SELECT dlock_unlock_all();

-- transaction scope
BEGIN;
SELECT dlock_try_xact('tx', lease => '4 minutes');
SELECT lease_left('tx');
SELECT dlock_renew('tx', '6 minutes') IS NOT NULL;
SELECT lease_left('tx');
COMMIT;
SELECT dlock_renew('tx', '1 minute');

DROP FUNCTION lease_left(text);

-- the lease marker (objsubid 4 or 5) is held exactly while a name has session
-- holds and a lease, whichever call brought which: a lease from a
-- transaction-scope call on a session hold, a session hold on a transaction
-- hold with a lease, a new hold without a lease where an old one left its marker
CREATE FUNCTION marks() RETURNS text LANGUAGE sql AS $$
  SELECT count(*) FILTER (WHERE objsubid = 1) || ' held, ' ||
         count(*) FILTER (WHERE objsubid IN (4, 5)) || ' marked'
  FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
$$;
BEGIN;
SELECT dlock_try_xact('mk-a', lease => '1 hour'), dlock_try('mk-a');
COMMIT;
SELECT marks(), dlock_unlock_all(), marks();
BEGIN;
SELECT dlock_try('mk-c'), dlock_try_xact('mk-c', lease => '1 hour');
COMMIT;
SELECT marks(), (SELECT name FROM dlock_locks WHERE pid = pg_backend_pid()), dlock_unlock_all(), marks();
SELECT dlock_try('mk-e', lease => '1 hour');
SELECT pg_advisory_unlock(dlock_key('mk-e'));
SELECT dlock_try('mk-e'), marks();
SELECT dlock_unlock('mk-e'), marks();

-- a session part released behind dlock's back while a transaction hold of
-- the same name keeps the lock: forgotten, and taken afresh with its marker
BEGIN;
SELECT dlock_try_xact('mk-t'), dlock_try('mk-t', lease => '1 hour');
SELECT pg_advisory_unlock_all();
SELECT dlock_try('mk-t'), marks();
COMMIT;
SELECT marks(), dlock_unlock_all(), marks();
-- PREPARE TRANSACTION is refused while the session has a hold with a lease
SELECT dlock_try('mk-p', lease => '1 hour');
BEGIN;
PREPARE TRANSACTION 'dlock_lease_prepare';
SELECT dlock_unlock_all();
DROP FUNCTION marks();
