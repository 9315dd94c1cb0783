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

// Durations are milliseconds, sent as lease_ms/timeout_ms of the _ms forms, rounded up as dlock
// rounds an interval (0.2 is 1, not 0, which means "do not wait"). null stays null (SQL
// NULL: the argument is not given).
const ms = (d) => (d == null ? null : Math.ceil(Number(d)));

// Session locks belong to a connection: pass a pg.Client or a client from
// pool.connect(), never the pool itself. Held until unlock() or the connection's end,
// whatever its transactions do. `shared` must not be null (22004).
async function tryLock(conn, name, shared = false, leaseMs = null) {
  const { rows } = await conn.query(
    'SELECT dlock_try_ms($1, $2, $3) AS ok', [name, !!shared, ms(leaseMs)]);
  return rows[0].ok;
}

// Waits in the queue up to timeoutMs (0: try once; null or omitted: without limit);
// false at the deadline.
async function lock(conn, name, timeoutMs, shared = false, leaseMs = null) {
  const { rows } = await conn.query(
    'SELECT dlock_lock_ms($1, $2, $3, $4) AS ok',
    [name, ms(timeoutMs), !!shared, ms(leaseMs)]);
  return rows[0].ok;
}

// false (and a server WARNING) if this connection does not hold it.
async function unlock(conn, name, shared = false) {
  const { rows } = await conn.query(
    'SELECT dlock_unlock($1, $2) AS ok', [name, !!shared]);
  return rows[0].ok;
}

// Detached lock: held by the server for its token, not by this connection, so any
// connection (a pool, pool.query, a new client) can extend or release it. Returns the
// token (a BigInt), or null if not acquired within timeoutMs, which is how long to wait:
// 0 or null tries once (unlike lock, there is no "without limit" here).
async function acquire(conn, name, leaseMs, timeoutMs = 0) {
  const { rows } = await conn.query(
    'SELECT dlock_acquire_ms($1, $2, $3, false) AS token',
    [name, ms(leaseMs), ms(timeoutMs)]);
  return rows[0].token === null ? null : BigInt(rows[0].token);
}

// Returns the new expiry as a Date (milliseconds; the server keeps microseconds).
async function extend(conn, name, token, leaseMs) {
  const { rows } = await conn.query(
    'SELECT dlock_extend_ms($1, $2, $3) AS expires', [name, token, ms(leaseMs)]);
  return rows[0].expires;
}

// false (and a server WARNING) if it is not held with that token any more.
async function release(conn, name, token) {
  const { rows } = await conn.query('SELECT dlock_release($1, $2) AS ok', [name, token]);
  return rows[0].ok;
}

