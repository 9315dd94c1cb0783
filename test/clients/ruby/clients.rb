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

# Each method converts ruby-pg's String results. Durations are seconds (Integer or
# Float, as for sleep), sent as whole milliseconds through the *_ms arguments.
module Dlock
  module_function

  # The 64-bit key of a name, as SELECT dlock_key(name): the first 8 bytes of
  # SHA-256 of its UTF-8 bytes, read as a little-endian signed integer.
  def key(name)
    Digest::SHA256.digest(name.encode(Encoding::UTF_8)).unpack1("q<")
  end

  # Session lock; never waits. true if taken now. lease: seconds, or nil for none.
  def try_lock(conn, name, shared: false, lease: nil)
    bool conn.exec_params("SELECT dlock_try_ms($1, $2, $3)",
                          [name, !!shared, ms(lease)])
  end

  # Session lock; waits up to timeout seconds (nil: without limit; 0: not at all),
  # false at the deadline.
  def lock(conn, name, timeout, shared: false, lease: nil)
    bool conn.exec_params("SELECT dlock_lock_ms($1, $2, $3, $4)",
                          [name, ms(timeout), !!shared, ms(lease)])
  end

  # false (and a WARNING) if this session does not hold it.
  def unlock(conn, name, shared: false)
    bool conn.exec_params("SELECT dlock_unlock($1, $2)", [name, !!shared])
  end

  # Detached lock: its fencing token (an Integer), or nil if not acquired. timeout:
  # seconds to wait; 0 or nil tries once (unlike lock, where nil waits without limit).
  def acquire(conn, name, lease, timeout = 0)
    token = value conn.exec_params("SELECT dlock_acquire_ms($1, $2, $3, false)",
                                   [name, ms(lease), ms(timeout)])
    token && Integer(token) # int8 comes back as a String; Integer keeps every digit
  end

  # Moves the detached lock's expiry to now + lease; returns it as a Time.
  # (Not named extend: that is Object#extend.)
  def extend_lease(conn, name, token, lease)
    TIMESTAMPTZ.decode value(conn.exec_params("SELECT dlock_extend_ms($1, $2, $3)",
                                              [name, token, ms(lease)]))
  end

  # Works from any connection: true; false (and a WARNING) if not held with that token.
  def release(conn, name, token)
    bool conn.exec_params("SELECT dlock_release($1, $2)", [name, token])
  end

  # Transaction lock inside conn.transaction: yields conn with the lock held and
  # commits; rolls back and returns false if the lock is not granted within timeout
  # (nil: without limit).
  def in_transaction_lock(conn, name, timeout)
    conn.transaction do
      locked = bool conn.exec_params("SELECT dlock_lock_xact_ms($1, $2, false, NULL)",
                                     [name, ms(timeout)])
      raise NotLocked unless locked # makes conn.transaction roll back
      yield conn
    end
    true
  rescue NotLocked
    false
  end

  # With a pool: lock, work and unlock on ONE checked-out connection. The block's own
  # exception is the one raised; errors of the clean-up are dropped.
  def with_lock(pool, name, timeout)
    pool.with do |conn|
      next false unless lock(conn, name, timeout)
      begin
        yield conn
      ensure
        # an open or failed transaction would make the unlock fail
        quietly { conn.exec("ROLLBACK") } unless conn.transaction_status == PG::PQTRANS_IDLE
        # not unlocked: connection_pool cannot drop a connection; reset makes a new server
        # session, and the old one ends with its locks
        quietly { conn.reset } unless quietly { unlock(conn, name) }
      end
      true
    end
  end

  NotLocked = Class.new(StandardError)
  TIMESTAMPTZ = PG::TextDecoder::TimestampWithTimeZone.new # the driver's own decoder

  def bool(result) = result.getvalue(0, 0) == "t"
  def value(result) = result.getvalue(0, 0)
  # rounded up, as dlock rounds an interval (a positive duration never becomes 0, "do
  # not wait"); rationalize reads the Float 1.1 as 11/10, so 1.1 s is 1100 ms, not 1101
  def ms(seconds) = seconds && (seconds.rationalize * 1000).ceil

  def quietly
    yield
  rescue PG::Error
    nil
  end
  private_class_method :bool, :value, :ms, :quietly
end
# README end

require "tempfile"

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

# granted_count once a closed session has ended (its backend exits just after the close)
def granted_count_after_close(conn, name)
  deadline = now + 5
  sleep 0.01 while granted_count(conn, name).positive? && now < deadline
  granted_count(conn, name)
