-- dlock 1.4 -> 1.5
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.5'" to load this file. \quit

-- 1.5: every duration can also be given in milliseconds, as a bigint named
-- timeout_ms or lease_ms, for drivers that cannot send an interval (pgjdbc
-- sends a Java String as varchar, which does not cast to interval
-- implicitly) and for clients where a bare number is the natural way to
-- say a duration (a number bound to an interval argument means seconds).
-- README.md "From your language".
--
-- The new arguments come last, with DEFAULT NULL, on the full forms only:
-- no new overload, so every existing call resolves as before (a new
-- overload with the same leading arguments would make a positional call
-- with an unknown-typed literal, dlock_lock('job', '5s'), ambiguous).  The
-- one-argument forms are unchanged.  Adding arguments needs DROP and
-- CREATE; a view or a SQL-standard function body of yours that calls one of
-- these full forms would have to be dropped first (the update says so).

DROP FUNCTION dlock_try(dlock_name, boolean, interval);
CREATE FUNCTION dlock_try(name dlock_name, shared boolean DEFAULT false, lease interval DEFAULT NULL,
                          lease_ms bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

DROP FUNCTION dlock_lock(dlock_name, interval, boolean, interval);
CREATE FUNCTION dlock_lock(name dlock_name, timeout interval DEFAULT NULL,
                           shared boolean DEFAULT false, lease interval DEFAULT NULL,
                           timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

DROP FUNCTION dlock_try_xact(dlock_name, boolean, interval);
CREATE FUNCTION dlock_try_xact(name dlock_name, shared boolean DEFAULT false, lease interval DEFAULT NULL,
                               lease_ms bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_try_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

DROP FUNCTION dlock_lock_xact(dlock_name, interval, boolean, interval);
CREATE FUNCTION dlock_lock_xact(name dlock_name, timeout interval DEFAULT NULL,
                                shared boolean DEFAULT false, lease interval DEFAULT NULL,
                                timeout_ms bigint DEFAULT NULL, lease_ms bigint DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dlock_lock_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

DROP FUNCTION dlock_renew(text, interval);
CREATE FUNCTION dlock_renew(name text, lease interval DEFAULT NULL, lease_ms bigint DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dlock_renew'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The lease of the full form gets a DEFAULT too, so that it can be given as
-- lease_ms alone; a call with neither is refused by the function, with a
-- hint.  The two-argument form, dlock_acquire('job', '30s'), is unchanged.
DROP FUNCTION dlock_acquire(dlock_name, interval, interval, boolean);
CREATE FUNCTION dlock_acquire(name dlock_name, lease interval DEFAULT NULL, timeout interval DEFAULT '0',
                              shared boolean DEFAULT false,
                              lease_ms bigint DEFAULT NULL, timeout_ms bigint DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

DROP FUNCTION dlock_extend(text, bigint, interval);
CREATE FUNCTION dlock_extend(name text, token bigint, lease interval DEFAULT NULL, lease_ms bigint DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'dlock_extend'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION dlock_acquire(dlock_name, interval, interval, boolean, bigint, bigint) IS
'acquire a detached lock, waiting up to timeout (NULL: no limit); returns its fencing token, or NULL if not acquired in time; lease_ms and timeout_ms: the same in milliseconds';
COMMENT ON FUNCTION dlock_extend(text, bigint, interval, bigint) IS
'give the detached lock held with this token a new lease, counted from now (lease, or lease_ms in milliseconds); returns when it ends';
