<?php
// dlock from PHP 8.2 with PDO (pdo_pgsql, Debian php-pgsql), driver defaults.
// Run: PGPORT=<port> php test/clients/php/clients.php (test/clients/run runs it)
// Environment: PGHOST, PGPORT, PGUSER, PGDATABASE (defaults 127.0.0.1, 5432, postgres, postgres).

declare(strict_types=1);

// README begin
/** The 64-bit key of a name: the first 8 bytes of SHA-256 of its UTF-8 bytes, little-endian. */
function dlockKey(string $name): int
{
    // 'P' reads 8 bytes little-endian; PHP's int is signed 64-bit, as bigint is.
    return unpack('P', hash('sha256', $name, true))[1];
}

/**
 * Seconds (int or float) to the whole milliseconds the *_ms arguments take, rounded up as
 * dlock rounds an interval; round(, 6) drops float noise (2.007 s is 2007 ms, not 2008).
 */
function milliseconds(int|float|null $seconds): ?int
{
    if ($seconds === null) {
        return null;
    }
    $ms = (int) ceil(round($seconds * 1000, 6));
    return $seconds > 0 ? max($ms, 1) : $ms; // positive never becomes 0, "do not wait"
}

/** Takes a session lock if it is free now; never waits. $lease in seconds, null: none. */
function tryLock(PDO $conn, string $name, bool $shared = false, int|float|null $lease = null): bool
{
    $stmt = $conn->prepare('SELECT dlock_try_ms(?, ?, ?)');
    $stmt->bindValue(1, $name);
    $stmt->bindValue(2, $shared, PDO::PARAM_BOOL);
    $stmt->bindValue(3, milliseconds($lease), PDO::PARAM_INT);
    $stmt->execute();
    return $stmt->fetchColumn() === true;
}

/** Waits up to $timeout seconds for a session lock: null waits without limit, 0 not at all. */
function lock(PDO $conn, string $name, int|float|null $timeout): bool
{
    $stmt = $conn->prepare('SELECT dlock_lock_ms(?, ?, false, NULL)');
    $stmt->bindValue(1, $name);
    $stmt->bindValue(2, milliseconds($timeout), PDO::PARAM_INT);
    $stmt->execute();
    return $stmt->fetchColumn() === true;
}

/** Releases one session hold; false (and a server WARNING) if this session did not hold it. */
function unlock(PDO $conn, string $name, bool $shared = false): bool
{
    $stmt = $conn->prepare('SELECT dlock_unlock(?, ?)');
    $stmt->bindValue(1, $name);
    $stmt->bindValue(2, $shared, PDO::PARAM_BOOL);
    $stmt->execute();
    return $stmt->fetchColumn() === true;
}

/**
 * Acquires a detached lock, held by the server until released or its lease runs out.
 * Returns its fencing token, or null if not acquired. $timeout: seconds to wait; 0 or null
 * tries once (unlike lock(), where null waits without limit).
 */
function acquire(PDO $conn, string $name, int|float $lease, int|float|null $timeout = 0): ?int
{
    $stmt = $conn->prepare('SELECT dlock_acquire_ms(?, ?, ?, false)');
    $stmt->bindValue(1, $name);
    $stmt->bindValue(2, milliseconds($lease), PDO::PARAM_INT);
    $stmt->bindValue(3, milliseconds($timeout), PDO::PARAM_INT);
    $stmt->execute();
    return $stmt->fetchColumn(); // int, or null when not acquired
}

/** Extends a detached lock's lease to now + $lease seconds; returns the new expiry. */
function extend(PDO $conn, string $name, int $token, int|float $lease): DateTimeImmutable
{
    $stmt = $conn->prepare('SELECT dlock_extend_ms(?, ?, ?)');
    $stmt->bindValue(1, $name);
    $stmt->bindValue(2, $token, PDO::PARAM_INT);
    $stmt->bindValue(3, milliseconds($lease), PDO::PARAM_INT);
    $stmt->execute();
    // a string such as '2030-01-01 12:00:00.123456+00'
    return new DateTimeImmutable($stmt->fetchColumn());
}

/** Releases a detached lock, from any connection; false if it is not held with that token. */
function release(PDO $conn, string $name, int $token): bool
{
    $stmt = $conn->prepare('SELECT dlock_release(?, ?)');
    $stmt->bindValue(1, $name);
    $stmt->bindValue(2, $token, PDO::PARAM_INT);
    $stmt->execute();
    return $stmt->fetchColumn() === true;
}

