#!/usr/bin/env python3
"""test/stress.py: many sessions taking and releasing a few names at random.

Run by test/run against its scratch cluster (dlock preloaded):
    python3 test/stress.py --port 54321 [--seconds 10] [--workers 8] [--seed N] [--only semaphore]
Prints "ok - ..." / "not ok - ..." lines like test/fault.py, whose helpers it
uses, then "# all stress tests ran".

Workers (one connection each) pick a name out of four and an operation:
session or transaction scope, exclusive or shared, try or timed wait or an
unbounded wait, re-entry, a savepoint rolled back, two names in random order
(deadlocks are possible and must be detected), locks with long leases; one
extra worker keeps overstaying short leases on transaction locks, so the
reaper cancels it again and again under the others' feet.  While it holds a
name, a worker records that in tables, and the tables enforce the rules:

  stress_inside (name PRIMARY KEY): an exclusive holder inserts its row, so a
      second exclusive holder at the same time is a unique violation;
  stress_shared: a shared holder's row; an exclusive holder must see none
      for its name, and a shared holder must see no stress_inside row;
  stress_log: every exclusive hold's token, in hold order (a sequence): per
      name the tokens must increase.

Then a soak of detached locks (DLOCK_SOAK_CYCLES, default 200000): four
sessions acquire and release detached locks by the hundred thousand (in
server-side loops, so that it takes seconds), mixed with waits that are
granted or time out, acquisitions rolled back, leases that run out and
extensions; afterwards no hold, waiter process, lock-table entry or waiter
slot may be left, and the lock holder must never have restarted.

dlock_stats must add up to what the workers saw, summed over the four
names: acquisitions (every call that returned true, re-entries included),
tries that found the name taken (busy), waits that timed out, deadlocks,
leases enforced, and holds ended (acquisitions less re-entries: every hold
ends).  Then a flood of new names evicts entries while other sessions keep
reading the view: every read works and stays within the bound, and a name
one session keeps using is kept, its counts exact.

Semaphores (permits => 3 on one name): eight sessions (--workers) take a
permit at random for up to --seconds (at most 15): dlock_try, dlock_lock with
a short timeout, dlock_try_xact and dlock_lock_xact in a transaction that
commits or rolls back, a second take of the held permit, an unlock of one
not held; a controller cancels waiting sessions and terminates holders and
waiters (they reconnect), and samples pg_locks all along: never more than
three permits granted, one per process.  Each hold is checked against
pg_locks (one permit lock, the one dlock_locks shows) and has its row in
sem_inside (permit PRIMARY KEY, CHECK 1..3; pid UNIQUE) for as long as it
lasts, inside a transaction (the xact hold's own, so a rollback or a
terminate takes the row with it), and the transaction-scope advisory lock
(SEM_INSIDE_KEY, permit) of the two-integer key space, never one of dlock's:
a second holder of a permit inside at the same time finds it taken.  After every call told "no", every unlock, rollback and error,
the session holds nothing of the name (no permit, no turnstile).  Then
nothing is left in pg_locks, three new sessions get permits 1, 2 and 3 and
a fourth none.

Rows of transaction-scope holds are written in the same transaction, so a
holder cancelled by the reaper takes its rows with it.  The checks are about
correctness, not speed: the numbers of operations are printed, not judged
(but every kind of operation must have happened).
"""
import argparse
import contextlib
import os
import random
import re
import sys
import threading
import time

import psycopg2
import psycopg2.errors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fault  # noqa: E402
from fault import check, expect, q, connect, RESULTS  # noqa: E402

NAMES = ["stress-a", "stress-b", "stress-c", "stress-d"]
STATS = {}
STATS_LOCK = threading.Lock()
VIOLATIONS = []
PIDS = set()


def count(what, n=1):
    with STATS_LOCK:
        STATS[what] = STATS.get(what, 0) + n


def tally(what, n=1):
    """What dlock_stats must show, summed over NAMES (the "stats:" counts)."""
    count("stats: " + what, n)


def outcome(ok, timeout):
    """An acquisition call's result: acquired, busy (no wait) or timed out."""
    if ok:
        tally("acquisitions")
    elif timeout in ("0", 0):
        tally("busy")
    else:
        tally("timeouts")


def violation(what):
    with STATS_LOCK:
        VIOLATIONS.append(what)


