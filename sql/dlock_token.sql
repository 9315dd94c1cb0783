-- fencing tokens: every new hold gets a larger token than any hold before it
-- (across restarts too: test/fault.py)
SET client_min_messages = warning;
RESET client_min_messages;

SELECT dlock_try('fence');
SELECT dlock_token('fence') AS t1 \gset
-- re-entering is the same hold: same token
SELECT dlock_try('fence');
SELECT dlock_token('fence') = :t1 AS same;
-- the layout: timeline * 10^13 + a counter of the timeline (this server is
-- on timeline 1, and the counter starts above the timeline's base)
SELECT :t1 / 10000000000000 AS timeline,
       :t1 / 10000000000000 = (SELECT timeline_id FROM pg_control_checkpoint()) AS current_timeline,
       :t1 % 10000000000000 > 0 AS counter_above_base;
-- allowing standby locks changes nothing on a primary
SET dlock.allow_standby_locks = on;
SELECT dlock_try('fence-primary'), dlock_token('fence-primary') > :t1 AS has_token;
SELECT dlock_unlock('fence-primary');
RESET dlock.allow_standby_locks;
SELECT dlock_unlock('fence'), dlock_unlock('fence');
SELECT dlock_token('fence');
-- a new hold: a larger token
SELECT dlock_try('fence');
SELECT dlock_token('fence') > :t1 AS larger;
SELECT dlock_token('fence') AS t2 \gset
SELECT dlock_unlock('fence');

-- strictly increasing across names, modes, scopes, and waits
CREATE TEMP TABLE tokens (i serial, t bigint);
INSERT INTO tokens (t) SELECT CASE WHEN dlock_try('n' || g) THEN dlock_token('n' || g) END FROM generate_series(1, 20) g;
INSERT INTO tokens (t) SELECT CASE WHEN dlock_try('s' || g, true) THEN dlock_token('s' || g) END FROM generate_series(1, 5) g;
INSERT INTO tokens (t) SELECT CASE WHEN dlock_lock('w' || g, '1s') THEN dlock_token('w' || g) END FROM generate_series(1, 5) g;
BEGIN;
INSERT INTO tokens (t) SELECT CASE WHEN dlock_try_xact('x' || g) THEN dlock_token('x' || g) END FROM generate_series(1, 5) g;
COMMIT;
SELECT count(t) AS tokens, bool_and(t > :t2) AS all_after_t2,
       bool_and(t > prev) AS strictly_increasing
  FROM (SELECT t, lag(t) OVER (ORDER BY i) AS prev FROM tokens) s;
SELECT dlock_unlock_all();

-- held shared and exclusive: the exclusive hold's token
SELECT dlock_try('both', true);
SELECT dlock_token('both') AS ts \gset
SELECT dlock_try('both');
SELECT dlock_token('both') > :ts AS exclusive_token;
SELECT dlock_unlock('both');
SELECT dlock_token('both') = :ts AS shared_token;
SELECT dlock_unlock('both', true);

-- the view shows the same token
SELECT dlock_try('shown');
SELECT token = dlock_token('shown') AS same FROM dlock_locks WHERE name = 'shown';
-- a hold dropped behind dlock's back has no token any more
SELECT pg_advisory_unlock_all();
SELECT dlock_token('shown');
