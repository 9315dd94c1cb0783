#!/usr/bin/env python3
"""test/security.py: what a role can do to others through dlock, and what it
cannot (doc/security.md).

Run by test/run against its scratch cluster (dlock preloaded):
    python3 test/security.py --port 54321
Prints "ok - name" / "not ok - name" lines, then "# all security tests ran".
It creates (and drops) the roles dlock_alice, dlock_bob, dlock_carol and
dlock_team, and the databases dlock_sec and dlock_eucjp.

- A lease, or info, given by code that runs in a session as another role
  (a SECURITY DEFINER function, an index expression run by a superuser's
  ANALYZE) is refused with 42501 unless that role could end the session
  itself; the session is not ended.
- client_addr of a detached lock follows pg_stat_activity's rule (the
  session's user, not the role SET ROLE chose).
- One role's names, however many and however chosen, push only a share of
  another role's rows out of dlock_stats.
- In a database that is not UTF-8, the errors that name a lock with a lease
  name it in the database's encoding.
"""
import argparse
import hashlib
import os
import struct
import sys
import time

import psycopg2
import psycopg2.errors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fault  # noqa: E402 - the helpers, once the path is set
from fault import check, expect, expect_error, q, connect, RESULTS  # noqa: E402

ROLES = ("dlock_alice", "dlock_bob", "dlock_carol", "dlock_team")


def as_role(role, dbname="dlock_sec", tcp=False):
    kw = dict(host="127.0.0.1" if tcp else "/tmp/dlock-%d" % fault.ARGS.port, port=fault.ARGS.port,
              user=role, dbname=dbname, application_name="dlock-security")
    conn = psycopg2.connect(**kw)
    conn.autocommit = True
    return conn


def setup():
    c = connect()
    for db in ("dlock_sec", "dlock_eucjp"):
        q(c, "DROP DATABASE IF EXISTS %s" % db)
    for r in ROLES:
        q(c, "DROP ROLE IF EXISTS %s" % r)
    q(c, "CREATE ROLE dlock_team")
    for r in ROLES[:3]:
        q(c, "CREATE ROLE %s LOGIN IN ROLE dlock_team" % r)
    q(c, "CREATE DATABASE dlock_sec")
    c.close()
    d = connect("dlock_sec")
    q(d, "CREATE EXTENSION dlock")
    q(d, "CREATE SCHEMA alice AUTHORIZATION dlock_alice")
    q(d, "GRANT USAGE ON SCHEMA alice TO PUBLIC")
    d.close()


def teardown():
    c = connect()
    for db in ("dlock_sec", "dlock_eucjp"):
        q(c, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % db)
    for r in ROLES:
        q(c, "DROP ROLE IF EXISTS %s" % r)
    c.close()


def alive(conn):
    try:
        return q(conn, "SELECT 1") == 1
    except psycopg2.Error:
        return False


