// dlock client test for Go: pgx v4 (github.com/jackc/pgx/v4) and pgxpool, driver defaults.
//
// Run (GOPATH mode, Debian packages only, no network):
//
//	cd test/clients/go && mkdir -p /var/tmp/dlock-clients/gocache && \
//	  GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE=/var/tmp/dlock-clients/gocache GOFLAGS= go run clients.go
//
// The part between "README begin" and "README end" is copied into README.md.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgtype"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// README begin
// Imports: context, crypto/sha256, encoding/binary, fmt, time,
// github.com/jackc/pgx/v4 and github.com/jackc/pgx/v4/pgxpool.

// Querier is what the functions below run on: a *pgx.Conn, a pgx.Tx, a *pgxpool.Conn
// (one connection checked out of a pool), or a *pgxpool.Pool for acquire, extend and
// release only (a session lock needs one connection: withLock).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...interface{}) pgx.Row
}

// dlockKey returns the key dlock_key(name) computes: the first 8 bytes of the SHA-256 of
// the name's UTF-8 bytes, little-endian, as a signed 64-bit integer.
func dlockKey(name string) int64 {
	sum := sha256.Sum256([]byte(name))
	return int64(binary.LittleEndian.Uint64(sum[:8]))
}

// ms converts a duration to the whole milliseconds of a *_ms argument, rounded up as
// dlock rounds an interval (1µs is 1 ms, not 0, which would mean "do not wait").
func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// msOrNull is ms(d), or nil (SQL NULL: the argument is not given) when null is true.
func msOrNull(d time.Duration, null bool) *int64 {
	if null {
		return nil
	}
	v := ms(d)
	return &v
}

// tryLock takes a session lock if it is free, without waiting; lease <= 0 means no lease.
func tryLock(ctx context.Context, q Querier, name string, shared bool, lease time.Duration) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, "SELECT dlock_try_ms($1, $2, $3)",
		name, shared, msOrNull(lease, lease <= 0)).Scan(&ok)
	return ok, err
}

// lock waits up to timeout for an exclusive session lock; false when the timeout passed.
// timeout 0 tries once; a negative timeout waits without limit (timeout_ms NULL).
func lock(ctx context.Context, q Querier, name string, timeout time.Duration) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, "SELECT dlock_lock_ms($1, $2, false, NULL)",
		name, msOrNull(timeout, timeout < 0)).Scan(&ok)
	return ok, err
}

// unlock releases one session hold of name on this connection; false (and a server
// WARNING) if this connection does not hold it.
func unlock(ctx context.Context, q Querier, name string, shared bool) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, "SELECT dlock_unlock($1, $2)", name, shared).Scan(&ok)
	return ok, err
}

// acquire takes a detached lock and returns its fencing token, or nil if it was not
// acquired (dlock_acquire returns NULL). timeout is how long to wait for it: 0 tries once
// and does not wait (unlike lock, there is no "without limit" here).
func acquire(ctx context.Context, q Querier, name string, lease, timeout time.Duration) (*int64, error) {
	var token *int64
	err := q.QueryRow(ctx, "SELECT dlock_acquire_ms($1, $2, $3, false)",
		name, ms(lease), ms(timeout)).Scan(&token)
	return token, err
}

// extend sets the detached lock's lease to now + lease and returns the new expiry.
func extend(ctx context.Context, q Querier, name string, token int64, lease time.Duration) (time.Time, error) {
	var expires time.Time
	err := q.QueryRow(ctx, "SELECT dlock_extend_ms($1, $2, $3)", name, token, ms(lease)).Scan(&expires)
	return expires, err
}

// release releases a detached lock, from any connection; false if it is not held with
// that token (the lease ran out, or it was released already).
func release(ctx context.Context, q Querier, name string, token int64) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, "SELECT dlock_release($1, $2)", name, token).Scan(&ok)
	return ok, err
}

