-- session-scope locks in one session: try, lock, unlock, re-entrancy, unlock_all
SET client_min_messages = warning;
RESET client_min_messages;

CREATE VIEW my_locks AS
  SELECT name, mode, scope, granted FROM dlock_locks WHERE pid = pg_backend_pid()
  ORDER BY name, mode;

SELECT dlock_try('nightly-report');
SELECT * FROM my_locks;
-- re-entrant, like pg_advisory_lock: two holds need two unlocks
SELECT dlock_try('nightly-report');
SELECT dlock_unlock('nightly-report');
SELECT * FROM my_locks;
SELECT dlock_unlock('nightly-report');
SELECT * FROM my_locks;
-- unlocking what is not held: false, with the same WARNING as Postgres
SELECT dlock_unlock('nightly-report');
SELECT dlock_unlock('never-taken', shared => true);

-- dlock_lock without contention: true at once, with any timeout or none
SELECT dlock_lock('a'), dlock_lock('b', '1s'), dlock_lock('c', '0'), dlock_lock('d', timeout => NULL);
SELECT dlock_lock('e', timeout => '5 minutes', shared => true);
SELECT * FROM my_locks;

-- shared and exclusive are separate holds of one name
SELECT dlock_try('e');
SELECT * FROM my_locks WHERE name = 'e';
SELECT dlock_unlock('e');             -- the exclusive one
SELECT dlock_unlock('e', true);       -- the shared one
SELECT dlock_unlock('e', true);

-- dlock_unlock_all: every session-level dlock lock, counted once per name and mode
SELECT dlock_try('a');                -- a second hold of 'a'
SELECT dlock_try_xact('x');           -- transaction scope: not touched (and gone already)
SELECT pg_advisory_lock(4242);        -- not a dlock lock: not touched
SELECT dlock_unlock_all();
SELECT * FROM my_locks;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT pg_advisory_unlock(4242);
SELECT dlock_unlock_all();

-- locks released behind dlock's back (pg_advisory_unlock_all, DISCARD ALL)
SELECT dlock_try('behind-the-back');
SELECT pg_advisory_unlock_all();
SELECT * FROM my_locks;
SELECT dlock_try('behind-the-back');  -- a fresh hold
SELECT * FROM my_locks;
SELECT dlock_unlock('behind-the-back');
SELECT dlock_unlock('behind-the-back');
SELECT dlock_try('discarded');
DISCARD ALL;
SELECT * FROM my_locks;
SELECT dlock_unlock_all();

-- a named lock works from any call site: DO blocks, functions, prepared statements
DO $$ BEGIN IF NOT dlock_try('from-do') THEN RAISE EXCEPTION 'not taken'; END IF; END $$;
PREPARE take(text) AS SELECT dlock_try($1);
EXECUTE take('from-prepared');
SELECT * FROM my_locks;
SELECT dlock_unlock_all();
DEALLOCATE take;
DROP VIEW my_locks;
