# dlock client test for Ruby: ruby-pg (Debian ruby-pg 1.4.5) with its defaults,
# and the connection_pool gem (Debian ruby-connection-pool 2.2.5).
#
#   PGPORT=5432 ruby test/clients/ruby/clients.rb     (test/clients/run runs it)
#
# The lines between "README begin" and "README end" are copied into README.md
# ("From your language"); the rest is the test harness that runs them.

# README begin
require "digest"
require "pg"              # ruby-pg
require "connection_pool" # the connection_pool gem, for Dlock.with_lock

# dlock with ruby-pg's defaults: every result is a String ("t"/"f", "10000000000042",
# "2030-01-01 12:00:00.5+00"), and "f" is truthy in Ruby, so each method converts its
# result. Durations are seconds (Integer or Float, as for sleep), sent as whole
# milliseconds through the *_ms arguments (a Float there fails: 22P02 for bigint).
module Dlock
  module_function

  # The 64-bit key of a name, as SELECT dlock_key(name): the first 8 bytes of
  # SHA-256 of its UTF-8 bytes, read as a little-endian signed integer.
  def key(name)
    Digest::SHA256.digest(name.encode(Encoding::UTF_8)).unpack1("q<")
  end

  # Session lock; never waits. true if taken now. lease: seconds, or nil for none.
  # (!!shared: nil would be sent as NULL and fail with 22004.)
  def try_lock(conn, name, shared: false, lease: nil)
    bool conn.exec_params("SELECT dlock_try($1, shared => $2, lease_ms => $3)",
                          [name, !!shared, ms(lease)])
  end

  # Session lock; waits up to timeout seconds (nil: without limit), false at the deadline.
  def lock(conn, name, timeout, shared: false, lease: nil)
    bool conn.exec_params("SELECT dlock_lock($1, timeout_ms => $2, shared => $3, lease_ms => $4)",
                          [name, ms(timeout), !!shared, ms(lease)])
  end

  # false (and a WARNING, which libpq prints on stderr) if this session does not hold it.
  def unlock(conn, name, shared: false)
    bool conn.exec_params("SELECT dlock_unlock($1, shared => $2)", [name, !!shared])
  end

  # Detached lock: its fencing token (an Integer), or nil if not acquired within timeout seconds.
  def acquire(conn, name, lease, timeout = 0)
    token = value conn.exec_params("SELECT dlock_acquire($1, lease_ms => $2, timeout_ms => $3)",
                                   [name, ms(lease), ms(timeout)])
    token && Integer(token) # int8 comes back as a String; Integer keeps every digit
  end

  # Moves the detached lock's expiry to now + lease; returns it as a Time.
  # (Not named extend: that is Object#extend.)
  def extend_lease(conn, name, token, lease)
    TIMESTAMPTZ.decode value(conn.exec_params("SELECT dlock_extend($1, $2, lease_ms => $3)",
                                              [name, token, ms(lease)]))
  end

  # Works from any connection: true; false (and a WARNING) if not held with that token.
  def release(conn, name, token)
    bool conn.exec_params("SELECT dlock_release($1, $2)", [name, token])
  end

  # Transaction lock inside conn.transaction: yields conn with the lock held and
  # commits; rolls back and returns false if the lock is not granted within timeout.
  def in_transaction_lock(conn, name, timeout)
    conn.transaction do
      locked = bool conn.exec_params("SELECT dlock_lock_xact($1, timeout_ms => $2)",
                                     [name, ms(timeout)])
      raise NotLocked unless locked # makes conn.transaction roll back
      yield conn
    end
    true
  rescue NotLocked
    false
  end

  # With a pool: lock, work and unlock on ONE checked-out connection. A session lock
  # taken on one pooled connection and unlocked on another stays held (and the next
  # user of that connection inherits it); otherwise use in_transaction_lock, or a
  # detached lock (acquire/release), whose token can be released from any connection.
  def with_lock(pool, name, timeout)
    pool.with do |conn|
      next false unless lock(conn, name, timeout)
      begin
        yield conn
      ensure
        # a transaction the work left open (or aborted) would make the unlock fail
        conn.exec("ROLLBACK") unless conn.transaction_status == PG::PQTRANS_IDLE
        unlock(conn, name)
      end
      true
    end
  end

  NotLocked = Class.new(StandardError)
  TIMESTAMPTZ = PG::TextDecoder::TimestampWithTimeZone.new # the driver's own decoder

  def bool(result) = result.getvalue(0, 0) == "t"
  def value(result) = result.getvalue(0, 0)
  def ms(seconds) = seconds && (seconds * 1000).round
  private_class_method :bool, :value, :ms