// TxBeginner is a *pgx.Conn, a *pgxpool.Conn or a *pgxpool.Pool (a transaction pins
// one pooled connection until it ends).
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// inTransactionLock runs work in a transaction that holds the exclusive lock name,
// released by the commit or rollback. It returns false, without running work, if the
// lock was not free within timeout (as in lock: negative waits without limit).
func inTransactionLock(ctx context.Context, db TxBeginner, name string, timeout time.Duration,
	work func(pgx.Tx) error) (bool, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) // does nothing after a successful Commit
	var ok bool
	err = tx.QueryRow(ctx, "SELECT dlock_lock_xact_ms($1, $2, false, NULL)",
		name, msOrNull(timeout, timeout < 0)).Scan(&ok)
	if err != nil || !ok {
		return false, err // the deferred Rollback ends the transaction
	}
	if err := work(tx); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// withLock checks out one pooled connection, takes the exclusive session lock name on it
// (timeout as in lock), runs work and unlocks on that same connection. ok is false if the
// lock was not taken; err is work's error if it failed. A transaction that work left open
// is rolled back first; if the unlock then fails, the connection is closed, not given
// back to the pool still holding the lock (closing the session ends its locks).
func withLock(ctx context.Context, pool *pgxpool.Pool, name string, timeout time.Duration,
	work func(*pgxpool.Conn) error) (ok bool, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release() // drops a closed connection from the pool
	if ok, err = lock(ctx, conn, name, timeout); err != nil || !ok {
		return false, err
	}
	defer func() {
		// Not ctx: it may be cancelled by now, and the lock must go all the same.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if conn.Conn().PgConn().TxStatus() != 'I' { // in a transaction, maybe a failed one
			conn.Exec(uctx, "ROLLBACK") // its error, if any, shows in the unlock's
		}
		unlocked, uerr := unlock(uctx, conn, name, false)
		if uerr != nil || !unlocked {
			conn.Conn().Close(uctx) // pgxpool v4 has no Hijack
			if err == nil {
				err = fmt.Errorf("unlock %q: %v, %v", name, unlocked, uerr)
			}
		}
	}()
	return true, work(conn)
}

// README end

// ---------------------------------------------------------------------------
// Test harness

var failed bool

func report(what string, err error) {
	if err != nil {
		failed = true
		fmt.Printf("not ok - Go: %s: %s\n", what, strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		fmt.Printf("ok - Go: %s\n", what)
	}
}

// check runs one check; an error or a panic is reported as not ok.
func check(what string, f func() error) {
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		err = f()
	}()
	report(what, err)
}

