-- dlock_force_release (1.6): an operator's override for detached locks, and
-- the columns of dlock_locks that show what the on-call engineer needs
\set VERBOSITY terse
CREATE ROLE dlock_force_job;
CREATE ROLE dlock_force_oncall;
GRANT SELECT ON dlock_stats TO dlock_force_oncall;

-- nobody's by default: not PUBLIC's, so no role may call it until granted
SELECT has_function_privilege('dlock_force_job', 'dlock_force_release(text, bigint)', 'EXECUTE') AS job_may,
       has_function_privilege('dlock_force_oncall', 'dlock_force_release(text, bigint)', 'EXECUTE') AS oncall_may;

-- a job's lock released early, kept for its minimum hold: its row says so
SET ROLE dlock_force_job;
SELECT dlock_acquire('force-nightly', '10 min', min_hold => '1 hour') AS t \gset
SELECT dlock_release('force-nightly', :t) AS released;
SELECT granted, min_hold_until > now() + interval '59 min' AS in_min_hold, released,
       session_state IS NULL AS no_session
  FROM dlock_locks WHERE name = 'force-nightly';
-- its own role cannot end it (the minimum hold is the point), nor force it
SELECT dlock_force_release('force-nightly', :t);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- the role the DBA grants it to: ends it now, by the token in the view
GRANT EXECUTE ON FUNCTION dlock_force_release(text, bigint) TO dlock_force_oncall;
SET ROLE dlock_force_oncall;
SELECT dlock_force_release(name, token) FROM dlock_locks
 WHERE name = 'force-nightly' AND scope = 'detached' AND granted;
SELECT count(*) FROM dlock_locks WHERE name = 'force-nightly';
-- free at once: another acquisition gets it
SELECT dlock_acquire('force-nightly', '1 min') AS t2 \gset
SELECT :t2 > :t AS newer_token;
-- the old token holds nothing now: false, with the warning of dlock_release
SET client_min_messages = error;
SELECT dlock_force_release('force-nightly', :t) AS again;
RESET client_min_messages;
SELECT dlock_release('force-nightly', :t2) AS released;
RESET ROLE;

-- another role's lock in its lease, no minimum hold: ended too; and counted
SET ROLE dlock_force_job;
SELECT dlock_acquire('force-other', '10 min') AS t3 \gset
RESET ROLE;
SET ROLE dlock_force_oncall;
SELECT dlock_force_release('force-other', :t3) AS forced;
SELECT name, released, force_released FROM dlock_stats
 WHERE name IN ('force-nightly', 'force-other') ORDER BY name;
RESET ROLE;

-- a superuser may, without a grant; a NULL ends nothing and answers NULL
-- (STRICT, as pg_terminate_backend: a waiter's row in the view has no token)
SELECT dlock_acquire('force-su', '1 min', min_hold => '1 hour') AS t4 \gset
SELECT dlock_force_release('force-su', NULL) IS NULL AS null_token,
       dlock_force_release(NULL, :t4) IS NULL AS null_name;
SELECT count(*) AS still_held FROM dlock_locks WHERE name = 'force-su';
SELECT dlock_force_release('force-su', :t4) AS forced;

-- granted to PUBLIC, it refuses to run: every role could end every role's
-- detached locks
GRANT EXECUTE ON FUNCTION dlock_force_release(text, bigint) TO PUBLIC;
\set VERBOSITY default
SELECT dlock_force_release('force-su', :t4);
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
REVOKE EXECUTE ON FUNCTION dlock_force_release(text, bigint) FROM PUBLIC;

-- a semaphore's N, for a holder in a session and for a detached one; the
-- holder's session state; one row per name in dlock_summary
SELECT dlock_try('force-sem', permits => 3);
SELECT dlock_acquire('force-sem', '1 min', permits => 3) AS t5 \gset
SELECT scope, permit, permits, session_state FROM dlock_locks
 WHERE name = 'force-sem' ORDER BY permit;
SELECT holders, waiters, permits FROM dlock_summary WHERE name = 'force-sem';
SELECT dlock_unlock('force-sem'), dlock_release('force-sem', :t5);
SELECT dlock_try('force-plain');
SELECT permits, session_state FROM dlock_locks WHERE name = 'force-plain';
SELECT dlock_unlock('force-plain');

REVOKE ALL ON FUNCTION dlock_force_release(text, bigint) FROM dlock_force_oncall;
REVOKE ALL ON dlock_stats FROM dlock_force_oncall;
DROP ROLE dlock_force_job;
DROP ROLE dlock_force_oncall;