// A transaction lock, released by COMMIT or ROLLBACK; timeoutMs as in lock. pg has no
// transaction helper: BEGIN ... COMMIT on one client (a pg.Client or from pool.connect()).
async function inTransactionLock(client, name, timeoutMs, work) {
  await client.query('BEGIN');
  try {
    const { rows } = await client.query(
      'SELECT dlock_lock_xact_ms($1, $2, false, NULL) AS ok', [name, ms(timeoutMs)]);
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

// With a pg.Pool: check out ONE client, lock, work and unlock on it. false if the lock
// was not taken within timeoutMs (as in lock); work's error propagates. A transaction
// that work left open is rolled back first; if the unlock then fails, the client is
// destroyed, not given back to the pool holding the lock (its session's end frees it).
async function withLock(pool, name, timeoutMs, work) {
  const client = await pool.connect();
  let locked = false;
  let clean = false;
  try {
    locked = await lock(client, name, timeoutMs);
    clean = !locked;
    if (!locked) return false;
    await work(client);
    return true;
  } finally {
    if (locked) {
      // In a transaction, maybe a failed one? (getTransactionStatus: pg 8.21 and later;
      // without it, always ROLLBACK: outside a transaction, that is only a WARNING.)
      if (client.getTransactionStatus?.() !== 'I') {
        await client.query('ROLLBACK').catch(() => {});
      }
      clean = await unlock(client, name).catch(() => false);
    }
    client.release(!clean); // true: destroy the connection
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
  noLimit: 'n-Node',
  seconds: 'sec-Node',
  wrongWay: 'w-Node',
  poolError: 'pe-Node',
  poolTx: 'pt-Node',
  poolUnlock: 'pu-Node',
  lost: 'lost-Node',
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

  await check('ms rounds up: 0.2 -> 1, 1500.5 -> 1501, 0 -> 0, null/undefined -> null', async () => {
    const got = [ms(0.2), ms(1500.5), ms(0), ms(null), ms(undefined)];
    expect(got[0] === 1 && got[1] === 1501 && got[2] === 0 && got[3] === null && got[4] === null,
      `got ${got.map(show).join(', ')}`);
  });

  await check('lock with a null timeout waits without limit', async () => {
    const n = NAMES.noLimit;
    expect(await tryLock(A, n) === true, 'tryLock(A) did not take it');
    const later = new Promise((resolve) => setTimeout(resolve, 300)).then(() => unlock(A, n));
    const t0 = process.hrtime.bigint();
    const r = await lock(B, n, null);
    const took = Number(process.hrtime.bigint() - t0) / 1e6;
    const u = await later;
    expect(u === true, `unlock(A) returned ${show(u)}`);
    expect(r === true, `lock(B, null) returned ${show(r)}`);
    expect(took >= 250, `lock(B, null) returned after ${took.toFixed(1)} ms, before the unlock`);
    const u2 = await unlock(B, n);
    expect(u2 === true, `unlock(B) returned ${show(u2)}`);
  });

  await check('pitfall: a Number bound to an interval means seconds (200 -> 00:03:20; lease => 30000 is 30000 s)', async () => {
    const iv = await scalar(A, 'SELECT $1::interval::text', [200]);
    expect(iv === '00:03:20', `SELECT $1::interval with 200 = ${show(iv)}`);
    const n = NAMES.seconds;
    const r = await scalar(A, 'SELECT dlock_try($1, lease => $2)', [n, 30000]);
    expect(r === true, `dlock_try(lease => 30000) returned ${show(r)}`);
    const secs = await scalar(A,
      'SELECT extract(epoch FROM lease_expires - since)::int FROM dlock_locks WHERE name = $1', [n]);
    const u = await unlock(A, n);
    expect(u === true, `unlock(A) returned ${show(u)}`);
    expect(secs === 30000, `lease => 30000 gave a lease of ${show(secs)} s`);
  });

  await check('pitfall: lease_ms with a fraction (1500.5) is 22P02', async () => {
    let code;
    try {
      await A.query('SELECT dlock_try($1, lease_ms => $2)', [NAMES.seconds, 1500.5]);
    } catch (err) {
      code = err.code;
    }
    expect(code === '22P02', `lease_ms => 1500.5 gave ${show(code)}`);
  });

  await check('pitfall: bigint comes back as a string, a BigInt parameter goes out exactly, boolean as a boolean', async () => {
    const big = 2n ** 53n + 1n;
    const { rows } = await A.query('SELECT $1::bigint AS v, $1::bigint::text AS t, true AS b', [big]);
    expect(typeof rows[0].v === 'string', `bigint came back as a ${typeof rows[0].v}`);
    expect(rows[0].t === '9007199254740993' && BigInt(rows[0].v) === big,
      `2^53+1 came back as ${show(rows[0].v)} (${show(rows[0].t)})`);
    expect(rows[0].b === true, `true came back as ${show(rows[0].b)}`);
  });

  await check('pitfall: JSON.stringify throws on a BigInt (TypeError); toString() and BigInt() round-trip', async () => {
    const token = 10000000000042n;
    let thrown;
    try {
      JSON.stringify({ token });
    } catch (err) {
      thrown = err;
    }
    expect(thrown instanceof TypeError, `JSON.stringify({ token }) gave ${show(thrown)}`);
    const back = BigInt(JSON.parse(JSON.stringify({ token: token.toString() })).token);
    expect(back === token, `round trip gave ${show(back)}`);
  });

  await check('pitfall: shared => null is 22004', async () => {
    let code;
    try {
      await A.query('SELECT dlock_try($1, shared => $2)', [NAMES.shared, null]);
    } catch (err) {
      code = err.code;
    }
    expect(code === '22004', `shared => null gave ${show(code)}`);
  });

  const held = (name) => scalar(A,
    'SELECT count(*)::int FROM dlock_locks WHERE name = $1 AND granted', [name]);
  // waits up to 2 s for name to have `want` granted rows (a session ends a moment after
  // its client closes it)
  const waitHeld = async (name, want) => {
    for (let i = 0; ; i++) {
      const count = await held(name);
      if (count === want) return;
      expect(i < 40, `${count} granted rows of ${name}, want ${want}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const alive = (pid) => scalar(A, 'SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)', [pid]);
  const newPool = () => {
    const pool = new pg.Pool({ ...config, max: 2 });
    pool.on('error', (err) => {
      failures++;
      console.log(`not ok - Node: idle pool connection error: ${describe(err)}`);
    });
    return pool;
  };

  await check('pitfall: pg.Pool closes an idle client after 10 s by default (idleTimeoutMillis)', async () => {
    const pool = new pg.Pool(config);
    const t = pool.options.idleTimeoutMillis;
    await pool.end();
    expect(t === 10000, `idleTimeoutMillis ${show(t)}`);
  });

  await check('pool, the wrong way: unlock through pool.query runs on another connection, false, lock stays', async () => {
    const n = NAMES.wrongWay;
    const pool = newPool();
    try {
      const c1 = await pool.connect();
      let r;
      let u;
      try {
        r = await tryLock(c1, n);
        u = await unlock(pool, n); // c1 is checked out: another connection
      } finally {
        c1.release(); // back to the pool, still holding the lock
      }
      expect(r === true, `tryLock(pooled client) returned ${show(r)}`);
      expect(u === false, `unlock(pool) returned ${show(u)}`);
      const count = await held(n);
      expect(count === 1, `${count} granted rows after unlock(pool), want 1`);
    } finally {
      await pool.end(); // the sessions end, and their locks
    }
    await waitHeld(n, 0);
  });

  await check('pool: withLock pins one connection; detached lock through the pool', async () => {
    const pool = newPool();
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

  await check('pool: withLock rethrows work\'s error, nothing held after', async () => {
    const n = NAMES.poolError;
    const pool = newPool();
    const boom = new Error('boom');
    let caught;
    try {
      await withLock(pool, n, 1000, async () => { throw boom; });
    } catch (err) {
      caught = err;
    } finally {
      await pool.end();
    }
    expect(caught === boom, `withLock threw ${show(caught)}`);
    await waitHeld(n, 0);
  });

  await check('pool: withLock after work left a failed transaction: work\'s error (22012), rolled back, unlocked, connection kept', async () => {
    const n = NAMES.poolTx;
    const pool = newPool();
    let caught;
    let pid;
    try {
      try {
        await withLock(pool, n, 1000, async (client) => {
          pid = client.processID;
          await client.query('BEGIN');
          await client.query('SELECT 1/0');
        });
      } catch (err) {
        caught = err;
      }
      expect(caught && caught.code === '22012', `withLock threw ${describe(caught)}`);
      await waitHeld(n, 0);
      expect(await alive(pid) === true, `the connection (backend ${pid}) was closed`);
    } finally {
      await pool.end();
    }
  });

  await check('pool: withLock destroys the connection when its unlock returns false', async () => {
    const n = NAMES.poolUnlock;
    const pool = newPool();
    let pid;
    try {
      const r = await withLock(pool, n, 1000, async (client) => {
        pid = client.processID;
        await unlock(client, n); // makes withLock's own unlock return false
      });
      expect(r === true, `withLock returned ${show(r)}`);
      for (let i = 0; await alive(pid); i++) {
        expect(i < 40, `backend ${pid} still there`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await pool.end();
    }
  });

  await check("a session ended over its lease: an idle client emits 'error' with the server's FATAL "
    + '(code 57L01, the lease of lock ... ran out); without a listener that ends the process', async () => {
    const lost = new pg.Client(config);
    const events = [];
    lost.on('error', (err) => events.push(err));
    await lost.connect();
    await lost.query('SELECT dlock_try_ms($1, false, 200)', [NAMES.lost]);
    for (let i = 0; i < 200 && events.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    let later = null;
    try {
      await lost.query('SELECT 1');
    } catch (err) {
      later = err;
    }
    const first = events[0];
    console.log(`#   node: 'error' event: ${first ? `${first.code} ${first.message}` : 'none'}; `
      + `the next query: ${later ? `${later.code || ''} ${later.message}` : 'no error'}`);
    expect(first && first.code === '57L01'
      && first.message.includes(`the lease of lock "${NAMES.lost}" ran out`),
    `'error' event: ${first ? `${first.code} ${first.message}` : 'none'}`);
    expect(later !== null, 'the next query did not fail');
    await lost.end().catch(() => {});
  });

  await check('nothing left in dlock_locks', async () => {
    // (a session just ended over its lease lets go of its locks as it exits:
    // a moment after its client had the FATAL)
    let rows = [];
    for (let i = 0; i < 50; i += 1) {
      ({ rows } = await A.query(
        'SELECT name, scope, pid FROM dlock_locks WHERE name = ANY($1::text[])', [ALL_NAMES]));
      if (rows.length === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
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