@check("security: a lease from another role's SECURITY DEFINER function is refused (42501); the session lives")
def t_definer_lease():
    alice = as_role("dlock_alice")
    q(alice, "CREATE FUNCTION alice.grab(l interval) RETURNS boolean SECURITY DEFINER "
             "LANGUAGE sql AS $$ SELECT dlock_try('definer-trap', lease => l) $$")
    q(alice, "CREATE FUNCTION alice.label() RETURNS boolean SECURITY DEFINER "
             "LANGUAGE sql AS $$ SELECT dlock_try('definer-label', info => 'alice was here') $$")
    q(alice, "CREATE FUNCTION alice.plain() RETURNS boolean SECURITY DEFINER "
             "LANGUAGE sql AS $$ SELECT dlock_try('definer-plain') $$")
    q(alice, "CREATE FUNCTION alice.renew() RETURNS timestamptz SECURITY DEFINER "
             "LANGUAGE sql AS $$ SELECT dlock_renew('bobs', '100ms') $$")
    # the positional forms for clients (1.6), each way they give a lease or info
    ms_forms = {
        "try_ms": "dlock_try_ms('definer-ms', false, 1000, NULL, NULL)",
        "lock_ms": "dlock_lock_ms('definer-ms', 0, false, NULL, 'alice', NULL)",
        "try_xact_ms": "dlock_try_xact_ms('definer-ms', false, 1000, NULL, NULL)",
        "lock_xact_ms": "dlock_lock_xact_ms('definer-ms', 0, true, 1000, NULL, NULL)",
        "renew_ms": "dlock_renew_ms('bobs', 100, NULL)",
    }
    for fn, call in ms_forms.items():
        q(alice, "CREATE FUNCTION alice.%s() RETURNS text SECURITY DEFINER "
                 "LANGUAGE sql AS $$ SELECT %s::text $$" % (fn, call))
    bob = as_role("dlock_bob")
    e = expect_error(psycopg2.errors.InsufficientPrivilege, "lease from alice's definer",
                     bob, "SELECT alice.grab('1s')")
    expect("dlock_alice" in str(e) and "lease" in str(e), "the message names the role: %s" % e)
    expect_error(psycopg2.errors.InsufficientPrivilege, "info from alice's definer", bob, "SELECT alice.label()")
    # nothing taken, nothing left
    expect(q(bob, "SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid()") == 0, "held after refusal")
    # a lock without a lease is what pg_advisory_lock would allow too
    expect(q(bob, "SELECT alice.plain()") is True, "plain lock through the definer")
    # renewing bob's own lease to 100 ms from alice's code: refused too
    expect(q(bob, "SELECT dlock_try('bobs', lease => '1 hour')") is True, "bob's lease")
    expect_error(psycopg2.errors.InsufficientPrivilege, "renew from alice's definer", bob, "SELECT alice.renew()")
    for fn in ms_forms:
        expect_error(psycopg2.errors.InsufficientPrivilege, "%s from alice's definer" % fn,
                     bob, "SELECT alice.%s()" % fn)
    time.sleep(1.0)
    expect(alive(bob), "bob's session was ended")
    expect(q(bob, "SELECT dlock_unlock_all()") == 2, "bob's holds")
    # bob's own code, and SET ROLE (bob's own doing): allowed
    expect(q(bob, "SELECT dlock_try('own', lease => '1 hour', info => 'bob')") is True, "own lease")
    q(bob, "SET ROLE dlock_team")
    expect(q(bob, "SELECT dlock_try('own-team', lease => '1 hour')") is True, "lease under SET ROLE")
    q(bob, "RESET ROLE")
    expect(q(bob, "SELECT dlock_unlock_all()") == 2, "unlock")
    bob.close()
    alice.close()


@check("security: a superuser's SECURITY DEFINER wrapper may give leases (it could end the session anyway)")
def t_definer_superuser():
    d = connect("dlock_sec")
    q(d, "CREATE FUNCTION public.job_lock(n text) RETURNS boolean SECURITY DEFINER "
         "LANGUAGE sql AS $$ SELECT dlock_try(n, lease => '1 hour') $$")
    bob = as_role("dlock_bob")
    expect(q(bob, "SELECT public.job_lock('wrapped')") is True, "through the superuser's wrapper")
    expect(q(bob, "SELECT lease_expires IS NOT NULL FROM dlock_locks WHERE name = 'wrapped'") is True, "lease")
    expect(q(bob, "SELECT dlock_unlock('wrapped')") is True, "unlock")
    bob.close()
    # a wrapper of a role that has the session's role's privileges (team is
    # not a member of bob: refused; bob's own: allowed)
    q(d, "DROP FUNCTION public.job_lock(text)")
    d.close()


@check("security: a lease from a table owner's index expression in a superuser's ANALYZE is refused; the session lives")
def t_analyze_lease():
    alice = as_role("dlock_alice")
    q(alice, "CREATE FUNCTION alice.f(i int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$ "
             "BEGIN IF session_user <> 'dlock_alice' THEN "
             "PERFORM public.dlock_try('analyze-trap', lease => '1s'); END IF; RETURN i; END $$")
    q(alice, "CREATE TABLE alice.t (i int)")
    q(alice, "INSERT INTO alice.t SELECT generate_series(1, 100)")
    q(alice, "CREATE INDEX ON alice.t (alice.f(i))")
    su = connect("dlock_sec")
    e = expect_error(psycopg2.errors.InsufficientPrivilege, "lease from an index expression in ANALYZE",
                     su, "ANALYZE alice.t")
    expect("security-restricted" in str(e), "message: %s" % e)
    expect(q(su, "SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid()") == 0, "held after refusal")
    time.sleep(1.5)
    expect(alive(su), "the superuser's session was ended")
    su.close()
    alice.close()