end

N_CONT = "c-#{LANG_NAME}"
N_LEASE = "lease-#{LANG_NAME}"
N_SHARED = "s-#{LANG_NAME}"
N_DET = "d-#{LANG_NAME}"
N_XACT = "x-#{LANG_NAME}"
N_POOL = "p-#{LANG_NAME}"
N_POOL_DET = "pd-#{LANG_NAME}"
N_FAIL = "f-#{LANG_NAME}"
N_WRONG = "w-#{LANG_NAME}"
N_MISC = "m-#{LANG_NAME}"
ALL_NAMES = [N_CONT, N_LEASE, N_SHARED, N_DET, N_XACT, N_POOL, N_POOL_DET, N_FAIL, N_WRONG,
             N_MISC].freeze

WorkError = Class.new(StandardError)

# What the code writes on file descriptor 2 (where libpq's default notice processor writes).
def captured_stderr
  Tempfile.create("dlock-ruby-stderr") do |tmp|
    saved = $stderr.dup
    begin
      $stderr.reopen(tmp)
      yield
    ensure
      $stderr.reopen(saved)
      saved.close
    end
    File.read(tmp.path)
  end
end

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

  check("ruby-pg's defaults: boolean as \"t\"/\"f\", bigint as a String, NULL as nil") do |p|
    expect(p, "row", a.exec("SELECT true, false, 10000000000042::bigint, NULL::bigint").values,
           [["t", "f", "10000000000042", nil]])
  end

  check("arguments: a Float for lease_ms is 22P02, nil for shared is 22004, false works") do |p|
    sql = "SELECT dlock_try($1, shared => $2, lease_ms => $3)"
    [[[N_MISC, false, 1500.0], "22P02"], [[N_MISC, nil, nil], "22004"]].each do |params, state|
      a.exec_params(sql, params)
      p << "#{params.inspect} was accepted"
    rescue PG::Error => e
      expect(p, params.inspect, e.result.error_field(PG::PG_DIAG_SQLSTATE), state)
    end
    expect(p, "shared => false (sent as \"false\")", one(a, sql, [N_MISC, false, nil]), "t")
    expect(p, "unlock", Dlock.unlock(a, N_MISC), true)
  end

  check("interval arguments: an Integer means seconds (200 is 00:03:20), a String works") do |p|
    expect(p, "$1::interval with 200", one(a, "SELECT $1::interval", [200]), "00:03:20")
    expect(p, "lease => \"30 s\"", one(a, "SELECT dlock_try($1, lease => $2)", [N_MISC, "30 s"]), "t")
    expect(p, "unlock", Dlock.unlock(a, N_MISC), true)
  end

  check("durations round up to whole milliseconds (1 us is 1 ms, 2.007 s is 2007 ms)") do |p|
    { nil => nil, 0 => 0, 0.000001 => 1, 1e-10 => 1, 0.2 => 200, 1.1 => 1100, 2.007 => 2007, 1.0005 => 1001,
      30 => 30_000, Rational(1, 3) => 334 }.each do |seconds, want|
      expect(p, "ms(#{seconds.inspect})", Dlock.send(:ms, seconds), want)
    end
  end

  check("WARNINGs: libpq prints them on stderr by default, set_notice_receiver takes them") do |p|
    plain = PG.connect(host: a.host, port: a.port, user: a.user, dbname: a.db)
    begin
      got = nil
      text = captured_stderr { got = Dlock.unlock(plain, N_MISC) }
      expect(p, "unlock of a lock not held", got, false)
      p << "stderr had #{text.inspect}" unless text.include?("WARNING:  you don't own a lock")
      notices = []
      plain.set_notice_receiver { |r| notices << r.error_message }
      text = captured_stderr { Dlock.unlock(plain, N_MISC) }
      p << "stderr had #{text.inspect} with a notice receiver" unless text.empty?
      p << "the receiver got #{notices.inspect}" unless notices.size == 1 && notices[0].include?("don't own")
    ensure
      plain.close
    end
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

  check("lock with timeout nil waits without limit (until A unlocks 0.4 s later)") do |p|
    expect(p, "try_lock(A)", Dlock.try_lock(a, N_CONT), true)
    t0 = now
    unlocker = Thread.new { sleep 0.4; Dlock.unlock(a, N_CONT) }
    got = Dlock.lock(b, N_CONT, nil)
    waited = now - t0
    expect(p, "lock(B, nil)", got, true)
    expect(p, "unlock(A) meanwhile", unlocker.value, true)
    p << "lock(B, nil) returned after #{(waited * 1000).round} ms" if waited < 0.3
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
    expect(p, "acquire(B, timeout nil)", Dlock.acquire(b, N_DET, 1, nil), nil)
    p << "acquire(B, timeout nil) took #{((now - t0) * 1000).round} ms" if now - t0 > 0.1
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

  check("with_lock when the block raises, leaves a failed transaction, or breaks the unlock: " \
        "its own error, nothing held after, a reset when the unlock failed") do |p|
    pool = ConnectionPool.new(size: 1, timeout: 5) { connect }
    begin
      pid = pool.with(&:backend_pid)
      works = {
        "raises" => [WorkError, ->(_conn) { raise WorkError, "work failed" }],
        "leaves a failed transaction" => [nil, lambda do |conn|
          conn.exec("BEGIN")
          begin
            conn.exec("SELECT 1/0")
          rescue PG::DivisionByZero
            nil
          end
        end],
        "fails in a transaction" => [PG::DivisionByZero, lambda do |conn|
          conn.exec("BEGIN")
          conn.exec("SELECT 1/0")
        end],
        "leaves a transaction open and raises" => [WorkError, lambda do |conn|
          conn.exec("BEGIN")
          raise WorkError, "work failed"
        end],
      }
      works.each do |what, (error, work)|
        got = Dlock.with_lock(pool, N_FAIL, 1, &work)
        p << "#{what}: returned #{got.inspect}" unless error.nil? && got == true
      rescue StandardError => e
        p << "#{what}: raised #{e.class}: #{e.message.strip}" unless e.instance_of?(error)
      ensure
        expect(p, "#{what}: held after", granted_count(c, N_FAIL), 0)
        expect(p, "#{what}: the same connection", pool.with(&:backend_pid), pid)
        expect(p, "#{what}: idle", pool.with(&:transaction_status), PG::PQTRANS_IDLE)
      end
      begin
        Dlock.with_lock(pool, N_FAIL, 1) do |conn|
          conn.exec("SET search_path TO nowhere") # dlock_unlock: 42883
          raise WorkError, "work failed"
        end
        p << "breaks the unlock: no error"
      rescue StandardError => e
        p << "breaks the unlock: raised #{e.class}: #{e.message.strip}" unless e.instance_of?(WorkError)
      end
      expect(p, "breaks the unlock: held after", granted_count_after_close(c, N_FAIL), 0)
      p << "breaks the unlock: the connection was not reset" if pool.with(&:backend_pid) == pid
      expect(p, "after the reset", Dlock.with_lock(pool, N_FAIL, 1) { nil }, true)
    ensure
      pool.shutdown(&:close)
    end
  end

  check("the wrong way: a lock taken on one pooled connection and unlocked on another " \
        "returns false and stays held") do |p|
    pool = ConnectionPool.new(size: 2, timeout: 5) { connect }
    begin
      pool.with do |first|
        expect(p, "try_lock(first)", Dlock.try_lock(first, N_WRONG), true)
        other_pid, unlocked = Thread.new do
          pool.with { |second| [second.backend_pid, Dlock.unlock(second, N_WRONG)] }
        end.value
        p << "unlock used the same connection" if other_pid == first.backend_pid
        expect(p, "unlock(second)", unlocked, false)
      end
      expect(p, "held after", granted_count(c, N_WRONG), 1)
    ensure
      pool.shutdown(&:close)
    end
    expect(p, "held after the pool's shutdown", granted_count_after_close(c, N_WRONG), 0)
  end

  check("a session ended over its lease, used again: ruby-pg raises PG::ConnectionBad (or " \
        "PG::UnableToSend) whose message has the server's FATAL (the lease of lock ... ran out)") do |p|
    lost = connect
    one(lost, "SELECT dlock_try_ms($1, false, 200)", ["lost-ruby"])
    deadline = now + 10
    sleep 0.05 while granted_count(c, "lost-ruby") > 0 && now < deadline
    begin
      lost.exec("SELECT 1")
      p << "the session lived past its lease"
    rescue PG::Error => e
      puts "#   ruby: #{e.class}: #{e.message.gsub("\n", " | ")}"
      p << "ruby-pg said #{e.class}: #{e.message}" unless e.message.include?('the lease of lock "lost-ruby" ran out')
    ensure
      lost.close unless lost.finished?
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
