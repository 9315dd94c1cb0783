-- many names in one session, beyond dlock.max_locks_per_session (64 here):
-- every hold is found again (re-entry, unlock), entries freed in any order
-- are reused, shared and exclusive holds of a name are kept apart, and
-- dlock's record agrees with the lock manager at every step
-- (more names than dlock.max_held_locks allows this small test server)
SET dlock.max_held_locks = 100000;
CREATE FUNCTION agree() RETURNS text LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())
         || ' held, ' ||
         (SELECT count(*) FROM dlock_names() WHERE pid = pg_backend_pid()) || ' named'
$$;
SELECT count(*) FILTER (WHERE dlock_try('many-' || i)) FROM generate_series(1, 1000) i;
SELECT agree();
-- taken again: each one found, held twice
SELECT count(*) FILTER (WHERE dlock_try('many-' || i)) FROM generate_series(1, 1000) i;
-- every third released twice (gone), the others once (still held)
SELECT count(*) FILTER (WHERE dlock_unlock('many-' || i) AND dlock_unlock('many-' || i))
  FROM generate_series(3, 1000, 3) i;
SELECT count(*) FILTER (WHERE dlock_unlock('many-' || i))
  FROM generate_series(1, 1000) i WHERE i % 3 <> 0;
SELECT agree();
SELECT count(*) FILTER (WHERE dlock_try('many-' || i)) FROM generate_series(3, 1000, 3) i;
SELECT count(*) FILTER (WHERE dlock_try('many-' || i, shared => true)) FROM generate_series(1, 1000, 2) i;
SELECT agree();
-- the first name is held in both modes; both are found
SELECT dlock_token('many-1') > 0 AS has_token, dlock_unlock('many-1', shared => true), dlock_unlock('many-1');
SELECT dlock_unlock_all();
SELECT agree();
-- and transaction holds of many names end with the transaction
BEGIN;
SELECT count(*) FILTER (WHERE dlock_try_xact('many-' || i)) FROM generate_series(1, 500) i;
SELECT agree();
COMMIT;
SELECT agree();
-- a sweep that found nothing does not keep the next holds released behind
-- dlock's back from being reclaimed (a pooled session after DISCARD ALL)
SELECT count(*) FILTER (WHERE dlock_try('full-' || i)) FROM generate_series(1, 66) i;
SELECT pg_advisory_unlock_all();
SELECT dlock_try('after-discard'), dlock_try('after-discard', lease => '1 hour');
SELECT name FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_unlock_all();
DROP FUNCTION agree();