/**
 * Runs $work($conn) in a transaction holding a transaction lock, which its end releases.
 * Returns false, without running $work, if the lock was not taken within $timeout seconds
 * (null: without limit).
 */
function inTransactionLock(PDO $conn, string $name, int|float|null $timeout, callable $work): bool
{
    $conn->beginTransaction();
    try {
        $stmt = $conn->prepare('SELECT dlock_lock_xact_ms(?, ?, false, NULL)');
        $stmt->bindValue(1, $name);
        $stmt->bindValue(2, milliseconds($timeout), PDO::PARAM_INT);
        $stmt->execute();
        if ($stmt->fetchColumn() !== true) {
            $conn->rollBack();
            return false;
        }
        $work($conn);
        $conn->commit();
        return true;
    } catch (Throwable $e) {
        if ($conn->inTransaction()) {
            $conn->rollBack();
        }
        throw $e;
    }
}

/**
 * The pooled way: lock, $work($pool) and unlock on one connection. $pool is a persistent
 * connection, new PDO($dsn, $user, $password, [PDO::ATTR_PERSISTENT => true]), which the
 * next request this PHP worker serves gets again.
 */
function withLock(PDO $pool, string $name, int|float|null $timeout, callable $work): bool
{
    if (!lock($pool, $name, $timeout)) {
        return false;
    }
    try {
        $work($pool);
        return true;
    } finally { // errors here are dropped: $work's own exception is the one thrown
        try {
            if ($pool->inTransaction()) {
                $pool->rollBack(); // else an open or failed transaction fails the unlock
            }
        } catch (Throwable) {
        }
        try {
            $unlocked = unlock($pool, $name);
        } catch (Throwable) {
            $unlocked = false;
        }
        if (!$unlocked) {
            // Not unlocked, and a persistent connection cannot be dropped: DISCARD ALL resets
            // the session. It releases all its advisory and dlock session locks, and also drops
            // prepared statements (a PDOStatement prepared before fails: 26000), temporary
            // tables, SET settings and LISTENs.
            try {
                $pool->exec('DISCARD ALL');
            } catch (Throwable) {
            }
        }
    }
}
// README end

// ---------------------------------------------------------------------------------------
// Test harness: runs the functions above against the server in PGHOST/PGPORT/...

final class CheckFailed extends Exception
{
}

final class WorkError extends Exception
{
}

/** The SQLSTATE of what $body throws, or null if it throws nothing. */
function sqlstateOf(callable $body): ?string
{
    try {
        $body();
        return null;
    } catch (PDOException $e) {
        return $e->errorInfo[0] ?? (string) $e->getCode();
    }
}

/** Fails the current check with $detail unless $condition holds. */
function expect(bool $condition, string $detail): void
{
    if (!$condition) {
        throw new CheckFailed($detail);
    }
}

function show(mixed $value): string
{
    return str_replace("\n", ' ', var_export($value, true));
}

$env = static fn (string $key, string $default): string =>
    (getenv($key) !== false && getenv($key) !== '') ? getenv($key) : $default;
$dsn = sprintf(
    'pgsql:host=%s;port=%s;dbname=%s',
    $env('PGHOST', '127.0.0.1'),
    $env('PGPORT', '5432'),
    $env('PGDATABASE', 'postgres')
);
$user = $env('PGUSER', 'postgres');
$connect = static fn (array $options = []): PDO => new PDO($dsn, $user, null, $options);

const NAMES = ['c-PHP', 'lease-PHP', 's-PHP', 'd-PHP', 'x-PHP', 'p-PHP', 'm-PHP', 'n-PHP', 'f-PHP', 'w-PHP', 'lost-PHP'];

/** Rows in dlock_locks (held or awaited) for the given names, seen from $conn. */
function viewCount(PDO $conn, array $names, bool $grantedOnly = false): int
{
    $in = implode(', ', array_fill(0, count($names), '?'));
    $stmt = $conn->prepare("SELECT count(*) FROM dlock_locks WHERE name IN ($in)"
        . ($grantedOnly ? ' AND granted' : ''));
    $stmt->execute($names);
    return $stmt->fetchColumn();
}

