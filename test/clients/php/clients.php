<?php
// dlock from PHP 8.2 with PDO (pdo_pgsql, Debian php-pgsql), driver defaults.
// Run: PGPORT=<port> php test/clients/php/clients.php (test/clients/run runs it)
// Environment: PGHOST, PGPORT, PGUSER, PGDATABASE (defaults 127.0.0.1, 5432, postgres, postgres).

declare(strict_types=1);

// README begin
// PDO returns boolean as PHP bool, bigint as PHP int (64-bit PHP) and timestamptz as a string.
// The pg_* functions return every value as a string: false is 'f', and 'f' is truthy in PHP,
// so `if (pg_fetch_result($r, 0, 0))` is always true; there, compare with === 't'.

/** The 64-bit key of a name: the first 8 bytes of SHA-256 of its UTF-8 bytes, little-endian. */
function dlockKey(string $name): int
{
    // 'P' reads 8 bytes little-endian; PHP's int is signed 64-bit, as bigint is.
    return unpack('P', hash('sha256', $name, true))[1];
}

/** Seconds (int or float) to the whole milliseconds the *_ms arguments take. */
function milliseconds(int|float|null $seconds): ?int
{
    return $seconds === null ? null : (int) round($seconds * 1000);
}

/** Takes a session lock if it is free now; never waits. $lease in seconds, null: none. */
function tryLock(PDO $conn, string $name, bool $shared = false, int|float|null $lease = null): bool
{
    $stmt = $conn->prepare('SELECT dlock_try(?, shared => ?, lease_ms => ?)');
    $stmt->bindValue(1, $name);
    // PDO sends a PHP false bound as a string as '' (22P02 invalid input syntax for
    // type boolean: ""), e.g. with execute([$name, false]): bind it as PARAM_BOOL.
    $stmt->bindValue(2, $shared, PDO::PARAM_BOOL);
    $stmt->bindValue(3, milliseconds($lease), PDO::PARAM_INT);
    $stmt->execute();
    return $stmt->fetchColumn() === true;
}

/** Waits up to $timeout seconds (null: without limit) for a session lock. */
function lock(PDO $conn, string $name, int|float|null $timeout): bool
{
    $stmt = $conn->prepare('SELECT dlock_lock(?, timeout_ms => ?)');
    $stmt->bindValue(1, $name);
    $stmt->bindValue(2, milliseconds($timeout), PDO::PARAM_INT);
    $stmt->execute();
    return $stmt->fetchColumn() === true;
}

/** Releases one session hold; false (and a server WARNING) if this session did not hold it. */
function unlock(PDO $conn, string $name, bool $shared = false): bool
{
    $stmt = $conn->prepare('SELECT dlock_unlock(?, shared => ?)');
    $stmt->bindValue(1, $name);
    $stmt->bindValue(2, $shared, PDO::PARAM_BOOL);
    $stmt->execute();
    return $stmt->fetchColumn() === true;
}

/**
 * Acquires a detached lock, held by the server until released or its lease runs out.
 * Returns its fencing token, or null if it was not acquired within $timeout seconds.
 */
function acquire(PDO $conn, string $name, int|float $lease, int|float|null $timeout = 0): ?int
{
    $stmt = $conn->prepare('SELECT dlock_acquire(?, lease_ms => ?, timeout_ms => ?)');
    $stmt->bindValue(1, $name);
    $stmt->bindValue(2, milliseconds($lease), PDO::PARAM_INT);
    $stmt->bindValue(3, milliseconds($timeout), PDO::PARAM_INT);
    $stmt->execute();
    return $stmt->fetchColumn(); // int, or null when not acquired
}

/** Extends a detached lock's lease to now + $lease seconds; returns the new expiry. */
function extend(PDO $conn, string $name, int $token, int|float $lease): DateTimeImmutable
{
    $stmt = $conn->prepare('SELECT dlock_extend(?, ?, lease_ms => ?)');
    $stmt->bindValue(1, $name);
    $stmt->bindValue(2, $token, PDO::PARAM_INT);
    $stmt->bindValue(3, milliseconds($lease), PDO::PARAM_INT);
    $stmt->execute();
    // timestamptz comes as a string such as '2030-01-01 12:00:00.123456+00' (DateStyle ISO).
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
 * Returns false, without running $work, if the lock was not taken within $timeout seconds.
 */
function inTransactionLock(PDO $conn, string $name, int|float|null $timeout, callable $work): bool
{
    $conn->beginTransaction();
    try {
        $stmt = $conn->prepare('SELECT dlock_lock_xact(?, timeout_ms => ?)');
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
 * The pooled way. PHP has no in-process pool: a persistent connection,
 *     $pool = new PDO($dsn, $user, $password, [PDO::ATTR_PERSISTENT => true]);
 * stays open after the request and is handed to the next request this PHP worker serves.
 * A session lock belongs to that connection, not to the request: unlocked from another
 * connection (a later request on another worker) dlock_unlock returns false and the lock
 * stays held, and a lock the request never unlocked is inherited by the next request.
 * So lock, work and unlock on the same connection in one call, unlocking in finally; across
 * requests, use a transaction lock, or a detached lock and keep its token (release works
 * from any connection).
 */
function withLock(PDO $pool, string $name, int|float|null $timeout, callable $work): bool
{
    if (!lock($pool, $name, $timeout)) {
        return false;
    }
    try {
        $work($pool);
        return true;
    } finally {
        unlock($pool, $name); // on the connection that took it
    }
}
// README end

// ---------------------------------------------------------------------------------------
// Test harness: runs the functions above against the server in PGHOST/PGPORT/...

final class CheckFailed extends Exception
{
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

const NAMES = ['c-PHP', 'lease-PHP', 's-PHP', 'd-PHP', 'x-PHP', 'p-PHP'];

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

// 8. nothing left
$check('nothing left in dlock_locks', static function () use ($c): void {
    $left = viewCount($c, NAMES);
    expect($left === 0, "$left rows left for " . implode(', ', NAMES));
});

echo "# all PHP client tests ran\n";
exit($failures === 0 ? 0 : 1);
