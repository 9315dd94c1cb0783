'use strict';
// failover.js: what a node-postgres (pg 8) client sees when the primary that holds its dlock
// lock goes away (a switchover or failover), and how it gets the lock back on the new
// primary. Run by test/clients/run --failover (test/ha.py drives it), from the directory
// where npm installed pg:
//
//   DLOCK_FAILOVER_HOSTS=h1:p1,h2:p2 DLOCK_FAILOVER_GO=/path/go node failover.js
//
// Prints "held T1 P1", waits for the file DLOCK_FAILOVER_GO, prints "lost ..." (the error
// the idle client emitted, then what the next query rejected with), then
// "retaken T2 P2 SECONDS" and "# all node failover tests ran"; "not ok - node failover: ..."
// and exit 1 otherwise.
const fs = require('node:fs');
const pg = require('pg');

const NAME = 'ha-node';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function fail(why) {
  console.log(`not ok - node failover: ${why}`);
  process.exit(1);
}

// node-postgres takes one host: it has no multi-host connection string and no
// target_session_attrs. So try each host in turn and keep the first that is not in
// recovery. Each client gets an 'error' listener before it connects: a client whose server
// ends the session while it is idle emits 'error', and without a listener Node ends the
// process. The first error is kept in client.lostWith.
async function connectPrimary() {
  let last = null;
  for (const hostPort of process.env.DLOCK_FAILOVER_HOSTS.split(',')) {
    const i = hostPort.lastIndexOf(':');
    const client = new pg.Client({
      host: hostPort.slice(0, i), port: Number(hostPort.slice(i + 1)),
      user: 'postgres', database: 'postgres', connectionTimeoutMillis: 5000,
    });
    client.lostWith = null;
    client.on('error', (err) => { client.lostWith = client.lostWith || err; });
    try {
      await client.connect();
      const { rows } = await client.query('SELECT pg_is_in_recovery() AS standby');
      if (!rows[0].standby) return client;
      last = new Error(`${hostPort} is a standby`);
    } catch (err) {
      last = err;
    }
    await client.end().catch(() => {});
  }
  throw last;
}

// Takes the lock with a 60 s lease; returns its token (a string: pg gives a bigint as one)
// and the server's port.
async function lockAndToken(client) {
  const { rows: [{ ok }] } = await client.query("SELECT dlock_try($1, lease => '60 s') AS ok", [NAME]);
  if (ok !== true) fail('dlock_try on the primary was not true');
  const { rows: [r] } = await client.query(
    'SELECT dlock_token($1) AS token, inet_server_port() AS port', [NAME]);
  return r;
}

const describe = (err) => `${err.constructor.name} ${err.code || 'no SQLSTATE'} ${err.message.split('\n')[0]}`;

async function main() {
  const client = await connectPrimary();
  const held = await lockAndToken(client);
  console.log(`held ${held.token} ${held.port}`);

  const go = process.env.DLOCK_FAILOVER_GO;
  for (let waited = 0; !fs.existsSync(go); waited += 100) {
    if (waited >= 120000) fail(`no ${go} within 120 s`);
    await sleep(100);
  }

  // The old connection: its server ended the session, and the lock with it.
  let line;
  try {
    const { rows } = await client.query('SELECT dlock_token($1) AS token', [NAME]);
    line = `none ${rows[0].token}`;
  } catch (err) {
    line = describe(err);
  }
  const event = client.lostWith ? describe(client.lostWith) : 'none';
  console.log(`lost 'error' event: ${event}; then the query: ${line}`);
  await client.end().catch(() => {});

  // Treat the lock as lost: reconnect to the new primary, take the lock again, use the new token.
  const start = Date.now();
  let again;
  let r;
  for (;;) {
    again = null;
    try {
      again = await connectPrimary();
      r = await lockAndToken(again);
      break;
    } catch (err) {
      if (again) await again.end().catch(() => {});
      if (Date.now() - start > 60000) fail(`no primary within 60 s: ${err.message}`);
    }
    await sleep(200); // no primary yet
  }
  console.log(`retaken ${r.token} ${r.port} ${((Date.now() - start) / 1000).toFixed(1)}`);
  await again.query('SELECT dlock_unlock($1)', [NAME]);
  await again.end();
  console.log('# all node failover tests ran');
}

main().catch((err) => fail(`unexpected ${err.stack}`));
