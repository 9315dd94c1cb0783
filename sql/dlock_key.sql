-- dlock_key(name): first 8 bytes of SHA-256(UTF-8 name), little-endian, as bigint
SET client_min_messages = warning;
RESET client_min_messages;

-- the recipe, written in SQL with the server's own sha256(): any client can do this
CREATE FUNCTION ref_key(name text) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT ('x' || string_agg(lpad(to_hex(get_byte(d, i)), 2, '0'), '' ORDER BY i DESC))::bit(64)::bigint
    FROM (SELECT sha256(convert_to(name, 'UTF8')) AS d) s, generate_series(0, 7) i
$$;

-- the documented test vectors (doc/functions.md)
SELECT n, dlock_key(n) FROM (VALUES ('abc'), ('nightly-report'), ('a'), ('ünïcødé 日本')) v(n);

-- every length across the SHA-256 padding boundaries, up to the 255-byte limit
SELECT count(*) AS lengths, count(*) FILTER (WHERE dlock_key(n) = ref_key(n)) AS matching
  FROM (SELECT repeat('x', len) AS n FROM generate_series(1, 255) len) s;
SELECT count(*) FILTER (WHERE dlock_key(n) = ref_key(n)) AS matching_multibyte
  FROM (SELECT repeat('日', len) AS n FROM generate_series(1, 85) len) s;

-- the key is the key of an ordinary bigint advisory lock
SELECT dlock_try('interop');
SELECT count(*) FROM pg_locks
 WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 1
   AND (classid::bigint << 32 | objid::bigint) = dlock_key('interop');
SELECT pg_try_advisory_lock(dlock_key('interop'));  -- same lock, so re-entrant
SELECT pg_advisory_unlock(dlock_key('interop'));
SELECT dlock_unlock('interop');
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();

-- names: not null, not empty, at most 255 bytes in UTF-8 (characters may take more than one)
SELECT dlock_key(NULL);
SELECT dlock_key('');
SELECT dlock_key(repeat('x', 255)) = ref_key(repeat('x', 255));
SELECT dlock_key(repeat('x', 256));
SELECT dlock_key(repeat('é', 127)) = ref_key(repeat('é', 127));  -- 254 bytes
SELECT dlock_key(repeat('é', 128));                              -- 256 bytes
SELECT dlock_key(repeat('x', 100000));
-- names are bytes: no case folding, no trimming, no Unicode normalisation
SELECT dlock_key('Job') <> dlock_key('job') AS case_matters,
       dlock_key('job ') <> dlock_key('job') AS space_matters,
       dlock_key(U&'\00E9') <> dlock_key(U&'e\0301') AS normalisation_matters;

DROP FUNCTION ref_key(text);
