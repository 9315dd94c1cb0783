-- Update mode (1.7): mode => 'update' shares a name with shared holders and
-- excludes other update and exclusive holders; dlock_raise makes it
-- exclusive, dlock_lower makes it update again.  (Two sessions: test/isolation
-- update_mode; here what one session sees.)
-- the mode in words, or shared => true; both only where they agree
SELECT dlock_try('u1', mode => 'update');
SELECT dlock_try('u2', mode => 'shared'), dlock_try('u3', mode => 'exclusive'),
       dlock_try('u4', shared => true, mode => 'shared');
SELECT name, mode, scope, granted, token > 0 AS has_token FROM dlock_locks ORDER BY name, mode;
-- an update hold is two locks in the lock manager: RowShareLock on the key
-- (objsubid 1: it shares with ShareLock, conflicts with ExclusiveLock) and
-- ExclusiveLock on its update gate (objsubid 7)
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
-- an update hold is not a shared one: neither pg_advisory_unlock_shared nor
-- dlock_unlock(shared) gives back any of it
SELECT dlock_try('u1', mode => 'update');
SELECT pg_advisory_unlock_shared(dlock_key('u1'));
SELECT dlock_unlock('u1', shared => true), dlock_unlock(ARRAY['u1'], true);
SELECT dlock_token('u1') > 0 AS still_held;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- beside a shared hold, each release gives back its own
SELECT dlock_try('u1', shared => true);
SELECT dlock_unlock('u1', mode => 'update');
SELECT mode FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT dlock_unlock('u1', shared => true);
-- pg_advisory_unlock_all releases both of its locks; taking it again after
-- that, in the same statement too, holds it anew (the gate it just took is
-- kept), with or without a lease
SELECT dlock_try('u1', mode => 'update'), pg_advisory_unlock_all();
SELECT dlock_unlock('u1', mode => 'update');
SELECT dlock_try('u1', mode => 'update', lease => '1 min');
SELECT pg_advisory_unlock_all(), dlock_lock('u1', mode => 'update', lease => '1 min');
SELECT objsubid, mode FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
 ORDER BY objsubid;
SELECT name, mode, lease_expires IS NOT NULL AS has_lease FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_try('u1', mode => 'update'), dlock_unlock_all();
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- a transaction's update hold: dlock_unlock has no session hold to release
BEGIN;
SELECT dlock_try_xact('u1', mode => 'update');
SELECT dlock_unlock('u1', mode => 'update');
COMMIT;
-- a raise in a transaction is given back by dlock_lower, also one taken in
-- a cursor that is still open, or before a savepoint that is rolled back
-- to; one rolled back with its savepoint is gone; a plain exclusive hold
-- of the transaction is not a raise
BEGIN;
SELECT dlock_lock_xact('c', mode => 'update'), dlock_lock_xact('d', mode => 'update');
SELECT dlock_raise('d'), dlock_raise('c');
SAVEPOINT s;
SELECT dlock_raise('c');
SELECT dlock_lower('d'), dlock_lower('c');
ROLLBACK TO s;
SELECT dlock_lower('c');
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND mode = 'ExclusiveLock'
   AND objsubid = 1;
DECLARE cur CURSOR FOR SELECT dlock_raise('c');
FETCH cur;
SELECT dlock_lower('c');
CLOSE cur;
SAVEPOINT t;
SELECT dlock_raise('c');
ROLLBACK TO t;
SELECT name, mode FROM dlock_locks WHERE pid = pg_backend_pid() ORDER BY name, mode;
SELECT dlock_lock_xact('c');
SELECT dlock_lower('c');
COMMIT;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- a raise taken behind dlock's back (pg_advisory_unlock_all) is not given
-- back again at the end of the transaction, in place of a session hold of
-- the name taken after it
BEGIN;
SELECT dlock_lock_xact('c', mode => 'update'), dlock_raise('c');
SELECT pg_advisory_unlock_all();
SELECT dlock_lock('c');
COMMIT;
SELECT name, mode, scope FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_unlock('c');
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- dlock_unlock does not give back a raise in a transaction (its lock is a
-- session lock that dlock gives back itself): false and a WARNING; a session
-- hold taken beside it outlives the transaction
BEGIN;
SELECT dlock_lock_xact('n', mode => 'update'), dlock_raise('n');
SELECT dlock_unlock('n');
SELECT dlock_lock('n');
COMMIT;
SELECT name, mode, scope FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_unlock('n');
-- a raise whose lock went behind dlock's back (pg_advisory_unlock), its
-- entry since used for another hold: the end of the transaction leaves
-- that hold alone
BEGIN;
SELECT dlock_lock_xact('x2', mode => 'update'), dlock_raise('x2');
SELECT pg_advisory_unlock(dlock_key('x2'));
SELECT dlock_lock('x2'), dlock_unlock('x2'), dlock_lock('m2', lease => '1 hour');
COMMIT;
SELECT name, mode, scope FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_renew('m2') > now() AS renewed, dlock_unlock('m2');
-- in a transaction dlock_lower lowers a raise, not the session's own
-- exclusive hold of the name
SELECT dlock_lock('s');
BEGIN;
SELECT dlock_lock_xact('s', mode => 'update'), dlock_raise('s'), dlock_lower('s');
SELECT name, mode, scope FROM dlock_locks WHERE pid = pg_backend_pid() ORDER BY mode;
COMMIT;
SELECT name, mode, scope FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_unlock('s');
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- a prepared transaction's update hold: shown, without a name, in update
-- mode; one with a raise cannot be prepared
BEGIN;
SELECT dlock_lock_xact('pp', mode => 'update');
PREPARE TRANSACTION 'dlock_update';
SELECT name, mode, granted, pid FROM dlock_locks WHERE key = dlock_key('pp');
SELECT dlock_try('pp', mode => 'update'), dlock_try('pp', shared => true), dlock_unlock('pp', shared => true);
ROLLBACK PREPARED 'dlock_update';
BEGIN;
SELECT dlock_lock_xact('pp', mode => 'update'), dlock_raise('pp');
PREPARE TRANSACTION 'dlock_update';
-- statistics count update mode apart
SELECT dlock_stats_reset('u1');
SELECT dlock_try('u1', mode => 'update'), dlock_unlock('u1', mode => 'update');
SELECT mode, acquisitions, session_acquisitions, released FROM dlock_stats WHERE name = 'u1';
