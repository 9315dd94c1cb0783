-- dlock 1.1 -> 1.2
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.2'" to load this file. \quit

-- 1.2: fencing tokens carry the timeline, so they stay ordered across
-- promotions and point-in-time recoveries; lock functions refuse on a hot
-- standby unless dlock.allow_standby_locks is on (both in the library).
-- The only SQL change says what a token is.
COMMENT ON FUNCTION dlock_token(pg_catalog.text) IS
'the fencing token of this session''s hold of a name: timeline * 10^13 + a counter of that timeline; compare tokens as bigint, larger is later';
