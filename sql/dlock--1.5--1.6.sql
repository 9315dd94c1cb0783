-- dlock 1.5 -> 1.6
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.6'" to load this file. \quit

-- 1.6: new functions only; nothing of 1.5 changes, and every call of 1.5
-- resolves as before (the new functions have names of their own).

-- The positional forms for clients (1.6): dlock_try_ms, dlock_lock_ms, their
-- _xact forms, dlock_acquire_ms, dlock_extend_ms and dlock_renew_ms take
-- every argument by position, durations as bigint milliseconds, and have
-- no DEFAULT arguments and a name of their own.  A driver's statement
-- SELECT dlock_try_ms($1, $2, $3, $4, $5) then resolves among one function
-- with nothing to expand: the full forms' DEFAULT lists and named
-- arguments cost PostgreSQL more to parse than the lock costs to take
-- (README.md "From your language").  A NULL argument is what leaving it out
-- of the full form does: timeout_ms NULL waits without a limit in
-- dlock_lock_ms and does not wait in dlock_acquire_ms, lease_ms NULL takes
-- no lease (dlock_renew_ms: the length it had), info and permits NULL are
-- not given; shared must not be NULL.
CREATE FUNCTION "@extschema@".dlock_try_ms(name pg_catalog.text, shared boolean, lease_ms bigint,
                             info pg_catalog.text, permits bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_ms(name pg_catalog.text, timeout_ms bigint, shared boolean,
                              lease_ms bigint, info pg_catalog.text, permits bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_try_xact_ms(name pg_catalog.text, shared boolean, lease_ms bigint,
                                  info pg_catalog.text, permits bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_xact_ms(name pg_catalog.text, timeout_ms bigint, shared boolean,
                                   lease_ms bigint, info pg_catalog.text, permits bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_acquire_ms(name pg_catalog.text, lease_ms bigint, timeout_ms bigint,
                                 shared boolean, info pg_catalog.text, min_hold_ms bigint,
                                 permits bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_extend_ms(name pg_catalog.text, token bigint, lease_ms bigint,
                                info pg_catalog.text)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_extend_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_renew_ms(name pg_catalog.text, lease_ms bigint, info pg_catalog.text)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_renew_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION "@extschema@".dlock_try_ms(pg_catalog.text, boolean, bigint, pg_catalog.text, bigint) IS
'dlock_try for clients, every argument by position: (name, shared, lease_ms, info, permits); NULL: not given';
COMMENT ON FUNCTION "@extschema@".dlock_lock_ms(pg_catalog.text, bigint, boolean, bigint, pg_catalog.text, bigint) IS
'dlock_lock for clients, every argument by position: (name, timeout_ms, shared, lease_ms, info, permits); timeout_ms NULL: no limit';
COMMENT ON FUNCTION "@extschema@".dlock_try_xact_ms(pg_catalog.text, boolean, bigint, pg_catalog.text, bigint) IS
'dlock_try_xact for clients, every argument by position: (name, shared, lease_ms, info, permits); NULL: not given';
COMMENT ON FUNCTION "@extschema@".dlock_lock_xact_ms(pg_catalog.text, bigint, boolean, bigint, pg_catalog.text, bigint) IS
'dlock_lock_xact for clients, every argument by position: (name, timeout_ms, shared, lease_ms, info, permits); timeout_ms NULL: no limit';
COMMENT ON FUNCTION "@extschema@".dlock_acquire_ms(pg_catalog.text, bigint, bigint, boolean, pg_catalog.text, bigint, bigint) IS
'dlock_acquire for clients, every argument by position: (name, lease_ms, timeout_ms, shared, info, min_hold_ms, permits); timeout_ms NULL: do not wait';
COMMENT ON FUNCTION "@extschema@".dlock_extend_ms(pg_catalog.text, bigint, bigint, pg_catalog.text) IS
'dlock_extend for clients, every argument by position: (name, token, lease_ms, info)';
COMMENT ON FUNCTION "@extschema@".dlock_renew_ms(pg_catalog.text, bigint, pg_catalog.text) IS
'dlock_renew for clients, every argument by position: (name, lease_ms, info); lease_ms NULL: the length it had';

-- Each comes in a short shape too, without info and permits (and
-- min_hold_ms): the one the README's examples send.  A driver's untyped
-- parameter costs the server as much to parse and bind as the lock costs
-- to take, so the shape a client sends most has the fewest.  A name with
-- shapes of different lengths and no defaults still resolves by the count
-- of arguments alone.  And dlock_unlock(name, shared) by position, with the
-- name as text: dlock_unlock($1, $2) resolves to it, not to the full form
-- (whose name is a dlock_name, a domain, dearer to bind).
CREATE FUNCTION "@extschema@".dlock_try_ms(name pg_catalog.text, shared boolean, lease_ms bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_ms(name pg_catalog.text, timeout_ms bigint, shared boolean,
                              lease_ms bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_try_xact_ms(name pg_catalog.text, shared boolean, lease_ms bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_lock_xact_ms(name pg_catalog.text, timeout_ms bigint, shared boolean,
                                   lease_ms bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_acquire_ms(name pg_catalog.text, lease_ms bigint, timeout_ms bigint,
                                 shared boolean)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_extend_ms(name pg_catalog.text, token bigint, lease_ms bigint)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_extend_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_renew_ms(name pg_catalog.text, lease_ms bigint)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'dlock_renew_ms'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION "@extschema@".dlock_unlock(name pg_catalog.text, shared boolean)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_unlock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION "@extschema@".dlock_try_ms(pg_catalog.text, boolean, bigint) IS
'dlock_try for clients, every argument by position: (name, shared, lease_ms); NULL: not given';
COMMENT ON FUNCTION "@extschema@".dlock_lock_ms(pg_catalog.text, bigint, boolean, bigint) IS
'dlock_lock for clients, every argument by position: (name, timeout_ms, shared, lease_ms); timeout_ms NULL: no limit';
COMMENT ON FUNCTION "@extschema@".dlock_try_xact_ms(pg_catalog.text, boolean, bigint) IS
'dlock_try_xact for clients, every argument by position: (name, shared, lease_ms); NULL: not given';
COMMENT ON FUNCTION "@extschema@".dlock_lock_xact_ms(pg_catalog.text, bigint, boolean, bigint) IS
'dlock_lock_xact for clients, every argument by position: (name, timeout_ms, shared, lease_ms); timeout_ms NULL: no limit';
COMMENT ON FUNCTION "@extschema@".dlock_acquire_ms(pg_catalog.text, bigint, bigint, boolean) IS
'dlock_acquire for clients, every argument by position: (name, lease_ms, timeout_ms, shared); timeout_ms NULL: do not wait';
COMMENT ON FUNCTION "@extschema@".dlock_extend_ms(pg_catalog.text, bigint, bigint) IS
'dlock_extend for clients, every argument by position: (name, token, lease_ms)';
COMMENT ON FUNCTION "@extschema@".dlock_renew_ms(pg_catalog.text, bigint) IS
'dlock_renew for clients, every argument by position: (name, lease_ms); lease_ms NULL: the length it had';
COMMENT ON FUNCTION "@extschema@".dlock_unlock(pg_catalog.text, boolean) IS
'release one session hold of a lock; the positional form for clients (the name as text)';
