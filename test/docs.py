#!/usr/bin/env python3
"""test/docs.py --port PORT: the manual runs as it is written.

README.md and every page of doc/ are read as a user reads them:

- every ```sql block runs in psql, as written, with ON_ERROR_STOP, in a
  session of its own, against the scratch cluster (dlock preloaded); an
  ERROR or a WARNING fails it.  The blocks of one page run in order in one
  database of their own: README.md's in a database "app" without dlock, its
  installation block (the one that creates the extension) first; each doc/
  page's in a database with the extension created in public;
- every link to a page of the manual names a page and a heading that exist;
- every ```sh block parses as bash (bash -n; they are not run);
- README.md stays short (at most 500 lines) and links every page of doc/,
  and META.json names them all.

The language blocks of doc/languages.md are checked by test/clients/run
against the programs that run them; the postgres_exporter queries of
doc/monitoring.md run in test/stress.py, where there is traffic to count.
Prints "ok - ..." / "not ok - ..." lines and, last, "# all doc checks ran".
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(TOP, "README.md")
PAGES = [README] + sorted(glob.glob(os.path.join(TOP, "doc", "*.md")))
README_MAX_LINES = 500

FAILED = 0


def report(ok, what, detail=""):
    global FAILED
    if ok:
        print("ok - " + what, flush=True)
    else:
        FAILED += 1
        print("not ok - %s%s" % (what, (": " + detail) if detail else ""), flush=True)


def rel(path):
    return os.path.relpath(path, TOP)


def fenced_blocks(text):
    """(line number of the opening fence, language, body) of each fenced block"""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            start, lang, body = i + 1, m.group(1), []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            out.append((start, lang, "\n".join(body) + "\n"))
        i += 1
    return out


def outside_blocks(text):
    """the page without its fenced blocks (their lines left empty)"""
    keep, inside = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            inside = not inside
            keep.append("")
            continue
        keep.append("" if inside else line)
    return "\n".join(keep)


def slug(heading):
    """the anchor GitHub gives a heading"""
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


def anchors(path):
    found = set()
    for line in outside_blocks(open(path, encoding="utf-8").read()).split("\n"):
        m = re.match(r"^#{1,6} (.*)$", line)
        if m:
            found.add(slug(m.group(1)))
    return found


def check_links():
    for page in PAGES:
        text = outside_blocks(open(page, encoding="utf-8").read())
        bad = []
        count = 0
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue            # a URL: not checked here
            count += 1
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
            if not os.path.exists(dest):
                bad.append(target + " (no such file)")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                bad.append(target + " (no such heading)")
        report(not bad, "links: the %d links of %s go to pages and headings that exist" %
               (count, rel(page)), "; ".join(bad))


def check_readme():
    lines = open(README, encoding="utf-8").read().count("\n")
    report(lines <= README_MAX_LINES, "README.md is at most %d lines (%d)" % (README_MAX_LINES, lines))
    text = open(README, encoding="utf-8").read()
    missing = [rel(p) for p in PAGES[1:] if "(" + rel(p) + ")" not in text]
    report(not missing, "README.md links every page of doc/", ", ".join(missing))
    listed = json.load(open(os.path.join(TOP, "META.json"), encoding="utf-8")).get("x_documentation")
    report(listed == [rel(p) for p in PAGES], "META.json lists README.md and every page of doc/",
           "it lists %r" % (listed,))


def psql(port, db, sql):
    return subprocess.run(
        ["psql", "-X", "-h", "/tmp/dlock-%d" % port, "-p", str(port), "-U", "postgres",
         "-d", db, "-v", "ON_ERROR_STOP=1", "-f", "-"],
        input=sql, capture_output=True, text=True, timeout=180)


def fresh_database(port, db, extension):
    sql = "DROP DATABASE IF EXISTS %s WITH (FORCE);\nCREATE DATABASE %s;\n" % (db, db)
    r = psql(port, "postgres", sql)
    if r.returncode != 0:
        return r.stderr.strip()
    if extension:
        r = psql(port, db, "CREATE EXTENSION dlock;\n")
        if r.returncode != 0:
            return r.stderr.strip()
    return None


def page_database(page):
    return "app" if page == README else "dlock_docs_" + re.sub(r"\W", "_", os.path.basename(page)[:-3])


def drop_manual_roles(port):
    """The roles the manual's blocks create (CREATE ROLE x) are the cluster's:
    dropped before the blocks run (a run before this one made them) and
    after, with the databases that hold their privileges."""
    roles = set()
    for page in PAGES:
        roles.update(re.findall(r"^CREATE ROLE (\w+)", open(page, encoding="utf-8").read(), re.M))
    if not roles:
        return
    sql = "".join("DROP DATABASE IF EXISTS %s WITH (FORCE);\n" % page_database(p) for p in PAGES)
    sql += "".join("DROP ROLE IF EXISTS %s;\n" % r for r in sorted(roles))
    r = psql(port, "postgres", sql)
    report(r.returncode == 0, "the roles the manual creates (%s) are dropped" % ", ".join(sorted(roles)),
           r.stderr.strip())


def run_blocks(port):
    total = 0
    drop_manual_roles(port)
    for page in PAGES:
        blocks = [(n, body) for n, lang, body in fenced_blocks(open(page, encoding="utf-8").read())
                  if lang == "sql"]
        if not blocks:
            continue
        readme = page == README
        if readme:
            # the installation block first, as a user runs it before the others
            blocks.sort(key=lambda b: "CREATE EXTENSION" not in b[1])
        db = page_database(page)
        problem = fresh_database(port, db, extension=not readme)
        if problem:
            report(False, "%s: a database for its blocks" % rel(page), problem)
            continue
        for line, body in blocks:
            total += 1
            what = "%s:%d: the sql block runs in psql as written" % (rel(page), line)
            try:
                r = psql(port, db, body)
            except subprocess.TimeoutExpired:
                report(False, what, "did not end within 180 s")
                continue
            said = [l for l in r.stderr.split("\n") if re.search(r"\b(ERROR|WARNING|FATAL):", l)]
            if r.returncode != 0 or said:
                report(False, what, "exit %d; %s" % (r.returncode, " | ".join(said or [r.stderr.strip()])))
            else:
                report(True, what)
    report(total >= 25, "the manual has its sql blocks (%d found)" % total)
    release_manual_locks(port)
    drop_manual_roles(port)


def release_manual_locks(port):
    """The detached locks the manual's blocks leave held (a scheduled job's
    minimum hold keeps its lock for minutes after dlock_release) are let go
    with the operator's override, so that the suites run after this one on
    the same cluster find nothing of them."""
    problems = []
    for page in PAGES:
        # (dlock_force_release acts in its own database)
        r = psql(port, page_database(page),
                 "SELECT count(dlock_force_release(name, token)) FROM dlock_locks "
                 "WHERE scope = 'detached' AND granted AND database = current_database();\n")
        if r.returncode != 0 and "does not exist" not in r.stderr:
            problems.append(r.stderr.strip())
    report(not problems, "the detached locks the manual's blocks leave are released", " | ".join(problems))


def check_shell():
    """every ```sh block parses as bash (bash -n: nothing runs)"""
    bad, count = [], 0
    for page in PAGES:
        for line, lang, body in fenced_blocks(open(page, encoding="utf-8").read()):
            if lang != "sh":
                continue
            count += 1
            r = subprocess.run(["bash", "-n"], input=body, capture_output=True, text=True)
            if r.returncode != 0:
                bad.append("%s:%d: %s" % (rel(page), line, r.stderr.strip()))
    report(not bad, "the %d sh blocks of the manual parse as bash" % count, "; ".join(bad))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    check_readme()
    check_links()
    check_shell()
    run_blocks(args.port)
    print("# all doc checks ran", flush=True)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