@check("security: another role's code cannot keep a leased lock of the session held, nor bring one under a lease "
       "(42501); the session lives")
def t_foreign_hold_and_lease():
    alice = as_role("dlock_alice")
    q(alice, "CREATE FUNCTION alice.g(i int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$ "
             "BEGIN IF session_user <> 'dlock_alice' THEN PERFORM public.dlock_try('maint'); END IF; RETURN i; END $$")
    q(alice, "CREATE TABLE alice.m (i int)")
    q(alice, "INSERT INTO alice.m SELECT generate_series(1, 10)")
    q(alice, "CREATE INDEX ON alice.m (alice.g(i))")
    q(alice, "CREATE FUNCTION alice.take(n text) RETURNS boolean SECURITY DEFINER "
             "LANGUAGE sql AS $$ SELECT dlock_try(n) $$")
    su = connect("dlock_sec")
    # (a) the session's leased hold, then the table owner's code in ANALYZE
    expect(q(su, "SELECT dlock_lock('maint', lease => '2s')") is True, "lease")
    e = expect_error(psycopg2.errors.InsufficientPrivilege, "a foreign hold under a lease", su, "ANALYZE alice.m")
    expect("lease" in str(e), "message: %s" % e)
    expect(q(su, "SELECT dlock_unlock('maint')") is True, "unlock")
    expect(q(su, "SELECT count(*) FROM dlock_locks WHERE pid = pg_backend_pid()") == 0, "left held")
    # (b) the foreign hold first, then a lease of the session's own
    q(su, "ANALYZE alice.m")
    e = expect_error(psycopg2.errors.InsufficientPrivilege, "a lease over a foreign hold",
                     su, "SELECT dlock_lock('maint', lease => '2s')")
    expect(q(su, "SELECT dlock_lock('maint')") is True, "no lease: fine")
    expect_error(psycopg2.errors.InsufficientPrivilege, "a renewal over a foreign hold",
                 su, "SELECT dlock_renew('maint', '2s')")
    q(su, "SELECT dlock_unlock_all()")
    # (c) a transaction's lease, then the foreign hold in the same transaction
    su.autocommit = False
    q(su, "SELECT dlock_lock_xact('maint', lease => '2s')")
    expect_error(psycopg2.errors.InsufficientPrivilege, "a foreign hold under a transaction's lease",
                 su, "ANALYZE alice.m")
    su.rollback()
    su.autocommit = True
    # the same through another role's SECURITY DEFINER function
    bob = as_role("dlock_bob")
    expect(q(bob, "SELECT dlock_lock('bobs-job', lease => '2s')") is True, "bob's lease")
    expect_error(psycopg2.errors.InsufficientPrivilege, "alice's definer under bob's lease",
                 bob, "SELECT alice.take('bobs-job')")
    expect(q(bob, "SELECT dlock_unlock('bobs-job')") is True, "unlock")
    expect(q(bob, "SELECT alice.take('bobs-other')") is True, "a lock without a lease: as pg_advisory_lock")
    expect_error(psycopg2.errors.InsufficientPrivilege, "bob's lease over alice's hold",
                 bob, "SELECT dlock_lock('bobs-other', lease => '2s')")
    time.sleep(2.5)
    expect(alive(su) and alive(bob), "a session was ended")
    for c in (su, bob, alice):
        c.close()


