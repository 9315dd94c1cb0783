-- bad input: every error has an SQLSTATE and leaves nothing half-registered
SET client_min_messages = warning;
RESET client_min_messages;

-- runs a statement, returns its SQLSTATE and message (or 'ok: <result>')
CREATE FUNCTION try_sql(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text; d text;
BEGIN
  EXECUTE q INTO r;
  RETURN 'ok: ' || coalesce(r, 'null');
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' / ' || nullif(d, ''), '');
END $$;
-- what this session holds, by the lock manager and by dlock
CREATE FUNCTION held() RETURNS text LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())
         || ' advisory, ' ||
         (SELECT count(*) FROM dlock_names() WHERE pid = pg_backend_pid()) || ' dlock entries'
$$;

SELECT q, try_sql(q) FROM (VALUES
  -- names
  ('SELECT dlock_try(NULL)'),
  ('SELECT dlock_lock(NULL, ''1s'')'),
  ('SELECT dlock_try_xact(NULL)'),
  ('SELECT dlock_lock_xact(NULL)'),
  ('SELECT dlock_unlock(NULL)'),
  ('SELECT dlock_renew(NULL, ''1s'')'),
  ('SELECT dlock_token(NULL)'),
  ('SELECT dlock_try('''')'),
  ('SELECT dlock_lock(repeat(''x'', 256))'),
  ('SELECT dlock_unlock(repeat(''é'', 200))'),
  -- modes
  ('SELECT dlock_try(''m'', NULL)'),
  ('SELECT dlock_lock(''m'', ''1s'', NULL)'),
  ('SELECT dlock_unlock(''m'', NULL)'),
  -- timeouts: NULL waits forever, 0 does not wait, negative and huge are errors
  ('SELECT dlock_lock(''t'', ''-1s'')'),
  ('SELECT dlock_lock(''t'', ''-1 day 1 hour'')'),
  ('SELECT dlock_lock_xact(''t'', ''25 days'')'),
  ('SELECT dlock_lock(''t'', ''178000000 years'')'),
  -- leases: at least 100ms, not negative, not past the end of time
  ('SELECT dlock_try(''l'', lease => ''-1s'')'),
  ('SELECT dlock_try(''l'', lease => ''0'')'),
  ('SELECT dlock_try(''l'', lease => ''99ms'')'),
  ('SELECT dlock_lock(''l'', ''1s'', lease => ''0.0999 s'')'),
  ('SELECT dlock_try_xact(''l'', lease => ''300000 years'')'),
  ('SELECT dlock_try(''l'', lease => ''106751990 days'')'),  -- ends past timestamptz
  ('SELECT dlock_lock(''l'', lease => ''2147483647 days'')'),
  -- renew and token need a hold
  ('SELECT dlock_renew(''not-held'', ''1s'')'),
  ('SELECT dlock_token(''not-held'')')
) v(q);
SELECT held();

-- the same, as psql shows them (message, detail, hint)
SELECT dlock_try('');
SELECT dlock_key(repeat('x', 300));
SELECT dlock_lock('t', '30 days');
SELECT dlock_try('l', lease => '10ms');
SELECT dlock_renew('not-held');

-- renew a lock that has no lease, without giving one
SELECT dlock_try('no-lease');
SELECT dlock_renew('no-lease');
SELECT dlock_renew('no-lease', '-5s');
SELECT dlock_token('no-lease') > 0 AS has_token;
SELECT dlock_unlock('no-lease');
SELECT held();

-- more named locks than dlock.max_locks_per_session (64 here): they work, the
-- extra ones have no name in the view and cannot have a lease
SELECT count(*) FILTER (WHERE dlock_try('many-' || i)) FROM generate_series(1, 64) i;
SELECT dlock_try('many-65');
SELECT try_sql('SELECT dlock_try(''many-66'', lease => ''1 hour'')');
SELECT try_sql('SELECT dlock_renew(''many-65'', ''1 hour'')');
-- taking it again with a lease: the same refusal, and no second hold
SELECT try_sql('SELECT dlock_try(''many-65'', lease => ''1 hour'')');
SELECT dlock_token('many-65') > dlock_token('many-64') AS overflow_has_token;
SELECT count(*) AS named, count(*) FILTER (WHERE name IS NULL) AS unnamed
  FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_unlock('many-65'), dlock_unlock('many-1');
SELECT dlock_unlock('many-65');    -- held once only: false
-- a freed entry can take a lease again
SELECT dlock_try('many-66', lease => '1 hour');
SELECT dlock_unlock_all();
SELECT held();
-- a full slot of holds released behind dlock's back (pg_advisory_unlock_all,
-- DISCARD ALL) is reclaimed: a new name gets an entry, a lease and its name
SELECT count(*) FILTER (WHERE dlock_try('swept-' || i)) FROM generate_series(1, 64) i;
SELECT pg_advisory_unlock_all();
SELECT dlock_try('after-sweep'), dlock_try('after-sweep', lease => '1 hour');
SELECT name, lease_expires IS NOT NULL AS has_lease FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_unlock_all();
SELECT held();
-- one hold of a full slot released behind dlock's back (a raw
-- pg_advisory_unlock): a later new name gets its entry, and its name in the
-- view, once the look at one hold in turn reaches it
SELECT count(*) FILTER (WHERE dlock_try('full-' || i)) FROM generate_series(1, 64) i;
SELECT pg_advisory_unlock(dlock_key('full-7'));
SELECT count(*) FILTER (WHERE dlock_try('late-' || i)) FROM generate_series(1, 64) i;
SELECT count(*) AS named FROM dlock_locks WHERE pid = pg_backend_pid() AND name LIKE 'late-%';
SELECT dlock_unlock_all();
SELECT held();

-- one session may hold at most dlock.max_held_locks names (53400, with a
-- hint); a name it holds already can still be taken again
SET dlock.max_held_locks = 3;
SELECT dlock_try('cap-1'), dlock_try('cap-2'), dlock_try('cap-3', shared => true);
SELECT try_sql($$SELECT dlock_try('cap-4')$$);
SELECT dlock_lock('cap-4', timeout => '1s');
SELECT dlock_try('cap-1'), dlock_unlock('cap-1');
SELECT held();
SELECT dlock_unlock_all();
SET dlock.max_held_locks = -2;
RESET dlock.max_held_locks;

-- a full shared lock table (max_locks_per_transaction), with the session's
-- own limit raised: the lock manager's own error, and every lock taken
-- before it is known to dlock (released here in the same block: while the
-- table is full, even reading pg_locks fails)
SET dlock.max_held_locks = 1000000;
DO $$
DECLARE
  n int := 0;
  released int;
BEGIN
  BEGIN
    LOOP
      PERFORM dlock_try('fill-' || n);
      n := n + 1;
    END LOOP;
  EXCEPTION WHEN out_of_memory THEN
    RAISE NOTICE 'lock table full: % (SQLSTATE %)', SQLERRM, SQLSTATE;
  END;
  released := dlock_unlock_all();
  RAISE NOTICE 'more than 100 taken: %; dlock_unlock_all released all of them: %',
    n > 100, released = n;
END $$;
SELECT held();
-- and locking works again
SELECT dlock_try('after-full'), dlock_unlock('after-full');
RESET dlock.max_held_locks;

DROP FUNCTION try_sql(text);
DROP FUNCTION held();

