-- pgbench script: dlock_contended.sql with one built-in advisory lock.
SELECT pg_try_advisory_lock(42) AND pg_advisory_unlock(42);
