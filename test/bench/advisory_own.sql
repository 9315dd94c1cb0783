-- pgbench script: dlock_own.sql with a built-in advisory lock on the
-- client's number.
SELECT pg_try_advisory_lock(:client_id);
SELECT pg_advisory_unlock(:client_id);
