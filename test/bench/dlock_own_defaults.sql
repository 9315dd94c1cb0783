-- pgbench script: dlock_own.sql through the full forms of the functions
-- (the name cast to dlock_name), leaving their DEFAULT arguments out, so that
-- PostgreSQL expands the defaults on every statement: what the one-argument
-- forms save.
SELECT dlock_try('bench-:client_id'::dlock_name);
SELECT dlock_unlock('bench-:client_id'::dlock_name);
