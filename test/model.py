#!/usr/bin/env python3
"""test/model.py: every answer of dlock checked against a reference model and
against the lock manager, for random sequences of calls (doc/guarantees.md "What dlock
promises").

Run by test/run against its scratch cluster (dlock preloaded):
    python3 test/model.py --port 54321 [--seconds 60] [--seed N] [--steps N]
    DLOCK_MODEL_SECONDS=600 test/run --pg 15 model      (a longer run)
Prints "ok - ..." / "not ok - ..." lines, then "# all model tests ran".  A
failure prints the seed and the shortest sequence of steps that still shows
it (found by taking steps out and running again), as a script to replay:
    python3 test/model.py --port 54321 --replay FILE
The sequences earlier runs found (test/model-cases/*.json) are replayed
first, each its own test.

Four sessions (and the observer, and dlock's lock holder for detached locks)
work on three names, two of which share a wake-up bucket of the semaphores.
Each step is one call from one session, picked at random among:

  dlock_try / dlock_lock (a short timeout, or left waiting in the queue while
  the others go on) and their _xact forms, exclusive, shared or (1.7) in
  update mode (mode => 'update': the update gate, objsubid 7, then
  RowShareLock on the key; a wait for the gate, or for the key after it),
  with permits => 2 or 3, a lease (long, or short enough to run out: the
  reaper ends the session), info; the mode in words, and the calls that
  contradict it (shared => true, permits with update); several names at
  once; re-entry; dlock_unlock (also of what is not held, and mode =>
  'update'), dlock_unlock_all, dlock_renew, dlock_token (exclusive first,
  then update, then shared); dlock_raise (an exclusive hold over an update
  hold, in its scope: at once, at a timeout, or left waiting for the shared
  holders; in a transaction a session lock that dlock gives back at the end
  of its (sub)transaction) and dlock_lower (in the update hold's scope: a
  session hold, or the latest raise in the transaction, given back early);
  BEGIN, SAVEPOINT, ROLLBACK TO, RELEASE, COMMIT, ROLLBACK; detached
  dlock_acquire (a lease long or short, min_hold, shared, permits),
  dlock_extend, dlock_release and dlock_force_release (the override, in a
  minimum hold too) with the right token and a wrong one; and
  what users and poolers do behind dlock's back: pg_advisory_unlock_all(),
  DISCARD ALL, pg_try_advisory_lock / pg_advisory_unlock (and their _shared
  forms) of dlock_key(name) (which do not reach an update hold: only
  pg_advisory_unlock_all and DISCARD ALL release it, gate and all), a
  session terminated; and bursts: several sessions trying one name at the
  same instant (update mode too).

The model is the lock manager's state (what each session holds, per lock and
mode, in session and transaction scope, with savepoints; who waits, in which
order) plus dlock's records of its holds (permit, token, lease, info).  After
every step:
  - the answer is the model's, wherever the model determines it (an answer
    that depends on a race, such as which of two tries wins, is checked by
    what it must add up to instead);
  - every "yes" is backed by pg_locks: the session holds what the call asked
    for (the name's own lock in the mode asked; for permits => N one of
    permits 1..N; in update mode RowShareLock on the key and the gate), and
    nothing else the call took;
  - every "no" has a reason in pg_locks: another process holds the lock in a
    conflicting mode, or waits for it ahead, or (a semaphore) holds every
    permit 1..N, or is in line, or (update mode) holds or awaits the gate;
  - pg_locks shows each session holding exactly the model's locks on the
    names' keys (objsubid 1) and update gates (objsubid 7);
  - dlock_locks shows exactly the model's named holds and waits: name,
    process, mode, scope, permit and token (an update hold, or a wait for
    one, is one row, mode update);
  - a new hold's token is larger than every token given before it.

The model knows the limits doc/guarantees.md states ("Things to know"): a hold
released behind dlock's back and taken again with a raw pg_advisory_lock
before dlock noticed may go on as the old hold (its token), and the model
accepts either there.  It keeps out of pg_advisory_unlock and
pg_advisory_unlock_all in a session holding a raise in a transaction (a
session lock in the lock manager, which they would release behind dlock's
back; out_of_model).
"""
import argparse
import hashlib
import json
import os
import random
import re
import struct
import sys
import threading
import time
import traceback

import psycopg2
import psycopg2.errors
import psycopg2.extensions

ARGS = None
RESULTS = []
DB = "dlock_model"
DB_OID = 54321
NSESS = 4
SUBID_KEY = 1
SUBID_GATE = 7             # update mode's gate (ExclusiveLock; dlock.h DLOCK_SUBID_UPDATE)
SUBID_TURNSTILE = 1000
SHORT_LEASE = 0.4          # seconds: runs out during the run
LONG_LEASE = 3600
SETTLE = 1.5               # seconds an asynchronous event (a reaper's signal, a
                           # detached expiry) may take after its time
WAIT_SETTLE = 3.0          # seconds a woken waiter may take to return


def dlock_key(name):
    return struct.unpack("<q", hashlib.sha256(name.encode()).digest()[:8])[0]


def ms(seconds):
    """A duration in whole milliseconds for the _ms forms (None: not given)."""
    return None if seconds is None else int(round(seconds * 1000))


def subid(permit):
    return SUBID_KEY if permit <= 1 else SUBID_TURNSTILE + permit


def bucket(dbid, key):
    return ((key & 0xFFFFFFFF) ^ dbid) % 128


class Violation(Exception):
    pass


def conflicts(m1, m2):
    return m1 == "x" or m2 == "x"


# A call's mode ("x" exclusive, "s" shared, "u" update) as the view's mode
# letter, which also keys dlock's records of a session's holds
HK = {"x": "e", "s": "s", "u": "u"}
WORDS = {"x": "exclusive", "s": "shared", "u": "update"}


def key_mode(mode):
    """The lock a hold of mode takes on the name's key: update takes
    RowShareLock ("r") there, which shares with ShareLock and conflicts with
    ExclusiveLock as ShareLock would, a mode of its own (and its gate
    besides: src/dlock.h)."""
    return {"x": "x", "s": "s", "u": "r"}[mode]


LOCKMODES = {"ExclusiveLock": "x", "ShareLock": "s", "RowShareLock": "r"}


# ---------------------------------------------------------------------------
# The model.

class Hold:
    """dlock's record of one session's hold of (name, mode)."""

    def __init__(self, permit, token):
        self.permit = permit          # 0: the name's own lock, taken plain; p: permit p
        self.token = token            # None: not determined (see ghosts)
        self.nsession = 0
        self.xact = []                # savepoint depth of each transaction-scope grant
        self.raised = []              # of those, the raises (dlock_raise in a transaction)
        self.lease = None             # expiry (time.time()) or None
        self.info = None

    def tag_subid(self):
        return subid(self.permit)

    def total(self):
        return self.nsession + len(self.xact)


class Ghost:
    """A session hold of dlock's released behind its back (raw calls): dlock
    still records it, and if the session holds its lock again (a raw
    pg_advisory_lock) before a dlock call looks, dlock goes on with it as the
    old hold (doc/guarantees.md "Things to know")."""

    def __init__(self, h):
        self.token, self.n, self.permit = h.token, h.nsession, h.permit


class Session:
    def __init__(self, idx):
        self.idx = idx
        self.conn = None
        self.pid = None
        self.in_block = False
        self.depth = 0                # savepoints open
        self.holds = {}               # (name, mode) -> Hold
        self.lm = {}                  # (key, subid, mode) -> [session count, [xact depths]]
        self.ghosts = {}              # (name, mode) -> Ghost
        self.stale_scope = set()      # (name, mode): its session part released behind dlock's
                                      # back while a transaction's hold keeps the lock: dlock
                                      # cannot tell, the view may still say session+transaction
        self.pending = None           # a call waiting in a queue (Pending)
        self.lost_leases = []         # expiries of short leases whose holds went behind
                                      # dlock's back in this transaction block: a COMMIT
                                      # after one may be refused (doc/functions.md "Leases")

    # each lock: [session count, [savepoint depth of each transaction-scope
    # count], [depth of each raise in a transaction: a session lock that dlock
    # gives back at the end of its (sub)transaction, src/locks.c]]
    def lm_get(self, key, sub, mode):
        return self.lm.setdefault((key, sub, mode), [0, [], []])

    def lm_count(self, key, sub, mode):
        c = self.lm.get((key, sub, mode))
        return 0 if c is None else c[0] + len(c[1]) + len(c[2])

    def lm_tidy(self):
        for k in [k for k, v in self.lm.items() if v[0] == 0 and not v[1] and not v[2]]:
            del self.lm[k]

    def raised(self):
        """Does the session hold a raise in a transaction?"""
        return any(c[2] for c in self.lm.values())


class Detached:
    def __init__(self, name, mode, permit, token, lease, min_until):
        self.name, self.mode, self.permit, self.token = name, mode, permit, token
        self.lease = lease
        self.min_until = min_until
        self.released = False


class Pending:
    """A call left waiting in a queue (a thread runs it)."""

    def __init__(self, sess, call, kind, key, sub, mode, names_modes=None):
        self.sess, self.call, self.kind = sess, call, kind
        self.key, self.sub, self.mode = key, sub, mode   # the lock it waits for now
        # update mode (kind "update"): waits for the gate (phase "gate"), then
        # holds it (gate) and waits for RowShareLock on the key (phase "key")
        self.phase = "gate" if sub == SUBID_GATE else "key"
        self.gate = False
        self.since = time.monotonic()
        self.thread = None
        self.result = None
        self.error = None
        self.done = threading.Event()


class Model:
    def __init__(self, names, keys):
        self.names = names
        self.keys = keys
        self.sessions = [Session(i) for i in range(NSESS)]
        self.detached = []            # Detached holds of the lock holder
        self.queue = {}               # (key, sub) -> [Pending] in arrival order (plain waits)
        self.line = {}                # key -> [Pending] (semaphore waiters, first is head)
        self.max_token = 0
        self.events = []              # (time, kind, args): asynchronous events to come

    # -- the lock manager ----------------------------------------------------
    def holders(self, key, sub, exclude=None):
        """(who, mode) of every holder of the lock: sessions and the holder 'H'."""
        out = []
        for s in self.sessions:
            if s is exclude:
                continue
            for m in ("x", "s", "r"):
                if s.lm_count(key, sub, m) > 0:
                    out.append((s, m))
        for d in self.detached:
            if self.keys[d.name] == key and subid(d.permit) == sub:
                out.append(("H", d.mode))
        return out

    def free_for(self, sess, key, sub, mode, queue_too=True):
        """Would the lock manager grant sess this lock now, without waiting?"""
        for who, m in self.holders(key, sub, exclude=sess):
            if conflicts(m, mode):
                return False
        if queue_too and (sess is None or sess.lm_count(key, sub, mode) == 0):
            # a request that conflicts with one waiting is not granted at once
            for p in self.queue.get((key, sub), []):
                if p.sess is not sess and conflicts(p.mode, mode):
                    return False
        return True

    def in_line(self, key, exclude=None):
        return any(p.sess is not exclude for p in self.line.get(key, []))

    def lm_add(self, sess, key, sub, mode, xact, raised=False):
        c = sess.lm_get(key, sub, mode)
        if raised:
            c[2].append(sess.depth)
        elif xact:
            c[1].append(sess.depth if sess.in_block else -1)
        else:
            c[0] += 1

    def lm_release_session(self, sess, key, sub, mode):
        c = sess.lm.get((key, sub, mode))
        if c is None or c[0] == 0:
            return False
        c[0] -= 1
        sess.lm_tidy()
        return True