end
# README end

# ---------------------------------------------------------------------------
# Test harness

LANG_NAME = "Ruby"
$all_ok = true

def connect
  conn = PG.connect(host: ENV.fetch("PGHOST", "127.0.0.1"),
                    port: ENV.fetch("PGPORT", "5432"),
                    user: ENV.fetch("PGUSER", "postgres"),
                    dbname: ENV.fetch("PGDATABASE", "postgres"),
                    application_name: "dlock-ruby-client-test")
  conn.set_notice_receiver { |_result| } # the expected WARNINGs are not output
  conn
end

def report(what, good, detail = nil)
  if good
    puts "ok - #{LANG_NAME}: #{what}"
  else
    $all_ok = false
    puts "not ok - #{LANG_NAME}: #{what}: #{detail}"
  end
end

# Runs one check; an unexpected exception is a "not ok" line with it.
def check(what)
  problems = []
  yield problems
  report(what, problems.empty?, problems.join("; "))
rescue StandardError => e
  report(what, false, "#{e.class}: #{e.message.strip}")
end

def expect(problems, label, actual, expected)
  problems << "#{label}: got #{actual.inspect}, expected #{expected.inspect}" unless actual == expected
end

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def one(conn, sql, params = []) = conn.exec_params(sql, params).getvalue(0, 0)

def granted_count(conn, name)
  Integer(one(conn, "SELECT count(*) FROM dlock_locks WHERE name = $1 AND granted", [name]))
end

N_CONT = "c-#{LANG_NAME}"
N_LEASE = "lease-#{LANG_NAME}"
N_SHARED = "s-#{LANG_NAME}"
N_DET = "d-#{LANG_NAME}"
N_XACT = "x-#{LANG_NAME}"
N_POOL = "p-#{LANG_NAME}"
N_POOL_DET = "pd-#{LANG_NAME}"
ALL_NAMES = [N_CONT, N_LEASE, N_SHARED, N_DET, N_XACT, N_POOL, N_POOL_DET].freeze

