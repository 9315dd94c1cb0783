-- the dlock_locks view in one session (waiters are in the isolation specs)
SET client_min_messages = warning;
RESET client_min_messages;
SET application_name = 'dlock-view-test';

\d dlock_locks

SELECT clock_timestamp() AS t0 \gset
SELECT dlock_try('report'), dlock_try('cache', shared => true), dlock_try('ünïcødé 日本', lease => '1 hour');
SELECT clock_timestamp() AS t1 \gset
SELECT pg_advisory_lock(77);     -- a plain advisory lock: shown, without a name
SELECT database = current_database() AS this_db, name,
       key = CASE WHEN name IS NULL THEN 77 ELSE dlock_key(name) END AS key_ok, mode, scope,
       granted, pid = pg_backend_pid() AS my_pid, username = current_user AS my_user,
       application_name, client_addr IS NULL AS over_socket,
       CASE WHEN name IS NOT NULL THEN since BETWEEN :'t0' AND :'t1' END AS since_ok,
       lease_expires IS NOT NULL AS has_lease, token > 0 AS has_token, wait_time
  FROM dlock_locks WHERE pid = pg_backend_pid()
 ORDER BY name NULLS LAST;
SELECT key FROM dlock_locks WHERE name IS NULL AND pid = pg_backend_pid();
-- a holder: how long it has held, and nobody it waits for
SELECT name, hold_time >= '0' AND hold_time <= clock_timestamp() - :'t0' AS hold_time_ok, blocked_by
  FROM dlock_locks WHERE pid = pg_backend_pid() AND name IS NOT NULL ORDER BY name;

-- the lease column is the expiry: the time of the grant + lease
SELECT lease_expires BETWEEN :'t0'::timestamptz + interval '1 hour' AND :'t1'::timestamptz + interval '1 hour' AS lease_ok
  FROM dlock_locks WHERE name = 'ünïcødé 日本';

-- since is when the hold began, and stays while it is re-entered
SELECT since AS s1 FROM dlock_locks WHERE name = 'report' \gset
SELECT pg_sleep(0.01);
SELECT dlock_try('report');
SELECT since = :'s1' AS since_kept FROM dlock_locks WHERE name = 'report';
SELECT dlock_unlock('report'), dlock_unlock('report');

-- a name taken only with pg_advisory_lock(dlock_key(...)) has no name: dlock did not take it
SELECT pg_advisory_lock(dlock_key('raw'));
SELECT name, key = dlock_key('raw') AS key_ok FROM dlock_locks WHERE pid = pg_backend_pid() AND key = dlock_key('raw');

-- dlock_names() lists the names the view puts on the lock manager's rows
SELECT name, mode, session_holds, xact_holds, waiting FROM dlock_names() WHERE pid = pg_backend_pid() ORDER BY name;

SELECT pg_advisory_unlock_all();
SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid();

-- a user without any privileges can lock, get tokens and leases, and read the view
CREATE ROLE dlock_plain_user;
SELECT dlock_try('superuser-lock');
SET ROLE dlock_plain_user;
SELECT dlock_try('plain-user-lock', lease => '1 hour'), dlock_token('plain-user-lock') > 0 AS has_token;
SELECT name, username, application_name FROM dlock_locks WHERE name IS NOT NULL ORDER BY name;
SELECT dlock_unlock_all();
RESET ROLE;
SELECT dlock_unlock_all();
DROP ROLE dlock_plain_user;

-- a database whose encoding is not UTF-8: names are hashed as UTF-8 (same key
-- as anywhere else) and shown in the database's encoding
SELECT dlock_key('café') AS cafe_key \gset
\set regress_db :DBNAME
CREATE DATABASE dlock_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
\c dlock_latin1
SET client_encoding = 'UTF8';
SET client_min_messages = warning;
CREATE EXTENSION dlock;
RESET client_min_messages;
SHOW server_encoding;
SELECT dlock_key('café') = :cafe_key AS same_key;
SELECT dlock_try('café');
SELECT name, key = :cafe_key AS same_key, database = current_database() AS this_db FROM dlock_locks WHERE pid = pg_backend_pid();
SELECT dlock_unlock('café');
\c :regress_db
DROP DATABASE dlock_latin1;

-- dlock_summary (1.6): one row per name
SELECT dlock_try('sum-a'), dlock_try('sum-a'), dlock_try('sum-b', shared => true, lease => '1 hour');
SELECT name, holders, waiters, held_modes, longest_hold IS NOT NULL AS has_longest_hold,
       longest_wait, next_lease_end IS NOT NULL AS has_lease_end,
       holder_pids = ARRAY[pg_backend_pid()] AS held_here, first_waiter_pid
  FROM dlock_summary WHERE name LIKE 'sum-%' ORDER BY name;
SELECT dlock_unlock('sum-a'), dlock_unlock('sum-a'), dlock_unlock('sum-b', shared => true);
SELECT count(*) AS left_in_summary FROM dlock_summary WHERE name LIKE 'sum-%';
