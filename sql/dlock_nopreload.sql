-- run against a server WITHOUT dlock in shared_preload_libraries: plain
-- locking works; names in the view, leases and tokens say what they need
SET client_min_messages = warning;
RESET client_min_messages;
SHOW shared_preload_libraries;

SELECT dlock_key('abc');
-- the standby setting is a per-session choice, there without preloading too
SHOW dlock.allow_standby_locks;
-- so is waiting for the synchronous standbys: without synchronous_standby_names
-- a grant waits for nothing
SHOW dlock.synchronous_grants;
SET dlock.synchronous_grants = on;
SELECT dlock_try('confirmed'), dlock_unlock('confirmed');
RESET dlock.synchronous_grants;
SELECT dlock_try('plain'), dlock_try('plain'), dlock_lock('waited', '1s'), dlock_try('s', true);
SELECT dlock_unlock('plain'), dlock_unlock('plain'), dlock_unlock('plain');
BEGIN;
SELECT dlock_try_xact('tx'), dlock_lock_xact('tx2', '1s');
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
COMMIT;
SELECT dlock_unlock_all();
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();

-- the view still lists the locks (pg_locks), without names
SELECT dlock_try('unnamed');
SELECT name, key = dlock_key('unnamed') AS key_ok, mode, scope, granted FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT count(*) FROM dlock_names();

-- leases, tokens and info need the library preloaded
SELECT dlock_try('leased', lease => '1 minute');
SELECT dlock_lock('with-info', info => 'node-a:5432');
SELECT dlock_renew('unnamed', info => 'node-a:5432');
SELECT dlock_lock_xact('leased', '1s', false, '1 minute');
SELECT dlock_renew('unnamed', '1 minute');
SELECT dlock_token('unnamed');
-- and observers (1.7), and update mode does not (nor notify => false)
SELECT dlock_try('watched', notify => true);
SELECT dlock_acquire('watched', '1 minute', notify => true);
SELECT dlock_try('upd', mode => 'update', notify => false), dlock_unlock('upd', mode => 'update');
-- and semaphores (permits 1 is the plain lock, which needs nothing)
SELECT dlock_try('sem', permits => 3);
SELECT dlock_lock_xact('sem', '1s', permits => 2);
SELECT dlock_try('sem', permits => 1) AND dlock_unlock('sem') AS one_permit;
-- and so do statistics (55000); nothing is counted without them
SELECT * FROM dlock_stats;
SELECT * FROM dlock_stats_info;
SELECT dlock_stats_reset();
-- and nothing was taken by the failed calls
SELECT dlock_unlock_all();
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
