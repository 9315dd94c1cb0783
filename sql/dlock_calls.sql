-- how calls resolve: each lock function has a one-argument form (name text)
-- and a full form (name dlock_name, with DEFAULT arguments).  A call with only
-- a name must reach the one-argument form, so that PostgreSQL does not expand
-- DEFAULT arguments on every statement (EXPLAIN VERBOSE shows them when it
-- does); every other way of calling must reach the full form, never fail as
-- ambiguous.
SET client_min_messages = warning;
RESET client_min_messages;

-- only a name: the one-argument form, no defaults in the plan
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_try('a'), dlock_try_xact('a');
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_lock('a'), dlock_lock_xact('a'), dlock_unlock('a');
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_try(name => 'a');
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_try(n) FROM (VALUES ('a'::text)) v(n);
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_try(n) FROM (VALUES ('a'::varchar)) v(n);
PREPARE p_unknown AS SELECT dlock_try($1);
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE p_unknown('a');
PREPARE p_varchar(varchar) AS SELECT dlock_try($1);
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE p_varchar('a');

-- more than a name: the full form, defaults filled in (but dlock_unlock
-- with a name and shared: its positional form, dlock_unlock(text, boolean),
-- since 1.6)
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_try('a', true), dlock_try('a', lease => '1 min');
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_try_xact('a', shared => true), dlock_unlock('a', true);
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_lock('a', '1s');
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_lock_xact('a', lease => '1 min', timeout => '2s');
EXPLAIN (VERBOSE, COSTS OFF) SELECT dlock_try('a'::dlock_name);

-- and both forms do the same thing
SELECT dlock_try('r1'), dlock_try('r1'::dlock_name), dlock_try('r1', false);
SELECT dlock_unlock('r1'), dlock_unlock('r1'::dlock_name), dlock_unlock('r1', false);
SELECT dlock_unlock('r1');
SELECT dlock_lock('r2'), dlock_lock('r2', NULL), dlock_lock(name => 'r2', shared => true);
SELECT dlock_unlock_all();
BEGIN;
SELECT dlock_try_xact('r3'), dlock_lock_xact('r3'), dlock_try_xact('r3', true);
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
COMMIT;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();

-- a NULL name is an error in either form
SELECT dlock_try(NULL);
SELECT dlock_try(NULL, false);
SELECT dlock_unlock(NULL::text);