/** Releases what a failed check (or an earlier, killed run) may have left held. */
function cleanUp(array $conns): void
{
    foreach ($conns as $conn) {
        try {
            if ($conn->inTransaction()) {
                $conn->rollBack();
            }
            $conn->query('SELECT dlock_unlock_all()');
        } catch (Throwable $e) {
            // best effort
        }
    }
    try {
        $in = implode(', ', array_fill(0, count(NAMES), '?'));
        $conns[0]->prepare("SELECT dlock_release(name, token) FROM dlock_locks
                             WHERE scope = 'detached' AND granted AND name IN ($in)")
            ->execute(NAMES);
    } catch (Throwable $e) {
        // best effort
    }
}

$failures = 0;
$conns = [];

/** Runs one numbered check: prints ok, or not ok with the first failed expectation. */
$check = static function (string $what, callable $body) use (&$failures, &$conns): void {
    try {
        $body();
        echo "ok - PHP: $what\n";
    } catch (Throwable $e) {
        $failures++;
        $detail = $e instanceof CheckFailed
            ? $e->getMessage()
            : get_class($e) . ': ' . $e->getMessage();
        echo "not ok - PHP: $what: " . preg_replace('/\s+/', ' ', trim($detail)) . "\n";
        cleanUp($conns);
    }
};

try {
    $a = $connect();
    $b = $connect();
    $c = $connect();
    $conns = [$a, $b, $c];
} catch (Throwable $e) {
    echo 'not ok - PHP: connect: ' . preg_replace('/\s+/', ' ', $e->getMessage()) . "\n";
    exit(1);
}
cleanUp($conns); // a detached lock left by a killed earlier run would still be held

// 1. dlockKey matches dlock_key()
$check('dlockKey matches dlock_key()', static function () use ($a): void {
    $stmt = $a->prepare('SELECT dlock_key(?)');
    foreach (['nightly-report', 'задача-42', str_repeat('long-name-', 20)] as $name) {
        $stmt->execute([$name]);
        $server = $stmt->fetchColumn();
        $client = dlockKey($name);
        expect(is_int($server), 'dlock_key() did not come back as int: ' . show($server));
        expect($client === $server, "key of '$name': client $client, server $server");
    }
});

// PDO's types
$check("PDO returns bool, int and null, and timestamptz as a string", static function () use ($a): void {
    $row = $a->query('SELECT true, false, 10000000000042::bigint, NULL::bigint, now()')->fetch(PDO::FETCH_NUM);
    expect(array_slice($row, 0, 4) === [true, false, 10000000000042, null], 'row: ' . show($row));
    expect(is_string($row[4]), 'timestamptz: ' . show($row[4]));
});

// a plain false parameter, in PDO and in pg_query_params; pg_* results as strings
$check("a plain false parameter goes out as '' (22P02); pg_query_params returns 't'/'f' strings",
    static function () use ($a, $env, $user): void {
        $name = 'm-PHP';
        $state = sqlstateOf(static function () use ($a, $name): void {
            $a->prepare('SELECT dlock_try(?, shared => ?)')->execute([$name, false]);
        });
        expect($state === '22P02', 'PDO execute([$name, false]): ' . show($state));
        $pg = pg_connect(sprintf('host=%s port=%s dbname=%s user=%s', $env('PGHOST', '127.0.0.1'),
            $env('PGPORT', '5432'), $env('PGDATABASE', 'postgres'), $user));
        try {
            $r = @pg_query_params($pg, 'SELECT dlock_try($1, shared => $2)', [$name, false]);
            expect($r === false, 'pg_query_params with false was accepted');
            $error = pg_last_error($pg);
            expect(str_contains($error, 'invalid input syntax for type boolean: ""'), 'error: ' . $error);
            $r = pg_query_params($pg, 'SELECT dlock_try($1), dlock_try($1, shared => $2), $3::bigint, NULL',
                [$name, 'f', 10000000000042]);
            $row = pg_fetch_row($r);
            expect($row === ['t', 't', '10000000000042', null], 'pg_fetch_row: ' . show($row));
            $row = pg_fetch_row(pg_query_params($pg, 'SELECT dlock_unlock($1), dlock_unlock($1), dlock_try($1)', [$name]));
            expect($row === ['t', 't', 't'], 'unlock, unlock, try: ' . show($row));
            $row = pg_fetch_row(pg_query_params($pg, 'SELECT dlock_unlock($1), dlock_unlock($1)', [$name]));
            expect($row === ['t', 'f'], 'unlock, unlock again: ' . show($row));
        } finally {
            pg_close($pg);
        }
    });

// durations
$check('durations round up to whole milliseconds (1 us is 1 ms, 2.007 s is 2007 ms)', static function (): void {
    $cases = [[null, null], [0, 0], [0.000001, 1], [1e-10, 1], [0.2, 200], [2.007, 2007], [1.0005, 1001],
        [30, 30000], [1 / 3, 334], [2147483.647, 2147483647]];
    foreach ($cases as [$seconds, $want]) {
        $got = milliseconds($seconds);
        expect($got === $want, 'milliseconds(' . show($seconds) . ') = ' . show($got) . ', not ' . show($want));
    }
});

// a bare number for an interval
$check('interval arguments: a number means seconds (200 is 00:03:20)', static function () use ($a): void {
    $stmt = $a->prepare('SELECT ?::interval');
    $stmt->bindValue(1, 200, PDO::PARAM_INT);
    $stmt->execute();
    $got = $stmt->fetchColumn();
    expect($got === '00:03:20', '200 as an interval: ' . show($got));
});

// 2. contention between two connections
$check('contention between two connections', static function () use ($a, $b): void {
    $name = 'c-PHP';
    expect(tryLock($a, $name, false, 30) === true, 'tryLock(A) was not true');
    expect(tryLock($b, $name, false, 30) === false, 'tryLock(B) was not false while A holds it');
    $t0 = hrtime(true);
    $got = lock($b, $name, 0.2);
    $ms = (hrtime(true) - $t0) / 1e6;
    expect($got === false, 'lock(B, 200 ms) was not false while A holds it');
    expect($ms >= 150, sprintf('lock(B, 200 ms) returned after %.1f ms', $ms));
    expect(unlock($a, $name) === true, 'unlock(A) was not true');
    expect(lock($b, $name, 5) === true, 'lock(B, 5 s) after unlock(A) was not true');
    expect(unlock($b, $name) === true, 'unlock(B) was not true');
});

// lock(null) waits without limit: for a detached lock with a 500 ms lease, here
$check('lock with timeout null waits without limit (a detached lease of 500 ms runs out)',
    static function () use ($a, $b): void {
        $name = 'n-PHP';
        $token = acquire($a, $name, 0.5);
        expect(is_int($token), 'acquire(A) returned ' . show($token));
        $t0 = hrtime(true);
        $got = lock($b, $name, null);
        $ms = (hrtime(true) - $t0) / 1e6;
        expect($got === true, 'lock(B, null) returned ' . show($got));
        expect($ms >= 400, sprintf('lock(B, null) returned after %.1f ms', $ms));
        expect(unlock($b, $name) === true, 'unlock(B) was not true');
    });

// 3. lease
$check('lease of 30 s shows in dlock_locks', static function () use ($a): void {
    $name = 'lease-PHP';
    expect(tryLock($a, $name, false, 30) === true, 'tryLock(A, lease 30 s) was not true');
    $stmt = $a->prepare('SELECT extract(epoch FROM lease_expires - since) FROM dlock_locks WHERE name = ?');
    $stmt->execute([$name]);
    $rows = $stmt->fetchAll(PDO::FETCH_COLUMN);
    expect(count($rows) === 1, 'expected one row in dlock_locks, got ' . count($rows));
    $seconds = (float) $rows[0];
    expect($seconds >= 29 && $seconds <= 31, "lease_expires - since is $seconds s");
    expect(unlock($a, $name) === true, 'unlock(A) was not true');
});

// 4. shared, with PHP's own true and false
$check('shared locks with PHP true and false', static function () use ($a, $b, $c): void {
    $name = 's-PHP';
    expect(tryLock($a, $name, true, null) === true, 'tryLock(A, shared true) was not true');
    expect(tryLock($b, $name, true) === true, 'tryLock(B, shared true) was not true');
    expect(tryLock($c, $name, false) === false, 'tryLock(C, shared false) was not false');
    expect(unlock($a, $name, true) === true, 'unlock(A, shared true) was not true');
    expect(unlock($b, $name, true) === true, 'unlock(B, shared true) was not true');
});

// 5. detached lock
$check('detached lock: acquire, extend, release from another connection',
    static function () use ($a, $b): void {
        $name = 'd-PHP';
        $token = acquire($a, $name, 60, 0);
        expect(is_int($token), 'token is not a PHP int: ' . show($token));
        expect($token > 10 ** 13, "token $token is not > 10^13");
        $stmt = $a->prepare("SELECT token::text FROM dlock_locks WHERE name = ? AND scope = 'detached'");
        $stmt->execute([$name]);
        $viewToken = $stmt->fetchColumn();
        expect($viewToken === (string) $token, "token $token, view says " . show($viewToken));
        expect(acquire($b, $name, 1, 0) === null, 'acquire(B, timeout 0) while held was not null');
        $t0 = hrtime(true);
        expect(acquire($b, $name, 1, null) === null, 'acquire(B, timeout null) while held was not null');
        $ms = (hrtime(true) - $t0) / 1e6;
        expect($ms < 100, sprintf('acquire(B, timeout null) returned after %.1f ms', $ms));
        $t0 = hrtime(true);
        $second = acquire($b, $name, 1, 0.3);
        $ms = (hrtime(true) - $t0) / 1e6;
        expect($second === null, 'acquire(B, timeout 300 ms) while held was not null');
        expect($ms >= 250, sprintf('acquire(B, timeout 300 ms) returned after %.1f ms', $ms));
        $expires = extend($b, $name, $token, 120);
        $limit = (new DateTimeImmutable())->modify('+100 seconds');
        expect($expires > $limit, 'extend(B, 120 s) returned ' . $expires->format(DATE_RFC3339_EXTENDED));
        expect(release($b, $name, $token) === true, 'release(B) was not true');
        expect(release($b, $name, $token) === false, 'second release(B) was not false');
    });

// 6. transaction lock
$check('transaction lock with beginTransaction/commit', static function () use ($a, $b): void {
    $name = 'x-PHP';
    $ran = false;
    $seenFromB = null;
    $result = inTransactionLock($a, $name, 1, static function (PDO $conn) use ($b, $name, &$ran, &$seenFromB): void {
        $ran = true;
        $seenFromB = tryLock($b, $name);
    });
    expect($result === true, 'inTransactionLock returned ' . show($result));
    expect($ran, 'work did not run');
    expect($seenFromB === false, 'tryLock(B) during the transaction was ' . show($seenFromB));
    expect(!$a->inTransaction(), 'A is still in a transaction');
    expect(tryLock($b, $name) === true, 'tryLock(B) after the commit was not true');
    expect(unlock($b, $name) === true, 'unlock(B) was not true');
});

// 7. pooled: persistent connections, at most 2 (one persistent connection per key)
$check('pooled (persistent) connections', static function () use ($connect, $c): void {
    $name = 'p-PHP';
    $pool = [
        $connect([PDO::ATTR_PERSISTENT => 'dlock-php-pool-1']),
        $connect([PDO::ATTR_PERSISTENT => 'dlock-php-pool-2']),
    ];
    $held = null;
    $result = withLock($pool[0], $name, 1, static function (PDO $conn) use ($c, $name, &$held): void {
        $held = viewCount($c, [$name], true);
    });
    expect($result === true, 'withLock returned ' . show($result));
    expect($held === 1, 'granted rows during withLock: ' . show($held));
    $after = viewCount($c, [$name]);
    expect($after === 0, "rows after withLock: $after");
    $token = acquire($pool[0], $name, 10);
    expect(is_int($token), 'acquire via the pool returned ' . show($token));
    expect(release($pool[1], $name, $token) === true, 'release via the other pooled connection was not true');
    $pool = null; // persistent connections are closed when the PHP process ends
});

// a persistent connection is handed out again, with what it holds
$check('a persistent connection comes back with the session lock the last user left',
    static function () use ($connect, $c): void {
        $name = 'p-PHP';
        $first = $connect([PDO::ATTR_PERSISTENT => 'dlock-php-pool-1']);
        $pid = $first->query('SELECT pg_backend_pid()')->fetchColumn();
        expect(tryLock($first, $name) === true, 'tryLock was not true');
        $first = null; // the "request" ends without unlocking
        $again = $connect([PDO::ATTR_PERSISTENT => 'dlock-php-pool-1']);
        $pid2 = $again->query('SELECT pg_backend_pid()')->fetchColumn();
        expect($pid2 === $pid, "another backend: $pid2, not $pid");
        expect(viewCount($c, [$name], true) === 1, 'not held any more');
        expect(unlock($again, $name) === true, 'unlock on the same connection was not true');
    });

// withLock when the work fails
$check('withLock when the work throws, leaves a failed transaction, or breaks the unlock: its own '
    . 'exception, nothing held after, DISCARD ALL when the unlock failed',
    static function () use ($connect, $c): void {
        $name = 'f-PHP';
        $pool = $connect([PDO::ATTR_PERSISTENT => 'dlock-php-pool-1']);
        $pid = $pool->query('SELECT pg_backend_pid()')->fetchColumn();
        $works = [
            'throws' => [WorkError::class, static function (PDO $conn): void {
                throw new WorkError('work failed');
            }],
            'leaves a failed transaction' => [null, static function (PDO $conn): void {
                $conn->beginTransaction();
                try {
                    $conn->query('SELECT 1/0');
                } catch (PDOException $e) {
                    // swallowed: the transaction is left failed
                }
            }],
            'fails in a transaction' => [PDOException::class, static function (PDO $conn): void {
                $conn->beginTransaction();
                $conn->query('SELECT 1/0');
            }],
            'leaves a transaction open and throws' => [WorkError::class, static function (PDO $conn): void {
                $conn->exec('BEGIN');
                throw new WorkError('work failed');
            }],
        ];
        foreach ($works as $what => [$error, $work]) {
            try {
                $got = withLock($pool, $name, 1, $work);
                expect($error === null && $got === true, "$what: returned " . show($got));
            } catch (CheckFailed $e) {
                throw $e;
            } catch (Throwable $e) {
                expect($error !== null && get_class($e) === $error,
                    "$what: threw " . get_class($e) . ': ' . $e->getMessage());
                expect(!($e instanceof PDOException) || $e->errorInfo[0] === '22012',
                    "$what: threw " . $e->getMessage());
            }
            expect(viewCount($c, [$name]) === 0, "$what: still held");
            expect(!$pool->inTransaction(), "$what: left in a transaction");
        }
        $before = $pool->prepare('SELECT 1');
        $before->execute(); // prepared on the server at its first execute
        $before->fetchAll();
        try {
            withLock($pool, $name, 1, static function (PDO $conn): void {
                $conn->exec('SET search_path TO nowhere'); // dlock_unlock: 42883
                throw new WorkError('work failed');
            });
            expect(false, 'breaks the unlock: no exception');
        } catch (WorkError $e) {
            // its own exception
        }
        expect(viewCount($c, [$name]) === 0, 'breaks the unlock: still held');
        $pid2 = $pool->query('SELECT pg_backend_pid()')->fetchColumn();
        expect($pid2 === $pid, 'breaks the unlock: another backend');
        $path = $pool->query('SHOW search_path')->fetchColumn();
        expect($path !== 'nowhere', 'breaks the unlock: search_path still ' . $path);
        $state = sqlstateOf(static function () use ($before): void {
            $before->execute();
        });
        expect($state === '26000', 'a statement prepared before DISCARD ALL: ' . show($state));
        $before = null;
        expect(withLock($pool, $name, 1, static function (PDO $conn): void {
        }) === true, 'withLock after DISCARD ALL');
    });

// the wrong way: lock on one pooled (persistent) connection, unlock on another
$check('the wrong way: locked on one persistent connection, unlocked on another: false, still held',
    static function () use ($connect, $c): void {
        $name = 'w-PHP';
        $first = $connect([PDO::ATTR_PERSISTENT => 'dlock-php-pool-1']);
        $second = $connect([PDO::ATTR_PERSISTENT => 'dlock-php-pool-2']);
        expect(tryLock($first, $name) === true, 'tryLock(first) was not true');
        expect(unlock($second, $name) === false, 'unlock(second) was not false');
        expect(viewCount($c, [$name], true) === 1, 'not held after unlock(second)');
        expect(unlock($first, $name) === true, 'unlock(first) was not true');
    });

// a session ended over its lease, then used again
$check('a session ended over its lease, used again: PDO throws a PDOException whose message has the '
    . "server's FATAL (the lease of lock ... ran out)",
    static function () use ($connect, $c): void {
        $name = 'lost-PHP';
        $lost = $connect([PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
        $lost->prepare('SELECT dlock_try_ms(?, false, 200)')->execute([$name]);
        for ($i = 0; $i < 200 && viewCount($c, [$name], true) > 0; $i++) {
            usleep(50000);
        }
        try {
            $lost->query('SELECT 1');
            expect(false, 'the session lived past its lease');
        } catch (PDOException $e) {
            echo '#   php: ', get_class($e), ' [', $e->getCode(), ']: ', str_replace("\n", ' | ', $e->getMessage()), "\n";
            expect(str_contains($e->getMessage(), "the lease of lock \"$name\" ran out"),
                'PDO said [' . $e->getCode() . '] ' . $e->getMessage());
        }
    });

// 8. nothing left
$check('nothing left in dlock_locks', static function () use ($c): void {
    $left = viewCount($c, NAMES);
    expect($left === 0, "$left rows left for " . implode(', ', NAMES));
});

echo "# all PHP client tests ran\n";
exit($failures === 0 ? 0 : 1);