conns = []
begin
  a = connect; conns << a
  b = connect; conns << b
  c = connect; conns << c

  # A detached lock left by an earlier run that was killed would outlive it: clear it.
  ALL_NAMES.each do |n|
    a.exec_params("SELECT dlock_release(name, token) FROM dlock_locks " \
                  "WHERE name = $1 AND scope = 'detached' AND granted", [n])
  end

  check("dlock_key matches SELECT dlock_key for ASCII, non-ASCII and 200-character names") do |p|
    ["nightly-report", "задача-42", "k" * 200].each do |n|
      mine = Dlock.key(n)
      p << "#{n[0, 20]}: key is a #{mine.class}" unless mine.is_a?(Integer)
      expect(p, n[0, 20], mine, Integer(one(a, "SELECT dlock_key($1)", [n])))
    end
    expect(p, "README example", Dlock.key("nightly-report"), -8663603374018903193)
  end

  check("contention: try_lock, lock with timeout, unlock between two connections") do |p|
    expect(p, "try_lock(A)", Dlock.try_lock(a, N_CONT, shared: false, lease: 30), true)
    expect(p, "try_lock(B)", Dlock.try_lock(b, N_CONT, shared: false, lease: 30), false)
    t0 = now
    got = Dlock.lock(b, N_CONT, 0.2)
    waited = now - t0
    expect(p, "lock(B, 200 ms)", got, false)
    p << "lock(B, 200 ms) returned after #{(waited * 1000).round} ms" if waited < 0.15
    expect(p, "unlock(A)", Dlock.unlock(a, N_CONT), true)
    expect(p, "lock(B, 5 s)", Dlock.lock(b, N_CONT, 5), true)
    expect(p, "unlock(B)", Dlock.unlock(b, N_CONT), true)
  end

  check("lease of 30 s shows in dlock_locks") do |p|
    expect(p, "try_lock(A, lease 30)", Dlock.try_lock(a, N_LEASE, lease: 30), true)
    secs = one(a, "SELECT extract(epoch FROM lease_expires - since) FROM dlock_locks " \
                  "WHERE name = $1 AND granted", [N_LEASE])
    p << "lease_expires - since = #{secs.inspect}" unless secs && Float(secs).between?(29, 31)
    expect(p, "unlock(A)", Dlock.unlock(a, N_LEASE), true)
  end

  check("shared locks with Ruby true and false") do |p|
    expect(p, "try_lock(A, shared)", Dlock.try_lock(a, N_SHARED, shared: true, lease: nil), true)
    expect(p, "try_lock(B, shared)", Dlock.try_lock(b, N_SHARED, shared: true), true)
    expect(p, "try_lock(C, exclusive)", Dlock.try_lock(c, N_SHARED, shared: false), false)
    expect(p, "unlock(A, shared)", Dlock.unlock(a, N_SHARED, shared: true), true)
    expect(p, "unlock(B, shared)", Dlock.unlock(b, N_SHARED, shared: true), true)
  end

  check("detached: acquire, wait, extend and release from another connection") do |p|
    token = Dlock.acquire(a, N_DET, 60, 0)
    p << "token is a #{token.class} (#{token.inspect})" unless token.is_a?(Integer)
    p << "token #{token.inspect} is not above 10^13" unless token.is_a?(Integer) && token > 10**13
    expect(p, "token in dlock_locks",
           one(a, "SELECT token::text FROM dlock_locks WHERE name = $1 AND granted", [N_DET]),
           token.to_s)
    expect(p, "acquire(B, no wait)", Dlock.acquire(b, N_DET, 1, 0), nil)
    t0 = now
    again = Dlock.acquire(b, N_DET, 1, 0.3)
    waited = now - t0
    expect(p, "acquire(B, 300 ms)", again, nil)
    p << "acquire(B, 300 ms) returned after #{(waited * 1000).round} ms" if waited < 0.25
    expiry = Dlock.extend_lease(b, N_DET, token, 120)
    if !expiry.is_a?(Time)
      p << "extend_lease returned a #{expiry.class}: #{expiry.inspect}"
    elsif expiry - Time.now <= 100
      p << "extend_lease expiry #{expiry} is not more than 100 s ahead"
    end
    expect(p, "release(B)", Dlock.release(b, N_DET, token), true)
    expect(p, "release(B) again", Dlock.release(b, N_DET, token), false)
  end

  check("transaction lock inside conn.transaction") do |p|
    inside = nil
    ran = Dlock.in_transaction_lock(a, N_XACT, 1) do |conn|
      inside = Dlock.try_lock(b, N_XACT)
      conn.exec("SELECT 1")
    end
    expect(p, "in_transaction_lock", ran, true)
    expect(p, "try_lock(B) during the transaction", inside, false)
    expect(p, "A idle after commit", a.transaction_status, PG::PQTRANS_IDLE)
    expect(p, "try_lock(B) after it", Dlock.try_lock(b, N_XACT), true)
    # and when the lock is held elsewhere: false, rolled back, the block not run
    blocked = Dlock.in_transaction_lock(a, N_XACT, 0.05) { p << "block ran without the lock" }
    expect(p, "in_transaction_lock while B holds it", blocked, false)
    expect(p, "A idle after rollback", a.transaction_status, PG::PQTRANS_IDLE)
    expect(p, "unlock(B)", Dlock.unlock(b, N_XACT), true)
  end

  check("pool: with_lock on one pooled connection, detached lock across pooled connections") do |p|
    pool = ConnectionPool.new(size: 2, timeout: 5) { connect }
    begin
      seen = nil
      ran = Dlock.with_lock(pool, N_POOL, 1) { |_conn| seen = granted_count(c, N_POOL) }
      expect(p, "with_lock", ran, true)
      expect(p, "held during the work", seen, 1)
      expect(p, "held after with_lock", granted_count(c, N_POOL), 0)

      pool.with do |first|
        token = Dlock.acquire(first, N_POOL_DET, 60)
        p << "pooled acquire gave #{token.inspect}" unless token.is_a?(Integer)
        # another thread checks out the other pooled connection (the same thread
        # would get the same one back: ConnectionPool#with is re-entrant per thread)
        other_pid, released = Thread.new do
          pool.with { |second| [second.backend_pid, Dlock.release(second, N_POOL_DET, token)] }
        end.value
        p << "release used the same connection" if other_pid == first.backend_pid
        expect(p, "release through the pool", released, true)
      end
      expect(p, "detached lock left", granted_count(c, N_POOL_DET), 0)
    ensure
      pool.shutdown(&:close)
    end
  end

  check("nothing left in dlock_locks") do |p|
    ALL_NAMES.each do |n|
      rows = Integer(one(c, "SELECT count(*) FROM dlock_locks WHERE name = $1", [n]))
      p << "#{rows} row(s) for #{n}" unless rows.zero?
    end
  end
rescue Exception => e # rubocop:disable Lint/RescueException
  report("unexpected error", false, "#{e.class}: #{e.message.strip}")
  exit 1 # without the last line: the program did not reach its end
ensure
  conns.each { |conn| conn.close unless conn.finished? }
end

puts "# all #{LANG_NAME} client tests ran"
exit($all_ok ? 0 : 1)