@check("security: detached locks taken by another role's code count against that role's limit")
def t_detached_limit_role():
    su = connect("dlock_sec")
    q(su, "ALTER SYSTEM SET dlock.max_detached_locks_per_role = 2")
    q(su, "SELECT pg_reload_conf()")
    time.sleep(1.5)
    try:
        alice = as_role("dlock_alice")
        q(alice, "CREATE FUNCTION alice.grab(n text) RETURNS bigint SECURITY DEFINER "
                 "LANGUAGE sql AS $$ SELECT dlock_acquire(n, '1 min') $$")
        bob = as_role("dlock_bob")
        t1 = q(bob, "SELECT alice.grab('quota-1')")
        t2 = q(bob, "SELECT alice.grab('quota-2')")
        expect(t1 and t2, "two through alice's function")
        e = expect_error(psycopg2.errors.ConfigurationLimitExceeded, "a third of alice's",
                         bob, "SELECT alice.grab('quota-3')")
        expect("dlock_alice" in str(e), "the limit named: %s" % e)
        # bob's own limit is untouched
        t3 = q(bob, "SELECT dlock_acquire('bobs-own', '1 min')")
        expect(t3 is not None, "bob's own")
        for n, t in (("quota-1", t1), ("quota-2", t2)):
            expect(q(alice, "SELECT dlock_release(%s, %s)", (n, t)) is True, "alice releases " + n)
        expect(q(bob, "SELECT dlock_release('bobs-own', %s)", (t3,)) is True, "bob releases his")
        for c in (alice, bob):
            c.close()
    finally:
        q(su, "ALTER SYSTEM RESET dlock.max_detached_locks_per_role")
        q(su, "SELECT pg_reload_conf()")
        su.close()


@check("security: a detached lock's client_addr follows pg_stat_activity's rule after SET ROLE")
def t_client_addr_set_role():
    alice = as_role("dlock_alice", tcp=True)
    q(alice, "SET ROLE dlock_team")
    tok = q(alice, "SELECT dlock_acquire('team-job', '30s')")
    expect(tok is not None, "acquired")
    carol = as_role("dlock_carol", tcp=True)
    # carol is a member of dlock_team, not of dlock_alice: pg_stat_activity
    # hides alice's address from her, and so does dlock
    hidden = q(carol, "SELECT client_addr IS NULL FROM pg_stat_activity WHERE usename = 'dlock_alice'")
    expect(hidden is True, "pg_stat_activity shows carol alice's address")
    expect(q(carol, "SELECT client_addr IS NULL FROM dlock_locks WHERE name = 'team-job'") is True,
           "dlock_locks shows carol alice's address")
    expect(q(carol, "SELECT client_addr IS NULL FROM dlock_names() WHERE name = 'team-job'") is True,
           "dlock_names() shows carol alice's address")
    # alice (her own session's user) and a superuser see it
    q(alice, "RESET ROLE")
    expect(q(alice, "SELECT host(client_addr) FROM dlock_locks WHERE name = 'team-job'") == "127.0.0.1",
           "alice sees her address")
    su = connect("dlock_sec")
    expect(q(su, "SELECT host(client_addr) FROM dlock_locks WHERE name = 'team-job'") == "127.0.0.1",
           "a superuser sees it")
    q(alice, "SET ROLE dlock_team")
    expect(q(alice, "SELECT dlock_release('team-job', %s)", (tok,)) is True, "released")
    for c in (alice, carol, su):
        c.close()


def dlock_key(name):
    return struct.unpack("<q", hashlib.sha256(name.encode()).digest()[:8])[0]


