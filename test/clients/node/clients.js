'use strict';
// dlock from Node with node-postgres (pg), used with its defaults.
// Between the README markers: the snippet README.md shows under "From your language".
// After it: a test of the snippet against a running server (PGHOST, PGPORT, PGUSER,
// PGDATABASE). Prints one "ok - Node: ..." / "not ok - Node: ..." line per check.

// README begin
const { createHash } = require('node:crypto');

// The key of a name, as dlock_key(name): the first 8 bytes of the SHA-256 of its UTF-8
// bytes, little-endian, signed. A BigInt: a Number cannot hold 64 bits.
function dlockKey(name) {
  return createHash('sha256').update(name, 'utf8').digest().readBigInt64LE(0);
}

// Durations are milliseconds, sent by name as lease_ms/timeout_ms (bigint). pg sends a
// parameter as untyped text: a Number bound to lease/timeout (interval) means SECONDS,
// silently; and bigint refuses a fraction ("1500.5": 22P02), so round up.
const ms = (d) => (d == null ? null : Math.ceil(Number(d)));

// Session locks belong to a connection: pass a pg.Client or a client from
// pool.connect(), never the pool itself (pool.query may pick another connection each time).
// Held until unlock() or the connection's end, whatever its transactions do.
// Boolean results come back as JS booleans; `shared` must not be null (22004).
async function tryLock(conn, name, shared = false, leaseMs = null) {
  const { rows } = await conn.query(
    'SELECT dlock_try($1, shared => $2, lease_ms => $3) AS ok', [name, !!shared, ms(leaseMs)]);
  return rows[0].ok;
}

// Waits in the queue up to timeoutMs (null: no limit); false at the deadline.
async function lock(conn, name, timeoutMs, shared = false, leaseMs = null) {
  const { rows } = await conn.query(
    'SELECT dlock_lock($1, timeout_ms => $2, shared => $3, lease_ms => $4) AS ok',
    [name, ms(timeoutMs), !!shared, ms(leaseMs)]);
  return rows[0].ok;
}

async function unlock(conn, name, shared = false) {
  const { rows } = await conn.query(
    'SELECT dlock_unlock($1, shared => $2) AS ok', [name, !!shared]);
  return rows[0].ok;
}

// Detached lock: held by the server for its token, not by this connection, so any
// connection (a pool, pool.query, a new client) can extend or release it.
// int8 comes back as a string: the token is a BigInt (~10^13 and more: keep it exact),
// or null when not acquired within timeoutMs.
async function acquire(conn, name, leaseMs, timeoutMs = 0) {
  const { rows } = await conn.query(
    'SELECT dlock_acquire($1, lease_ms => $2, timeout_ms => $3) AS token',
    [name, ms(leaseMs), ms(timeoutMs)]);
  return rows[0].token === null ? null : BigInt(rows[0].token);
}

// Returns the new expiry as a Date (milliseconds; the server keeps microseconds).
async function extend(conn, name, token, leaseMs) {
  const { rows } = await conn.query(
    'SELECT dlock_extend($1, $2, lease_ms => $3) AS expires', [name, token, ms(leaseMs)]);
  return rows[0].expires;
}

// false (and a server WARNING) if it is not held with that token any more.
async function release(conn, name, token) {
  const { rows } = await conn.query('SELECT dlock_release($1, $2) AS ok', [name, token]);
  return rows[0].ok;
}