class Worker(threading.Thread):
    def __init__(self, n, seconds, seed, lease_abuser=False):
        super().__init__(daemon=True)
        self.n = n
        self.rnd = random.Random(seed * 1000 + n)
        self.deadline = time.monotonic() + seconds
        self.lease_abuser = lease_abuser
        self.error = None
        self.conn = None

    def reconnect(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg2.Error:
                pass
        self.conn = connect(app="dlock-stress-%d" % self.n)
        self.pid = q(self.conn, "SELECT pg_backend_pid()")
        with STATS_LOCK:
            PIDS.add(self.pid)

    def x(self, sql, params=None):
        return q(self.conn, sql, params)

    @contextlib.contextmanager
    def transaction(self):
        """BEGIN ... COMMIT, or ROLLBACK on an error (which goes on)."""
        self.conn.autocommit = False
        try:
            yield
            self.conn.commit()
        except BaseException:
            if not self.conn.closed:
                self.conn.rollback()
            raise
        finally:
            if not self.conn.closed:
                self.conn.autocommit = True

    # ---- what a holder does while it holds ----

    def enter_exclusive(self, name):
        """Record an exclusive hold: its row, its token in hold order."""
        tok = self.x("SELECT dlock_token(%s)", (name,))
        try:
            self.x("INSERT INTO stress_inside VALUES (%s, %s, %s)", (name, self.pid, tok))
        except psycopg2.errors.UniqueViolation:
            violation("two exclusive holders of %s (pid %d)" % (name, self.pid))
            raise
        if self.x("SELECT count(*) FROM stress_shared WHERE name = %s", (name,)) != 0:
            violation("exclusive hold of %s while shared holders are inside" % name)
        self.x("INSERT INTO stress_log (name, token) VALUES (%s, %s)", (name, tok))

    def inside_exclusive(self, name):
        self.enter_exclusive(name)
        self.pause()
        self.x("DELETE FROM stress_inside WHERE name = %s", (name,))

    def inside_shared(self, name):
        self.x("INSERT INTO stress_shared VALUES (%s, %s)", (name, self.pid))
        if self.x("SELECT count(*) FROM stress_inside WHERE name = %s", (name,)) != 0:
            violation("shared hold of %s while an exclusive holder is inside" % name)
        self.pause()
        self.x("DELETE FROM stress_shared WHERE name = %s AND pid = %s", (name, self.pid))

    def pause(self):
        if self.rnd.random() < 0.3:
            time.sleep(self.rnd.random() * 0.005)

    def timeout(self):
        return self.rnd.choice(["0", "1ms", "20ms", "100ms"])

    # ---- operations ----

    def op_session(self, name):
        shared = self.rnd.random() < 0.3
        lease = self.rnd.choice([None, "1 min"])
        how = self.rnd.choice(["try", "wait", "forever"])
        if how == "try":
            ok = self.x("SELECT dlock_try(%s, %s, %s)", (name, shared, lease))
            outcome(ok, "0")
        elif how == "wait":
            timeout = self.timeout()
            ok = self.x("SELECT dlock_lock(%s, %s, %s, %s)", (name, timeout, shared, lease))
            outcome(ok, timeout)
        else:
            ok = self.x("SELECT dlock_lock(%s)", (name,)) if not shared else \
                self.x("SELECT dlock_lock(%s, shared => true)", (name,))
            outcome(ok, None)
        count("session %s %s" % ("shared" if shared else "exclusive", "taken" if ok else "missed"))
        if not ok:
            return
        if self.rnd.random() < 0.2:   # re-entry: two holds, two unlocks
            expect(self.x("SELECT dlock_try(%s, %s)", (name, shared)) is True, "re-entry refused")
            expect(self.x("SELECT dlock_unlock(%s, %s)", (name, shared)) is True, "unlock of re-entry")
            count("re-entries")
            tally("acquisitions")
            tally("re-entries")
        if shared:
            self.inside_shared(name)
        else:
            self.inside_exclusive(name)
        if self.x("SELECT dlock_unlock(%s, %s)", (name, shared)) is not True:
            violation("unlock of a held %s returned false" % name)

    def op_xact(self, name):
        shared = self.rnd.random() < 0.3
        with self.transaction():
            timeout = self.timeout()
            ok = self.x("SELECT dlock_lock_xact(%s, %s, %s, %s)",
                        (name, timeout, shared, self.rnd.choice([None, "1 min"])))
            outcome(ok, timeout)
            count("transaction %s %s" % ("shared" if shared else "exclusive", "taken" if ok else "missed"))
            if ok:
                if shared:
                    self.inside_shared(name)
                else:
                    self.inside_exclusive(name)

    def op_savepoint(self, name):
        with self.transaction():
            self.x("SAVEPOINT s")
            ok = self.x("SELECT dlock_try_xact(%s)", (name,))
            outcome(ok, "0")
            self.x("ROLLBACK TO SAVEPOINT s")
            if ok and self.x("SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid()") != 0:
                violation("a lock outlived its rolled-back savepoint")
            count("savepoints rolled back")

    def op_two(self, name):
        other = self.rnd.choice([n for n in NAMES if n != name])
        try:
            for nm in (name, other):
                timeout = self.rnd.choice([None, "50ms"])
                ok = self.x("SELECT dlock_lock(%s, %s)", (nm, timeout))
                outcome(ok, timeout)
                if not ok:
                    count("two names: timed out")
                    return
            count("two names: both taken")
        except psycopg2.errors.DeadlockDetected:
            count("two names: deadlock detected")
            tally("deadlocks")
        finally:
            self.x("SELECT dlock_unlock_all()")
            if self.x("SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid()") != 0:
                violation("dlock_unlock_all left locks behind")

    def op_overstay(self, name):
        """Hold a transaction lock past a short lease: the reaper cancels."""
        try:
            with self.transaction():
                ok = self.x("SELECT dlock_lock_xact(%s, '1s', lease => '200ms')", (name,))
                outcome(ok, "1s")
                if ok:
                    self.enter_exclusive(name)  # and stays: it is cancelled
                    self.x("SELECT pg_sleep(3)")
                    violation("overstayed a lease without being cancelled")
        except psycopg2.errors.QueryCanceled:
            violation("a lease's cancel reported as a plain cancel (57014), not 57L02")
        except psycopg2.errors.DeadlockDetected:
            # its wait was in a cycle (queue order counts); an
            # OperationalError too, so caught before that
            count("deadlock detected (single-name waits)")
            tally("deadlocks")
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
            if getattr(e, "pgcode", None) == "57L02":
                count("leases enforced (cancelled)")
                tally("leases expired")
                return
            count("leases enforced (terminated)")
            tally("leases expired")
            self.reconnect()

    def run(self):
        try:
            self.reconnect()
            ops = [self.op_session] * 4 + [self.op_xact] * 3 + [self.op_savepoint, self.op_two]
            while time.monotonic() < self.deadline:
                name = self.rnd.choice(NAMES)
                if self.lease_abuser:
                    self.op_overstay(name)
                    time.sleep(0.05)
                else:
                    try:
                        self.rnd.choice(ops)(name)
                    except psycopg2.errors.DeadlockDetected:
                        # any waiter in a cycle may be the one told (queue
                        # order counts); it held nothing else, or its
                        # transaction is rolled back
                        count("deadlock detected (single-name waits)")
                        tally("deadlocks")
            self.conn.close()
        except Exception as e:  # noqa: BLE001 - reported by the checks
            self.error = "%s: %s" % (type(e).__name__, e)


def setup():
    c = connect()
    q(c, "CREATE EXTENSION IF NOT EXISTS dlock")
    q(c, "DROP TABLE IF EXISTS stress_inside, stress_shared, stress_log")
    q(c, "CREATE TABLE stress_inside (name text PRIMARY KEY, pid int, token bigint)")
    q(c, "CREATE TABLE stress_shared (name text, pid int)")
    q(c, "CREATE TABLE stress_log (seq bigserial PRIMARY KEY, name text, token bigint)")
    for n in NAMES:
        q(c, "SELECT dlock_stats_reset(%s)", (n,))
    c.close()


def holder_pid(c):
    return q(c, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock lock holder'")


# a wait refused for want of a background worker: none free (53000), or the
# role has its share (dlock.max_detached_waiters_per_role, 53400)
NO_WAITER = (psycopg2.errors.InsufficientResources, psycopg2.errors.ConfigurationLimitExceeded)


class SoakWorker(threading.Thread):
    """Bulk cycles on its own names in server-side loops, mixed with waits,
    rollbacks, expiries and extensions on a shared name."""

    def __init__(self, n, cycles, seed):
        super().__init__(daemon=True)
        self.n, self.cycles = n, cycles
        self.rng = random.Random(seed * 100 + n)
        self.conn = connect()
        self.error = None
        self.stats = {}
        self.tokens = []

    def bump(self, what, k=1):
        self.stats[what] = self.stats.get(what, 0) + k

    def run(self):
        try:
            self.work()
        except Exception as e:  # noqa: BLE001 - reported by the check
            self.error = repr(e)

    def work(self):
        c, rng, done = self.conn, self.rng, 0
        while done < self.cycles:
            batch = min(5000, self.cycles - done)
            released = q(c, "SELECT count(*) FROM generate_series(1, %s) g "
                            "WHERE dlock_release('soak-%s-' || g %% 7, dlock_acquire('soak-%s-' || g %% 7, '30s'))",
                         (batch, self.n, self.n))
            if released != batch:
                raise AssertionError("bulk: %r of %d released" % (released, batch))
            done += batch
            self.bump("bulk cycles", batch)
            # a few single operations on the shared names
            for _ in range(20):
                name = "soak-shared-%d" % rng.randrange(3)
                op = rng.random()
                if op < 0.4:
                    try:
                        t = q(c, "SELECT dlock_acquire(%s, '30s', timeout => %s, shared => %s)",
                              (name, "%d ms" % rng.choice([0, 20, 100]), rng.random() < 0.3))
                    except NO_WAITER:
                        # every background worker slot busy with waits and waited
                        # locks, or this role's share of them (documented); a
                        # leak shows in the final check
                        self.bump("no waiter for this role or server (53400, 53000)")
                        continue
                    if t is None:
                        self.bump("not acquired (busy or timed out)")
                        continue
                    self.tokens.append(t)
                    if rng.random() < 0.5:
                        q(c, "SELECT dlock_extend(%s, %s, '30s')", (name, t))
                        self.bump("extended")
                    time.sleep(rng.random() * 0.005)
                    if not q(c, "SELECT dlock_release(%s, %s)", (name, t)):
                        raise AssertionError("release of %s %d refused" % (name, t))
                    self.bump("acquired and released")
                elif op < 0.6:
                    with c.cursor() as cur:
                        cur.execute("BEGIN")
                        try:
                            cur.execute("SELECT dlock_acquire(%s, '30s', timeout => '50 ms')", (name,))
                            self.bump("rolled back")
                        except NO_WAITER:
                            self.bump("no waiter for this role or server (53400, 53000)")
                        cur.execute("ROLLBACK")
                elif op < 0.7:
                    try:
                        t = q(c, "SELECT dlock_acquire(%s, '120 ms', timeout => '50 ms')", (name,))
                    except NO_WAITER:
                        self.bump("no waiter for this role or server (53400, 53000)")
                        continue
                    if t is not None:
                        self.tokens.append(t)
                        self.bump("left to expire")
                else:
                    q(c, "SELECT dlock_try(%s, shared => true)", (name,)) and \
                        q(c, "SELECT dlock_unlock(%s, shared => true)", (name,))
                    self.bump("session holds between")


def detached_soak(cycles, seed):
    workers = 4
    c = connect()
    holder = holder_pid(c)
    log_off = fault.log_size()
    tokens_before = q(c, "SELECT dlock_acquire('soak-probe', '1 s')")
    q(c, "SELECT dlock_release('soak-probe', %s)", (tokens_before,))
    t0 = time.monotonic()
    ws = [SoakWorker(i, cycles // workers, seed) for i in range(workers)]
    for w in ws:
        w.start()
    for w in ws:
        w.join(600)
    elapsed = time.monotonic() - t0
    total = {}
    for w in ws:
        for k, v in w.stats.items():
            total[k] = total.get(k, 0) + v
    print("# detached soak: %d workers, %.1f s" % (workers, elapsed), flush=True)
    for k in sorted(total):
        print("#   %-40s %d" % (k, total[k]), flush=True)

    @check("detached soak: every session ran to the end without an unexpected error")
    def t_soak_workers():
        expect(all(not w.is_alive() for w in ws), "a soak worker is stuck")
        errors = [(w.n, w.error) for w in ws if w.error]
        expect(not errors, "errors: %r" % errors)
        expect(total.get("bulk cycles", 0) >= cycles - workers, "bulk cycles: %r" % total.get("bulk cycles"))
        for k in ("acquired and released", "rolled back", "left to expire", "not acquired (busy or timed out)"):
            expect(total.get(k, 0) > 0, "never happened: %s" % k)

    @check("detached soak: tokens increase per session, above every token before the soak")
    def t_soak_tokens():
        for w in ws:
            expect(all(b > a for a, b in zip(w.tokens, w.tokens[1:])), "session %d: tokens not increasing" % w.n)
            expect(not w.tokens or w.tokens[0] > tokens_before, "session %d: token below the earlier one" % w.n)

    @check("detached soak: nothing left (holds, waiter processes, lock-table entries, waiter slots); holder never restarted")
    def t_soak_clean():
        # leases of at most 120 ms left to expire
        expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM dlock_locks WHERE scope = 'detached'") == 0,
                                timeout=10), "detached holds left")
        expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM pg_stat_activity "
                                             "WHERE backend_type = 'dlock waiter'") == 0, timeout=10),
               "waiter processes left")
        expect(q(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (holder,)) == 0,
               "lock-table entries of the holder left")
        expect(q(c, "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                    "WHERE l.locktype = 'advisory' AND a.backend_type LIKE 'dlock%%'") == 0,
               "lock-table entries of dlock processes left")
        expect(holder_pid(c) == holder, "the lock holder was restarted")
        # every slot of the lock holder is free again: all of them at once
        # (by two roles, each logged in as itself: one role may hold half,
        # dlock.max_detached_locks_per_role, counted by the session's user)
        most = q(c, "SELECT current_setting('dlock.max_detached_locks')::int")
        half = most // 2
        q(c, "DROP ROLE IF EXISTS dlock_soak_other")
        q(c, "CREATE ROLE dlock_soak_other LOGIN")
        other = connect(user="dlock_soak_other")
        got = q(c, "SELECT count(dlock_acquire('soak-full-' || g, '30s')) FROM generate_series(1, %s) g", (half,))
        got += q(other, "SELECT count(dlock_acquire('soak-full-' || g, '30s')) FROM generate_series(%s, %s) g",
                 (half + 1, most))
        other.close()
        expect(got == most, "the lock holder took %r of %d locks at once" % (got, most))
        expect(q(c, "SELECT count(*) FILTER (WHERE dlock_release(name, token)) FROM dlock_locks "
                    "WHERE name LIKE 'soak-full-%%'") == most, "releasing them")
        # every waiter block is free again: as many waited acquisitions at once
        # as there are worker slots (less the reaper, the lock holder and the
        # logical replication launcher)
        nwait = q(c, "SELECT current_setting('max_worker_processes')::int") - 3
        for rnd in range(3):
            a = connect()
            q(a, "SELECT dlock_try('soak-slots')")
            # alternately by the two roles (each may have half of the slots)
            waiters = [fault.Waiter("SELECT dlock_acquire('soak-slots', '30s', timeout => '20s', shared => true)",
                                    conn=connect(user="dlock_soak_other") if i % 2 else None)
                       for i in range(nwait)]
            for w in waiters:
                w.start()
            expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM dlock_names() "
                                                 "WHERE name = 'soak-slots' AND waiting = 'detached'") == nwait),
                   "round %d: %d waiters did not all queue" % (rnd, nwait))
            q(a, "SELECT dlock_unlock('soak-slots')")
            for w in waiters:
                w.join(20)
                expect(isinstance(w.result, int), "round %d: waited acquisition: %r / %r" % (rnd, w.result, w.error))
                q(c, "SELECT dlock_release('soak-slots', %s)", (w.result,))
                w.conn.close()
            a.close()
        q(c, "DROP ROLE dlock_soak_other")
        log = fault.log_since(log_off)
        for bad in ("terminated by signal", "PANIC", "TRAP", "server process (PID", "exited with exit code"):
            expect(bad not in log, "the log says %r" % bad)
        expect(log.count("lease of detached lock") == total.get("left to expire", 0),
               "expiries logged: %d, left to expire: %d" % (log.count("lease of detached lock"),
                                                           total.get("left to expire", 0)))

    for t in (t_soak_workers, t_soak_tokens, t_soak_clean):
        t()
    c.close()


