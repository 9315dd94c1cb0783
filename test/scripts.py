#!/usr/bin/env python3
"""test/scripts.py: the extension's SQL scripts are safe to run as a superuser
in a schema that others can create objects in (doc/security.md).

An extension script runs as a superuser with the extension's schema first on
search_path (pg_catalog is searched before it, pg_temp last).  A role that
can create objects in that schema can plant an operator or a function there
that overload resolution prefers to pg_catalog's (one whose argument types
fit the call better), and the superuser runs it.  So every script keeps to
these rules, which the parts of this test check:

  lint    (static, no server) every sql/dlock--*.sql, the bodies of its DO
          blocks included: each operator written OPERATOR(pg_catalog.x);
          each function call, type and collation schema-qualified
          (pg_catalog, or "@extschema@" for dlock's own); no construct that
          looks an operator up implicitly (IN (...), CASE x WHEN,
          IS [NOT] DISTINCT FROM, BETWEEN, LIKE, NULLIF, ...); no
          unqualified pg_catalog relation; no CREATE OR REPLACE of an
          object that an earlier script of the extension did not create.
  traps   (on a server) a role with CREATE on the schema plants operators
          and functions that shadow every one the scripts use, for the
          argument types the scripts use them with, each of which would
          make that role a superuser if a superuser ran it.  Then
          CREATE EXTENSION dlock, CREATE EXTENSION dlock VERSION 'x' for
          every version, and ALTER EXTENSION dlock UPDATE along every
          update path: the role stays what it was, and no trap ran.
  same    a fresh install and an install of 1.0 updated to the current
          version have the same functions (arguments, defaults, result,
          attributes, C symbol, privileges, comments), views, types and
          initial privileges.

    python3 test/scripts.py --lint-only [--dir SQLDIR]
    python3 test/scripts.py --port PORT          (lint, then traps and same)

Prints "ok - ..." / "not ok - ..." lines and, last, "# all script tests ran".
"""
import argparse
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)

# ---------------------------------------------------------------------------
# A tokenizer for the SQL of extension scripts and the PL/pgSQL of their DO
# blocks: enough to find every operator, call and type reference.

OP_CHARS = set("+-*/<>=~!@#%^&|`?")
KIND_IDENT, KIND_QIDENT, KIND_KEYWORD_SKIP, KIND_STRING, KIND_DOLLAR, KIND_NUM, KIND_OP, KIND_PUNCT = range(8)


class Tok:
    __slots__ = ("kind", "text", "line")

    def __init__(self, kind, text, line):
        self.kind, self.text, self.line = kind, text, line

    @property
    def up(self):
        return self.text.upper() if self.kind == KIND_IDENT else None

    def __repr__(self):
        return "Tok(%d,%r,%d)" % (self.kind, self.text, self.line)