def stats_part(dbid, key, mode=0):
    """The part of dlock_stats an entry is in (stats_table.h)."""
    h = (((key & 0xFFFFFFFFFFFFFFFF) ^ (dbid << 1) ^ mode) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    return (h >> 32) % 32


def names_in_part(prefix, dbid, part, n):
    out, i = [], 0
    while len(out) < n:
        name = "%s-%d" % (prefix, i)
        i += 1
        if stats_part(dbid, dlock_key(name)) == part:
            out.append(name)
    return out


@check("security: another role's names, all chosen for one part of dlock_stats, push out at most a share of a role's rows")
def t_stats_share():
    su = connect("dlock_sec")
    dbid = q(su, "SELECT oid FROM pg_database WHERE datname = current_database()")
    max_entries = q(su, "SELECT max_entries FROM dlock_stats_info")
    cap = (max_entries + 31) // 32
    share = max(1, cap // 8)
    batch = max(1, cap * 5 // 100)
    q(su, "SELECT dlock_stats_reset()")
    # the name the attack aims at, and as many more of alice's as
    # fill most of its part
    part = stats_part(dbid, dlock_key("alice-job-0"))
    alice_names = names_in_part("alice-job", dbid, part, cap - 10)
    alice = as_role("dlock_alice")
    for n in alice_names:
        q(alice, "SELECT dlock_try(%s), dlock_unlock(%s)", (n, n))
    q(alice, "SELECT count(*) FROM dlock_stats")  # flushes alice's counts
    had = q(su, "SELECT count(*) FROM dlock_stats WHERE name LIKE 'alice-job-%%'")
    expect(had == len(alice_names), "alice's rows before: %s of %d" % (had, len(alice_names)))
    # bob: 3 000 names of that part, each used more often than alice's
    bob = as_role("dlock_bob")
    for n in names_in_part("bob-junk", dbid, part, 3 * cap):
        q(bob, "SELECT dlock_try(%s), dlock_unlock(%s), dlock_try(%s), dlock_unlock(%s)", (n, n, n, n))
    q(bob, "SELECT count(*) FROM dlock_stats")
    kept = q(su, "SELECT count(*) FROM dlock_stats WHERE name LIKE 'alice-job-%%'")
    expect(kept >= len(alice_names) - share - batch,
           "alice kept %d of %d rows (share %d, eviction batch %d)" % (kept, len(alice_names), share, batch))
    bobs = q(su, "SELECT count(*) FROM dlock_stats WHERE name LIKE 'bob-junk-%%'")
    expect(0 < bobs <= share + batch, "bob has %d rows in the part" % bobs)
    # bob's own rows do go, so his newest names are counted
    expect(q(su, "SELECT sum(evictions) FROM dlock_stats_info") > 0, "evictions counted")
    # a name bob counted first, which alice then uses: bob's own names do not
    # push it out (an entry counted by two roles is nobody's own)
    q(su, "SELECT dlock_stats_reset()")
    target = names_in_part("alice-report", dbid, part, 1)[0]
    q(bob, "SELECT dlock_try(%s), dlock_unlock(%s)", (target, target))
    q(alice, "SELECT dlock_try(%s), dlock_unlock(%s)", (target, target))
    q(alice, "SELECT count(*) FROM dlock_stats")
    # bob's own names, each used more than the target
    for n in names_in_part("bob-again", dbid, part, 3 * cap):
        q(bob, "SELECT dlock_try(%s), dlock_unlock(%s), dlock_try(%s), dlock_unlock(%s), "
               "dlock_try(%s), dlock_unlock(%s)", (n, n, n, n, n, n))
    q(bob, "SELECT count(*) FROM dlock_stats")
    expect(q(su, "SELECT acquisitions FROM dlock_stats WHERE name = %s", (target,)) == 2,
           "the row bob counted first, then alice: gone or changed")
    q(su, "SELECT dlock_stats_reset()")
    for c in (su, alice, bob):
        c.close()


@check("security: in an EUC_JP database, PREPARE with a leased lock named in Japanese gets its 0A000 refusal")
def t_euc_jp_names():
    c = connect()
    q(c, "CREATE DATABASE dlock_eucjp ENCODING 'EUC_JP' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    c.close()
    d = connect("dlock_eucjp")
    q(d, "CREATE EXTENSION dlock")
    d.set_client_encoding("UTF8")
    expect(q(d, "SELECT dlock_try(%s, lease => '1 hour')", ("日本",)) is True, "leased lock")
    d.autocommit = False
    q(d, "SELECT 1")
    e = expect_error(psycopg2.errors.FeatureNotSupported, "PREPARE with a leased lock",
                     d, "PREPARE TRANSACTION 'dlock-eucjp'")
    expect("日本" in str(e), "the name in the refusal: %s" % e)
    d.rollback()
    d.autocommit = True
    expect(q(d, "SELECT name FROM dlock_locks WHERE pid = pg_backend_pid()") == "日本", "the view's name")
    expect(q(d, "SELECT dlock_unlock(%s)", ("日本",)) is True, "unlock")
    d.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    fault.ARGS = ap.parse_args()
    setup()
    try:
        for fn in (t_definer_lease, t_definer_superuser, t_analyze_lease, t_foreign_hold_and_lease,
                   t_detached_limit_role, t_client_addr_set_role, t_stats_share, t_euc_jp_names):
            fn()
    finally:
        teardown()
    print("# all security tests ran")
    return 0 if all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