def run_sql(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        if cur.description is None:
            return None
        row = cur.fetchone()
        return row[0] if row else None


# ---------------------------------------------------------------------------
# The test: a harness that keeps the model and the server in step.

class Harness:
    def __init__(self, rng, log):
        self.rng = rng
        self.log = log                # steps done, for a replay
        self.admin = connect()
        self.obs = connect(DB)
        self.dbid = run_sql(self.obs, "SELECT oid FROM pg_database WHERE datname = current_database()")
        # PostgreSQL 17 and later let a request that does not wait (a try)
        # go ahead of waiters it holds a conflicting lock for, as a waiting
        # one always could (ProcSleep); 15 refuses it
        self.tries_jump = int(run_sql(self.obs, "SHOW server_version_num")) >= 170000
        self.names = pick_names(self.dbid)
        self.keys = {n: dlock_key(n) for n in self.names}
        self.model = Model(self.names, self.keys)
        self.holder_pid = None
        self.tokens_seen = set()
        self.step_max = 0
        self.trace = []
        self.counts = {}
        for s in self.model.sessions:
            self.connect_session(s)

    # -- sessions ------------------------------------------------------------
    def connect_session(self, s):
        s.conn = connect(DB, app="dlock-model-%d" % s.idx)
        s.conn.notices = []
        s.pid = run_sql(s.conn, "SELECT pg_backend_pid()")
        # half the sessions answer through dlock.synchronous_grants (no
        # synchronous standby here: the same answers, by the other way)
        if self.rng.random() < 0.5:
            run_sql(s.conn, "SET dlock.synchronous_grants = on")
        s.in_block = False
        s.depth = 0
        s.holds = {}
        s.lm = {}
        s.ghosts = {}
        s.stale_scope = set()
        s.pending = None

    def end_session(self, s, why, grant=True):
        """The session is gone (terminated, ended over its lease): the model
        drops what it held; a new session takes its place."""
        m = self.model
        for key_sub, q in list(m.queue.items()):
            m.queue[key_sub] = [p for p in q if p.sess is not s]
        for key, q in list(m.line.items()):
            m.line[key] = [p for p in q if p.sess is not s]
        if s.pending is not None:
            s.pending.done.wait(WAIT_SETTLE)
            s.pending = None
        try:
            s.conn.close()
        except Exception:  # noqa: BLE001
            pass
        old = s.pid
        self.connect_session(s)
        if grant:
            self.grant_waiters()
        return old

    # -- checks --------------------------------------------------------------
    def pg_locks(self):
        with self.obs.cursor() as cur:
            cur.execute("SELECT pid, (classid::bigint << 32) | objid::bigint, objsubid, mode, granted "
                        "  FROM pg_locks WHERE locktype = 'advisory' AND database = %s", (self.dbid,))
            return [(pid, key if key < 2 ** 63 else key - 2 ** 64, sub, LOCKMODES.get(mode, mode), g)
                    for pid, key, sub, mode, g in cur.fetchall()]

    def check_yes(self, s, name, mode, permits, locks):
        key = self.keys[name]
        if permits:
            ok = any(pid == s.pid and k == key and sub == subid(p) and md == "x" and g
                     for pid, k, sub, md, g in locks for p in range(1, permits + 1))
            what = "one of permits 1..%d of %s" % (permits, name)
        else:
            ok = any(pid == s.pid and k == key and sub == SUBID_KEY and md == key_mode(mode) and g
                     for pid, k, sub, md, g in locks)
            what = "%s's own lock in mode %s" % (name, key_mode(mode))
            if mode == "u":
                ok = ok and any(pid == s.pid and k == key and sub == SUBID_GATE and md == "x" and g
                                for pid, k, sub, md, g in locks)
                what += " and its update gate"
        if not ok:
            raise Violation("session %d was told yes but pg_locks does not show it holding %s: %r"
                            % (s.idx, what, [l for l in locks if l[1] == key]))

    def check_no(self, s, name, mode, permits, locks):
        """A 'no' has a reason in pg_locks."""
        key = self.keys[name]
        others = [l for l in locks if l[0] != s.pid and l[1] == key]
        if permits:
            in_line = any(sub == SUBID_TURNSTILE for _, _, sub, _, _ in others)
            all_taken = all(any(sub == subid(p) and (g or True) for _, _, sub, _, g in others) or
                            (p == 1 and any(pid == s.pid and k == key and sub == SUBID_KEY and md == "x"
                                            for pid, k, sub, md, g in locks))
                            for p in range(1, permits + 1))
            if not (in_line or all_taken):
                raise Violation("session %d was told no for %s (permits %d) but nobody is in line and a "
                                "permit is free: %r" % (s.idx, name, permits, others))
        else:
            reason = any(sub == SUBID_KEY and conflicts(md, key_mode(mode)) for _, _, sub, md, g in others)
            if mode == "u":
                # (or another holds the update gate, or waits for it)
                reason = reason or any(sub == SUBID_GATE for _, _, sub, md, g in others)
            if not reason:
                raise Violation("session %d was told no for %s (%s) but no other process holds or "
                                "awaits it in a conflicting mode: %r" % (s.idx, name, mode, others))

    def check_lock_answer(self, s, call, res, locks):
        if res is True:
            self.check_yes(s, call["name"], call["mode"], call.get("permits") or 0, locks)
        elif res is False:
            self.check_no(s, call["name"], call["mode"], call.get("permits") or 0, locks)

    def check_view(self):
        """dlock_locks shows the model's named holds and waits."""
        m = self.model
        with self.obs.cursor() as cur:
            cur.execute("SELECT pid, name, left(mode, 1), scope, granted, permit, token, released "
                        "  FROM dlock_locks WHERE database = current_database() AND name IS NOT NULL")
            rows = cur.fetchall()
        got = {}
        released = {}
        for pid, name, mode, scope, granted, permit, token, rel in rows:
            got.setdefault((pid, name, mode, granted), []).append((scope, permit, token))
            if scope == "detached":
                released[token] = rel
        want = {}
        uncertain = set()
        for s in m.sessions:
            for (name, mode), h in s.holds.items():
                if h.total() == 0:
                    continue
                scope = ("session+transaction" if h.nsession and h.xact else
                         "session" if h.nsession else "transaction")
                permit = h.permit if h.permit else None
                want.setdefault((s.pid, name, mode, True), []).append((scope, permit, h.token))
            for hk in s.ghosts:
                if self.ghost_shown(s, hk):
                    g = s.ghosts[hk]
                    want.setdefault((s.pid, hk[0], hk[1], True), []).append(
                        ("session", g.permit if g.permit else None, g.token))
            for (name, mode) in s.stale_scope:
                uncertain.add((s.pid, name, mode, True))
            if s.pending is not None and s.pending.kind in ("wait", "permit", "update"):
                # (a wait for update, for its gate or for the key after it: one row)
                p = s.pending
                scope = "transaction" if p.call.get("xact") else "session"
                want.setdefault((s.pid, p.call["name"], HK[p.call["mode"]], False),
                                []).append((scope, None, None))
        for d in m.detached:
            want.setdefault((self.holder_pid, d.name, "e" if d.mode == "x" else "s", True), []).append(
                ("detached", d.permit if d.permit else None, d.token))
            # released by its holder, kept for its minimum hold: the row says so
            if d.token in released and released[d.token] != d.released and \
                    abs(d.min_until - time.time()) > 0.3:
                raise Violation("dlock_locks says released=%r of detached hold %d; the model %r"
                                % (released[d.token], d.token, d.released))
        # the view says "exclusive"/"shared"/"update"; the model "x"/"s" for
        # the lock manager and "e"/"s"/"u" here
        for k in set(got) | set(want):
            if k in uncertain:
                continue
            g = sorted(got.get(k, []), key=repr)
            w = sorted(want.get(k, []), key=repr)
            if len(g) != len(w):
                raise Violation("dlock_locks has %r for %r; the model %r" % (g, k, w))
            for (gs, gp, gt), (ws, wp, wt) in zip(g, w):
                # permit 1 taken as a permit shows 1, as the plain lock NULL
                if gs != ws or (gp or 1) != (wp or 1) or (wt is not None and gt != wt):
                    raise Violation("dlock_locks has %r for %r; the model %r" % (g, k, w))

    def check_locks(self):
        """pg_locks shows each session holding exactly the model's locks of the
        names' keys (objsubid 1: ExclusiveLock, ShareLock, RowShareLock) and
        update gates (objsubid 7), in any scope: a lock nobody gave back (an
        update gate left behind) or one given back twice shows here."""
        m = self.model
        keys = set(self.keys.values())
        sess = {s.pid: s for s in m.sessions
                if not self.lease_due(s) and not (s.pending is not None and s.pending.done.is_set())}
        got = {(pid, key, sub, md) for pid, key, sub, md, g in self.pg_locks()
               if g and pid in sess and key in keys and sub in (SUBID_KEY, SUBID_GATE) and md in ("x", "s", "r")}
        want = {(s.pid, key, sub, md) for s in sess.values() for (key, sub, md), c in s.lm.items()
                if sub in (SUBID_KEY, SUBID_GATE) and (c[0] > 0 or c[1] or c[2])}
        if got != want:
            def show(t):
                return "s%d %s/%s/%s" % (sess[t[0]].idx, self.names[[self.keys[n] for n in self.names].index(t[1])],
                                          {SUBID_KEY: "key", SUBID_GATE: "gate"}[t[2]], t[3])
            raise Violation("pg_locks shows %s held that the model does not, and not %s that it does"
                            % (sorted(show(t) for t in got - want), sorted(show(t) for t in want - got)))

    def note(self, what):
        """Counts what a sequence went through (--verbose prints them)."""
        self.counts[what] = self.counts.get(what, 0) + 1

    def note_token(self, tok, new):
        """A token the server gave: a new hold's is larger than every token of
        the steps before (grants within one step may race each other)."""
        if tok is None:
            raise Violation("a hold the view shows without a name or token")
        if new:
            if tok <= self.model.max_token:
                raise Violation("token %d of a new hold is not larger than %d given before"
                                % (tok, self.model.max_token))
            self.step_max = max(self.step_max, tok)
        self.tokens_seen.add(tok)

    # -- waiters ---------------------------------------------------------------
    def grant_waiters(self):
        """After a release: the model grants what the lock manager would, in
        queue order, then the first in line of each semaphore takes a free
        permit; the harness checks that the server did so."""
        m = self.model
        changed = True
        while changed:
            changed = False
            for key_sub, q in list(m.queue.items()):
                ahead = []
                for p in list(q):
                    blocked = not m.free_for(p.sess, p.key, p.sub, p.mode, queue_too=False) or \
                        any(conflicts(a.mode, p.mode) for a in ahead)
                    if not blocked:
                        q.remove(p)
                        if p.kind == "update" and p.phase == "gate":
                            self.update_gate_granted(p)
                        else:
                            self.finish_pending(p, True)
                        changed = True
                    else:
                        ahead.append(p)
            for key, q in list(m.line.items()):
                if not q:
                    continue
                head = q[0]
                permit = self.free_permit(head.sess, key, head.call["permits"])
                if permit:
                    q.pop(0)
                    head.permit = permit
                    self.finish_pending(head, True)
                    changed = True

    def update_gate_granted(self, p):
        """A wait for update mode was given the gate: it asks for RowShareLock
        on the key next, granted at once or waiting in the key's queue."""
        m = self.model
        s = p.sess
        m.lm_add(s, p.key, SUBID_GATE, "x", p.call.get("xact"))
        p.gate = True
        if s.lm_count(p.key, SUBID_KEY, "r") == 0 and not m.free_for(s, p.key, SUBID_KEY, "r"):
            exp, pos = self.expect_sleep(s, p.key, SUBID_KEY, "r")
            if exp == "wait":
                p.phase, p.sub, p.mode = "key", SUBID_KEY, "r"
                m.queue.setdefault((p.key, SUBID_KEY), []).insert(pos, p)
                self.trace.append("  s%d pid %s: (given the gate of %s, waits for its key)"
                                  % (s.idx, s.pid, p.call["name"]))
                self.note("update waits for the key after the gate")
                self.await_waiting(p, "RowShareLock")
                return
        self.finish_pending(p, True)

    def await_waiting(self, p, lockmode):
        """The server shows p's session waiting for p's lock (its wait started
        in the lock manager), and past its deadlock check."""
        end = time.monotonic() + WAIT_SETTLE
        s = p.sess
        while time.monotonic() < end:
            if p.done.is_set():
                raise Violation("session %d's wait for %s returned %r / %s; the model says it waits for %s"
                                % (s.idx, p.call["name"], p.result, p.error, lockmode))
            n = run_sql(self.obs, "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted "
                                  "AND locktype = 'advisory' AND objsubid = %s AND mode = %s",
                        (s.pid, p.sub, lockmode))
            if n:
                break
            time.sleep(0.01)
        else:
            raise Violation("session %d does not wait for %s of %s" % (s.idx, lockmode, p.call["name"]))
        time.sleep(0.3)

    def free_permit(self, sess, key, permits, skip_detached=False):
        m = self.model
        for p in range(1, permits + 1):
            sub = subid(p)
            if p == 1 and sess is not None and sess.lm_count(key, sub, "x") > 0:
                continue              # this session's own exclusive hold (raw): taken
            if skip_detached and any(self.keys[d.name] == key and subid(d.permit) == sub for d in m.detached):
                continue
            if self.grantable_now(sess, key, sub, "x"):
                return p
        return 0

    def finish_pending(self, p, granted):
        """The model says p's wait ends now (granted): the server must agree."""
        s = p.sess
        if not p.done.wait(WAIT_SETTLE):
            raise Violation("session %d should have been granted %s by now, still waits"
                            % (s.idx, p.call["name"]))
        s.pending = None
        if p.error is not None:
            raise Violation("session %d's wait for %s ended with %s" % (s.idx, p.call["name"], p.error))
        if p.result is not True:
            raise Violation("session %d's wait for %s returned %r, the model says it was granted"
                            % (s.idx, p.call["name"], p.result))
        permit = getattr(p, "permit", 0)
        self.trace.append("  s%d pid %s: (its wait ended) %r" % (s.idx, s.pid, p.result))
        if self.lease_due(s):
            # its own lease ran out as it was granted: it may be ended now
            pid = s.pid
            self.settle_events()
            if s.pid != pid:
                return
        if p.kind == "permit":
            # which permit the first in line took depends on the order of the
            # releases it was woken by within the step: the one it holds now,
            # which must be one of 1..N and free of others (check_yes)
            locks = self.pg_locks()
            self.check_yes(s, p.call["name"], "x", p.call["permits"], locks)
            key = self.keys[p.call["name"]]
            subs = [l[2] for l in locks if l[0] == s.pid and l[1] == key and l[4] and l[3] == "x" and
                    (l[2] == SUBID_KEY or l[2] > SUBID_TURNSTILE) and
                    s.lm_count(key, l[2], "x") == 0]
            if len(subs) != 1:
                raise Violation("session %d took permits %r of %s at once" % (s.idx, subs, p.call["name"]))
            permit = 1 if subs[0] == SUBID_KEY else subs[0] - SUBID_TURNSTILE
            if not self.model.free_for(s, key, subs[0], "x", queue_too=False):
                raise Violation("session %d took permit %d of %s, which another holds" % (s.idx, permit, p.call["name"]))
        self.apply_grant(s, p.call, permit, gate_taken=p.gate)

    def mode_of(self, hk):
        """The lock a hold takes on its key (an update hold: RowShareLock, and its gate)."""
        return {"e": "x", "s": "s", "u": "r"}[hk[1]]

    def ghost_active(self, s, hk):
        """Does the session hold the ghost's lock (any scope)?  An update hold's
        is its RowShareLock and its gate: both (no raw call takes either)."""
        g = s.ghosts[hk]
        key = self.keys[hk[0]]
        if hk[1] == "u" and s.lm_count(key, SUBID_GATE, "x") == 0:
            return False
        return s.lm_count(key, subid(g.permit), self.mode_of(hk)) > 0

    def ghost_shown(self, s, hk):
        """Does dlock_locks show the ghost (dlock still records it)?  The view
        shows a hold by its lock: an update hold by its gate."""
        if hk[1] == "u":
            return s.lm_count(self.keys[hk[0]], SUBID_GATE, "x") > 0
        return self.ghost_active(s, hk)

    def touch_ghost(self, s, hk):
        """A dlock call looks at (name, mode): a ghost whose lock the session
        holds again goes on as the hold; one whose lock it does not is
        forgotten."""
        if hk not in s.ghosts:
            return
        g = s.ghosts[hk]
        active = self.ghost_active(s, hk)
        del s.ghosts[hk]
        self.note("ghost %s %s" % (hk[1], "active" if active else "gone"))
        if active and hk not in s.holds:
            h = Hold(g.permit, g.token)
            h.nsession = g.n
            s.holds[hk] = h
        elif active:
            s.holds[hk].nsession += g.n

    def lost_session_part(self, s, hk, h):
        """The lock manager no longer has h's session holds (released behind
        dlock's back): a ghost, or (a transaction's hold keeps the lock) a
        session part dlock cannot tell is gone until the transaction ends."""
        if h.nsession == 0:
            return
        self.note("lost %s %s" % (hk[1], "xact" if h.xact else "lease" if h.lease is not None else "ghost"))
        if h.xact:
            # (one with a lease lost its marker: forgotten at the transaction's end)
            h.stale_n = h.nsession if h.lease is None else 0
            h.nsession = 0
            s.stale_scope.add(hk)
        elif h.lease is not None:
            # its lease marker went with it: dlock forgets it when it looks
            # (at the latest at the transaction's end; until then, a commit
            # after its lease ran out is refused, as it may have been held
            # then)
            if s.in_block and h.lease - time.time() < 60:
                s.lost_leases.append(h.lease)
            h.nsession = 0
        else:
            s.ghosts[hk] = Ghost(h)
            h.nsession = 0
        if h.total() == 0:
            del s.holds[hk]

    # -- one step ----------------------------------------------------------------
    def apply_grant(self, s, call, permit, gate_taken=False):
        """A grant the server confirmed: into the model; checks the token.
        (gate_taken: an update hold whose gate the model has already.)"""
        m = self.model
        name, mode, xact = call["name"], call["mode"], call.get("xact", False)
        key = self.keys[name]
        hk = (name, HK[mode])
        sub = subid(permit)
        h = s.holds.get(hk)
        raised = bool(call.get("raise") and xact)
        m.lm_add(s, key, sub, key_mode(mode), xact, raised=raised)
        if mode == "u" and not gate_taken:
            m.lm_add(s, key, SUBID_GATE, "x", xact)
        if h is None or h.total() == 0:
            h = Hold(permit, None)
            s.holds[hk] = h
            new = True
        else:
            new = False
        if xact:
            h.xact.append(s.depth if s.in_block else -1)
            if raised:
                h.raised.append(s.depth)
        else:
            h.nsession += 1
        if call.get("lease") is not None and not call.get("defer"):
            h.lease = time.time() + call["lease"]
            if call["lease"] < 60 and not xact:
                m.events.append((h.lease, "session-lease", s.idx))
        tok = self.server_token(s, name, mode)
        if new:
            self.note_token(tok, True)
            h.token = tok
        elif h.token is None:
            h.token = tok
        elif tok != h.token:
            raise Violation("re-entry of %s by session %d changed its token %s -> %s"
                            % (name, s.idx, h.token, tok))

    def server_token(self, s, name, mode):
        """The token the view shows for this session's hold (not dlock_token:
        it must not change what dlock remembers)."""
        return run_sql(self.obs, "SELECT token FROM dlock_locks WHERE pid = %s AND name = %s AND granted "
                                 "AND mode = %s AND scope <> 'detached'",
                       (s.pid, name, WORDS[mode]))

    def lease_due(self, s):
        """Has a short lease of session s run out, or nearly?"""
        return any(e[1] == "session-lease" and e[2] == s.idx and e[0] - 0.15 <= time.time()
                   for e in self.model.events)

    def settle_events(self):
        """Wait out every asynchronous event that is due or nearly so."""
        m = self.model
        while True:
            now = time.time()
            due = [e for e in m.events if e[0] - 0.15 <= now]
            if not due:
                return
            t = max(e[0] for e in due)
            time.sleep(max(0.0, t - now) + SETTLE)
            # every end that came due first, then who gets what was freed
            for e in sorted(due, key=lambda e: e[0]):
                m.events.remove(e)
                self.apply_event(e)
            self.grant_waiters()

    def apply_event(self, e):
        m = self.model
        _, kind, arg = e
        if kind == "session-lease":
            s = m.sessions[arg]
            # is the lease still there (not renewed, released, or the session gone)?
            live = [h for h in s.holds.values() if h.lease is not None and h.lease <= time.time() and
                    h.nsession > 0]
            if not live:
                return
            if run_sql(self.obs, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (s.pid,)) != 0:
                raise Violation("session %d outlived its lease by %.1f s" % (s.idx, SETTLE))
            self.log_step({"op": "(the reaper ended session %d)" % s.idx})
            self.end_session(s, "lease", grant=False)
        elif kind == "detached-end":
            d = arg
            if d not in m.detached:
                return
            if d.lease > time.time() and not (d.released and d.min_until <= time.time()):
                return
            rows = run_sql(self.obs, "SELECT count(*) FROM dlock_locks WHERE token = %s", (d.token,))
            if rows:
                raise Violation("detached hold %d of %s outlived its end" % (d.token, d.name))
            m.detached.remove(d)

    def dump(self):
        """The model's state and the server's, for a failure's report."""
        out = []
        for s in self.model.sessions:
            out.append("session %d (pid %s)%s%s: holds %s; lock manager %s; ghosts %s" % (
                s.idx, s.pid, " in a block" if s.in_block else "",
                " waiting for %s" % s.pending.call["name"] if s.pending else "",
                {"%s/%s" % k: (h.permit, h.nsession, h.xact, h.token) for k, h in s.holds.items()},
                {"%s/%s/%s" % (self.names[[self.keys[n] for n in self.names].index(k[0])], k[1], k[2]): v
                 for k, v in s.lm.items()},
                {"%s/%s" % k: (g.permit, g.n, g.token) for k, g in s.ghosts.items()}))
        out.append("detached: %s" % [(d.name, d.mode, d.permit, d.token) for d in self.model.detached])
        try:
            with self.obs.cursor() as cur:
                cur.execute("SELECT pid, name, mode, scope, granted, permit, token FROM dlock_locks "
                            " WHERE database = current_database() ORDER BY pid, name")
                for r in cur.fetchall():
                    out.append("view: %r" % (r,))
            for l in self.pg_locks():
                out.append("pg_locks: %r" % (l,))
        except Exception as e:  # noqa: BLE001
            out.append("(the view: %s)" % e)
        return "\n".join(out)

    def log_step(self, step):
        self.log.append(step)
        self.trace.append(json.dumps(step, sort_keys=True))

    # -- the calls ---------------------------------------------------------------
    def do(self, step):
        """Runs one step on the server, checks it against the model."""
        self.settle_events()
        self.model.max_token = max(self.model.max_token, self.step_max)
        self.log_step(step)
        if ARGS.verbose:
            print("# step %d: %s" % (len(self.log), json.dumps(step, sort_keys=True)), flush=True)
        op = step["op"]
        s = self.model.sessions[step["s"]] if "s" in step else None
        if s is not None and s.pending is not None and op not in ("terminate",):
            return                    # (a replayed sequence may name a busy session)
        getattr(self, "op_" + op)(s, step)
        # (whatever the step gave back: its waiters are granted)
        self.grant_waiters()
        for x in self.model.sessions:
            for hk in [hk for hk, h in x.holds.items() if h.total() == 0 and hk not in x.stale_scope]:
                del x.holds[hk]
        # (an event that came due while the step ran: waited out first)
        self.settle_events()
        self.check_view()
        self.check_locks()

    def call(self, s, sql, params=None):
        """(result, error) of a statement of session s."""
        try:
            res = run_sql(s.conn, sql, params), None
        except psycopg2.Error as e:
            res = None, e
        self.trace.append("  s%d pid %s: %s %r -> %r%s" % (
            s.idx, s.pid, sql, params, res[0], "" if res[1] is None else " ERROR %s %s" % (
                res[1].pgcode, str(res[1]).strip().splitlines()[0])))
        return res

    def after_error(self, s):
        """An error in a transaction block: roll the whole block back."""
        if s.in_block:
            self.op_rollback(s, {})

    def lock_sql(self, call):
        if call.get("raise"):
            return self.raise_sql(call)
        fn = ("dlock_lock" if call["wait"] is not None else "dlock_try") + ("_xact" if call.get("xact") else "")
        if "names" not in call and (call["mode"] == "u" or call.get("words") or call.get("bad")):
            # the full form with the mode in words (1.7): the name as dlock_name
            # (the positional forms for clients have no mode; the full one has
            # timeout_ms and lease_ms)
            args, params = ["%s::dlock_name"], [call["name"]]
            if call["wait"] is not None:
                if call.get("ms"):
                    args.append("timeout_ms => %s")
                    params.append(ms(call["wait"]))
                else:
                    args.append("timeout => %s::interval")
                    params.append("%f s" % call["wait"])
            args.append("mode => %s")
            params.append(WORDS[call["mode"]])
            self.hold_args(call, args, params, call.get("ms"))
            if call.get("bad") == "shared":
                args.append("shared => true")        # contradicts the mode
            elif call.get("bad") == "permits":
                args.append("permits => 2")          # none in update mode
            elif call["mode"] != "s" and call.get("words"):
                args.append("shared => false")       # agrees
            return "SELECT %s(%s)" % (fn, ", ".join(args)), params
        if call.get("ms") and "names" not in call:
            # the positional form for clients: every argument, durations in ms
            params = [call["name"]]
            if call["wait"] is not None:
                params.append(ms(call["wait"]))
            params += [call["mode"] == "s", ms(call.get("lease"))]
            if call.get("info") is not None or call.get("permits"):
                params += [call.get("info"), call.get("permits")]    # the long shape
            return "SELECT %s_ms(%s)" % (fn, ", ".join(["%s"] * len(params))), params
        args, params = ["%s"], [call["name"] if "names" not in call else call["names"]]
        if "names" in call:
            args[0] = "%s::text[]"
        if call["wait"] is not None:
            args.append("timeout => %s::interval")
            params.append("%f s" % call["wait"])
        if call["mode"] == "s":
            args.append("shared => true")
        self.hold_args(call, args, params, False)
        return "SELECT %s(%s)" % (fn, ", ".join(args)), params

    @staticmethod
    def hold_args(call, args, params, lease_ms):
        """The named lease (or lease_ms), info and permits of a lock call."""
        if call.get("lease") is not None:
            args.append("lease_ms => %s" if lease_ms else "lease => %s::interval")
            params.append(ms(call["lease"]) if lease_ms else "%f s" % call["lease"])
        if call.get("info") is not None:
            args.append("info => %s")
            params.append(call["info"])
        if call.get("permits"):
            args.append("permits => %s")
            params.append(call["permits"])

    def raise_sql(self, call):
        """dlock_raise(name, timeout, timeout_ms): wait None is the answer at
        once (timeout 0), "nolimit" no timeout (NULL)."""
        if call.get("nolimit"):
            return "SELECT dlock_raise(%s)", [call["name"]]
        wait = call["wait"] or 0
        if call.get("ms"):
            return "SELECT dlock_raise(%s, timeout_ms => %s)", [call["name"], ms(wait)]
        return "SELECT dlock_raise(%s, %s::interval)", [call["name"], "%f s" % wait]

    def expect_lock(self, s, call):
        """What the model says a lock call answers: ('yes', permit), ('no', None),
        ('wait', position in the queue) or ('error', sqlstate)."""
        m = self.model
        name, mode = call["name"], call["mode"]
        key = self.keys[name]
        if call.get("bad"):
            return ("error", "22023")     # refused before anything is looked at
        if mode == "u":
            return self.expect_update(s, call)
        hk = (name, HK[mode])
        self.touch_ghost(s, hk)
        h = s.holds.get(hk)
        live = h is not None and h.total() > 0
        permits = call.get("permits") or 0
        waits = call["wait"] is not None
        if live and h.permit > 1 and not permits:
            return ("error", "55000")
        if live and permits and (h.permit or 1) > permits:
            return ("error", "55000")
        if live:
            return ("yes", h.permit)  # re-entry of what it holds
        if permits:
            if m.in_line(key, exclude=s):
                return ("wait", len(m.line.get(key, []))) if waits else ("no", None)
            p = self.free_permit(s, key, permits)
            if p:
                return ("yes", p)
            return ("wait", len(m.line.get(key, []))) if waits else ("no", None)
        sub = SUBID_KEY
        if s.lm_count(key, sub, mode) > 0:
            return ("yes", 0)         # the lock manager has it (a raw hold): re-entry
        if self.grantable_now(s, key, sub, mode):
            return ("yes", 0)
        if not waits:
            return ("no", None)
        return self.expect_sleep(s, key, sub, mode)

    def expect_update(self, s, call):
        """A lock call in update mode: the gate first (a try that does not get
        it: no; a wait: in the gate's queue), then RowShareLock on the key (a
        try, or a wait that times out, gives the gate back: no).  What the
        wait answers: ('wait', (phase, position in that queue))."""
        name = call["name"]
        key = self.keys[name]
        hk = (name, "u")
        self.touch_ghost(s, hk)
        h = s.holds.get(hk)
        if h is not None and h.total() > 0:
            return ("yes", 0)             # re-entry: both its locks again
        waits = call["wait"] is not None
        if s.lm_count(key, SUBID_GATE, "x") == 0 and not self.grantable_now(s, key, SUBID_GATE, "x"):
            if not waits:
                return ("no", None)
            exp, pos = self.expect_sleep(s, key, SUBID_GATE, "x")
            return ("wait", ("gate", pos)) if exp == "wait" else (exp, pos)
        if s.lm_count(key, SUBID_KEY, "r") > 0 or self.grantable_now(s, key, SUBID_KEY, "r"):
            return ("yes", 0)
        if not waits:
            return ("no", None)
        exp, pos = self.expect_sleep(s, key, SUBID_KEY, "r")
        return ("wait", ("key", pos)) if exp == "wait" else (exp, pos)

    def grantable_now(self, s, key, sub, mode):
        """Would a request that does not wait be granted?"""
        if self.model.free_for(s, key, sub, mode):
            return True
        return self.tries_jump and s is not None and self.expect_sleep(s, key, sub, mode)[0] == "yes"

    def expect_sleep(self, s, key, sub, mode):
        """A request that waits (PostgreSQL's ProcSleep): one that holds a
        lock of the object a waiter wants goes ahead of that waiter, and is
        granted at once if nothing else is in its way."""
        m = self.model
        held = [md for md in ("x", "s", "r") if s.lm_count(key, sub, md) > 0]
        others = any(conflicts(md, mode) for who, md in m.holders(key, sub, exclude=s))
        queue = m.queue.get((key, sub), [])
        if held:
            ahead = []
            for i, p in enumerate(queue):
                if any(conflicts(p.mode, x) for x in held):
                    p_held = [md for md in ("x", "s", "r") if p.sess.lm_count(key, sub, md) > 0]
                    if any(conflicts(mode, x) for x in p_held):
                        return ("error", "40P01")
                    if not any(conflicts(mode, a) for a in ahead) and not others:
                        return ("yes", 0)
                    return ("wait", i)
                ahead.append(p.mode)
        return ("wait", len(queue))

    def in_own_xact(self, s, op, step):
        """A transaction-scope call outside a block: op in a transaction of its
        own, so that pg_locks can be read before it ends."""
        self.op_begin(s, {})
        try:
            return op(s, step)
        finally:
            self.op_commit(s, {})

    def op_lock(self, s, step):
        call = step["call"]
        if call.get("xact") and not s.in_block and call["wait"] is not None and call["wait"] > 5:
            # a wait left in the queue needs a transaction that outlasts the
            # statement: outside a block, a short wait instead
            step = dict(step, call=dict(call, wait=0.03))
            call = step["call"]
        if call.get("xact") and not s.in_block:
            return self.in_own_xact(s, self.op_lock, step)
        m = self.model
        if call["wait"] is not None and call["wait"] > 5:
            return self.op_lock_pending(s, step)
        exp, detail = self.expect_lock(s, call)
        sql, params = self.lock_sql(call)
        res, err = self.call(s, sql, params)
        locks = self.pg_locks()
        if err is not None:
            if exp == "error" and err.pgcode == detail:
                self.after_error(s)
                return
            raise Violation("session %d: %s %r failed: %s %s (the model: %s)"
                            % (s.idx, sql, params, err.pgcode, str(err).strip().splitlines()[0], exp))
        if exp == "error":
            raise Violation("session %d: %s %r answered %r, the model expected error %s"
                            % (s.idx, sql, params, res, detail))
        self.note("%s %s" % ("raise" if call.get("raise") else "lock " + call["mode"],
                             "error" if err is not None else res))
        try:
            self.check_lock_answer(s, call, res, locks)
        except Violation as v:
            if self.lease_due(s):
                # told yes, then ended over a lease of its own that ran out
                # right after (the reaper): what it held is gone with it
                self.settle_events()
                return
            raise Violation("%s (session %d: %s %r; the model: %s %s)" % (v, s.idx, sql, params, exp, detail))
        if res is True:
            if exp not in ("yes",):
                raise Violation("session %d: %s %r answered true, the model: %s" % (s.idx, sql, params, exp))
            permit = detail or 0
            if call.get("permits") and permit == 0:
                permit = 0
            # which permit: the one pg_locks shows this session holding now, new
            if call.get("permits") and detail is not None:
                permit = detail
            self.apply_grant(s, call, permit)
            if not call.get("xact") or not s.in_block:
                self.end_statement(s)
        elif res is False:
            if exp == "yes":
                raise Violation("session %d: %s %r answered false, the model: yes" % (s.idx, sql, params))
            self.end_statement(s)
        else:
            raise Violation("session %d: %s answered %r" % (s.idx, sql, res))

    def op_lock_pending(self, s, step):
        """A call that the model says waits: it is left waiting in the queue."""
        call = step["call"]
        m = self.model
        exp, detail = self.expect_lock(s, call)
        if exp != "wait" or (call.get("xact") and not s.in_block):
            call = dict(call, wait=0.03, nolimit=False)
            return self.op_lock(s, dict(step, call=call))
        key = self.keys[call["name"]]
        permits = call.get("permits") or 0
        if call["mode"] == "u":
            # update mode: waits for the gate, or (the gate given at once)
            # holds the gate and waits for RowShareLock on the key
            phase, detail = detail
            if phase == "gate":
                p = Pending(s, call, "update", key, SUBID_GATE, "x")
            else:
                p = Pending(s, call, "update", key, SUBID_KEY, "r")
                m.lm_add(s, key, SUBID_GATE, "x", call.get("xact"))
                p.gate = True
        else:
            kind = "permit" if permits else "wait"
            p = Pending(s, call, kind, key, SUBID_TURNSTILE if permits else SUBID_KEY, call["mode"])
        sql, params = self.lock_sql(call)

        def run():
            try:
                p.result = run_sql(s.conn, sql, params)
            except psycopg2.Error as e:
                p.error = e
            p.done.set()

        p.thread = threading.Thread(target=run, daemon=True)
        s.pending = p
        self.note("waits: %s" % ("raise" if call.get("raise") else "%s %s" % (p.kind, p.phase)))
        if permits:
            m.line.setdefault(key, []).append(p)
        else:
            m.queue.setdefault((key, p.sub), []).insert(detail, p)
        p.thread.start()
        # it is waiting: in the lock manager's queue, or (first in line) asleep
        end = time.monotonic() + WAIT_SETTLE
        while time.monotonic() < end:
            if p.done.is_set():
                raise Violation("session %d: %s returned %r / %s at once; the model says it waits"
                                % (s.idx, sql, p.result, p.error))
            st = run_sql(self.obs, "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (s.pid,))
            if st in ("Lock", "Extension"):
                break
            time.sleep(0.01)
        else:
            raise Violation("session %d: %s does not wait" % (s.idx, sql))
        # past its deadlock check (deadlock_timeout), so that the waits others
        # start later are not looked at by it
        time.sleep(0.3)

    def end_statement(self, s):
        """Autocommit: a statement's transaction-scope holds end with it."""
        if s.in_block:
            return
        self.end_xact(s, commit=True)

    def end_xact(self, s, commit):
        m = self.model
        for hk in s.stale_scope:
            h = s.holds.get(hk)
            # (stale_n is 0 for a hold whose lease marker went with its
            # session part; a lease given since has a marker of its own)
            if h is not None and getattr(h, "stale_n", 0):
                if h.nsession > 0:
                    # taken again since: dlock's count has both
                    h.nsession += h.stale_n
                else:
                    h.nsession = h.stale_n
                    s.ghosts[hk] = Ghost(h)
                    h.nsession = 0
                h.stale_n = 0
        s.stale_scope = set()
        s.lost_leases = []
        for hk, h in list(s.holds.items()):
            if h.xact:
                h.xact = []
                h.raised = []
                if h.total() == 0:
                    del s.holds[hk]
        for k, c in list(s.lm.items()):
            c[1] = []
            c[2] = []         # (dlock gives a raise's session lock back)
        s.lm_tidy()
        s.in_block = False
        s.depth = 0
        # (a ghost that went on as the hold while a transaction's lock was
        # there: stale again)
        self.behind_back(s)
        self.grant_waiters()

    # -- transaction control -------------------------------------------------------
    def op_begin(self, s, step):
        if s.in_block:
            return
        self.call(s, "BEGIN")
        s.in_block = True
        s.depth = 0

    def end_block(self, s, sql):
        if not s.in_block:
            return
        res, err = self.call(s, sql)
        if (err is not None and sql == "COMMIT" and err.pgcode == "55P03" and
                "released in this transaction" in str(err) and
                any(t <= time.time() for t in s.lost_leases)):
            # a hold with a lease released behind dlock's back in this block,
            # whose lease has run out since: dlock cannot tell when it went,
            # and refuses the commit; the block is rolled back
            self.end_xact(s, False)
            return
        if err is not None:
            raise Violation("%s of session %d failed: %s" % (sql, s.idx, err))
        self.end_xact(s, sql == "COMMIT")

    def op_commit(self, s, step):
        self.end_block(s, "COMMIT")

    def op_rollback(self, s, step):
        self.end_block(s, "ROLLBACK")

    def op_savepoint(self, s, step):
        if not s.in_block:
            return
        s.depth += 1
        self.call(s, "SAVEPOINT sp%d" % s.depth)

    def op_rollback_to(self, s, step):
        if not s.in_block or s.depth == 0:
            return
        res, err = self.call(s, "ROLLBACK TO SAVEPOINT sp%d" % s.depth)
        if err is not None:
            raise Violation("ROLLBACK TO of session %d failed: %s" % (s.idx, err))
        d = s.depth
        for hk, h in list(s.holds.items()):
            h.xact = [x for x in h.xact if x < d]
            h.raised = [x for x in h.raised if x < d]
            if h.total() == 0:
                del s.holds[hk]
        for k, c in s.lm.items():
            c[1] = [x for x in c[1] if x < d]
            c[2] = [x for x in c[2] if x < d]
        s.lm_tidy()
        self.behind_back(s)
        # (the savepoint stays, as in PostgreSQL)
        self.grant_waiters()

    def op_release_sp(self, s, step):
        if not s.in_block or s.depth == 0:
            return
        res, err = self.call(s, "RELEASE SAVEPOINT sp%d" % s.depth)
        if err is not None:
            raise Violation("RELEASE of session %d failed: %s" % (s.idx, err))
        d = s.depth
        for h in s.holds.values():
            h.xact = [min(x, d - 1) for x in h.xact]
            h.raised = [min(x, d - 1) for x in h.raised]
        for c in s.lm.values():
            c[1] = [min(x, d - 1) for x in c[1]]
            c[2] = [min(x, d - 1) for x in c[2]]
        s.depth -= 1

    # -- releases ------------------------------------------------------------------
    def op_unlock(self, s, step):
        name, mode = step["name"], step["mode"]
        if mode == "u" or step.get("bad"):
            return self.op_unlock_update(s, step)
        hk = (name, HK[mode])
        self.touch_ghost(s, hk)
        # (the name as dlock_name reaches the full form; as text, the positional one of 1.6)
        sql = ("SELECT dlock_unlock(%s::dlock_name, shared => %s)" if step.get("full")
               else "SELECT dlock_unlock(%s, shared => %s)")
        params = (name, mode == "s")
        if step.get("words"):
            sql, params = "SELECT dlock_unlock(%s::dlock_name, mode => %s)", (name, WORDS[mode])
        res, err = self.call(s, sql, params)
        if err is not None:
            raise Violation("dlock_unlock failed: %s" % err)
        self.unlock_answered(s, name, mode, res, "dlock_unlock")

    def unlock_answered(self, s, name, mode, res, what):
        """dlock_unlock(name, mode) of exclusive or shared answered res (one
        session hold released as pg_advisory_unlock would; false, with a
        WARNING, where dlock records the name in this mode in the transaction
        only: its lock is not the session's, and a raise's session lock is
        dlock's to give back): checked, and into the model."""
        key = self.keys[name]
        hk = (name, HK[mode])
        h = s.holds.get(hk)
        sub = subid(h.permit) if h is not None else SUBID_KEY
        exp = s.lm.get((key, sub, mode), [0])[0] > 0
        if h is not None and h.xact and h.nsession == 0 and \
                not (hk in s.stale_scope and getattr(h, "stale_n", 0) > 0):
            exp = False
        if res != exp:
            raise Violation("session %d: %s(%s, %s) answered %r, the model %r"
                            % (s.idx, what, name, mode, res, exp))
        if res:
            self.model.lm_release_session(s, key, sub, mode)
            if (h is not None and h.nsession == 0 and hk in s.stale_scope and
                    getattr(h, "stale_n", 0) > 0):
                # dlock's count still has the part released behind its back
                # (stale_scope): the unlock takes one from it
                h.stale_n -= 1
            elif h is not None and h.nsession > 0:
                h.nsession -= 1
                if h.total() == 0:
                    del s.holds[hk]
                elif h.nsession > 0 and s.lm.get((key, sub, mode), [0])[0] == 0:
                    # dlock's count is above the lock manager's (a raw unlock
                    # took one): the rest of its session part is gone
                    self.lost_session_part(s, hk, h)
            self.behind_back(s)
            self.grant_waiters()
        elif h is not None:
            h.nsession = 0    # dlock's record: not held at session level
            h.stale_n = 0
            s.stale_scope.discard(hk)
            if h.total() == 0:
                del s.holds[hk]

    def op_unlock_update(self, s, step):
        """dlock_unlock(name, mode => 'update'): one gate count given back, and
        one RowShareLock count (src/locks.c release_update); false, with a
        WARNING, where it holds no gate (or dlock no session hold of it)."""
        name = step["name"]
        key = self.keys[name]
        hk = (name, "u")
        if step.get("bad"):
            res, err = self.call(s, "SELECT dlock_unlock(%s::dlock_name, shared => true, mode => 'update')",
                                 (name,))
            if err is None or err.pgcode != "22023":
                raise Violation("session %d: dlock_unlock(%s, shared => true, mode => 'update'): %r %s"
                                % (s.idx, name, res, err))
            self.after_error(s)
            return
        # (a ghost whose locks the session holds again goes on as the hold: the same)
        if hk in s.ghosts and self.ghost_active(s, hk):
            self.touch_ghost(s, hk)
        h = s.holds.get(hk)
        g = s.ghosts.get(hk)
        recorded = (h is not None and (h.nsession > 0 or (hk in s.stale_scope and getattr(h, "stale_n", 0) > 0))
                    or g is not None)
        sql = ("SELECT dlock_unlock(%s::dlock_name, shared => false, mode => 'update')" if step.get("full")
               else "SELECT dlock_unlock(%s::dlock_name, mode => 'update')")
        del s.conn.notices[:]
        res, err = self.call(s, sql, (name,))
        if err is not None:
            raise Violation("dlock_unlock(%s, mode => 'update') failed: %s" % (name, err))
        notices = s.conn.notices[:]
        del s.conn.notices[:]
        exp = s.lm.get((key, SUBID_GATE, "x"), [0])[0] > 0
        if res != exp:
            raise Violation("session %d: dlock_unlock(%s, mode => 'update') answered %r, the model %r"
                            % (s.idx, name, res, exp))
        if res:
            self.model.lm_release_session(s, key, SUBID_GATE, "x")
            self.model.lm_release_session(s, key, SUBID_KEY, "r")
            if h is not None and h.nsession > 0:
                h.nsession -= 1
                if h.total() == 0:
                    del s.holds[hk]
            elif h is not None and hk in s.stale_scope and getattr(h, "stale_n", 0) > 0:
                h.stale_n -= 1
            elif g is not None:
                g.n -= 1
                if g.n == 0:
                    del s.ghosts[hk]
            self.behind_back(s)
            self.grant_waiters()
        else:
            # (where the session holds the gate in the transaction only, and
            # dlock still counts a session hold of it that went behind its
            # back with its lease marker, the lock manager says it: its gate
            # is not the session's)
            words = ("update",) if s.lm_count(key, SUBID_GATE, "x") == 0 or \
                (not recorded and hk not in s.stale_scope) else ("update", "ExclusiveLock")
            if not any("you don't own a lock of type %s" % w in n for n in notices for w in words):
                raise Violation("session %d: dlock_unlock(%s, mode => 'update') of no gate, without its "
                                "WARNING: %r" % (s.idx, name, notices))
            if h is not None:
                h.nsession = 0    # dlock's record: not held at session level
                h.stale_n = 0
                s.stale_scope.discard(hk)
                if h.total() == 0:
                    del s.holds[hk]
            s.ghosts.pop(hk, None)

    def op_unlock_all(self, s, step):
        for hk in list(s.ghosts):
            self.touch_ghost(s, hk)
        res, err = self.call(s, "SELECT dlock_unlock_all()")
        if err is not None:
            raise Violation("dlock_unlock_all failed: %s" % err)
        # (it ends the session part of every record, stale ones too: dlock's
        # count of one in stale_scope still has the part released behind its
        # back, and it releases as many as the lock manager has)
        n = 0
        for hk, h in list(s.holds.items()):
            stale = getattr(h, "stale_n", 0) if hk in s.stale_scope else 0
            h.stale_n = 0
            if h.nsession + stale == 0:
                continue
            key, mode = self.keys[hk[0]], self.mode_of(hk)
            c = s.lm.get((key, subid(h.permit), mode), [0, [], []])
            k = min(h.nsession + stale, c[0])
            if hk[1] == "u":
                # each hold: its gate, then its RowShareLock (src/locks.c
                # release_update), where the session still has both
                g = s.lm.get((key, SUBID_GATE, "x"), [0, [], []])
                k = min(h.nsession + stale, g[0]) if s.lm_count(key, SUBID_KEY, "r") > 0 else 0
                for _ in range(k):
                    self.model.lm_release_session(s, key, SUBID_GATE, "x")
            for _ in range(k):
                self.model.lm_release_session(s, key, subid(h.permit), mode)
            if k > 0:
                n += 1
            h.nsession = 0
            if h.total() == 0:
                del s.holds[hk]
        s.stale_scope = set()
        if res != n:
            raise Violation("session %d: dlock_unlock_all() answered %r, the model %d" % (s.idx, res, n))
        self.grant_waiters()

    def op_raw_lock(self, s, step):
        name, mode = step["name"], "x" if step["mode"] == "x" else "s"
        key = self.keys[name]
        fn = "pg_try_advisory_lock" + ("_shared" if mode == "s" else "")
        exp = s.lm_count(key, SUBID_KEY, mode) > 0 or self.grantable_now(s, key, SUBID_KEY, mode)
        res, err = self.call(s, "SELECT %s(%%s)" % fn, (key,))
        if err is not None:
            raise Violation("%s failed: %s" % (fn, err))
        if res != exp:
            raise Violation("session %d: %s(%s) answered %r, the model %r" % (s.idx, fn, name, res, exp))
        if res:
            self.model.lm_add(s, key, SUBID_KEY, mode, False)

    def op_raw_unlock(self, s, step):
        name, mode = step["name"], "x" if step["mode"] == "x" else "s"
        key = self.keys[name]
        fn = "pg_advisory_unlock" + ("_shared" if mode == "s" else "")
        exp = s.lm.get((key, SUBID_KEY, mode), [0])[0] > 0
        res, err = self.call(s, "SELECT %s(%%s)" % fn, (key,))
        if err is not None:
            raise Violation("%s failed: %s" % (fn, err))
        if res != exp:
            raise Violation("session %d: %s(%s) answered %r, the model %r" % (s.idx, fn, name, res, exp))
        if res:
            self.model.lm_release_session(s, key, SUBID_KEY, mode)
            self.behind_back(s)
            self.grant_waiters()

    def behind_back(self, s):
        """dlock holds whose session part the lock manager no longer has (an
        update hold's: its RowShareLock or its gate)."""
        for hk, h in list(s.holds.items()):
            key, mode = self.keys[hk[0]], self.mode_of(hk)
            gone = s.lm.get((key, subid(h.permit), mode), [0])[0] == 0
            if hk[1] == "u":
                gone = gone or s.lm.get((key, SUBID_GATE, "x"), [0])[0] == 0
            if h.nsession > 0 and gone:
                self.lost_session_part(s, hk, h)

    def op_raw_unlock_all(self, s, step):
        res, err = self.call(s, "SELECT pg_advisory_unlock_all()")
        if err is not None:
            raise Violation("pg_advisory_unlock_all failed: %s" % err)
        for k, c in s.lm.items():
            c[0] = 0
        s.lm_tidy()
        self.behind_back(s)
        self.grant_waiters()

    def op_discard(self, s, step):
        if s.in_block:
            return
        res, err = self.call(s, "DISCARD ALL")
        if err is not None:
            raise Violation("DISCARD ALL failed: %s" % err)
        for k, c in s.lm.items():
            c[0] = 0
        s.lm_tidy()
        s.holds = {}
        s.ghosts = {}
        self.grant_waiters()

    def op_terminate(self, s, step):
        run_sql(self.obs, "SELECT pg_terminate_backend(%s, 5000)", (s.pid,))
        self.end_session(s, "terminated")

    # -- update mode: raise, lower ------------------------------------------------------
    def op_raise(self, s, step):
        """dlock_raise: an exclusive hold of the name taken over the session's
        update hold, as dlock_lock(name, timeout) takes one, in session scope
        if the update hold has session holds, else in the transaction."""
        name = step["name"]
        # (it looks at every record of the name: src/entries.c dlock_entries_held)
        for md in ("e", "u", "s"):
            self.touch_ghost(s, (name, md))
        hk = (name, "u")
        h = s.holds.get(hk)
        call = {"name": name, "mode": "x", "wait": step.get("wait"), "raise": True,
                "ms": step.get("ms", False), "nolimit": step.get("nolimit", False)}
        if h is None or h.total() == 0:
            if call["nolimit"]:
                call["wait"] = 0
            sql, params = self.raise_sql(call)
            res, err = self.call(s, sql, params)
            if err is None or err.pgcode != "55000":
                raise Violation("session %d: %s %r without an update hold: %r %s" % (s.idx, sql, params, res, err))
            self.after_error(s)
            return
        stale = getattr(h, "stale_n", 0) if hk in s.stale_scope else 0
        call["xact"] = h.nsession + stale == 0
        if call["xact"]:
            self.note("raise in a transaction")
        self.op_lock(s, dict(step, call=call))

    def op_lower(self, s, step):
        """dlock_lower: one exclusive hold of the name released (a session one
        as dlock_unlock, else the latest raise in the transaction), where the
        session holds the name in update mode."""
        name = step["name"]
        key = self.keys[name]
        for md in ("e", "u", "s"):
            self.touch_ghost(s, (name, md))
        hu = s.holds.get((name, "u"))
        del s.conn.notices[:]
        res, err = self.call(s, "SELECT dlock_lower(%s)", (name,))
        if hu is None or hu.total() == 0:
            if err is None or err.pgcode != "55000":
                raise Violation("session %d: dlock_lower(%s) without an update hold: %r %s" % (s.idx, name, res, err))
            self.after_error(s)
            return
        if err is not None:
            raise Violation("session %d: dlock_lower(%s) failed: %s" % (s.idx, name, err))
        hk = (name, "e")
        h = s.holds.get(hk)
        stale = getattr(h, "stale_n", 0) if h is not None and hk in s.stale_scope else 0
        ustale = getattr(hu, "stale_n", 0) if (name, "u") in s.stale_scope else 0
        # in the scope of the update hold, as dlock_raise raised it
        if hu.nsession + ustale > 0:
            if h is not None and h.nsession + stale > 0:
                self.unlock_answered(s, name, "x", res, "dlock_lower")
                return
        elif h is not None and h.raised:
            # the latest raise in the transaction (of the innermost
            # subtransaction), given back at once: a later ROLLBACK TO does
            # not bring it back.  (A dlock_lock_xact of the name is not a
            # raise: it ends with its transaction.)
            if res is not True:
                raise Violation("session %d: dlock_lower(%s) of a raise in a transaction answered %r"
                                % (s.idx, name, res))
            self.note("lower a raise in a transaction")
            d = max(h.raised)
            h.raised.remove(d)
            h.xact.remove(d)
            c = s.lm[(key, SUBID_KEY, "x")]
            c[2].remove(d)
            if h.total() == 0:
                del s.holds[hk]
            s.lm_tidy()
            self.behind_back(s)
            self.grant_waiters()
            return
        if res is not False or not any("is not raised" in n for n in s.conn.notices):
            raise Violation("session %d: dlock_lower(%s) of no exclusive hold answered %r (notices %r)"
                            % (s.idx, name, res, s.conn.notices))

    # -- leases, tokens ----------------------------------------------------------------
    def op_renew(self, s, step):
        name = step["name"]
        for md in ("e", "u", "s"):
            self.touch_ghost(s, (name, md))
        live = [(hk, h) for hk, h in s.holds.items() if hk[0] == name and h.total() > 0]
        lease = step["lease"]
        if step.get("ms"):
            res, err = self.call(s, "SELECT dlock_renew_ms(%s, %s) IS NOT NULL", (name, ms(lease)))
        else:
            res, err = self.call(s, "SELECT dlock_renew(%s, %s::interval) IS NOT NULL", (name, "%f s" % lease))
        if not live:
            if err is None or err.pgcode != "55000":
                raise Violation("session %d: dlock_renew(%s) of what is not held: %r %s"
                                % (s.idx, name, res, err))
            self.after_error(s)
            return
        if err is not None:
            raise Violation("session %d: dlock_renew(%s) failed: %s" % (s.idx, name, err))
        for hk, h in live:
            h.lease = time.time() + lease
            if h.nsession > 0 and lease < 60:
                self.model.events.append((h.lease, "session-lease", s.idx))

    def op_token(self, s, step):
        name = step["name"]
        for md in ("e", "u", "s"):
            self.touch_ghost(s, (name, md))
        # the exclusive hold's token first, then the update hold's, then the shared one's
        live = [((name, md), s.holds[(name, md)]) for md in ("e", "u", "s")
                if (name, md) in s.holds and s.holds[(name, md)].total() > 0]
        res, err = self.call(s, "SELECT dlock_token(%s)", (name,))
        if not live:
            if err is None or err.pgcode != "55000":
                raise Violation("session %d: dlock_token(%s) of what is not held: %r %s"
                                % (s.idx, name, res, err))
            self.after_error(s)
            return
        if err is not None:
            raise Violation("session %d: dlock_token(%s) failed: %s" % (s.idx, name, err))
        toks = [h.token for _, h in live]
        if res != toks[0] and toks[0] is not None:
            raise Violation("session %d: dlock_token(%s) = %r, the model %r (exclusive, update, shared: %r)"
                            % (s.idx, name, res, toks[0], toks))

    # -- several names -----------------------------------------------------------------
    def op_many(self, s, step):
        call = step["call"]
        if call.get("xact") and not s.in_block:
            return self.in_own_xact(s, self.op_many, step)
        names = sorted(call["names"], key=lambda n: self.keys[n])
        outs = []
        for n in names:
            one = dict(call, name=n, permits=None)
            outs.append(self.expect_lock(s, one))
            if outs[-1][0] != "yes":
                break         # the call stops there: later names are not looked at
        outs += [("yes", 0)] * (len(names) - len(outs))
        # taken in key order: the first name not granted decides
        exp, code = "yes", None
        for o in outs:
            if o[0] != "yes":
                exp, code = ("error", o[1]) if o[0] == "error" else ("no", None)
                break
        sql, params = self.lock_sql(dict(call, name=None, names=names, permits=None))
        res, err = self.call(s, sql, params)
        locks = self.pg_locks()
        if err is not None:
            if exp == "error" and err.pgcode == code:
                self.after_error(s)
                return
            raise Violation("session %d: %s %r failed: %s (model %s)" % (s.idx, sql, params, err, exp))
        if res is True:
            if exp != "yes":
                raise Violation("session %d: %s %r answered true, the model %s" % (s.idx, sql, params, exp))
            for n in names:
                self.check_yes(s, n, call["mode"], 0, locks)
                self.apply_grant(s, dict(call, name=n, defer=False), 0)
            if not call.get("xact") or not s.in_block:
                self.end_statement(s)
        elif res is False:
            if exp != "no":
                raise Violation("session %d: %s %r answered false, the model %s (per name, in key order: %r)"
                                % (s.idx, sql, params, exp, list(zip(names, outs))))
            # the first name not granted has its reason
            first = [n for n, o in zip(names, outs) if o[0] != "yes"][0]
            try:
                self.check_no(s, first, call["mode"], 0, locks)
            except Violation as v:
                raise Violation("%s (session %d: %s %r)" % (v, s.idx, sql, params))
            self.end_statement(s)
        else:
            raise Violation("%s answered %r" % (sql, res))

    def op_unlock_many(self, s, step):
        names = sorted(set(step["names"]), key=lambda n: self.keys[n])
        for n in names:
            self.op_unlock(s, {"name": n, "mode": step["mode"]})

    # -- detached ------------------------------------------------------------------------
    def op_acquire(self, s, step):
        m = self.model
        call = step["call"]
        name, mode = call["name"], call["mode"]
        key = self.keys[name]
        permits = call.get("permits") or 0
        if s.in_block:
            return
        # the lock holder: its own holds for others conflict as another's would
        if permits:
            exp_permit = 0
            if not m.in_line(key):
                for p in range(1, permits + 1):
                    sub = subid(p)
                    if any(self.keys[d.name] == key and subid(d.permit) == sub for d in m.detached):
                        continue
                    if all(not conflicts(md, "x") for who, md in m.holders(key, sub)) and \
                            not any(conflicts(q.mode, "x") for q in m.queue.get((key, sub), [])):
                        exp_permit = p
                        break
            exp = exp_permit > 0
        else:
            mine = [d for d in m.detached if self.keys[d.name] == key and subid(d.permit) == SUBID_KEY]
            exp = (not any(conflicts(d.mode, mode) for d in mine) and
                   all(not conflicts(md, mode) for who, md in m.holders(key, SUBID_KEY) if who != "H") and
                   not any(conflicts(q.mode, mode) for q in m.queue.get((key, SUBID_KEY), [])))
            exp_permit = 0
        args = ["%s", "lease => %s::interval"]
        params = [name, "%f s" % call["lease"]]
        if mode == "s":
            args.append("shared => true")
        if permits:
            args.append("permits => %s")
            params.append(permits)
        if call.get("min_hold"):
            args.append("min_hold => %s::interval")
            params.append("%f s" % call["min_hold"])
        sql = "SELECT dlock_acquire(%s)" % ", ".join(args)
        if call.get("ms"):
            # the positional form for clients: every argument, durations in ms
            sql = "SELECT dlock_acquire_ms(%s, %s, %s, %s)"
            params = [name, ms(call["lease"]), None, mode == "s"]
            if call.get("min_hold") or permits:
                sql = "SELECT dlock_acquire_ms(%s, %s, %s, %s, %s, %s, %s)"   # the long shape
                params += [None, ms(call.get("min_hold")), permits or None]
        res, err = self.call(s, sql, params)
        if err is not None:
            raise Violation("session %d: %s %r failed: %s" % (s.idx, sql, params, err))
        if (res is not None) != exp:
            raise Violation("session %d: %s %r answered %r, the model %s" % (s.idx, sql, params, res, exp))
        if res is None:
            return
        self.holder_pid = self.holder_pid or run_sql(
            self.obs, "SELECT pid FROM dlock_locks WHERE token = %s", (res,))
        self.note_token(res, True)
        permit = run_sql(self.obs, "SELECT coalesce(permit, 0) FROM dlock_locks WHERE token = %s", (res,))
        if permits and permit != exp_permit:
            raise Violation("session %d: detached permit %r, the model %r" % (s.idx, permit, exp_permit))
        now = time.time()
        d = Detached(name, mode, permit if permits else 0, res, now + call["lease"],
                     now + (call.get("min_hold") or 0))
        m.detached.append(d)
        self.counts.setdefault("tokens", []).append(res)
        if call["lease"] < 60:
            m.events.append((d.lease, "detached-end", d))

    def op_release(self, s, step):
        m = self.model
        ds = [d for d in m.detached if d.name == step["name"] and not d.released]
        d = self.rng.choice(ds) if ds else None
        right = step.get("right", True) and d is not None
        tok = d.token if right else (max(self.tokens_seen) + 7 if self.tokens_seen else 12345)
        res, err = self.call(s, "SELECT dlock_release(%s, %s)", (step["name"], tok))
        if err is not None:
            raise Violation("dlock_release failed: %s" % err)
        if res != right:
            raise Violation("session %d: dlock_release(%s, %s) answered %r, the model %r"
                            % (s.idx, step["name"], tok, res, right))
        if right:
            if d.min_until > time.time() + 0.15:
                d.released = True
                m.events.append((d.min_until, "detached-end", d))
            elif d.min_until > time.time() - 0.15:
                d.released = True
                m.events.append((time.time(), "detached-end", d))
            else:
                m.detached.remove(d)
                self.grant_waiters()

    def op_force(self, s, step):
        """dlock_force_release (1.6), an operator's override: ends a hold at
        once, in its minimum hold too (released early or not)."""
        m = self.model
        ds = [d for d in m.detached if d.name == step["name"]]
        d = self.rng.choice(ds) if ds else None
        right = step.get("right", True) and d is not None
        tok = d.token if right else (max(self.tokens_seen) + 7 if self.tokens_seen else 12345)
        now = time.time()
        # a hold at its end (lease, or minimum hold after a release) may be
        # gone already: either answer is right
        ending = right and (d.lease < now + 0.3 or (d.released and d.min_until < now + 0.3))
        res, err = self.call(s, "SELECT dlock_force_release(%s, %s)", (step["name"], tok))
        if err is not None:
            raise Violation("dlock_force_release failed: %s" % err)
        if res != right and not (ending and res is False):
            raise Violation("session %d: dlock_force_release(%s, %s) answered %r, the model %r"
                            % (s.idx, step["name"], tok, res, right))
        if right and res:
            m.detached.remove(d)
            self.grant_waiters()
        elif right:
            m.events.append((time.time(), "detached-end", d))

    def op_extend(self, s, step):
        m = self.model
        ds = [d for d in m.detached if d.name == step["name"] and not d.released]
        d = self.rng.choice(ds) if ds else None
        right = step.get("right", True) and d is not None
        tok = d.token if right else (max(self.tokens_seen) + 7 if self.tokens_seen else 12345)
        if step.get("ms"):
            res, err = self.call(s, "SELECT dlock_extend_ms(%s, %s, %s) IS NOT NULL",
                                 (step["name"], tok, ms(LONG_LEASE)))
        else:
            res, err = self.call(s, "SELECT dlock_extend(%s, %s, %s::interval) IS NOT NULL",
                                 (step["name"], tok, "%d s" % LONG_LEASE))
        if right:
            if err is not None:
                raise Violation("dlock_extend with the right token failed: %s" % err)
            d.lease = time.time() + LONG_LEASE
        else:
            if err is None or err.pgcode != "55000":
                raise Violation("dlock_extend with a wrong token: %r %s" % (res, err))
            self.after_error(s)

    # -- bursts ----------------------------------------------------------------------------
    def op_burst_loop(self, s, step):
        """Idle sessions each take and give back a name with more permits than
        there are of them, many times at once: none is ever told no (nobody
        is in line for it, and a permit is always free)."""
        m = self.model
        name, key = step["name"], self.keys[step["name"]]
        permits = step["permits"]
        # (not a session with a lease: the reaper may end it in the burst)
        sess = [x for x in m.sessions if x.pending is None and not x.in_block and
                not any(h.lease is not None for h in x.holds.values()) and
                not any(hk[0] == name for hk in list(x.holds) + list(x.ghosts)) and
                x.lm_count(key, SUBID_KEY, "x") == 0 and x.lm_count(key, SUBID_KEY, "s") == 0]
        if len(sess) < 2 or m.in_line(key) or any(
                who for p in range(1, permits + 1) for who, md in m.holders(key, subid(p))):
            return
        sql = ("SELECT count(*) FILTER (WHERE NOT ok) FROM (SELECT dlock_try(%s, permits => %s) AS ok, "
               "dlock_unlock(%s) FROM generate_series(1, %s)) t")
        results = {}
        gate = threading.Barrier(len(sess))

        def run(x):
            try:
                gate.wait(5)
                results[x.idx] = run_sql(x.conn, sql, (name, permits, name, step["rounds"]))
            except psycopg2.Error as e:
                results[x.idx] = e

        ts = [threading.Thread(target=run, args=(x,), daemon=True) for x in sess]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        bad = {x.idx: results.get(x.idx) for x in sess if results.get(x.idx) != 0}
        if bad:
            raise Violation("%d sessions each tried %s (permits %d) %d times at once, with nobody in line "
                            "and permits to spare; told no (per session): %r"
                            % (len(sess), name, permits, step["rounds"], bad))


    def op_burst(self, s, step):
        """Idle sessions try one name at the same instant."""
        m = self.model
        call = step["call"]
        name, key = call["name"], self.keys[call["name"]]
        sess = [x for x in m.sessions if x.pending is None and not x.in_block and
                not any(hk[0] == name and h.total() > 0 for hk, h in x.holds.items()) and
                not any(hk[0] == name for hk in x.ghosts) and
                x.lm_count(key, SUBID_KEY, "x") == 0 and x.lm_count(key, SUBID_KEY, "s") == 0 and
                x.lm_count(key, SUBID_GATE, "x") == 0]
        if len(sess) < 2:
            return
        permits = call.get("permits") or 0
        if permits:
            free = 0 if m.in_line(key) else sum(
                1 for p in range(1, permits + 1) if m.free_for(None, key, subid(p), "x"))
        elif call["mode"] == "u":
            # one gets the gate, if the key is free to share: the others are told no
            free = 1 if (m.free_for(None, key, SUBID_GATE, "x") and
                         m.free_for(None, key, SUBID_KEY, "r")) else 0
        else:
            free = 1 if m.free_for(None, key, SUBID_KEY, call["mode"]) else 0
            if call["mode"] == "s" and free:
                free = len(sess)
        sql, params = self.lock_sql(dict(call, wait=None, xact=False))
        results = {}
        gate = threading.Barrier(len(sess))

        def run(x):
            try:
                gate.wait(5)
                results[x.idx] = run_sql(x.conn, sql, params)
            except psycopg2.Error as e:
                results[x.idx] = e

        ts = [threading.Thread(target=run, args=(x,), daemon=True) for x in sess]
        for t in ts:
            t.start()
        for t in ts:
            t.join(10)
        locks = self.pg_locks()
        yes = [x for x in sess if results.get(x.idx) is True]
        errs = [results.get(x.idx) for x in sess if results.get(x.idx) not in (True, False)]
        if errs:
            raise Violation("burst: errors %r" % errs)
        if len(yes) != min(len(sess), free):
            raise Violation("burst of %d tries of %s (permits %s) with %d free: %d said yes"
                            % (len(sess), name, permits, free, len(yes)))
        for x in sess:
            if results[x.idx]:
                self.check_yes(x, name, call["mode"], permits, locks)
                mine = [l for l in locks if l[0] == x.pid and l[1] == key and l[4] and
                        l[2] != SUBID_TURNSTILE]
                permit = 0
                if permits:
                    subs = [l[2] for l in mine]
                    permit = 1 if SUBID_KEY in subs else max(subs) - SUBID_TURNSTILE
                self.apply_grant(x, dict(call, xact=False), permit)
            else:
                self.check_no(x, name, call["mode"], permits, locks)


def connect(dbname="postgres", app="dlock-model"):
    conn = psycopg2.connect(host="/tmp/dlock-%d" % ARGS.port, port=ARGS.port, user="postgres",
                            dbname=dbname, application_name=app)
    conn.autocommit = True
    return conn


def pick_names(dbid):
    """Three names, the first two in one wake-up bucket of the semaphores."""
    first = "m0"
    b = bucket(dbid, dlock_key(first))
    i = 0
    while True:
        cand = "m1-%d" % i
        if bucket(dbid, dlock_key(cand)) == b:
            break
        i += 1
    return [first, cand, "m2"]


# ---------------------------------------------------------------------------
# Random steps.

def out_of_model(h, step):
    """Steps the model does not follow.  A raise in a transaction is a session
    lock in the lock manager (dlock gives it back at the end of its
    (sub)transaction): pg_advisory_unlock and pg_advisory_unlock_all would
    release it behind dlock's back, and so would a dlock_unlock,
    dlock_unlock_all or dlock_lower of the name's session holds where a raw
    unlock left dlock's count of them above the lock manager's."""
    s = h.model.sessions[step["s"]] if "s" in step else None
    if s is None or not s.raised():
        return False
    if step["op"] == "raw_unlock_all" or (step["op"] == "raw_unlock" and step["mode"] == "x"):
        return True

    def short(name):
        # dlock's count of the name's exclusive session holds above the lock
        # manager's, beside a raise
        c = s.lm.get((h.keys[name], SUBID_KEY, "x"), [0, [], []])
        x = s.holds.get((name, "e"))
        n = 0 if x is None else x.nsession + (getattr(x, "stale_n", 0) if (name, "e") in s.stale_scope else 0)
        return bool(c[2]) and c[0] < n
    if step["op"] in ("unlock", "lower") and step.get("mode", "x") == "x":
        return short(step["name"])
    if step["op"] == "unlock_many" and step["mode"] == "x":
        return any(short(n) for n in step["names"])
    if step["op"] == "unlock_all":
        return any(short(n) for n in h.names)
    return False


def random_step(rng, h):
    """A step of the kinds --ops allows (all by default)."""
    for _ in range(200):
        step = any_step(rng, h)
        if out_of_model(h, step):
            continue
        if not ARGS.ops or step["op"] in ARGS.ops.split(","):
            return step
    return {"op": "unlock_all", "s": rng.choice([s for s in h.model.sessions if s.pending is None] or
                                                h.model.sessions).idx}


def any_step(rng, h):
    m = h.model
    idle = [s for s in m.sessions if s.pending is None]
    if not idle:
        return {"op": "unlock_all", "s": rng.choice(m.sessions).idx}
    s = rng.choice(idle)
    name = rng.choice(h.names)
    rm = rng.random()
    mode = "x" if ARGS.semaphores_only else "s" if rm < 0.22 else "u" if rm < 0.38 else "x"
    r = rng.random()

    def lock_call(wait):
        permits = rng.choice([None, None, None, 2, 3]) if mode == "x" else None
        if ARGS.semaphores_only:
            permits = 3
        lease = None
        if rng.random() < 0.15:
            lease = SHORT_LEASE if rng.random() < 0.4 else LONG_LEASE
        xact = rng.random() < 0.35
        hk = (name, HK[mode])
        short = hk in s.holds and s.holds[hk].lease is not None and s.holds[hk].lease - time.time() < 60
        if xact and short:
            xact = False      # a transaction's hold under a short lease: the reaper's
                              # cancel, which the model does not follow
        if lease == SHORT_LEASE and hk in s.holds and s.holds[hk].xact:
            lease = LONG_LEASE
        if lease == SHORT_LEASE and (xact or (wait is not None and wait > 5)):
            # a transaction's short lease (a cancel), and one that starts when
            # a wait left in the queue ends, are not in the model
            lease = LONG_LEASE
        call = {"name": name, "mode": mode, "wait": wait, "permits": permits, "lease": lease,
                "xact": xact, "info": "i%d" % rng.randrange(9) if rng.random() < 0.1 else None,
                "ms": rng.random() < 0.3}
        if mode != "u" and rng.random() < 0.1:
            call["words"] = True          # mode => 'exclusive' / 'shared'
        if mode == "u" and rng.random() < 0.05:
            call["bad"] = rng.choice(["shared", "permits"])
        return call

    def for_xact(call):
        # (as lock_call has it: not under a short lease)
        if not (hk_short((call["name"], HK[call["mode"]])) or call["lease"] == SHORT_LEASE):
            call["xact"] = True
        return call

    def hk_short(hk):
        return hk in s.holds and s.holds[hk].lease is not None and s.holds[hk].lease - time.time() < 60

    if r < 0.08:
        # raise and lower, mostly by a session of a name it holds in update mode
        held = [(x, hk[0]) for x in idle for hk, hd in x.holds.items() if hk[1] == "u" and hd.total() > 0]
        nm = name
        if rng.random() < 0.5:
            # in a transaction, of a transaction's update hold: a transaction
            # block begun, an update hold taken in it, raised and lowered
            inb = [x for x in idle if x.in_block]
            if not inb:
                return {"op": "begin", "s": s.idx}
            s = rng.choice(inb)
            mine = [hk[0] for hk, hd in s.holds.items() if hk[1] == "u" and hd.xact and not hd.nsession]
            if not mine:
                mode = "u"
                return {"op": "lock", "s": s.idx, "call": for_xact(lock_call(rng.choice([None, None, 0.03])))}
            held = [(s, rng.choice(mine))]
        if held and rng.random() < 0.9:
            # (a session in a transaction block first: its raises are the transaction's)
            s, nm = rng.choice([x for x in held if x[0].in_block] if rng.random() < 0.5 and
                               any(x[0].in_block for x in held) else held)
        elif not held and rng.random() < 0.7:
            # (none to raise: one taken first, in a transaction block mostly
            # for the transaction, where a raise is a transaction's too)
            mode = "u"
            call = lock_call(rng.choice([None, None, 0.03]))
            if s.in_block and rng.random() < 0.6:
                for_xact(call)
            return {"op": "lock", "s": s.idx, "call": call}
        # (a name raised lowered more often than raised again)
        raised = (nm, "e") in s.holds and s.holds[(nm, "e")].total() > 0
        if rng.random() < (0.3 if raised else 0.75):
            wait = rng.choice([None, 0.03, 0.03, 60.0])
            if wait == 60.0 and sum(1 for x in m.sessions if x.pending is not None) >= 2:
                wait = 0.03
            if wait is not None and would_deadlock(h, s, nm, "x"):
                wait = None
            return {"op": "raise", "s": s.idx, "name": nm, "wait": wait,
                    "nolimit": wait == 60.0 and rng.random() < 0.5, "ms": rng.random() < 0.3}
        return {"op": "lower", "s": s.idx, "name": nm}
    if r < 0.30:
        return {"op": "lock", "s": s.idx, "call": lock_call(None)}
    if r < 0.44:
        call = lock_call(0.03 if r < 0.38 else 60.0)
        if call["wait"] > 5 and sum(1 for x in m.sessions if x.pending is not None) >= 2:
            call["wait"] = 0.03
        if would_deadlock(h, s, name, mode, call["permits"] or 0):
            call["wait"] = None
        return {"op": "lock", "s": s.idx, "call": call}
    if r < 0.54:
        step = {"op": "unlock", "s": s.idx, "name": name, "mode": mode, "full": rng.random() < 0.3}
        if mode == "u" and rng.random() < 0.05:
            step["bad"] = True            # shared => true, mode => 'update'
        elif mode != "u" and rng.random() < 0.1:
            step["words"] = True
        return step
    if r < 0.56:
        return {"op": "unlock_all", "s": s.idx}
    if r < 0.60:
        return {"op": rng.choice(["begin", "begin", "commit", "rollback"]), "s": s.idx}
    if r < 0.63:
        return {"op": rng.choice(["savepoint", "rollback_to", "release_sp"]), "s": s.idx}
    if mode == "u" and r < 0.89:
        # pg_advisory_unlock_shared / _lock_shared next to update holds (which
        # they do not reach); the text[] forms and detached locks have no mode
        mode = "s" if r < 0.69 else "x"
    if r < 0.66:
        return {"op": "raw_lock", "s": s.idx, "name": name, "mode": mode}
    if r < 0.69:
        # (not of a hold with a lease: pg_advisory_unlock leaves its lease
        # marker, doc/guarantees.md "Things to know", which the model does not follow)
        if not any(hk[0] == name and h.lease is not None for hk, h in s.holds.items()):
            return {"op": "raw_unlock", "s": s.idx, "name": name, "mode": mode}
        return {"op": "raw_unlock_all", "s": s.idx}
    if r < 0.71:
        return {"op": "raw_unlock_all", "s": s.idx}
    if r < 0.72:
        return {"op": "discard", "s": s.idx}
    if r < 0.73:
        return {"op": "terminate", "s": s.idx}
    if r < 0.75:
        lease = rng.choice([LONG_LEASE, SHORT_LEASE])
        if any(hk[0] == name and h.xact for hk, h in s.holds.items()):
            lease = LONG_LEASE
        return {"op": "renew", "s": s.idx, "name": name, "lease": lease, "ms": rng.random() < 0.3}
    if r < 0.77:
        return {"op": "token", "s": s.idx, "name": name}
    if r < 0.81:
        names = rng.sample(h.names, rng.choice([2, 3]))
        call = lock_call(rng.choice([None, 0.03]))
        call["names"] = names
        call["permits"] = None
        call.pop("bad", None)
        if any((n, "e" if mode == "x" else "s") in s.holds and
               s.holds[(n, "e" if mode == "x" else "s")].lease is not None for n in names):
            call["xact"] = False
            if call["lease"] == SHORT_LEASE:
                call["lease"] = LONG_LEASE
        if call["lease"] == SHORT_LEASE and any(
                (n, "e" if mode == "x" else "s") in s.holds and s.holds[(n, "e" if mode == "x" else "s")].xact
                for n in names):
            call["lease"] = LONG_LEASE
        if any(would_deadlock(h, s, n, mode) for n in names):
            call["wait"] = None
        return {"op": "many", "s": s.idx, "call": call}
    if r < 0.83:
        return {"op": "unlock_many", "s": s.idx, "names": rng.sample(h.names, 2), "mode": mode}
    if r < 0.89:
        lease = LONG_LEASE if rng.random() < 0.7 else SHORT_LEASE
        return {"op": "acquire", "s": s.idx,
                "call": {"name": name, "mode": mode,
                         "permits": rng.choice([None, None, 2, 3]) if mode == "x" else None,
                         "lease": lease,
                         "min_hold": rng.choice([None, None, None, 0.3]),
                         "ms": rng.random() < 0.3}}
    if r < 0.92:
        return {"op": "release", "s": s.idx, "name": name, "right": rng.random() < 0.8}
    if r < 0.93:
        return {"op": "force", "s": s.idx, "name": name, "right": rng.random() < 0.8}
    if r < 0.95:
        return {"op": "extend", "s": s.idx, "name": name, "right": rng.random() < 0.8,
                "ms": rng.random() < 0.3}
    if r < 0.97:
        # next to a name whose semaphore has someone in line, when there is one
        lined = [n for n in h.names if m.line.get(h.keys[n])]
        same = [n for n in h.names if lined and n != lined[0] and
                bucket(h.dbid, h.keys[n]) == bucket(h.dbid, h.keys[lined[0]])]
        return {"op": "burst_loop", "s": s.idx, "name": rng.choice(same or h.names), "permits": 50,
                "rounds": 400}
    call = lock_call(None)
    call["xact"] = False
    call["lease"] = None
    call.pop("bad", None)
    if call["permits"] is None and rng.random() < 0.6:
        call["permits"] = 3
        call["mode"] = "x"
    return {"op": "burst", "s": s.idx, "call": call}



def waits_for(h, sess, key, mode, permits, pending=None, sub=SUBID_KEY):
    """Whom a request of sess (for name key in mode, or a permit of 1..permits)
    waits for: the holders it conflicts with, and those ahead of it.  An
    update request (mode "u") waits for the gate, and then for RowShareLock on
    the key: for whoever holds the gate or waits for it ahead, and (it may
    come to) for every exclusive holder and waiter of the key."""
    m = h.model
    out = set()
    if permits:
        for p in range(1, permits + 1):
            for who, md in m.holders(key, subid(p), exclude=sess):
                out.add(who)
        for q in m.line.get(key, []):
            if q is pending:
                break
            out.add(q.sess)
    elif mode == "u":
        for who, md in m.holders(key, SUBID_GATE, exclude=sess):
            out.add(who)
        for q in m.queue.get((key, SUBID_GATE), []):
            if q is pending:
                break
            out.add(q.sess)
        for who, md in m.holders(key, SUBID_KEY, exclude=sess):
            if md == "x":
                out.add(who)
        for q in m.queue.get((key, SUBID_KEY), []):
            if q.mode == "x":
                out.add(q.sess)
    else:
        for who, md in m.holders(key, sub, exclude=sess):
            if conflicts(md, mode):
                out.add(who)
        for q in m.queue.get((key, sub), []):
            if q is pending:
                break
            if q.sess is not sess and conflicts(q.mode, mode):
                out.add(q.sess)
    out.discard("H")                  # the lock holder waits for nobody
    out.discard(sess)
    return out


def pending_waits_for(h, x):
    """Whom x's call waiting in a queue waits for."""
    p = x.pending
    if p.kind == "update" and p.phase == "gate":
        return waits_for(h, x, p.key, "u", 0, pending=p)
    return waits_for(h, x, p.key, p.mode, p.call.get("permits") or 0, pending=p, sub=p.sub)


def would_deadlock(h, s, name, mode, permits=0):
    """Would s waiting for name close a circle of waits?  (Deadlocks are the
    isolation specs' and the fault suite's: the model keeps out of them.)  A
    waiter that others would newly wait for (it holds what they want) is the
    one that closes it."""
    m = h.model
    key = h.keys[name]
    seen = set()
    todo = list(waits_for(h, s, key, mode, permits))
    while todo:
        x = todo.pop()
        if x is s:
            return True
        if x in seen:
            continue
        seen.add(x)
        if x.pending is None:
            continue
        todo.extend(pending_waits_for(h, x))
    # and nobody that waits already may come to wait for s through the queue
    # s joins (a request that goes ahead of a waiter): s waits for none of them
    for x in m.sessions:
        if x.pending is not None and x is not s:
            if s in pending_waits_for(h, x):
                # s holds what x wants; if s now waits for something x holds, or
                # for x ahead of it: a circle
                if x in waits_for(h, s, key, mode, permits) or x in seen:
                    return True
    return False


# ---------------------------------------------------------------------------

def reset_db():
    a = connect()
    run_sql(a, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
    # a fixed OID: the names (two share a wake-up bucket, by the database's
    # OID) are the same in every run, and a sequence can be replayed
    run_sql(a, "CREATE DATABASE %s WITH OID = %d" % (DB, DB_OID))
    a.close()
    c = connect(DB)
    run_sql(c, "CREATE EXTENSION dlock")
    c.close()
    # detached holds of an earlier run: gone with the database's sessions?
    # (they are the lock holder's: release them by token)
    a = connect()
    a.close()


def run_sequence(seed, steps, seconds=None, fixed=None):
    """Runs a sequence: random (seed) or fixed (a list of steps).  Returns
    (log, violation or None)."""
    reset_db()
    rng = random.Random(seed)
    log = []
    h = Harness(rng, log)
    end = time.monotonic() + seconds if seconds else None
    try:
        i = 0
        while True:
            if fixed is not None:
                if i >= len(fixed):
                    break
                step = fixed[i]
            else:
                if (end is not None and time.monotonic() > end) or (steps and i >= steps):
                    break
                step = random_step(rng, h)
            i += 1
            h.do(step)
        # let every waiter go, and everything settle: then nothing is left
        for s in h.model.sessions:
            if s.pending is None:
                h.op_rollback(s, {})
                h.op_unlock_all(s, {})
        h.settle_events()
        return log, None, h
    except Violation as v:
        return log, str(v) + "\n" + h.dump(), h
    except Exception as e:  # noqa: BLE001
        return log, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()), h
    finally:
        cleanup(h)


def cleanup(h):
    # a call still waiting (a wait of 60 s behind a hold nobody releases, as a
    # detached lock's) is cancelled, not waited out: closing its connection
    # would wait for it
    for s in h.model.sessions:
        if s.pending is not None:
            try:
                run_sql(h.obs, "SELECT pg_cancel_backend(%s)", (s.pid,))
            except Exception:  # noqa: BLE001
                pass
    for s in h.model.sessions:
        try:
            s.conn.close()
        except Exception:  # noqa: BLE001
            pass
    # detached holds: released by token (the lock holder keeps them past the
    # database's sessions)
    try:
        c = connect(DB)
        for d in list(h.model.detached):
            run_sql(c, "SELECT dlock_release(%s, %s)", (d.name, d.token))
        run_sql(c, "SELECT count(dlock_release(name, token)) FROM dlock_locks WHERE scope = 'detached' "
                   "AND database = current_database()")
        # one released within its min_hold goes when that ends
        end = time.monotonic() + 5
        while time.monotonic() < end and run_sql(
                c, "SELECT count(*) FROM dlock_locks WHERE scope = 'detached' AND database = current_database()"):
            time.sleep(0.05)
        c.close()
    except Exception:  # noqa: BLE001
        pass
    for c in (h.obs, h.admin):
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass


def shrink(log, violation):
    """The shortest sequence (by taking steps out) that still fails."""
    steps = [s for s in log if not s["op"].startswith("(")]
    best = steps
    chunk = max(1, len(best) // 2)
    tries = 0
    deadline = time.monotonic() + ARGS.shrink_seconds
    while chunk >= 1 and time.monotonic() < deadline:
        i = 0
        progressed = False
        while i < len(best) and time.monotonic() < deadline:
            cand = best[:i] + best[i + chunk:]
            tries += 1
            _, v, _ = run_sequence(0, 0, fixed=cand)
            if v is not None and same_kind(v, violation):
                best = cand
                progressed = True
            else:
                i += chunk
        if not progressed:
            chunk //= 2
    return best, tries


def same_kind(v, w):
    return v.split(":")[0][:40] == w.split(":")[0][:40] or v[:30] == w[:30]


def describe(step):
    d = dict(step)
    return json.dumps(d, sort_keys=True)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("DLOCK_MODEL_SECONDS", "60")))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DLOCK_MODEL_SEED", "0")) or None)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--runs", type=int, default=0, help="sequences (each --seconds/runs long)")
    ap.add_argument("--replay")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--ops", help="only these kinds of steps (lock,burst_loop,...)")
    ap.add_argument("--semaphores-only", action="store_true", help="every lock call with permits")
    ap.add_argument("--shrink-seconds", type=float, default=120)
    ARGS = ap.parse_args()
    failed = 0
    if ARGS.replay:
        fixed = json.load(open(ARGS.replay))
        log, v, _ = run_sequence(0, 0, fixed=fixed)
        print(("not ok - " if v else "ok - ") + "model: replay of %s%s" % (ARGS.replay, (": " + v) if v else ""))
        print("# all model tests ran")
        return 1 if v else 0
    # the sequences earlier runs found (test/model-cases), replayed first
    cases = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model-cases")
    for f in sorted(os.listdir(cases)) if os.path.isdir(cases) and not ARGS.seed else []:
        log, v, _ = run_sequence(0, 0, fixed=json.load(open(os.path.join(cases, f))))
        print(("not ok - " if v else "ok - ") + "model: the sequence of %s%s" % (f, (": " + v) if v else ""))
        failed += 1 if v else 0
    seed = ARGS.seed or random.randrange(1, 10 ** 9)
    runs = ARGS.runs or max(1, int(ARGS.seconds // 20))
    per = ARGS.seconds / runs
    total_steps = 0
    for r in range(runs):
        sd = seed + r
        t0 = time.monotonic()
        log, v, h = run_sequence(sd, ARGS.steps, seconds=None if ARGS.steps else per)
        n = len([s for s in log if not s["op"].startswith("(")])
        total_steps += n
        if ARGS.verbose:
            print("# seed %d: %s" % (sd, ", ".join("%s %d" % (k, c) for k, c in sorted(h.counts.items())
                                                  if k != "tokens")), flush=True)
        if v is None:
            continue
        failed += 1
        print("not ok - model: seed %d, step %d of the sequence: %s" % (sd, n, v.splitlines()[0]))
        for line in v.splitlines()[1:]:
            print("#   " + line)
        # what the session the violation names sent, last (the trace file is
        # not kept where the run was a CI machine's)
        who = re.search(r"session (\d+)", v)
        if who:
            mine = [t for t in h.trace if t.startswith("  s%s pid" % who.group(1))]
            print("#   session %s's last statements:" % who.group(1))
            for t in mine[-25:]:
                print("#   " + t[:300])
        print("#   the last steps:")
        for st in log[-8:]:
            print("#     " + describe(st))
        best, tries = shrink(log, v)
        with open("/tmp/dlock-model-%d.trace" % sd, "w") as f:
            f.write("\n".join(h.trace) + "\n")
        path = "/tmp/dlock-model-%d.json" % sd
        with open(path, "w") as f:
            json.dump(best, f, indent=1)
        print("#   the shortest sequence found that shows it (%d steps, %d runs to find it; "
              "replay: test/model.py --port %d --replay %s):" % (len(best), tries, ARGS.port, path))
        for st in best:
            print("#     " + describe(st))
        break
    if not failed:
        print("ok - model: %d random sequences (seed %d), %d steps, every answer as the model's, "
              "backed by pg_locks, the view as the model" % (runs, seed, total_steps))
    a = connect()
    run_sql(a, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
    a.close()
    print("# all model tests ran")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