// A transaction lock, released by COMMIT or ROLLBACK. pg has no transaction helper:
// BEGIN ... COMMIT on one client (a pg.Client or from pool.connect(), not pool.query).
async function inTransactionLock(client, name, timeoutMs, work) {
  await client.query('BEGIN');
  try {
    const { rows } = await client.query(
      'SELECT dlock_lock_xact($1, timeout_ms => $2) AS ok', [name, ms(timeoutMs)]);
    if (!rows[0].ok) {
      await client.query('ROLLBACK');
      return false;
    }
    await work(client);
    await client.query('COMMIT');
    return true;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

// With a pg.Pool: a session lock taken on one pooled connection and unlocked through the
// pool (pool.query) on another stays held, and the next user of that connection inherits
// it. So check out ONE client, lock, work and unlock on it; or use inTransactionLock on a
// checked-out client, or a detached lock (its token releases it from any connection).
async function withLock(pool, name, timeoutMs, work) {
  const client = await pool.connect();
  let locked = false;
  let clean = false;
  try {
    locked = await lock(client, name, timeoutMs);
    if (!locked) {
      clean = true;
      return false;
    }
    await work(client);
    return true;
  } finally {
    if (locked) clean = await unlock(client, name).catch(() => false);
    // A connection that may still hold the lock must not go back to the pool:
    // release(true) closes it, and the server releases its locks with the session.
    client.release(!clean);
  }
}
// README end

// ---------------------------------------------------------------------------------------
// The test.

const pg = require('pg');

const config = {
  host: process.env.PGHOST || '127.0.0.1',
  port: Number(process.env.PGPORT || 5432),
  user: process.env.PGUSER || 'postgres',
  database: process.env.PGDATABASE || 'postgres',
  application_name: 'dlock-client-node',
};

const NAMES = {
  contention: 'c-Node',
  lease: 'lease-Node',
  shared: 's-Node',
  detached: 'd-Node',
  xact: 'x-Node',
  pool: 'p-Node',
  poolDetached: 'pd-Node',
};
const ALL_NAMES = Object.values(NAMES);

let failures = 0;

class CheckFailed extends Error {}

function expect(cond, detail) {
  if (!cond) throw new CheckFailed(detail);
}

function show(v) {
  if (typeof v === 'bigint') return `${v}n`;
  if (v instanceof Date) return v.toISOString();
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}

function describe(err) {
  if (err instanceof CheckFailed) return err.message;
  const code = err && err.code ? ` (${err.code})` : '';
  return `unexpected exception: ${err && err.message ? err.message : String(err)}${code}`;
}

async function check(what, fn) {
  try {
    await fn();
    console.log(`ok - Node: ${what}`);
  } catch (err) {
    failures++;
    console.log(`not ok - Node: ${what}: ${describe(err).replace(/\s*\n\s*/g, ' ')}`);
  }
}

const opened = []; // every client, closed at the end

async function connect() {
  const client = new pg.Client(config);
  opened.push(client);
  client.on('error', (err) => {
    failures++;
    console.log(`not ok - Node: connection error: ${describe(err)}`);
  });
  await client.connect();
  return client;
}

async function scalar(conn, sql, params = []) {
  const { rows } = await conn.query(sql, params);
  return rows.length ? Object.values(rows[0])[0] : undefined;
}

async function main() {
  const A = await connect();
  const B = await connect();
  const C = await connect();

  // A run that died earlier may have left its detached locks (their leases end them).
  await A.query(
    `SELECT dlock_release(name, token) FROM dlock_locks
      WHERE scope = 'detached' AND granted AND name = ANY($1::text[])`, [ALL_NAMES]);

  await check('dlockKey equals dlock_key()', async () => {
    for (const name of ['nightly-report', 'задача-42', 'k'.repeat(200)]) {
      const key = dlockKey(name);
      const server = await scalar(A, 'SELECT dlock_key($1)::text', [name]);
      expect(typeof key === 'bigint', `dlockKey(${name.slice(0, 20)}) is a ${typeof key}`);
      expect(key.toString() === server,
        `dlockKey(${name.slice(0, 20)}) = ${key}, dlock_key() = ${server}`);
    }
    expect(dlockKey('nightly-report') === -8663603374018903193n, 'README key of nightly-report');
  });

  await check('contention between two connections, lock timeout', async () => {
    const n = NAMES.contention;
    let r = await tryLock(A, n, false, 30000);
    expect(r === true, `tryLock(A) returned ${show(r)}`);
    r = await tryLock(B, n, false, 30000);
    expect(r === false, `tryLock(B) returned ${show(r)}`);
    const t0 = process.hrtime.bigint();
    r = await lock(B, n, 200);
    const took = Number(process.hrtime.bigint() - t0) / 1e6;
    expect(r === false, `lock(B, 200 ms) returned ${show(r)}`);
    expect(took >= 150, `lock(B, 200 ms) returned after ${took.toFixed(1)} ms`);
    r = await unlock(A, n);
    expect(r === true, `unlock(A) returned ${show(r)}`);
    r = await lock(B, n, 5000);
    expect(r === true, `lock(B, 5 s) after unlock(A) returned ${show(r)}`);
    r = await unlock(B, n);
    expect(r === true, `unlock(B) returned ${show(r)}`);
  });

  await check('lease of 30 s shows in dlock_locks', async () => {
    const n = NAMES.lease;
    const r = await tryLock(A, n, false, 30000);
    expect(r === true, `tryLock(A, lease 30 s) returned ${show(r)}`);
    try {
      const secs = await scalar(A,
        'SELECT extract(epoch FROM lease_expires - since)::text FROM dlock_locks WHERE name = $1 AND granted',
        [n]);
      expect(secs !== undefined && secs !== null, `no lease in dlock_locks: ${show(secs)}`);
      const s = parseFloat(secs);
      expect(s >= 29 && s <= 31, `lease_expires - since = ${secs} s`);
    } finally {
      const u = await unlock(A, n);
      expect(u === true, `unlock(A) returned ${show(u)}`);
    }
  });

  await check('shared locks with true/false', async () => {
    const n = NAMES.shared;
    let r = await tryLock(A, n, true, null);
    expect(r === true, `tryLock(A, shared true) returned ${show(r)}`);
    r = await tryLock(B, n, true);
    expect(r === true, `tryLock(B, shared true) returned ${show(r)}`);
    r = await tryLock(C, n, false);
    expect(r === false, `tryLock(C, shared false) returned ${show(r)}`);
    r = await unlock(A, n, true);
    expect(r === true, `unlock(A, shared) returned ${show(r)}`);
    r = await unlock(B, n, true);
    expect(r === true, `unlock(B, shared) returned ${show(r)}`);
  });

  await check('detached lock: BigInt token, null, extend, release from another connection', async () => {
    const n = NAMES.detached;
    const token = await acquire(A, n, 60000, 0);
    expect(typeof token === 'bigint', `token ${show(token)} is a ${typeof token}, not a bigint`);
    expect(token > 10n ** 13n, `token ${token} is not > 10^13`);
    const viewToken = await scalar(A,
      "SELECT token::text FROM dlock_locks WHERE name = $1 AND scope = 'detached'", [n]);
    expect(viewToken === token.toString(), `token ${token}, the view says ${show(viewToken)}`);
    let t = await acquire(B, n, 1000, 0);
    expect(t === null, `acquire(B, timeout 0) returned ${show(t)}`);
    const t0 = process.hrtime.bigint();
    t = await acquire(B, n, 1000, 300);
    const took = Number(process.hrtime.bigint() - t0) / 1e6;
    expect(t === null, `acquire(B, timeout 300 ms) returned ${show(t)}`);
    expect(took >= 250, `acquire(B, timeout 300 ms) returned after ${took.toFixed(1)} ms`);
    const expires = await extend(B, n, token, 120000);
    expect(expires instanceof Date, `extend returned ${show(expires)}, not a Date`);
    const ahead = (expires.getTime() - Date.now()) / 1000;
    expect(ahead > 100, `extend(120 s) expires ${ahead.toFixed(1)} s from now`);
    let r = await release(B, n, token);
    expect(r === true, `release(B) returned ${show(r)}`);
    r = await release(B, n, token);
    expect(r === false, `second release(B) returned ${show(r)}`);
  });

  await check('transaction lock with BEGIN/COMMIT', async () => {
    const n = NAMES.xact;
    let seenFromB;
    const r = await inTransactionLock(A, n, 1000, async (tx) => {
      seenFromB = await tryLock(B, n);
      await tx.query('SELECT 1');
    });
    expect(r === true, `inTransactionLock returned ${show(r)}`);
    expect(seenFromB === false, `tryLock(B) inside the transaction returned ${show(seenFromB)}`);
    const after = await tryLock(B, n);
    expect(after === true, `tryLock(B) after COMMIT returned ${show(after)}`);
    const u = await unlock(B, n);
    expect(u === true, `unlock(B) returned ${show(u)}`);
  });

  await check('pool: withLock pins one connection; detached lock through the pool', async () => {
    const pool = new pg.Pool({ ...config, max: 2 });
    pool.on('error', (err) => {
      failures++;
      console.log(`not ok - Node: idle pool connection error: ${describe(err)}`);
    });
    const held = (name) => scalar(A,
      'SELECT count(*)::int FROM dlock_locks WHERE name = $1 AND granted', [name]);
    try {
      let inside;
      const r = await withLock(pool, NAMES.pool, 1000, async () => {
        inside = await held(NAMES.pool);
      });
      expect(r === true, `withLock returned ${show(r)}`);
      expect(inside === 1, `held ${show(inside)} times inside withLock`);
      const afterwards = await held(NAMES.pool);
      expect(afterwards === 0, `held ${afterwards} times after withLock`);
      const token = await acquire(pool, NAMES.poolDetached, 60000);
      expect(typeof token === 'bigint', `acquire(pool) returned ${show(token)}`);
      const rel = await release(pool, NAMES.poolDetached, token);
      expect(rel === true, `release(pool) returned ${show(rel)}`);
    } finally {
      await pool.end();
    }
  });

  await check('nothing left in dlock_locks', async () => {
    const { rows } = await A.query(
      'SELECT name, scope, pid FROM dlock_locks WHERE name = ANY($1::text[])', [ALL_NAMES]);
    expect(rows.length === 0,
      `left: ${rows.map((r) => `${r.name} (${r.scope}, pid ${r.pid})`).join(', ')}`);
  });

  // Leave nothing behind for the next run, whatever failed above.
  await A.query(
    `SELECT dlock_release(name, token) FROM dlock_locks
      WHERE scope = 'detached' AND granted AND name = ANY($1::text[])`, [ALL_NAMES]);
}

(async () => {
  let reachedEnd = false;
  try {
    await main();
    reachedEnd = true;
  } catch (err) {
    failures++;
    console.log(`not ok - Node: run: ${describe(err).replace(/\s*\n\s*/g, ' ')}`);
  } finally {
    await Promise.allSettled(opened.map((client) => client.end()));
  }
  if (reachedEnd) console.log('# all Node client tests ran');
  process.exitCode = failures ? 1 : 0;
})();
