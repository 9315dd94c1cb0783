-- pgbench script: every client tries the same named lock and releases it
-- only if it got it (one statement, so that a miss does not warn on unlock).
SELECT dlock_try('bench') AND dlock_unlock('bench');
