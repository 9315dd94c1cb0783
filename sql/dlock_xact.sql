-- transaction scope in one session: released at commit, rollback, and with
-- the subtransaction that took it; dlock's record follows the lock manager
SET client_min_messages = warning;
RESET client_min_messages;

CREATE VIEW my_locks AS
  SELECT name, mode, scope, granted FROM dlock_locks WHERE pid = pg_backend_pid()
  ORDER BY name, mode;
-- dlock's own record (the view hides entries pg_locks does not confirm)
CREATE VIEW my_entries AS
  SELECT name, session_holds, xact_holds FROM dlock_names() WHERE pid = pg_backend_pid()
  ORDER BY name, mode;

BEGIN;
SELECT dlock_try_xact('x1'), dlock_lock_xact('x2', '1s', shared => true), dlock_lock_xact('x3');
SELECT * FROM my_locks;
-- dlock_unlock is for session locks, as pg_advisory_unlock
SELECT dlock_unlock('x1');
COMMIT;
SELECT * FROM my_locks;

BEGIN;
SELECT dlock_try_xact('x1');
ROLLBACK;
SELECT * FROM my_locks;

-- both scopes on one name and mode: one lock, both scopes shown, one token
BEGIN;
SELECT dlock_try('both');
SELECT dlock_token('both') AS t1 \gset
SELECT dlock_try_xact('both');
SELECT * FROM my_locks;
SELECT dlock_token('both') = :t1 AS same_hold;
COMMIT;
SELECT * FROM my_locks;
SELECT dlock_token('both') = :t1 AS same_hold;
SELECT dlock_unlock('both');

-- session locks survive a rollback
BEGIN;
SELECT dlock_try('survivor');
ROLLBACK;
SELECT * FROM my_locks;
SELECT dlock_unlock('survivor');

-- savepoints: ROLLBACK TO releases what the subtransaction took, RELEASE keeps it
BEGIN;
SELECT dlock_try_xact('outer');
SAVEPOINT s1;
SELECT dlock_try_xact('inner-rolled-back');
SELECT dlock_try_xact('outer');        -- a second hold, taken in s1
SAVEPOINT s2;
SELECT dlock_try_xact('inner-released');
RELEASE SAVEPOINT s2;
SELECT * FROM my_locks;
SELECT * FROM my_entries;
ROLLBACK TO SAVEPOINT s1;
SELECT * FROM my_locks;
SELECT * FROM my_entries;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SAVEPOINT s3;
SELECT dlock_try_xact('kept');
RELEASE SAVEPOINT s3;
SELECT * FROM my_locks;
COMMIT;
SELECT * FROM my_locks;
SELECT * FROM my_entries;

-- a failing statement rolls back its subtransaction's locks (PL/pgSQL EXCEPTION)
BEGIN;
DO $$
BEGIN
  BEGIN
    PERFORM dlock_try_xact('in-failed-block');
    PERFORM 1 / 0;
  EXCEPTION WHEN division_by_zero THEN
    RAISE NOTICE 'caught';
  END;
  PERFORM dlock_try_xact('after-failed-block');
END $$;
SELECT * FROM my_locks;
SELECT * FROM my_entries;
COMMIT;
SELECT * FROM my_entries;

-- an aborted transaction drops its xact locks at once
BEGIN;
SELECT dlock_try_xact('doomed');
SELECT 1 / 0;
ROLLBACK;
SELECT * FROM my_locks;

-- a transaction-scope lock with a lease cannot be prepared (the reaper could
-- not end a prepared transaction)
BEGIN;
SELECT dlock_try_xact('prepared', lease => '1 hour');
PREPARE TRANSACTION 'dlock_test';
SELECT * FROM my_locks;
SELECT * FROM my_entries;
-- nor one taken with notify (1.7: its end could not be announced)
BEGIN;
SELECT dlock_try_xact('prepared', notify => true);
PREPARE TRANSACTION 'dlock_test';
SELECT * FROM my_locks;

-- a prepared transaction keeps at most max_locks_per_transaction (64 here)
-- dlock locks, the lock table's room for it: beyond, PREPARE is refused and
-- the locks go with the rollback; 64 are prepared, and held by the prepared
-- transaction (no pid) until it ends
BEGIN;
SELECT count(*) FILTER (WHERE dlock_try_xact('prep-' || i)) FROM generate_series(1, 65) i;
PREPARE TRANSACTION 'dlock_many';
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
BEGIN;
SELECT count(*) FILTER (WHERE dlock_try_xact('prep-' || i)) FROM generate_series(1, 64) i;
PREPARE TRANSACTION 'dlock_many';
SELECT count(*) FILTER (WHERE pid = pg_backend_pid()) AS mine, count(*) FILTER (WHERE pid IS NULL) AS prepared
  FROM pg_locks WHERE locktype = 'advisory';
ROLLBACK PREPARED 'dlock_many';
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory';

-- many transaction locks in one transaction (more than dlock first makes room
-- for): all recorded, all released at the end
BEGIN;
SELECT count(*) FILTER (WHERE dlock_try_xact('bulk-' || i)) FROM generate_series(1, 40) i;
SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid() AND name LIKE 'bulk-%';
SELECT count(*) FILTER (WHERE dlock_lock_xact('bulk-' || i, shared => true)) FROM generate_series(1, 40) i;
-- 80 locks; names for the first 64 (dlock.max_locks_per_session)
SELECT count(*) AS locks, count(name) AS named FROM dlock_locks WHERE pid = pg_backend_pid();
COMMIT;
SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid();

-- the same names again, all free
SELECT dlock_try('x1'), dlock_try('outer'), dlock_try('kept'), dlock_try('prepared');
SELECT dlock_unlock_all();
DROP VIEW my_locks, my_entries;
