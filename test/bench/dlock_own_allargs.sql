-- pgbench script: dlock_own.sql through the full forms of the functions with
-- every argument given (no DEFAULT arguments left to expand).
SELECT dlock_try('bench-:client_id', false, NULL);
SELECT dlock_unlock('bench-:client_id', false);
