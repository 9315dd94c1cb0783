-- Update mode (1.7): mode => 'update' shares a name with shared holders and
-- excludes other update and exclusive holders; dlock_raise makes it
-- exclusive, dlock_lower makes it update again.  (Two sessions: test/isolation
-- update_mode; here what one session sees.)
-- the mode in words, or shared => true; both only where they agree
SELECT dlock_try('u1', mode => 'update');
SELECT dlock_try('u2', mode => 'shared'), dlock_try('u3', mode => 'exclusive'),
       dlock_try('u4', shared => true, mode => 'shared');
SELECT name, mode, scope, granted, token > 0 AS has_token FROM dlock_locks ORDER BY name, mode;
-- an update hold is two locks in the lock manager: ShareLock on the key
-- (objsubid 1) and ExclusiveLock on its update gate (objsubid 7)
SELECT objsubid, mode, granted FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid()
   AND classid::bigint = (dlock_key('u1') >> 32) & 4294967295
 ORDER BY objsubid;
SELECT pid = pg_backend_pid() AS mine, mode, session_holds, xact_holds FROM dlock_names() WHERE name = 'u1';
SELECT dlock_unlock_all();
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- bad modes
SELECT dlock_try('u1', mode => 'Update');
SELECT dlock_lock('u1', mode => 'update', shared => true);
SELECT dlock_try('u1', mode => 'update', permits => 3);
SELECT dlock_unlock('u1', mode => 'nope');
-- the same session: shared and update at once are two holds; re-entry
SELECT dlock_try('u1', shared => true), dlock_try('u1', mode => 'update'),
       dlock_lock('u1', mode => 'update');
SELECT name, mode, scope FROM dlock_locks ORDER BY mode;
SELECT dlock_unlock('u1', mode => 'update'), dlock_unlock('u1', mode => 'update');
SELECT dlock_unlock('u1', mode => 'update');
SELECT name, mode FROM dlock_locks;
SELECT dlock_unlock('u1', shared => true);
-- raise: an exclusive hold over the update hold, with a newer token, which
-- dlock_token returns; lower releases it and the update hold goes on
SELECT dlock_try('u1', mode => 'update', lease => '1 min', info => 'reader');
SELECT dlock_token('u1') AS update_token \gset
SELECT dlock_raise('u1');
SELECT dlock_token('u1') > :update_token AS newer_token;
SELECT name, mode, scope, lease_expires IS NOT NULL AS has_lease, info FROM dlock_locks ORDER BY mode;
SELECT dlock_renew('u1', '2 min') > now() AS renewed;
SELECT dlock_lower('u1');
SELECT dlock_token('u1') = :update_token AS update_token_again;
SELECT dlock_lower('u1');
SELECT dlock_unlock('u1', mode => 'update');
-- raise and lower need an update hold
SELECT dlock_raise('u1');
SELECT dlock_try('u1', shared => true);
SELECT dlock_raise('u1');
SELECT dlock_lower('u1');
SELECT dlock_unlock('u1', shared => true);
-- a session hold is raised at session level, a transaction one in the
-- transaction; a lower in the transaction releases early, also a raise of
-- an enclosing savepoint, and a rollback does not raise it again
BEGIN;
SELECT dlock_try_xact('u1', mode => 'update');
SELECT dlock_raise('u1');
SELECT name, mode, scope FROM dlock_locks ORDER BY mode;
SELECT dlock_lower('u1');
SELECT dlock_raise('u1'), dlock_lower('u1');
SAVEPOINT a;
SELECT dlock_raise('u1');
SAVEPOINT b;
SELECT dlock_lower('u1');
ROLLBACK TO b;
SELECT name, mode, scope FROM dlock_locks ORDER BY mode;
ROLLBACK TO a;
SELECT name, mode, scope FROM dlock_locks ORDER BY mode;
COMMIT;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- released behind dlock's back: pg_advisory_unlock_shared of the key gives
-- back the update hold's ShareLock; dlock then forgets the hold, and its gate
SELECT dlock_try('u1', mode => 'update');
SELECT pg_advisory_unlock_shared(dlock_key('u1'));
SELECT dlock_token('u1');
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT dlock_try('u1', mode => 'update'), pg_advisory_unlock_all();
SELECT dlock_unlock('u1', mode => 'update');
SELECT dlock_try('u1', mode => 'update'), dlock_unlock_all();
-- statistics count update mode apart
SELECT dlock_stats_reset('u1');
SELECT dlock_try('u1', mode => 'update'), dlock_unlock('u1', mode => 'update');
SELECT mode, acquisitions, session_acquisitions, released FROM dlock_stats WHERE name = 'u1';