def eviction_under_reads(seconds):
    """
    New names evict entries while other sessions read dlock_stats, and one
    session keeps using one name: that entry is kept, and exact.
    """
    c = connect()
    bound = q(c, "SELECT max_entries FROM dlock_stats_info")
    evictions0 = q(c, "SELECT evictions FROM dlock_stats_info")
    q(c, "SELECT dlock_stats_reset('stress-busy')")
    c.close()
    stop = threading.Event()
    errors = []
    reads = [0]
    busy = [0]

    def use_busy():
        bc = connect(app="dlock-stress-busy")
        try:
            while not stop.is_set():
                busy[0] += q(bc, "SELECT count(dlock_try('stress-busy') AND dlock_unlock('stress-busy')) "
                                 "FROM generate_series(1, 100)")
                time.sleep(0.01)
        except Exception as e:  # noqa: BLE001
            errors.append("busy name: %s" % e)
        bc.close()

    def flood(n):
        fc = connect(app="dlock-stress-flood")
        k = 0
        try:
            while not stop.is_set():
                q(fc, "SELECT count(dlock_try(n) AND dlock_unlock(n)) FROM "
                      "(SELECT 'flood-' || %s || '-' || g AS n FROM generate_series(%s, %s) g) s",
                  (n, k, k + 999))
                k += 1000
        except Exception as e:  # noqa: BLE001
            errors.append("flood: %s" % e)
        fc.close()

    def read():
        rc = connect(app="dlock-stress-reader")
        try:
            while not stop.is_set():
                n, entries = q(rc, "SELECT ARRAY[(SELECT count(*) FROM dlock_stats)::int, entries] FROM dlock_stats_info")
                if n > bound or entries > bound:
                    errors.append("over the bound: %d rows, %d entries, bound %d" % (n, entries, bound))
                reads[0] += 1
        except Exception as e:  # noqa: BLE001
            errors.append("read: %s" % e)
        rc.close()

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(2)] + \
        [threading.Thread(target=read) for _ in range(2)] + [threading.Thread(target=use_busy)]
    for t in threads:
        t.start()
    time.sleep(max(seconds / 2, 3))
    stop.set()
    for t in threads:
        t.join(60)

    @check("stress: dlock_stats stays readable and bounded while names are evicted; a busy name is kept, exact")
    def t_eviction():
        c = connect()
        evictions = q(c, "SELECT evictions FROM dlock_stats_info")
        kept = q(c, "SELECT ARRAY[acquisitions, released] FROM dlock_stats WHERE name = 'stress-busy'")
        c.close()
        print("#   %d reads of dlock_stats, %d evictions" % (reads[0], evictions - evictions0), flush=True)
        expect(not errors, "errors: %r" % errors[:3])
        expect(reads[0] > 0, "no read")
        expect(evictions > evictions0, "nothing was evicted")
        expect(busy[0] > 0, "the busy name was never taken")
        expect(kept == [busy[0], busy[0]],
               "the busy name: dlock_stats %r (acquisitions, released), the session %d" % (kept, busy[0]))

    t_eviction()