func want(cond bool, format string, args ...interface{}) error {
	if cond {
		return nil
	}
	return fmt.Errorf(format, args...)
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func connString() string {
	return fmt.Sprintf("host=%s port=%s user=%s dbname=%s application_name=dlock-go-test",
		env("PGHOST", "127.0.0.1"), env("PGPORT", "5432"), env("PGUSER", "postgres"), env("PGDATABASE", "postgres"))
}

var names = []string{"c-Go", "lease-Go", "s-Go", "d-Go", "x-Go", "p-Go", "pd-Go",
	"n-Go", "ns-Go", "i-Go", "nl-Go", "w-Go", "pe-Go", "pt-Go", "pu-Go", "lost-Go"}

// sqlState is the SQLSTATE of a server error, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func main() {
	ctx := context.Background()
	deadline := time.AfterFunc(14*time.Second, func() {
		fmt.Println("not ok - Go: run: still running after 14 s")
		os.Exit(1)
	})
	defer deadline.Stop()

	var conns [3]*pgx.Conn
	for i := range conns {
		c, err := pgx.Connect(ctx, connString())
		if err != nil {
			report("connect", err)
			os.Exit(1)
		}
		defer c.Close(ctx)
		conns[i] = c
	}
	a, b, c := conns[0], conns[1], conns[2]

	// Leftovers of an earlier, failed run (detached locks outlive their connection).
	_, _ = a.Exec(ctx, `SELECT dlock_release(name, token) FROM dlock_locks
		WHERE scope = 'detached' AND granted AND name = ANY($1)`, names)

	// 1. key
	long := strings.Repeat("long-name-", 20)
	for _, n := range []struct{ what, name string }{
		{"dlockKey matches dlock_key (ASCII)", "nightly-report"},
		{"dlockKey matches dlock_key (non-ASCII)", "задача-42"},
		{"dlockKey matches dlock_key (200 characters)", long},
	} {
		check(n.what, func() error {
			var server int64
			if err := a.QueryRow(ctx, "SELECT dlock_key($1)", n.name).Scan(&server); err != nil {
				return err
			}
			local := dlockKey(n.name)
			return want(local == server, "dlockKey %d, dlock_key %d", local, server)
		})
	}

	// 2. contention between two connections
	check("contention: tryLock/lock/unlock between two connections", func() error {
		const n = "c-Go"
		if ok, err := tryLock(ctx, a, n, false, 30*time.Second); err != nil || !ok {
			return fmt.Errorf("tryLock(A) = %v, %v; want true", ok, err)
		}
		if ok, err := tryLock(ctx, b, n, false, 0); err != nil || ok {
			return fmt.Errorf("tryLock(B) = %v, %v; want false", ok, err)
		}
		start := time.Now()
		ok, err := lock(ctx, b, n, 200*time.Millisecond)
		took := time.Since(start)
		if err != nil || ok {
			return fmt.Errorf("lock(B, 200ms) = %v, %v; want false", ok, err)
		}
		if took < 150*time.Millisecond {
			return fmt.Errorf("lock(B, 200ms) returned false after %v, want >= 150ms", took)
		}
		if ok, err := unlock(ctx, a, n, false); err != nil || !ok {
			return fmt.Errorf("unlock(A) = %v, %v; want true", ok, err)
		}
		if ok, err := lock(ctx, b, n, 5*time.Second); err != nil || !ok {
			return fmt.Errorf("lock(B, 5s) = %v, %v; want true", ok, err)
		}
		if ok, err := unlock(ctx, b, n, false); err != nil || !ok {
			return fmt.Errorf("unlock(B) = %v, %v; want true", ok, err)
		}
		return nil
	})

	// 3. lease
	check("lease: 30 s lease shows in dlock_locks", func() error {
		const n = "lease-Go"
		if ok, err := tryLock(ctx, a, n, false, 30*time.Second); err != nil || !ok {
			return fmt.Errorf("tryLock(A, lease 30s) = %v, %v; want true", ok, err)
		}
		var secs float64
		err := a.QueryRow(ctx, "SELECT extract(epoch from lease_expires - since) FROM dlock_locks WHERE name = $1",
			n).Scan(&secs)
		if ok, uerr := unlock(ctx, a, n, false); uerr != nil || !ok {
			return fmt.Errorf("unlock(A) = %v, %v; want true", ok, uerr)
		}
		if err != nil {
			return err
		}
		return want(secs >= 29 && secs <= 31, "lease_expires - since = %v s, want 29..31", secs)
	})

	// 4. shared
	check("shared: two shared holders, exclusive refused", func() error {
		const n = "s-Go"
		if ok, err := tryLock(ctx, a, n, true, 0); err != nil || !ok {
			return fmt.Errorf("tryLock(A, shared) = %v, %v; want true", ok, err)
		}
		if ok, err := tryLock(ctx, b, n, true, 0); err != nil || !ok {
			return fmt.Errorf("tryLock(B, shared) = %v, %v; want true", ok, err)
		}
		if ok, err := tryLock(ctx, c, n, false, 0); err != nil || ok {
			return fmt.Errorf("tryLock(C, exclusive) = %v, %v; want false", ok, err)
		}
		if ok, err := unlock(ctx, a, n, true); err != nil || !ok {
			return fmt.Errorf("unlock(A, shared) = %v, %v; want true", ok, err)
		}
		if ok, err := unlock(ctx, b, n, true); err != nil || !ok {
			return fmt.Errorf("unlock(B, shared) = %v, %v; want true", ok, err)
		}
		return nil
	})

	// 5. detached
	const dn = "d-Go"
	var token *int64
	check("detached: acquire returns an int64 token > 10^13 equal to the view's", func() error {
		var err error
		if token, err = acquire(ctx, a, dn, 60*time.Second, 0); err != nil {
			return err
		}
		if token == nil {
			return errors.New("acquire(A) = nil, want a token")
		}
		if typ := fmt.Sprintf("%T", *token); typ != "int64" || *token <= 10_000_000_000_000 {
			return fmt.Errorf("token %v of type %s, want an int64 > 10^13", *token, typ)
		}
		var viewToken string
		if err := a.QueryRow(ctx, "SELECT token::text FROM dlock_locks WHERE name = $1", dn).Scan(&viewToken); err != nil {
			return err
		}
		return want(viewToken == strconv.FormatInt(*token, 10), "token %d, view %s", *token, viewToken)
	})
	check("detached: acquire from another connection is nil, also after waiting", func() error {
		if t, err := acquire(ctx, b, dn, time.Second, 0); err != nil || t != nil {
			return fmt.Errorf("acquire(B, timeout 0) = %v, %v; want nil", t, err)
		}
		start := time.Now()
		t, err := acquire(ctx, b, dn, time.Second, 300*time.Millisecond)
		took := time.Since(start)
		if err != nil || t != nil {
			return fmt.Errorf("acquire(B, timeout 300ms) = %v, %v; want nil", t, err)
		}
		return want(took >= 250*time.Millisecond, "acquire(B, timeout 300ms) returned after %v", took)
	})
	check("detached: extend and release from another connection", func() error {
		if token == nil {
			return errors.New("no token")
		}
		expires, err := extend(ctx, b, dn, *token, 120*time.Second)
		if err != nil {
			return err
		}
		if left := time.Until(expires); left <= 100*time.Second {
			return fmt.Errorf("extend(B, 120s) = %v, %v from now; want > 100s", expires, left)
		}
		if ok, err := release(ctx, b, dn, *token); err != nil || !ok {
			return fmt.Errorf("release(B) = %v, %v; want true", ok, err)
		}
		if ok, err := release(ctx, b, dn, *token); err != nil || ok {
			return fmt.Errorf("release(B) again = %v, %v; want false", ok, err)
		}
		return nil
	})

	// 6. transaction lock
	check("transaction lock: held in the transaction, released by commit", func() error {
		const n = "x-Go"
		ran := false
		ok, err := inTransactionLock(ctx, a, n, time.Second, func(tx pgx.Tx) error {
			ran = true
			if other, err := tryLock(ctx, b, n, false, 0); err != nil || other {
				return fmt.Errorf("tryLock(B) inside = %v, %v; want false", other, err)
			}
			return nil
		})
		if err != nil || !ok || !ran {
			return fmt.Errorf("inTransactionLock = %v, %v (work ran: %v); want true", ok, err, ran)
		}
		if ok, err := tryLock(ctx, b, n, false, 0); err != nil || !ok {
			return fmt.Errorf("tryLock(B) after commit = %v, %v; want true", ok, err)
		}
		if ok, err := unlock(ctx, b, n, false); err != nil || !ok {
			return fmt.Errorf("unlock(B) = %v, %v; want true", ok, err)
		}
		return nil
	})

	// 6b. durations
	check("ms rounds up: 1µs -> 1, 1ms -> 1, 1.5ms -> 2, 0 -> 0", func() error {
		got := []int64{ms(time.Microsecond), ms(time.Millisecond), ms(1500 * time.Microsecond), ms(0)}
		return want(got[0] == 1 && got[1] == 1 && got[2] == 2 && got[3] == 0, "got %v", got)
	})
	check("lock with a negative timeout waits without limit", func() error {
		const n = "n-Go"
		if ok, err := tryLock(ctx, a, n, false, 0); err != nil || !ok {
			return fmt.Errorf("tryLock(A) = %v, %v; want true", ok, err)
		}
		done := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			ok, err := unlock(ctx, a, n, false)
			if err == nil && !ok {
				err = errors.New("unlock(A) = false")
			}
			done <- err
		}()
		start := time.Now()
		ok, err := lock(ctx, b, n, -1)
		took := time.Since(start)
		if uerr := <-done; uerr != nil {
			return uerr
		}
		if err != nil || !ok {
			return fmt.Errorf("lock(B, -1) = %v, %v; want true", ok, err)
		}
		if ok, err := unlock(ctx, b, n, false); err != nil || !ok {
			return fmt.Errorf("unlock(B) = %v, %v; want true", ok, err)
		}
		return want(took >= 250*time.Millisecond, "lock(B, -1) returned after %v, before the unlock", took)
	})

	// 6c. the README's pitfalls
	check("pitfall: a time.Duration bound to a bigint goes out as nanoseconds (200ms -> 200000000)", func() error {
		var v int64
		if err := a.QueryRow(ctx, "SELECT $1::bigint", 200*time.Millisecond).Scan(&v); err != nil {
			return err
		}
		return want(v == 200000000, "SELECT $1::bigint with 200ms = %d", v)
	})
	check("pitfall: a 30 s Duration as lease_ms: a session lease of 347 days, a detached one refused (22023)", func() error {
		const n = "ns-Go"
		var ok bool
		if err := a.QueryRow(ctx, "SELECT dlock_try($1, lease_ms => $2)", n, 30*time.Second).Scan(&ok); err != nil || !ok {
			return fmt.Errorf("dlock_try(lease_ms => 30*time.Second) = %v, %v; want true", ok, err)
		}
		var days float64
		err := a.QueryRow(ctx, "SELECT extract(epoch from lease_expires - since) / 86400 FROM dlock_locks WHERE name = $1",
			n).Scan(&days)
		if ok, uerr := unlock(ctx, a, n, false); uerr != nil || !ok {
			return fmt.Errorf("unlock(A) = %v, %v; want true", ok, uerr)
		}
		if err != nil {
			return err
		}
		if days < 347 || days > 348 {
			return fmt.Errorf("lease of %.2f days, want 347.2", days)
		}
		var token *int64
		err = a.QueryRow(ctx, "SELECT dlock_acquire($1, lease_ms => $2)", n, 30*time.Second).Scan(&token)
		if token != nil {
			_, _ = release(ctx, a, n, *token)
		}
		return want(sqlState(err) == "22023", "dlock_acquire(lease_ms => 30*time.Second) = %v, %v; want 22023", token, err)
	})
	check("pitfall: a Duration bound to an interval is exact to the microsecond; timeout => $2 works", func() error {
		const n = "i-Go"
		var s string
		if err := a.QueryRow(ctx, "SELECT $1::interval::text", 1234567*time.Microsecond).Scan(&s); err != nil {
			return err
		}
		if s != "00:00:01.234567" {
			return fmt.Errorf("SELECT $1::interval with 1.234567s = %s", s)
		}
		if ok, err := tryLock(ctx, a, n, false, 0); err != nil || !ok {
			return fmt.Errorf("tryLock(A) = %v, %v; want true", ok, err)
		}
		start := time.Now()
		var ok bool
		err := b.QueryRow(ctx, "SELECT dlock_lock($1, timeout => $2)", n, 200*time.Millisecond).Scan(&ok)
		took := time.Since(start)
		if ok, uerr := unlock(ctx, a, n, false); uerr != nil || !ok {
			return fmt.Errorf("unlock(A) = %v, %v; want true", ok, uerr)
		}
		if err != nil || ok {
			return fmt.Errorf("dlock_lock(B, timeout => 200ms) = %v, %v; want false", ok, err)
		}
		return want(took >= 150*time.Millisecond && took < 2*time.Second,
			"dlock_lock(B, timeout => 200ms) returned false after %v", took)
	})
	check("pitfall: a NULL token scanned into int64 fails (cannot scan null into *int64), into pgtype.Int8 is Null", func() error {
		var v int64
		err := a.QueryRow(ctx, "SELECT NULL::bigint").Scan(&v)
		if err == nil || !strings.Contains(err.Error(), "cannot scan null into *int64") {
			return fmt.Errorf("Scan(&int64) of NULL: %v", err)
		}
		var t pgtype.Int8
		if err := a.QueryRow(ctx, "SELECT NULL::bigint").Scan(&t); err != nil {
			return err
		}
		return want(t.Status == pgtype.Null, "Scan(&pgtype.Int8) of NULL: %+v", t)
	})
	check("pitfall: a negative key scanned into uint64 fails", func() error {
		var v uint64
		err := a.QueryRow(ctx, "SELECT dlock_key('nightly-report')").Scan(&v)
		return want(err != nil, "Scan(&uint64) of dlock_key('nightly-report') = %d, no error", v)
	})
	check("pitfall: pgx has no OnNotice by default; with one, an unlock not held gives a WARNING", func() error {
		cfg, err := pgx.ParseConfig(connString())
		if err != nil {
			return err
		}
		if cfg.OnNotice != nil {
			return errors.New("ParseConfig set an OnNotice")
		}
		var severities []string
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { severities = append(severities, n.Severity) }
		nc, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return err
		}
		defer nc.Close(ctx)
		ok, err := unlock(ctx, nc, "nl-Go", false)
		if err != nil || ok {
			return fmt.Errorf("unlock of a lock not held = %v, %v; want false", ok, err)
		}
		return want(len(severities) == 1 && severities[0] == "WARNING", "notices: %v", severities)
	})

	// 7. pool
	held := func(n string) (int64, error) {
		var count int64
		err := c.QueryRow(ctx, "SELECT count(*) FROM dlock_locks WHERE name = $1 AND granted", n).Scan(&count)
		return count, err
	}
	// waitHeld waits up to 2 s for n to have want granted rows (a session ends a moment
	// after its client closes it).
	waitHeld := func(n string, want int64) error {
		for i := 0; ; i++ {
			count, err := held(n)
			if err != nil || count == want {
				return err
			}
			if i == 40 {
				return fmt.Errorf("%d granted rows of %s, want %d", count, n, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	poolConfig, err := pgxpool.ParseConfig(connString() + " pool_max_conns=2")
	if err != nil {
		report("pool: config", err)
		os.Exit(1)
	}
	pool, err := pgxpool.ConnectConfig(ctx, poolConfig)
	if err != nil {
		report("pool: connect", err)
		os.Exit(1)
	}
	check("pool: withLock holds the lock during work, nothing held after", func() error {
		const n = "p-Go"
		ok, err := withLock(ctx, pool, n, time.Second, func(conn *pgxpool.Conn) error {
			count, err := held(n)
			if err != nil {
				return err
			}
			return want(count == 1, "%d granted rows during work, want 1", count)
		})
		if err != nil || !ok {
			return fmt.Errorf("withLock = %v, %v; want true", ok, err)
		}
		count, err := held(n)
		if err != nil {
			return err
		}
		return want(count == 0, "%d granted rows after withLock, want 0", count)
	})
	check("pool, the wrong way: unlock through the pool runs on another connection, false, lock stays", func() error {
		const n = "w-Go"
		wpool, err := pgxpool.ConnectConfig(ctx, poolConfig.Copy())
		if err != nil {
			return err
		}
		defer wpool.Close()
		c1, err := wpool.Acquire(ctx)
		if err != nil {
			return err
		}
		if ok, err := tryLock(ctx, c1, n, false, 0); err != nil || !ok {
			c1.Release()
			return fmt.Errorf("tryLock(pooled conn) = %v, %v; want true", ok, err)
		}
		ok, uerr := unlock(ctx, wpool, n, false) // c1 is checked out: another connection
		c1.Release()                             // back to the pool, still holding the lock
		if uerr != nil || ok {
			return fmt.Errorf("unlock(pool) = %v, %v; want false", ok, uerr)
		}
		if count, err := held(n); err != nil || count != 1 {
			return fmt.Errorf("%d granted rows after unlock(pool), %v; want 1", count, err)
		}
		wpool.Close() // the sessions end, and their locks
		return waitHeld(n, 0)
	})
	check("pool: withLock returns work's error, nothing held after", func() error {
		const n = "pe-Go"
		boom := errors.New("boom")
		ok, err := withLock(ctx, pool, n, time.Second, func(conn *pgxpool.Conn) error { return boom })
		if !errors.Is(err, boom) {
			return fmt.Errorf("withLock = %v, %v; want work's error", ok, err)
		}
		return waitHeld(n, 0)
	})
	check("pool: withLock after work left a failed transaction: work's error (22012), rolled back, unlocked, connection kept", func() error {
		const n = "pt-Go"
		var pid uint32
		ok, err := withLock(ctx, pool, n, time.Second, func(conn *pgxpool.Conn) error {
			pid = conn.Conn().PgConn().PID()
			if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
				return err
			}
			_, err := conn.Exec(ctx, "SELECT 1/0")
			return err
		})
		if sqlState(err) != "22012" {
			return fmt.Errorf("withLock = %v, %v; want work's 22012", ok, err)
		}
		if err := waitHeld(n, 0); err != nil {
			return err
		}
		// rolled back and unlocked, the connection went back to the pool, open
		var alive bool
		if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)", int32(pid)).Scan(&alive); err != nil {
			return err
		}
		return want(alive, "the connection (backend %d) was closed", pid)
	})
	check("pool: withLock closes the connection when its unlock returns false", func() error {
		const n = "pu-Go"
		var pid uint32
		ok, err := withLock(ctx, pool, n, time.Second, func(conn *pgxpool.Conn) error {
			pid = conn.Conn().PgConn().PID()
			_, err := unlock(ctx, conn, n, false) // makes withLock's own unlock return false
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "unlock") {
			return fmt.Errorf("withLock = %v, %v; want an unlock error", ok, err)
		}
		for i := 0; ; i++ {
			var alive bool
			if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)", int32(pid)).Scan(&alive); err != nil {
				return err
			}
			if !alive {
				return nil
			}
			if i == 40 {
				return fmt.Errorf("backend %d still there", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	check("pool: detached acquire and release through the pool", func() error {
		const n = "pd-Go"
		t, err := acquire(ctx, pool, n, 30*time.Second, 0)
		if err != nil || t == nil {
			return fmt.Errorf("acquire(pool) = %v, %v; want a token", t, err)
		}
		if ok, err := release(ctx, pool, n, *t); err != nil || !ok {
			return fmt.Errorf("release(pool) = %v, %v; want true", ok, err)
		}
		return nil
	})
	pool.Close()

	check("a session ended over its lease, used again: pgx returns the server's FATAL as a "+
		"*pgconn.PgError with Code 57L01 (the lease of lock ... ran out)", func() error {
		const n = "lost-Go"
		lost, err := pgx.Connect(ctx, connString())
		if err != nil {
			return err
		}
		defer lost.Close(ctx)
		if _, err := lost.Exec(ctx, "SELECT dlock_try_ms($1, false, 200)", n); err != nil {
			return err
		}
		for i := 0; i < 200; i++ {
			var held int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM dlock_locks WHERE name = $1 AND granted", n).Scan(&held); err != nil {
				return err
			}
			if held == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		_, err = lost.Exec(ctx, "SELECT 1")
		if err == nil {
			return fmt.Errorf("the session lived past its lease")
		}
		fmt.Printf("#   go: %T (%s): %s\n", err, sqlState(err), err)
		return want(sqlState(err) == "57L01" && strings.Contains(err.Error(), `the lease of lock "lost-Go" ran out`),
			"pgx said %T (%s): %v", err, sqlState(err), err)
	})

	// 8. nothing left
	check("nothing left in dlock_locks", func() error {
		var left []string
		err := c.QueryRow(ctx, "SELECT coalesce(array_agg(name || ' ' || scope), '{}') FROM dlock_locks WHERE name = ANY($1)",
			names).Scan(&left)
		if err != nil {
			return err
		}
		return want(len(left) == 0, "still there: %v", left)
	})

	fmt.Println("# all Go client tests ran")
	if failed {
		os.Exit(1)
	}
}
