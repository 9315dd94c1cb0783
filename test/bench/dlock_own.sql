-- pgbench script: each client takes and releases its own named lock, the
-- name a literal ('bench-0', 'bench-1', ...) as a client library sends it.
-- pgbench substitutes its client_id variable even inside the quotes (simple
-- query mode).  Building the name in SQL with 'bench-' || client_id would
-- mostly measure PostgreSQL inlining the text || integer operator.
SELECT dlock_try('bench-:client_id');
SELECT dlock_unlock('bench-:client_id');