def tokenize(src, line0=1):
    toks = []
    i, n, line = 0, len(src), line0
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c.isspace():
            i += 1
            continue
        # psql meta-commands (\echo ... \quit): to the end of the line
        if c == "\\" and (i == 0 or src[i - 1] == "\n"):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("--", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += src.count("\n", i, j)
            i = j
            continue
        if c == "'" or (c in "eE" and i + 1 < n and src[i + 1] == "'"):
            # a string; E'...' takes backslash escapes
            escapes = c != "'"
            j = i + (2 if escapes else 1)
            while j < n:
                if escapes and src[j] == "\\":
                    j += 2
                elif src[j] == "'" and j + 1 < n and src[j + 1] == "'":
                    j += 2
                elif src[j] == "'":
                    break
                else:
                    j += 1
            toks.append(Tok(KIND_STRING, src[i:j + 1], line))
            line += src.count("\n", i, j + 1)
            i = j + 1
            continue
        if c == '"':
            j = src.find('"', i + 1)
            toks.append(Tok(KIND_QIDENT, src[i:j + 1], line))
            i = j + 1
            continue
        m = re.match(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$", src[i:])
        if m:
            tag = m.group(0)
            j = src.find(tag, i + len(tag))
            if j < 0:
                raise SyntaxError("line %d: unterminated %s" % (line, tag))
            toks.append(Tok(KIND_DOLLAR, src[i:j + len(tag)], line))
            line += src.count("\n", i, j + len(tag))
            i = j + len(tag)
            continue
        if src.startswith("@extschema@", i):
            toks.append(Tok(KIND_QIDENT, '"@extschema@"', line))
            i += len("@extschema@")
            continue
        if c.isalpha() or c == "_":
            m = re.match(r"[A-Za-z_][A-Za-z_0-9$]*", src[i:])
            toks.append(Tok(KIND_IDENT, m.group(0), line))
            i += len(m.group(0))
            continue
        if c.isdigit():
            m = re.match(r"\d+(\.\d+)?([eE][+-]?\d+)?", src[i:])
            if src.startswith("..", i + len(m.group(0)) - 1) and "." in m.group(0):
                m = re.match(r"\d+", src[i:])
            toks.append(Tok(KIND_NUM, m.group(0), line))
            i += len(m.group(0))
            continue
        if src.startswith("::", i) or src.startswith(":=", i) or src.startswith("..", i):
            toks.append(Tok(KIND_PUNCT, src[i:i + 2], line))
            i += 2
            continue
        if c in "()[],;.:":
            toks.append(Tok(KIND_PUNCT, c, line))
            i += 1
            continue
        if c in OP_CHARS:
            j = i
            while j < n and src[j] in OP_CHARS and not src.startswith("--", j) and not src.startswith("/*", j):
                j += 1
            toks.append(Tok(KIND_OP, src[i:j], line))
            i = j
            continue
        raise SyntaxError("line %d: unexpected character %r" % (line, c))
    return toks


# Words followed by "(" that are syntax, not a call looked up on search_path.
NOT_CALLS = {
    "VALUES", "EXISTS", "ARRAY", "CAST", "COALESCE", "GREATEST", "LEAST", "ROW", "OVER",
    "FILTER", "AS", "ON", "USING", "WITH", "CHECK", "TABLE", "FROM", "JOIN", "WHERE", "AND",
    "OR", "NOT", "THEN", "ELSE", "WHEN", "SELECT", "IF", "RETURNS", "UNION", "ALL", "LOOP",
    "BEGIN", "RETURN", "EXECUTE", "PERFORM", "ELSIF", "DISTINCT", "ORDER", "BY", "CASE",
    "LATERAL", "END", "INTO", "DEFAULT", "SET", "EXCEPT", "INTERSECT", "GROUP", "HAVING",
    "LIMIT", "OFFSET", "WHILE", "FOREACH", "RAISE", "QUERY", "AGGREGATE", "VARIADIC",
}
# Constructs that look up "=" (or another operator) on search_path implicitly.
IMPLICIT_OPS = {"BETWEEN", "LIKE", "ILIKE", "SIMILAR", "NULLIF", "OVERLAPS"}
# Type names that the grammar itself maps to pg_catalog (keywords).
KEYWORD_TYPES = {
    "BOOLEAN", "BOOL", "BIGINT", "INTEGER", "INT", "SMALLINT", "REAL", "FLOAT", "DOUBLE",
    "PRECISION", "NUMERIC", "DECIMAL", "INTERVAL", "TIMESTAMP", "TIME", "CHARACTER", "VARCHAR",
    "CHAR", "BIT", "VARYING", "WITH", "WITHOUT", "ZONE", "DEC",
}
# Where a function is named by its signature, not called.
SIGNATURE_CONTEXTS = [
    ("CREATE", "FUNCTION"), ("CREATE", "OR", "REPLACE", "FUNCTION"), ("ALTER", "FUNCTION"),
    ("DROP", "FUNCTION"), ("DROP", "FUNCTION", "IF", "EXISTS"), ("ON", "FUNCTION"),
    ("CREATE", "PROCEDURE"), ("ALTER", "PROCEDURE"), ("DROP", "PROCEDURE"),
]


def is_qualified_name(toks, k):
    """toks[k] is the last part of a name: is it schema.name with a safe schema?"""
    return k >= 2 and toks[k - 1].text == "." and (
        toks[k - 2].text.lower() == "pg_catalog" or toks[k - 2].text == '"@extschema@"')


def name_start(toks, k):
    """Index of the first token of the (possibly qualified) name ending at k."""
    while k >= 2 and toks[k - 1].text == "." and toks[k - 2].kind in (KIND_IDENT, KIND_QIDENT):
        k -= 2
    return k


def prev_words(toks, k, count):
    out = []
    j = k - 1
    while j >= 0 and len(out) < count:
        out.insert(0, toks[j].up or toks[j].text)
        j -= 1
    return tuple(out)


def match_close(toks, k):
    """toks[k] is "(": the index of its ")"."""
    depth = 0
    for j in range(k, len(toks)):
        if toks[j].text == "(":
            depth += 1
        elif toks[j].text == ")":
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


class Linter:
    def __init__(self, path):
        self.path = path
        self.problems = []

    def bad(self, tok, what):
        self.problems.append("%s:%d: %s" % (os.path.basename(self.path), tok.line, what))

    def check_type(self, toks, k):
        """A type reference starts at toks[k]; returns the index after it."""
        if k >= len(toks):
            return k
        t = toks[k]
        if t.up == "SETOF":
            return self.check_type(toks, k + 1)
        if t.kind == KIND_IDENT and t.up in KEYWORD_TYPES:
            j = k + 1
            while j < len(toks) and toks[j].up in KEYWORD_TYPES:
                j += 1
        elif t.kind in (KIND_IDENT, KIND_QIDENT):
            j = k
            while j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 2].kind in (KIND_IDENT, KIND_QIDENT):
                j += 2
            if not is_qualified_name(toks, j):
                self.bad(t, "unqualified type %s" % t.text)
            j += 1
        else:
            return k
        if j < len(toks) and toks[j].text == "(":  # a type modifier
            j = match_close(toks, j) + 1
        while j + 1 < len(toks) and toks[j].text == "[" and toks[j + 1].text == "]":
            j += 2
        return j

    def check_signature(self, toks, open_k, defining):
        """toks[open_k] is the "(" of a function's argument list."""
        close = match_close(toks, open_k)
        args, cur, depth = [], [], 0
        for j in range(open_k + 1, close):
            if toks[j].text == "(":
                depth += 1
            elif toks[j].text == ")":
                depth -= 1
            if toks[j].text == "," and depth == 0:
                args.append(cur)
                cur = []
            else:
                cur.append(j)
        if cur:
            args.append(cur)
        for a in args:
            # [mode] [name] type [DEFAULT expr | = expr]
            end = len(a)
            for x, j in enumerate(a):
                if toks[j].up == "DEFAULT" or toks[j].text == "=":
                    end = x
                    self.check_expr(toks, a[x + 1], a[-1] + 1)
                    break
            words = [j for j in a[:end]]
            while words and toks[words[0]].up in ("IN", "OUT", "INOUT", "VARIADIC"):
                words = words[1:]
            if not words:
                continue
            # the type is what is left after the argument's name (if any):
            # a name is one identifier followed by another token that can
            # start a type
            first = toks[words[0]]
            if (defining and len(words) > 1 and first.kind in (KIND_IDENT, KIND_QIDENT)
                    and toks[words[1]].text != "." and toks[words[1]].text != "["
                    and not (first.up in KEYWORD_TYPES and toks[words[1]].up in KEYWORD_TYPES)):
                words = words[1:]
            self.check_type(toks, words[0])
        return close

    def check_expr(self, toks, start, stop):
        """Operators, calls, implicit operators and casts in toks[start:stop]."""
        k = start
        while k < stop:
            t = toks[k]
            up = t.up
            if t.kind == KIND_OP:
                prev = toks[k - 1] if k > 0 else None
                nxt = toks[k + 1] if k + 1 < len(toks) else None
                in_operator = (k >= 4 and toks[k - 1].text == "." and toks[k - 2].text.lower() == "pg_catalog"
                               and toks[k - 3].text == "(" and toks[k - 4].up == "OPERATOR")
                if in_operator:
                    pass
                elif t.text == "=>":
                    pass  # named argument
                elif t.text == "*" and prev is not None and (prev.up == "SELECT" or prev.text in (",", ".", "(")):
                    pass  # SELECT *, t.*, count(*)
                elif t.text == "-" and nxt is not None and nxt.kind == KIND_NUM and prev is not None and (
                        prev.text in ("(", ",", "=>") or prev.kind == KIND_OP or prev.up in ("DEFAULT", "THEN", "ELSE")):
                    pass  # a negative constant
                elif t.text == "=" and prev is not None and (prev.up == "SET" or (
                        k >= 2 and toks[k - 2].up == "SET" and prev.kind == KIND_IDENT)):
                    pass  # SET x = ..., UPDATE ... SET col = ...
                else:
                    self.bad(t, "operator %s not written OPERATOR(pg_catalog.%s)" % (t.text, t.text))
            elif t.text == "::":
                k = self.check_type(toks, k + 1)
                continue
            elif up == "IS" and k + 1 < len(toks) and (toks[k + 1].up == "DISTINCT" or (
                    toks[k + 1].up == "NOT" and k + 2 < len(toks) and toks[k + 2].up == "DISTINCT")):
                self.bad(t, "IS [NOT] DISTINCT FROM looks up = on search_path")
            elif up == "IN" and k + 1 < len(toks) and toks[k + 1].text == "(":
                self.bad(t, "IN (...) looks up = on search_path")
            elif up in IMPLICIT_OPS:
                self.bad(t, "%s looks up an operator on search_path" % t.text)
            elif up == "CASE" and k + 1 < len(toks) and toks[k + 1].up != "WHEN":
                self.bad(t, "CASE x WHEN looks up = on search_path: write CASE WHEN x OPERATOR(pg_catalog.=) ...")
            elif up == "COLLATE":
                if not is_qualified_name(toks, k + 3) or toks[k + 2].text != ".":
                    self.bad(t, "unqualified collation")
            elif t.kind in (KIND_IDENT, KIND_QIDENT) and k + 1 < len(toks) and toks[k + 1].text == "(":
                s = name_start(toks, k)
                ctx = prev_words(toks, s, 5)
                if is_qualified_name(toks, k):
                    pass
                elif s != k:
                    self.bad(t, "function %s qualified with a schema other than pg_catalog or @extschema@"
                             % t.text)
                elif up in NOT_CALLS or up == "OPERATOR":
                    pass
                elif up == "IN":
                    pass  # reported above
                elif up in IMPLICIT_OPS:
                    pass
                elif any(ctx[-len(c):] == c for c in SIGNATURE_CONTEXTS):
                    pass  # handled by the statement
                elif prev_words(toks, s, 1) == ("AS",) or (s > 0 and toks[s - 1].text == ")"):
                    pass  # a table alias's column names
                elif up in KEYWORD_TYPES and s > 0 and toks[s - 1].text == "::":
                    pass
                else:
                    self.bad(t, "unqualified call of %s()" % t.text)
            elif (t.kind == KIND_IDENT and t.text.lower().startswith("pg_") and not is_qualified_name(toks, k)
                  and not (k + 1 < len(toks) and toks[k + 1].text == "(")
                  and not (k > 0 and toks[k - 1].text == ".")
                  and not (k + 1 < len(toks) and toks[k + 1].text == ".")):
                self.bad(t, "unqualified catalog relation %s" % t.text)
            k += 1

    def lint(self, src, plpgsql=False, line0=1):
        toks = tokenize(src, line0)
        # statements: split at top-level ";"
        stmts, cur, depth = [], [], 0
        for j, t in enumerate(toks):
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
            cur.append(j)
            if t.text == ";" and depth == 0:
                stmts.append(cur)
                cur = []
        if cur:
            stmts.append(cur)
        created = []
        for st in stmts:
            words = [toks[j].up or toks[j].text for j in st[:6]]
            a, b = st[0], st[-1] + 1
            if plpgsql:
                self.lint_plpgsql(toks, a, b)
                continue
            if words[:1] == ["DO"]:
                for j in st:
                    if toks[j].kind == KIND_DOLLAR:
                        body = toks[j].text
                        tag = body[:body.index("$", 1) + 1]
                        self.lint(body[len(tag):-len(tag)], plpgsql=True, line0=toks[j].line)
                continue
            if words[:3] == ["CREATE", "OR", "REPLACE"]:
                kind = words[3]
                k = a + 4
                while toks[k + 1].text == ".":
                    k += 2
                created.append(("replace", kind, toks[k].text.lower(), toks[k]))
            elif words[:1] == ["CREATE"] and words[1] in ("FUNCTION", "VIEW", "DOMAIN", "TYPE", "TABLE"):
                k = a + 2
                while toks[k + 1].text == ".":
                    k += 2
                created.append(("create", words[1], toks[k].text.lower(), toks[k]))
            self.lint_statement(toks, a, b)
        return created

    def lint_statement(self, toks, a, b):
        k = a
        while k < b:
            t = toks[k]
            ctx = prev_words(toks, name_start(toks, k), 5)
            if (t.kind in (KIND_IDENT, KIND_QIDENT) and k + 1 < b and toks[k + 1].text == "("
                    and any(ctx[-len(c):] == c for c in SIGNATURE_CONTEXTS)):
                defining = ctx[-1:] == ("FUNCTION",) and ctx[-2:-1] in (("CREATE",), ("REPLACE",))
                close = self.check_signature(toks, k + 1, defining)
                k = close + 1
                if k < b and toks[k].up == "RETURNS":
                    k = self.check_type(toks, k + 1)
                continue
            if t.up == "DOMAIN" and k + 1 < b:
                j = k + 1
                while j + 1 < b and toks[j + 1].text == ".":
                    j += 2
                if j + 1 < b and toks[j + 1].up == "AS":
                    k = self.check_type(toks, j + 2)
                    continue
            if t.up == "AS" and k > a and toks[a].up == "CREATE" and toks[a + 1].up in ("VIEW", "OR"):
                # the view's query
                self.check_expr(toks, k + 1, b)
                return
            if t.up in ("WHERE", "SELECT") or t.kind == KIND_OP or t.text == "::":
                self.check_expr(toks, k, b)
                return
            k += 1

    def lint_plpgsql(self, toks, a, b):
        # DECLARE ... BEGIN: variable declarations (name type;)
        words = [toks[j].up for j in range(a, b)]
        k = a
        if "DECLARE" in words:
            k = a + words.index("DECLARE") + 1
            while k < b and toks[k].up != "BEGIN":
                k += 1
        # a declaration that runs into the next statement split: "x type;"
        if toks[a].kind == KIND_IDENT and toks[a].up not in (
                "DECLARE", "BEGIN", "IF", "FOR", "FOREACH", "LOOP", "END", "EXECUTE", "PERFORM",
                "RETURN", "RAISE", "ELSE", "ELSIF", "SELECT", "INSERT", "UPDATE", "DELETE",
                "WHILE", "EXIT", "CONTINUE", "NULL", "GET", "COMMIT", "ROLLBACK") and \
                a + 1 < b and toks[a + 1].kind in (KIND_IDENT, KIND_QIDENT) and toks[a + 1].text != ":=":
            self.check_type(toks, a + 1)
            return
        self.check_expr(toks, a, b)


def script_versions(sqldir):
    """The scripts, in the order the chain runs them, and the base scripts."""
    files = sorted(glob.glob(os.path.join(sqldir, "dlock--*.sql")))
    return files


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def lint_all(sqldir):
    files = script_versions(sqldir)
    bases = {}
    updates = {}
    for f in files:
        m = re.match(r"dlock--([\d.]+)(?:--([\d.]+))?\.sql$", os.path.basename(f))
        if not m:
            continue
        if m.group(2):
            updates[(m.group(1), m.group(2))] = f
        else:
            bases[m.group(1)] = f
    results = []
    # each base script alone, then each update after the objects of every
    # script before it on the chain from the oldest base
    seen_by_version = {}
    for v in sorted(bases, key=vkey):
        li = Linter(bases[v])
        created = li.lint(open(bases[v]).read())
        for kind, what, name, tok in created:
            if kind == "replace":
                li.bad(tok, "CREATE OR REPLACE %s %s in a base script (an object someone made first would be taken over)"
                       % (what, name))
        seen_by_version[v] = {(w, n) for k, w, n, _ in created}
        results.append((bases[v], li.problems))
    for (src, dst) in sorted(updates, key=lambda p: (vkey(p[0]), vkey(p[1]))):
        li = Linter(updates[(src, dst)])
        created = li.lint(open(updates[(src, dst)]).read())
        before = seen_by_version.get(src, set())
        for kind, what, name, tok in created:
            if kind == "replace" and (what, name) not in before:
                li.bad(tok, "CREATE OR REPLACE %s %s, which no earlier script created" % (what, name))
        seen_by_version.setdefault(dst, set()).update(before | {(w, n) for k, w, n, _ in created})
        results.append((updates[(src, dst)], li.problems))
    return results


# ---------------------------------------------------------------------------
# Traps, on a server.

def connect(port, dbname="postgres", user="postgres"):
    import psycopg2
    c = psycopg2.connect(host="/tmp/dlock-%d" % port, port=port, dbname=dbname, user=user)
    c.autocommit = True
    return c


def q(conn, sql, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args or None)
        try:
            return cur.fetchall()
        except Exception:
            return None


# The argument types the scripts use operators and functions with, from
# which the traps are made: every operator the scripts use, for every pair
# of these types that pg_catalog's operators take (with casts) but have no
# exact operator for; every pg_catalog function the scripts use, for every
# list of these types of its arity (and of up to two more arguments for a
# VARIADIC one) that pg_catalog's functions take but have no exact function
# for.  A literal in a script is of type unknown, which a text argument
# takes best.  Each trap does what the operator or function it shadows
# does, so that the script goes on and commits, after it made its creator
# a superuser if a superuser ran it: what an attacker would plant.
TRAP_TYPES = ["oid", "regprocedure", "regclass", "regrole", "text", "name", '"char"', "integer",
              "bigint", "boolean", "aclitem[]", "aclitem", "oid[]", "text[]", "timestamptz",
              "interval"]
# for the third and later arguments
TRAP_TYPES_MORE = ["text", "name", "regprocedure", "oid"]


def used_names(sqldir):
    """Operators and function names the scripts use (qualified or not)."""
    ops, funcs = set(), set()
    for f in script_versions(sqldir):
        def scan(src):
            toks = tokenize(src)
            for k, t in enumerate(toks):
                if t.kind == KIND_OP and t.text not in ("=>",):
                    ops.add(t.text)
                elif t.kind == KIND_DOLLAR:
                    body = t.text
                    tag = body[:body.index("$", 1) + 1]
                    scan(body[len(tag):-len(tag)])
                elif t.kind == KIND_IDENT and k + 1 < len(toks) and toks[k + 1].text == "(":
                    funcs.add(t.text.lower())
        scan(open(f).read())
    ops.discard("*")
    # what IN, CASE x WHEN, IS DISTINCT FROM and the like look up
    ops |= {"=", "<>"}
    return sorted(ops), sorted(funcs)


TRAP_BODY = """
DECLARE r %(ret)s;
BEGIN
  -- once: a catalog row updated for every row of a join is slow
  IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) pg_catalog.current_user())
     AND NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'dlock_attacker') THEN
    EXECUTE 'ALTER ROLE dlock_attacker SUPERUSER';
  END IF;
  IF NOT EXISTS (SELECT FROM public.dlock_trap_log l WHERE l.what OPERATOR(pg_catalog.=) %(what)s) THEN
    INSERT INTO public.dlock_trap_log VALUES (%(what)s);
  END IF;
  %(delegate)s
END
"""


def try_sql(cur, sql, args=None):
    """Runs sql in a savepoint: its first value, or raises nothing and returns None."""
    cur.execute("SAVEPOINT t")
    try:
        cur.execute(sql, args)
        row = cur.fetchone() if cur.description else (True,)
        cur.execute("RELEASE SAVEPOINT t")
        return row[0] if row else None
    except Exception:  # noqa: BLE001 - not a combination pg_catalog takes
        cur.execute("ROLLBACK TO SAVEPOINT t")
        return None


def plant_traps(conn, schema, ops, funcs):
    """As dlock_attacker: the traps; returns how many were planted."""
    n = 0
    cur = conn.cursor()
    cur.execute("SET search_path = pg_catalog, pg_temp")

    def arg(t):
        # a script's literal is unknown-typed; anything else is typed
        return "NULL" if t == "text" else "NULL::%s" % t

    for op in ops:
        for lt in TRAP_TYPES:
            for rt in TRAP_TYPES:
                if try_sql(cur, "SELECT 1 FROM pg_catalog.pg_operator WHERE oprname = %s "
                                "AND oprleft = %s::pg_catalog.regtype AND oprright = %s::pg_catalog.regtype "
                                "AND oprnamespace = 'pg_catalog'::pg_catalog.regnamespace", (op, lt, rt)):
                    continue
                ret = try_sql(cur, "SELECT pg_catalog.pg_typeof(%s OPERATOR(pg_catalog.%s) %s)::text"
                              % (arg(lt), op, arg(rt)))
                if ret is None:
                    continue
                fn = "dlock_trap_op_%d" % n
                what = "'operator %s (%s, %s)'" % (op, lt.replace('"', ""), rt.replace('"', ""))
                body = TRAP_BODY % dict(ret=ret, what=what,
                                        delegate="RETURN $1 OPERATOR(pg_catalog.%s) $2;" % op)
                if try_sql(cur, "CREATE FUNCTION %s.%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS $t$%s$t$; "
                                "CREATE OPERATOR %s.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s.%s)"
                                % (schema, fn, lt, rt, ret, body, schema, op, lt, rt, schema, fn)):
                    n += 1
    for f in funcs:
        cur.execute("SELECT pronargs, provariadic <> 0, proretset, prorettype::pg_catalog.regtype::text, "
                    "       coalesce(proallargtypes::pg_catalog.regtype[]::text[], '{}'), "
                    "       coalesce(proargmodes::text[], '{}'), coalesce(proargnames, '{}') "
                    "  FROM pg_catalog.pg_proc WHERE proname = %s AND prokind = 'f' "
                    "   AND pronamespace = 'pg_catalog'::pg_catalog.regnamespace AND pronargs BETWEEN 1 AND 3",
                    (f,))
        shapes = {}
        for nargs, variadic, retset, ret, alltypes, modes, names in cur.fetchall():
            outs = [(nm or "c%d" % i, ty) for i, (ty, md, nm) in
                    enumerate(zip(alltypes, modes, names or [None] * len(modes))) if md in ("o", "t")]
            for arity in range(nargs, nargs + (3 if variadic else 1)):
                shapes.setdefault(arity, (retset, ret, outs))
        for arity, (retset, ret, outs) in sorted(shapes.items()):
            combos = [[]]
            for pos in range(arity):
                combos = [c + [t] for c in combos for t in (TRAP_TYPES if pos < 2 else TRAP_TYPES_MORE)]
            for c in combos:
                if try_sql(cur, "SELECT 1 FROM pg_catalog.pg_proc WHERE proname = %s AND "
                                "pronamespace = 'pg_catalog'::pg_catalog.regnamespace AND "
                                "proargtypes::pg_catalog.regtype[]::text[] = %s::pg_catalog.regtype[]::text[]",
                           (f, "{" + ",".join('"%s"' % a.replace('"', '\\"') for a in c) + "}")):
                    continue
                if try_sql(cur, "SELECT pg_catalog.pg_typeof(pg_catalog.%s(%s))" % (f, ", ".join(arg(t) for t in c))) is None:
                    continue
                lits = ", ".join("%L" for _ in c)
                params = ", ".join("$%d" % (i + 1) for i in range(len(c)))
                if retset:
                    delegate = "RETURN QUERY EXECUTE pg_catalog.format('SELECT * FROM pg_catalog.%s(%s)', %s);" % (
                        f, lits, params)
                else:
                    delegate = "EXECUTE pg_catalog.format('SELECT pg_catalog.%s(%s)', %s) INTO r; RETURN r;" % (
                        f, lits, params)
                what = "'function %s(%s)'" % (f, ", ".join(t.replace('"', "") for t in c))
                if outs and retset:
                    sig = ", ".join(c) + ", " + ", ".join("OUT %s %s" % o for o in outs)
                    returns = "SETOF record"
                    declare_ret = "int"
                else:
                    sig = ", ".join(c)
                    returns = ("SETOF " if retset else "") + ret
                    declare_ret = ret
                body = TRAP_BODY % dict(ret=declare_ret, what=what, delegate=delegate)
                if try_sql(cur, "CREATE FUNCTION %s.%s(%s) RETURNS %s LANGUAGE plpgsql AS $t$%s$t$"
                           % (schema, f, sig, returns, body)):
                    n += 1
    cur.close()
    return n


def run_traps(port, sqldir, report):
    admin = connect(port)
    q(admin, "DROP DATABASE IF EXISTS dlock_traps")
    q(admin, "CREATE DATABASE dlock_traps")
    q(admin, "DROP ROLE IF EXISTS dlock_attacker")
    q(admin, "CREATE ROLE dlock_attacker LOGIN")
    db = connect(port, "dlock_traps")
    # as on PostgreSQL 14 and before, or where a DBA granted it: everyone may
    # create objects in public, the schema dlock goes into
    q(db, "GRANT CREATE ON SCHEMA public TO PUBLIC")
    q(db, "CREATE TABLE public.dlock_trap_log (what text, at timestamptz DEFAULT pg_catalog.clock_timestamp())")
    q(db, "GRANT INSERT, SELECT ON public.dlock_trap_log TO PUBLIC")
    attacker = connect(port, "dlock_traps", "dlock_attacker")
    ops, funcs = used_names(sqldir)
    q(attacker, "BEGIN")
    n = plant_traps(attacker, "public", ops, funcs)
    q(attacker, "COMMIT")
    report(n > 100, "traps: %d operators and functions planted in public, shadowing %d operators and %d functions"
           % (n, len(ops), len(funcs)))
    # that the traps bite: an unqualified "=" on (oid, regprocedure), as the
    # 1.4 to 1.5 update had it, runs one
    q(db, "DO $$ BEGIN PERFORM 1 FROM pg_catalog.pg_proc o "
          "WHERE o.oid = 'pg_catalog.now()'::regprocedure; END $$")
    bit = q(db, "SELECT count(*) FROM public.dlock_trap_log")[0][0]
    sup = q(db, "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'dlock_attacker'")[0][0]
    report(bit > 0 and sup, "traps: an unqualified = of the kind 1.4 to 1.5 had makes the role superuser")
    q(db, "ALTER ROLE dlock_attacker NOSUPERUSER")
    q(db, "TRUNCATE public.dlock_trap_log")

    versions = sorted((r[0] for r in q(db, "SELECT version FROM pg_catalog.pg_available_extension_versions "
                                           "WHERE name = 'dlock'")), key=vkey)
    default = q(db, "SELECT default_version FROM pg_catalog.pg_available_extensions WHERE name = 'dlock'")[0][0]
    paths = q(db, "SELECT source, target FROM pg_catalog.pg_extension_update_paths('dlock') "
                  "WHERE path IS NOT NULL")
    steps = [("CREATE EXTENSION dlock", None)]
    steps += [("CREATE EXTENSION dlock VERSION '%s'" % v, None) for v in versions]
    steps += [("CREATE EXTENSION dlock VERSION '%s'" % s, "ALTER EXTENSION dlock UPDATE TO '%s'" % t)
              for s, t in sorted(paths, key=lambda p: (vkey(p[0]), vkey(p[1])))]
    for create, update in steps:
        q(db, "DROP EXTENSION IF EXISTS dlock")
        what = create + ("; " + update if update else "")
        err = None
        try:
            q(db, create)
            if update:
                q(db, update)
        except Exception as e:  # noqa: BLE001
            err = str(e).strip().splitlines()[0]
        sprung = [r[0] for r in q(db, "SELECT DISTINCT what FROM public.dlock_trap_log")]
        sup = q(db, "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'dlock_attacker'")[0][0]
        ok = err is None and not sprung and not sup
        report(ok, "traps: %s%s%s%s" % (what, "" if err is None else " failed: " + err,
                                        " (made the role superuser)" if sup else "",
                                        "" if not sprung else " ran traps: " + "; ".join(sprung[:5])))
        if sup:
            q(db, "ALTER ROLE dlock_attacker NOSUPERUSER")
        q(db, "TRUNCATE public.dlock_trap_log")
    # the views dlock's scripts made call no trap either, read by a superuser
    q(db, "DROP EXTENSION IF EXISTS dlock")
    q(db, "CREATE EXTENSION dlock VERSION '%s'" % versions[0])
    q(db, "ALTER EXTENSION dlock UPDATE")
    for v in ("dlock_locks", "dlock_stats", "dlock_stats_info"):
        q(db, "SELECT * FROM public.%s" % v)
    sprung = [r[0] for r in q(db, "SELECT DISTINCT what FROM public.dlock_trap_log")]
    report(not sprung, "traps: the views read by a superuser run no trap" +
           ("" if not sprung else ": " + "; ".join(sprung[:5])))
    db.close()
    attacker.close()
    q(admin, "DROP DATABASE dlock_traps")
    q(admin, "DROP ROLE dlock_attacker")
    admin.close()
    return default


# ---------------------------------------------------------------------------
# A fresh install and an updated one end alike.

CATALOG = """
SELECT 'function ' || p.oid::pg_catalog.regprocedure::text || ' ' ||
       pg_catalog.pg_get_function_arguments(p.oid) || ' -> ' ||
       pg_catalog.pg_get_function_result(p.oid) || ' ' || p.provolatile::text || p.proparallel::text ||
       p.proisstrict::text || p.prosecdef::text || ' ' || p.prosrc || ' ' || coalesce(p.probin, '') ||
       ' acl ' || coalesce(p.proacl::text, 'default') ||
       ' comment ' || coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '-')
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'public'::pg_catalog.regnamespace
UNION ALL
SELECT 'relation ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, 'default') ||
       ' ' || coalesce(pg_catalog.pg_get_viewdef(c.oid), '') ||
       ' comment ' || coalesce(pg_catalog.obj_description(c.oid, 'pg_class'), '-')
  FROM pg_catalog.pg_class c
 WHERE c.relnamespace = 'public'::pg_catalog.regnamespace
UNION ALL
SELECT 'type ' || t.typname || ' ' || t.typtype::text || ' ' || t.typbasetype::pg_catalog.regtype::text ||
       ' comment ' || coalesce(pg_catalog.obj_description(t.oid, 'pg_type'), '-')
  FROM pg_catalog.pg_type t
 WHERE t.typnamespace = 'public'::pg_catalog.regnamespace AND t.typtype = 'd'
UNION ALL
SELECT 'initial privileges ' || pg_catalog.pg_describe_object(i.classoid, i.objoid, i.objsubid) || ' ' ||
       i.privtype::text || ' ' || i.initprivs::text
  FROM pg_catalog.pg_init_privs i
  JOIN pg_catalog.pg_depend d ON d.classid = i.classoid AND d.objid = i.objoid AND d.deptype = 'e'
  JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid AND x.extname = 'dlock'
UNION ALL
SELECT 'member ' || pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
  FROM pg_catalog.pg_depend d
  JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid AND x.extname = 'dlock'
 WHERE d.deptype = 'e'
"""


def run_same(port, report):
    admin = connect(port)
    rows = {}
    for db, setup in (("dlock_fresh", ["CREATE EXTENSION dlock"]),
                      ("dlock_chain", ["CREATE EXTENSION dlock VERSION '1.0'", "ALTER EXTENSION dlock UPDATE"])):
        q(admin, "DROP DATABASE IF EXISTS %s" % db)
        q(admin, "CREATE DATABASE %s" % db)
        c = connect(port, db)
        for s in setup:
            q(c, s)
        rows[db] = set(r[0] for r in q(c, CATALOG))
        c.close()
        q(admin, "DROP DATABASE %s" % db)
    admin.close()
    only_fresh = sorted(rows["dlock_fresh"] - rows["dlock_chain"])
    only_chain = sorted(rows["dlock_chain"] - rows["dlock_fresh"])
    report(not only_fresh and not only_chain and len(rows["dlock_fresh"]) > 30,
           "same: a fresh install and 1.0 updated have the same %d objects%s" % (
               len(rows["dlock_fresh"]),
               "".join("\n#   only fresh:   " + x for x in only_fresh[:10]) +
               "".join("\n#   only updated: " + x for x in only_chain[:10])))


def run_default_privileges(port, report):
    """ALTER DEFAULT PRIVILEGES ... GRANT EXECUTE ON FUNCTIONS TO a role
    before the scripts run: the functions the scripts keep from PUBLIC
    (the override, dlock_force_release; on a fresh install the statistics
    reset too) are not that role's after a fresh install, nor the override
    after an update to 1.6."""
    admin = connect(port)
    q(admin, "DROP ROLE IF EXISTS dlock_defpriv")
    q(admin, "CREATE ROLE dlock_defpriv")
    for db, setup, kept in (
            ("dlock_defpriv_fresh", ["CREATE EXTENSION dlock"],
             ["dlock_force_release(text, bigint)", "dlock_stats_reset()", "dlock_stats_reset(text)"]),
            ("dlock_defpriv_update", ["CREATE EXTENSION dlock VERSION '1.5'", "ALTER EXTENSION dlock UPDATE"],
             ["dlock_force_release(text, bigint)"])):
        q(admin, "DROP DATABASE IF EXISTS %s" % db)
        q(admin, "CREATE DATABASE %s" % db)
        c = connect(port, db)
        q(c, "ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO dlock_defpriv")
        for s in setup:
            q(c, s)
        given = [f for f in kept if q(c, "SELECT has_function_privilege('dlock_defpriv', %s, 'EXECUTE')", f)[0][0]]
        granted = q(c, "SELECT has_function_privilege('dlock_defpriv', 'dlock_try(dlock_name, boolean, interval, "
                       "bigint, text, bigint, text, boolean)', 'EXECUTE')")[0][0]
        q(c, "ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM dlock_defpriv")
        c.close()
        q(admin, "DROP DATABASE %s" % db)
        report(not given and granted,
               "default privileges: %s gives a role that ALTER DEFAULT PRIVILEGES grants every function none of %s%s"
               % (" then ".join(setup), ", ".join(kept),
                  "" if not given else " (it has %s)" % ", ".join(given)))
    q(admin, "DROP ROLE dlock_defpriv")
    admin.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int)
    ap.add_argument("--lint-only", action="store_true")
    ap.add_argument("--dir", default=os.path.join(TOP, "sql"))
    args = ap.parse_args()
    failed = [0]

    def report(ok, what):
        print(("ok - " if ok else "not ok - ") + what, flush=True)
        if not ok:
            failed[0] += 1

    for path, problems in lint_all(args.dir):
        report(not problems, "lint: %s%s" % (os.path.basename(path),
                                             "".join("\n#   " + p for p in problems)))
    if not args.lint_only:
        run_traps(args.port, args.dir, report)
        run_same(args.port, report)
        run_default_privileges(args.port, report)
    print("# all script tests ran")
    return 1 if failed[0] else 0


if __name__ == "__main__":
    sys.exit(main())