def readme_monitoring_queries():
    """The SQL of doc/monitoring.md "Queries to watch" and "Prometheus": its sql
    blocks, and each query of its postgres_exporter YAML (the indented block
    after "query: |")."""
    page = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "doc", "monitoring.md")
    with open(page, encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Queries to watch\n", 1)[1].split("\n## Runbook\n", 1)[0]
    queries = []
    for lang, block in re.findall(r"```(sql|yaml)\n(.*?)```", section, re.S):
        if lang == "sql":
            queries.append(("sql", block))
            continue
        lines = block.split("\n")
        for i, line in enumerate(lines):
            if line.strip() == "query: |":
                indent = len(lines[i + 1]) - len(lines[i + 1].lstrip())
                sql = []
                for more in lines[i + 1:]:
                    if more.strip() and len(more) - len(more.lstrip()) < indent:
                        break
                    sql.append(more[indent:])
                queries.append(("yaml " + lines[i - 1].strip().rstrip(":"), "\n".join(sql)))
    return queries


def readme_queries():
    @check("doc/monitoring.md: its queries and the postgres_exporter queries run and return rows")
    def t_readme():
        queries = readme_monitoring_queries()
        expect(len([k for k, _ in queries if k == "sql"]) == 3, "not the three sql blocks")
        expect(len([k for k, _ in queries if k.startswith("yaml")]) == 3, "not the three exporter queries")
        c = connect()
        with c.cursor() as cur:
            for kind, sql in queries:
                cur.execute(sql)
                rows = cur.fetchall()
                names = [d[0] for d in cur.description]
                print("#   %s: %d rows, columns %s" % (kind, len(rows), ",".join(names)), flush=True)
                if kind.startswith("yaml dlock_stats") or kind == "yaml dlock_locks":
                    expect(rows, "%s returned no rows" % kind)
        c.close()

    t_readme()


# ---- semaphores: one name, three permits, eight sessions ------------------

SEM = "stress-sem"
SEM_PERMITS = 3
SEM_STATS = {}
SEM_VIOLATIONS = []
SEM_TERMINATED = set()   # pids the controller terminated
SEM_PIDS = set()         # every pid a semaphore worker had
# pg_locks rows of SEM's key that are dlock's semaphore locks: permit 1 (the
# name's own lock, objsubid 1), the turnstile (1000), permit p > 1 (1000 + p)
SEM_LOCKS = ("locktype = 'advisory' "
             "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
             "AND (classid::bigint << 32 | objid::bigint) = dlock_key('%s') "
             "AND (objsubid = 1 OR objsubid >= 1000)" % SEM)
SEM_SUBIDS = {1: 1, 2: 1002, 3: 1003}
SEM_INSIDE_KEY = 20240   # pg_try_advisory_xact_lock(SEM_INSIDE_KEY, permit): inside with it


def sem_count(what, n=1):
    with STATS_LOCK:
        SEM_STATS[what] = SEM_STATS.get(what, 0) + n


def sem_violation(what):
    with STATS_LOCK:
        SEM_VIOLATIONS.append(what)


def row(conn, sql, params=None):
    """The first row, or None."""
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()


class SemWorker(threading.Thread):
    """Takes and gives back permits of SEM at random (try, timed wait, in a
    transaction), and records each hold in sem_inside while it lasts."""

    def __init__(self, n, seconds, seed, t0):
        super().__init__(daemon=True)
        self.n = n
        self.rnd = random.Random(seed * 1000 + 500 + n)
        self.t0 = t0
        self.deadline = t0 + seconds
        self.error = None
        self.conn = None
        self.pid = None
        self.last_sql = ""
        self.tokens = []   # this session's tokens, in hold order (one list per session)

    def reconnect(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg2.Error:
                pass
        self.conn = connect(app="dlock-stress-sem-w%d" % self.n)
        self.pid = q(self.conn, "SELECT pg_backend_pid()")
        self.tokens = []
        with STATS_LOCK:
            SEM_PIDS.add(self.pid)

    def x(self, sql, params=None):
        self.last_sql = sql
        return q(self.conn, sql, params)

    def pause(self):
        time.sleep(self.rnd.choice([0, 0.001, 0.005, 0.02, 0.05]))

    # ---- checks of what this session holds ----

    def held(self):
        """What this session holds of SEM: the permits dlock_locks shows,
        the objsubids pg_locks shows (granted or not), the tokens."""
        self.last_sql = "held"
        return row(self.conn,
                   "SELECT (SELECT array_agg(coalesce(permit, 0) ORDER BY permit) FROM dlock_locks "
                   "         WHERE name = %s AND pid = pg_backend_pid()), "
                   "       (SELECT array_agg(objsubid ORDER BY objsubid) FROM pg_locks "
                   "         WHERE " + SEM_LOCKS + " AND pid = pg_backend_pid()), "
                   "       (SELECT array_agg(token) FROM dlock_locks WHERE name = %s AND pid = pg_backend_pid())",
                   (SEM, SEM))

    def my_permit(self, how):
        """The permit just taken: one in dlock_locks, the same one in pg_locks."""
        permits, subids, tokens = self.held()
        if not permits or len(permits) != 1 or permits[0] not in SEM_SUBIDS \
                or subids != [SEM_SUBIDS[permits[0]]]:
            sem_violation("%s (pid %d): dlock_locks permits %r, pg_locks objsubids %r"
                          % (how, self.pid, permits, subids))
            return None
        if self.tokens and tokens[0] <= self.tokens[-1]:
            sem_violation("%s (pid %d): token %d after %d" % (how, self.pid, tokens[0], self.tokens[-1]))
        self.tokens.append(tokens[0])
        sem_count("permit %d held" % permits[0])
        return permits[0]

    def holds_nothing(self, when):
        permits, subids, _ = self.held()
        if permits or subids:
            sem_violation("%s (pid %d): still holds (dlock_locks permits %r, pg_locks objsubids %r)"
                          % (when, self.pid, permits, subids))
            # go on from a clean session all the same
            self.x("SELECT pg_advisory_unlock_all()")

    def enter(self, permit):
        """The inside lock of permit, once nobody else who holds the permit
        has it.  A transaction that held the permit in transaction scope
        gives back the permit and its inside lock at its commit, in the lock
        manager's order: the next holder of the permit may find the inside
        lock still held, for a moment, by a process that no longer holds the
        permit (descheduled between the two under load).  Only a holder of
        the inside lock that still holds the permit is a second holder."""
        deadline = time.monotonic() + 2.0
        while True:
            if self.x("SELECT pg_try_advisory_xact_lock(%s, %s)", (SEM_INSIDE_KEY, permit)) is True:
                return True
            others = self.x(
                "SELECT count(*) FROM pg_locks i JOIN pg_locks p ON p.pid = i.pid "
                " WHERE i.locktype = 'advisory' AND i.objsubid = 2 AND i.granted "
                "   AND i.classid = %s AND i.objid = %s AND i.pid <> pg_backend_pid() "
                "   AND p.locktype = 'advisory' AND p.granted AND p.objsubid = %s "
                "   AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "   AND (p.classid::bigint << 32 | p.objid::bigint) = dlock_key(%s)",
                (SEM_INSIDE_KEY, permit, SEM_SUBIDS[permit], SEM))
            if others or time.monotonic() > deadline:
                return False
            time.sleep(0.001)

    def inside(self, permit):
        """The hold's row in sem_inside, for as long as the hold lasts (the
        caller's transaction).  Its constraints make a permit outside 1..3 or
        a session with two permits an error.  Another transaction inside with
        the same permit, not yet ended, is seen without waiting: each holds
        the transaction-scope advisory lock (SEM_INSIDE_KEY, permit) of the
        two-integer key space (objsubid 2, never one of dlock's) while it is
        inside.  (A wait of the INSERT itself is no sign: it may wait for the
        table's extension or a vacuum's truncation.)"""
        if not self.enter(permit):
            sem_violation("permit %d of pid %d: another transaction is inside with it"
                          % (permit, self.pid))
            raise psycopg2.errors.UniqueViolation("permit %d taken twice" % permit)
        try:
            self.x("INSERT INTO sem_inside (permit, pid) VALUES (%s, %s)", (permit, self.pid))
        except (psycopg2.errors.UniqueViolation, psycopg2.errors.CheckViolation) as e:
            sem_violation("permit %d of pid %d: %s" % (permit, self.pid, str(e).splitlines()[0]))
            raise
        self.pause()

    @contextlib.contextmanager
    def transaction(self):
        self.conn.autocommit = False
        try:
            yield
        finally:
            if not self.conn.closed:
                self.conn.rollback()   # (after a commit: nothing)
                self.conn.autocommit = True

    # ---- operations ----

    def calm(self):
        """The last 0.4 s of every second: no new waits, the line empties,
        and tries find permits free (a try takes one only when nobody is in
        line)."""
        return (time.monotonic() - self.t0) % 1.0 >= 0.6

    def op_session(self):
        if self.calm() or self.rnd.random() < 0.4:
            how = "try"
            ok = self.x("SELECT dlock_try(%s, permits => %s)", (SEM, SEM_PERMITS))
        else:
            how = "lock"
            ok = self.x("SELECT dlock_lock(%s, timeout => %s, permits => %s)",
                        (SEM, self.rnd.choice(["1ms", "20ms", "100ms", "400ms"]), SEM_PERMITS))
        sem_count("session %s %s" % (how, "taken" if ok else "missed"))
        if not ok:
            self.holds_nothing("after a %s that returned false" % how)
            time.sleep(0.002)
            return
        permit = self.my_permit("session " + how)
        if self.rnd.random() < 0.2:   # taken again: the same permit, one more hold
            before = self.held()
            expect(self.x("SELECT dlock_try(%s, permits => %s)", (SEM, SEM_PERMITS)) is True, "re-entry refused")
            if self.held() != before:
                sem_violation("re-entry of pid %d: held %r, then %r" % (self.pid, before, self.held()))
            expect(self.x("SELECT dlock_unlock(%s)", (SEM,)) is True, "unlock of the re-entry")
            sem_count("re-entries")
        if permit is not None:
            with self.transaction():
                self.inside(permit)
                self.x("DELETE FROM sem_inside WHERE pid = %s", (self.pid,))
                self.conn.commit()
        if self.x("SELECT dlock_unlock(%s)", (SEM,)) is not True:
            sem_violation("unlock of a held permit returned false (pid %d)" % self.pid)
        self.holds_nothing("after dlock_unlock")

    def op_xact(self):
        rolled_back = False
        with self.transaction():
            if self.calm() or self.rnd.random() < 0.3:
                how = "try_xact"
                ok = self.x("SELECT dlock_try_xact(%s, permits => %s)", (SEM, SEM_PERMITS))
            else:
                how = "lock_xact"
                ok = self.x("SELECT dlock_lock_xact(%s, timeout => %s, permits => %s)",
                            (SEM, self.rnd.choice(["1ms", "20ms", "100ms", "400ms"]), SEM_PERMITS))
            sem_count("transaction %s %s" % (how, "taken" if ok else "missed"))
            if not ok:
                time.sleep(0.002)
            if ok:
                permit = self.my_permit("transaction " + how)
                if permit is not None:
                    self.inside(permit)
                    rolled_back = self.rnd.random() < 0.3
            if rolled_back:
                self.conn.rollback()   # the row and the permit go with it
                sem_count("transactions rolled back")
            else:
                self.x("DELETE FROM sem_inside WHERE pid = %s", (self.pid,))
                self.conn.commit()
        self.holds_nothing("after a rollback" if rolled_back else "after the transaction")

    def op_stray_unlock(self):
        """An unlock of a permit not held: false, and nobody else's goes."""
        if self.x("SELECT dlock_unlock(%s)", (SEM,)) is not False:
            sem_violation("dlock_unlock of a permit not held did not return false (pid %d)" % self.pid)
        del self.conn.notices[:]   # its WARNING
        sem_count("stray unlocks")

    def reset(self, why):
        """After an error: nothing held any more (a cancel may leave a session
        hold its call took, doc/functions.md "Waiting"; a transaction's goes with it)."""
        for _ in range(50):
            try:
                if self.conn.closed:
                    self.reconnect()
                self.conn.rollback()
                self.conn.autocommit = True
                self.x("SELECT dlock_unlock_all()")
                self.holds_nothing("after %s and dlock_unlock_all" % why)
                return
            except psycopg2.errors.QueryCanceled:
                sem_count("cancels that landed elsewhere")
            except (psycopg2.OperationalError, psycopg2.InterfaceError):
                self.lost()
        raise AssertionError("could not get back to a clean session")

    def lost(self):
        """The connection is gone: it must have been the controller."""
        if self.pid not in SEM_TERMINATED:
            raise AssertionError("connection of pid %d lost, not terminated by the test" % self.pid)
        sem_count("terminated, reconnected")
        self.reconnect()

    def run(self):
        try:
            self.reconnect()
            ops = [self.op_session] * 5 + [self.op_xact] * 4 + [self.op_stray_unlock]
            while time.monotonic() < self.deadline:
                try:
                    self.rnd.choice(ops)()
                except psycopg2.errors.QueryCanceled:
                    sem_count("cancelled in %s" % ("a wait" if "dlock_lock" in self.last_sql else "another statement"))
                    self.reset("a cancel")
                except (psycopg2.errors.UniqueViolation, psycopg2.errors.CheckViolation,
                        psycopg2.errors.LockNotAvailable):
                    self.reset("a violation")   # (recorded)
                except (psycopg2.OperationalError, psycopg2.InterfaceError):
                    self.lost()
                    self.reset("a reconnection")
            self.conn.close()
        except Exception as e:  # noqa: BLE001 - reported by the checks
            self.error = "%s: %s (last: %s)" % (type(e).__name__, e, self.last_sql)


class SemController(threading.Thread):
    """Cancels waiting workers and terminates holders and waiters; checks
    in pg_locks, at every step, that at most three permits are held."""

    def __init__(self, seconds, seed):
        super().__init__(daemon=True)
        self.rnd = random.Random(seed * 1000 + 999)
        self.deadline = time.monotonic() + seconds
        self.error = None
        self.samples = 0

    def pids(self, sql):
        with self.conn.cursor() as cur:
            cur.execute(sql)
            return [r[0] for r in cur.fetchall()]

    def sample(self):
        held, bad, per_pid, turnstiles = row(self.conn, """
            SELECT count(*) FILTER (WHERE objsubid <> 1000),
                   count(*) FILTER (WHERE objsubid NOT IN (1, 1000, 1002, 1003)),
                   (SELECT max(n) FROM (SELECT count(*) n FROM pg_locks WHERE """ + SEM_LOCKS + """
                                          AND granted AND objsubid <> 1000 GROUP BY pid) p),
                   count(*) FILTER (WHERE objsubid = 1000)
              FROM pg_locks WHERE """ + SEM_LOCKS + " AND granted")
        self.samples += 1
        if held > SEM_PERMITS or bad or (per_pid or 0) > 1 or turnstiles > 1:
            sem_violation("pg_locks: %d permits held, %d unknown objsubids, %r by one process, %d turnstiles"
                          % (held, bad, per_pid, turnstiles))

    def run(self):
        try:
            self.conn = connect(app="dlock-stress-sem-controller")
            while time.monotonic() < self.deadline:
                self.sample()
                act = self.rnd.random()
                if act < 0.5:
                    # a waiter: in the turnstile's queue (Lock) or first in line (Extension)
                    victims = self.pids("SELECT pid FROM pg_stat_activity WHERE application_name LIKE "
                                        "'dlock-stress-sem-w%' AND state = 'active' "
                                        "AND wait_event_type IN ('Lock', 'Extension') AND query LIKE '%dlock_lock%'")
                    if victims:
                        q(self.conn, "SELECT pg_cancel_backend(%s)", (self.rnd.choice(victims),))
                        sem_count("controller: cancels sent to waiters")
                elif act < 0.65:
                    if self.rnd.random() < 0.5:
                        kind = "holders"
                        victims = self.pids("SELECT pid FROM pg_locks WHERE " + SEM_LOCKS
                                            + " AND granted AND objsubid <> 1000 AND pid IN (SELECT pid "
                                            "FROM pg_stat_activity WHERE application_name LIKE 'dlock-stress-sem-w%')")
                    else:
                        kind = "waiters"
                        victims = self.pids("SELECT pid FROM pg_stat_activity WHERE application_name LIKE "
                                            "'dlock-stress-sem-w%' AND state = 'active' "
                                            "AND wait_event_type IN ('Lock', 'Extension') "
                                            "AND query LIKE '%dlock_lock%'")
                    if victims:
                        v = self.rnd.choice(victims)
                        with STATS_LOCK:
                            SEM_TERMINATED.add(v)
                        q(self.conn, "SELECT pg_terminate_backend(%s)", (v,))
                        sem_count("controller: %s terminated" % kind)
                time.sleep(self.rnd.choice([0.02, 0.05, 0.1]))
            self.conn.close()
        except Exception as e:  # noqa: BLE001 - reported by the checks
            self.error = "%s: %s" % (type(e).__name__, e)


def semaphore_phase(seconds, seed, nworkers=8):
    """
    One semaphore, three permits, eight sessions: tries, timed waits and
    transaction holds, rolled back at times; a controller cancels waiters
    and terminates holders and waiters (which reconnect).  Never more than
    three holders, never two of one permit, nothing left afterwards, and the
    three permits are all there again.
    """
    seconds = min(seconds, 15)
    c = connect()
    q(c, "DROP TABLE IF EXISTS sem_inside")
    q(c, "CREATE TABLE sem_inside (permit int PRIMARY KEY CHECK (permit BETWEEN 1 AND %d), "
         "pid int UNIQUE NOT NULL)" % SEM_PERMITS)
    q(c, "SELECT dlock_stats_reset(%s)", (SEM,))
    log_off = fault.log_size()
    reaper = fault.reaper_pid()
    print("# semaphores: %d sessions on one name with %d permits, %.0f s" % (nworkers, SEM_PERMITS, seconds),
          flush=True)
    t0 = time.monotonic()
    ws = [SemWorker(i, seconds, seed, t0) for i in range(nworkers)]
    ctl = SemController(seconds, seed)
    for t in ws + [ctl]:
        t.start()
    for t in ws + [ctl]:
        t.join(seconds + 60)
    print("#   %.1f s, %d samples of pg_locks" % (time.monotonic() - t0, ctl.samples), flush=True)
    for k in sorted(SEM_STATS):
        print("#   %-40s %d" % (k, SEM_STATS[k]), flush=True)

    @check("semaphore: every session ran to the end without an unexpected error")
    def t_sem_workers():
        expect(all(not t.is_alive() for t in ws + [ctl]), "a session is stuck")
        errors = [(w.n, w.error) for w in ws if w.error] + ([("controller", ctl.error)] if ctl.error else [])
        expect(not errors, "errors: %r" % errors)

    @check("semaphore: never more than 3 holders, never two of one permit, each hold's permit as pg_locks has it")
    def t_sem_exclusion():
        expect(not SEM_VIOLATIONS, "%d violations: %r" % (len(SEM_VIOLATIONS), SEM_VIOLATIONS[:5]))
        expect(ctl.samples > 0, "pg_locks never sampled")

    @check("semaphore: every kind of operation happened (waits, cancels, terminations, rollbacks, every permit)")
    def t_sem_coverage():
        kinds = ["session try taken", "session lock taken", "session try missed", "session lock missed",
                 "transaction lock_xact taken", "transaction try_xact taken", "transactions rolled back",
                 "re-entries", "stray unlocks", "cancelled in a wait", "terminated, reconnected",
                 "controller: holders terminated", "controller: waiters terminated",
                 "permit 1 held", "permit 2 held", "permit 3 held"]
        missing = [k for k in kinds if SEM_STATS.get(k, 0) == 0]
        expect(not missing, "never happened: %r" % missing)
        # (a call cut short by a terminate may have been counted, and not seen)
        acquisitions, waited = row(c, "SELECT sum(acquisitions), sum(waited) FROM dlock_stats WHERE name = %s",
                                   (SEM,))
        seen = sum(v for k, v in SEM_STATS.items() if k.endswith(" taken") or k == "re-entries")
        expect(waited and waited > 0, "no acquisition waited (dlock_stats.waited %r)" % waited)
        expect(acquisitions >= seen, "dlock_stats.acquisitions %r, the sessions saw %d" % (acquisitions, seen))

    @check("semaphore: nothing left in pg_locks (permits, turnstile) nor dlock_locks once the sessions are gone")
    def t_sem_clean():
        expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM pg_locks WHERE " + SEM_LOCKS) == 0),
               "left in pg_locks: %r" % q(c, "SELECT array_agg(row(pid, objsubid, granted)::text) "
                                            "FROM pg_locks WHERE " + SEM_LOCKS))
        expect(q(c, "SELECT count(*) FROM dlock_locks WHERE name = %s", (SEM,)) == 0, "rows left in dlock_locks")
        expect(q(c, "SELECT count(*) FROM dlock_names() WHERE pid = ANY(%s)", (list(SEM_PIDS),)) == 0,
               "names left in dlock's slots")
        expect(q(c, "SELECT count(*) FROM sem_inside") == 0, "rows left in sem_inside")
        log = fault.log_since(log_off)
        for bad in ("terminated by signal", "PANIC", "TRAP", "server process (PID"):
            expect(bad not in log, "the log says %r" % bad)
        expect(fault.reaper_pid() == reaper, "the reaper was restarted")

    @check("semaphore: afterwards 3 sessions get a permit each (1, 2, 3) within 1 s, a 4th does not")
    def t_sem_after():
        cs = [connect(app="dlock-stress-sem-after") for _ in range(4)]
        try:
            for i in range(3):
                expect(q(cs[i], "SELECT dlock_lock(%s, permits => 3, timeout => '1s')", (SEM,)) is True,
                       "session %d got no permit" % (i + 1))
            got = q(c, "SELECT array_agg(permit ORDER BY permit) FROM dlock_locks WHERE name = %s AND granted",
                    (SEM,))
            expect(got == [1, 2, 3], "permits held: %r" % got)
            expect(q(cs[3], "SELECT dlock_try(%s, permits => 3)", (SEM,)) is False, "a 4th try got one")
            expect(q(cs[3], "SELECT dlock_lock(%s, permits => 3, timeout => '100ms')", (SEM,)) is False,
                   "a 4th timed wait got one")
            expect(q(cs[1], "SELECT dlock_unlock(%s)", (SEM,)) is True, "unlock")
            expect(q(cs[3], "SELECT dlock_lock(%s, permits => 3, timeout => '1s')", (SEM,)) is True,
                   "the 4th did not get the freed permit")
            expect(q(c, "SELECT permit FROM dlock_locks WHERE name = %s AND pid = %s", (SEM, fault.pid_of(cs[3]))) == 2,
                   "the 4th did not get permit 2")
        finally:
            fault.close_all(*cs)
        expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM pg_locks WHERE " + SEM_LOCKS) == 0),
               "left in pg_locks at the end")

    for t in (t_sem_workers, t_sem_exclusion, t_sem_coverage, t_sem_clean, t_sem_after):
        t()
    got = row(c, "SELECT acquisitions, immediate, waited, busy, timeouts, cancels, released "
                 "FROM dlock_stats WHERE name = %s", (SEM,))
    print("#   dlock_stats: acquisitions, immediate, waited, busy, timeouts, cancels, released: %r" % (got,),
          flush=True)
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("DLOCK_STRESS_SECONDS", 10)))
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DLOCK_STRESS_SEED", time.time())))
    ap.add_argument("--only", choices=["semaphore"], help="run only this phase")
    fault.ARGS = ap.parse_args()
    args = fault.ARGS
    if args.only == "semaphore":
        print("# stress: the semaphore phase only, seed %d" % args.seed, flush=True)
        semaphore_phase(args.seconds, args.seed, args.workers)
        print("# all stress tests ran")
        return 0 if all(ok for _, ok in RESULTS) else 1
    print("# stress: %d workers + 1 lease overstayer, %.0f s, seed %d" % (args.workers, args.seconds, args.seed),
          flush=True)
    setup()
    log_off = fault.log_size()
    reaper = fault.reaper_pid()
    workers = [Worker(i, args.seconds, args.seed) for i in range(args.workers)]
    workers.append(Worker(args.workers, args.seconds, args.seed, lease_abuser=True))
    for w in workers:
        w.start()
    for w in workers:
        w.join(args.seconds + 60)
    for k in sorted(STATS):
        print("#   %-40s %d" % (k, STATS[k]), flush=True)

    @check("stress: every worker ran to the end without an unexpected error")
    def t_workers():
        expect(all(not w.is_alive() for w in workers), "a worker is stuck")
        errors = [(w.n, w.error) for w in workers if w.error]
        expect(not errors, "errors: %r" % errors)

    @check("stress: mutual exclusion held (exclusive alone, shared never with exclusive)")
    def t_exclusion():
        expect(not VIOLATIONS, "violations: %r" % VIOLATIONS[:5])

    @check("stress: fencing tokens increase per name in hold order")
    def t_tokens():
        c = connect()
        with c.cursor() as cur:
            cur.execute("SELECT name, token FROM stress_log ORDER BY seq")
            rows = cur.fetchall()
        c.close()
        last = {}
        for name, tok in rows:
            expect(tok > last.get(name, 0), "%s: token %d after %d" % (name, tok, last.get(name, 0)))
            last[name] = tok
        expect(len(rows) > 0, "no exclusive holds recorded")

    @check("stress: every kind of operation happened, leases were enforced")
    def t_coverage():
        kinds = ["session exclusive taken", "session shared taken", "transaction exclusive taken",
                 "transaction shared taken", "savepoints rolled back", "two names: both taken",
                 "re-entries"]
        missing = [k for k in kinds if STATS.get(k, 0) == 0]
        expect(not missing, "never happened: %r" % missing)
        enforced = STATS.get("leases enforced (cancelled)", 0) + STATS.get("leases enforced (terminated)", 0)
        expect(enforced > 0, "no lease was enforced")

    @check("stress: nothing left behind once the sessions are gone; the server and the reaper never died")
    def t_clean():
        c = connect()
        pids = list(PIDS)
        expect(fault.wait_until(lambda: q(c, "SELECT count(*) FROM dlock_names() WHERE pid = ANY(%s)", (pids,)) == 0),
               "names left in dlock's slots")
        expect(q(c, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = ANY(%s)", (pids,)) == 0,
               "advisory locks left")
        expect(q(c, "SELECT count(*) FROM stress_inside") == 0, "holders still inside")
        expect(q(c, "SELECT count(*) FROM stress_shared") == 0, "shared holders still inside")
        c.close()
        log = fault.log_since(log_off)
        for bad in ("terminated by signal", "PANIC", "TRAP", "server process (PID"):
            expect(bad not in log, "the log says %r" % bad)
        expect(fault.reaper_pid() == reaper, "the reaper was restarted")

    @check("stress: dlock_stats adds up to what the sessions did")
    def t_stats():
        c = connect()
        got = q(c, """SELECT json_build_object(
                        'acquisitions', sum(acquisitions), 'busy', sum(busy),
                        'timeouts', sum(timeouts), 'deadlocks', sum(deadlocks),
                        'cancels', sum(cancels), 'released', sum(released),
                        'leases expired', sum(leases_expired),
                        'waited', sum(waited), 'immediate', sum(immediate))
                      FROM dlock_stats WHERE name = ANY(%s) AND database = current_database()""",
                (NAMES,))
        c.close()
        want = {k[len("stats: "):]: v for k, v in STATS.items() if k.startswith("stats: ")}
        print("#   dlock_stats %s" % ({k: got[k] for k in sorted(got)},), flush=True)
        for k in ("acquisitions", "busy", "timeouts", "deadlocks", "leases expired"):
            expect(got[k] == want.get(k, 0), "%s: dlock_stats %s, the sessions %s" % (k, got[k], want.get(k, 0)))
        expect(got["cancels"] == 0, "cancels: %s, none happened" % got["cancels"])
        expect(got["released"] == want.get("acquisitions", 0) - want.get("re-entries", 0),
               "released: %s, holds ended: %s" % (got["released"],
                                                  want.get("acquisitions", 0) - want.get("re-entries", 0)))
        expect(got["waited"] + got["immediate"] == got["acquisitions"], "waited + immediate != acquisitions")
        expect(got["waited"] > 0 and got["deadlocks"] > 0 and got["timeouts"] > 0,
               "no waits, deadlocks or timeouts: the check proves little")

    for t in (t_workers, t_exclusion, t_tokens, t_coverage, t_clean, t_stats):
        t()
    eviction_under_reads(args.seconds)
    readme_queries()
    semaphore_phase(args.seconds, args.seed, args.workers)
    detached_soak(int(os.environ.get("DLOCK_SOAK_CYCLES", 200000)), args.seed)
    print("# all stress tests ran")
    return 0 if all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
