#!/usr/bin/env python3
"""test/stress.py: many sessions taking and releasing a few names at random.

Run by test/run against its scratch cluster (dlock preloaded):
    python3 test/stress.py --port 54321 [--seconds 10] [--workers 8] [--seed N]
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
            count("leases enforced (cancelled)")
            tally("leases expired")
        except psycopg2.errors.DeadlockDetected:
            # its wait was in a cycle (queue order counts); an
            # OperationalError too, so caught before that
            count("deadlock detected (single-name waits)")
            tally("deadlocks")
        except (psycopg2.OperationalError, psycopg2.InterfaceError):
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
    """The SQL of README.md "Monitoring": its sql blocks, and each query of its
    postgres_exporter YAML (the indented block after "query: |")."""
    readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Monitoring\n", 1)[1].split("\n## ", 1)[0]
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
    @check("README Monitoring: its queries and the postgres_exporter queries run and return rows")
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("DLOCK_STRESS_SECONDS", 10)))
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DLOCK_STRESS_SEED", time.time())))
    fault.ARGS = ap.parse_args()
    args = fault.ARGS
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
    detached_soak(int(os.environ.get("DLOCK_SOAK_CYCLES", 200000)), args.seed)
    print("# all stress tests ran")
    return 0 if all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
