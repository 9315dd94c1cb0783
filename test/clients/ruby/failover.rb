# failover.rb: what a ruby-pg client sees when the primary that holds its dlock lock goes
# away (a switchover or failover), and how it gets the lock back on the new primary.
# Run by test/clients/run --failover (test/ha.py drives it):
#
#   DLOCK_FAILOVER_HOSTS=h1:p1,h2:p2 DLOCK_FAILOVER_GO=/path/go ruby test/clients/ruby/failover.rb
#
# Prints "held T1 P1", waits for the file DLOCK_FAILOVER_GO, prints "lost ..." (what the
# next call on the old connection raised), then "retaken T2 P2 SECONDS" and
# "# all ruby failover tests ran"; "not ok - ruby failover: ..." and exit 1 otherwise.
require "pg"

NAME = "ha-ruby"
$stdout.sync = true

def fail!(why)
  puts "not ok - ruby failover: #{why}"
  exit 1
end

# libpq takes every host of the cluster and, with target_session_attrs=read-write, keeps
# the first that accepts writes.
def connect_primary
  hosts, ports = ENV.fetch("DLOCK_FAILOVER_HOSTS").split(",").map { |h| h.rpartition(":").values_at(0, 2) }.transpose
  PG.connect(host: hosts.join(","), port: ports.join(","), user: "postgres", dbname: "postgres",
             target_session_attrs: "read-write", connect_timeout: 5)
end

# Takes the lock with a 60 s lease; returns its token and the server's port.
def lock_and_token(conn)
  ok = conn.exec_params("SELECT dlock_try($1, lease => '60 s')", [NAME]).getvalue(0, 0)
  fail! "dlock_try on the primary was not true" unless ok == "t"
  conn.exec_params("SELECT dlock_token($1), inet_server_port()", [NAME]).values.first
end

begin
  conn = connect_primary
  puts "held #{lock_and_token(conn).join(" ")}"

  go = ENV.fetch("DLOCK_FAILOVER_GO")
  waited = 0
  until File.exist?(go)
    fail! "no #{go} within 120 s" if waited >= 1200
    sleep 0.1
    waited += 1
  end

  # The old connection: its server ended the session, and the lock with it.
  begin
    puts "lost none #{conn.exec_params("SELECT dlock_token($1)", [NAME]).getvalue(0, 0).inspect}"
  rescue PG::Error => e
    puts "lost #{e.class} #{e.result&.error_field(PG::PG_DIAG_SQLSTATE) || "no SQLSTATE"} #{e.message.lines.first.chomp}"
  end
  conn.close unless conn.finished?
  conn = nil

  # Treat the lock as lost: reconnect to the new primary, take the lock again, use the new token.
  start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  begin
    conn = connect_primary
    token, port = lock_and_token(conn)
  rescue PG::Error => e
    conn&.close unless conn&.finished?
    conn = nil
    fail! "no primary within 60 s: #{e.message.strip}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) - start > 60
    sleep 0.2 # no primary yet
    retry
  end
  puts format("retaken %s %s %.1f", token, port, Process.clock_gettime(Process::CLOCK_MONOTONIC) - start)
  conn.exec_params("SELECT dlock_unlock($1)", [NAME])
  conn.close
  puts "# all ruby failover tests ran"
rescue StandardError => e
  fail! "unexpected #{e.class}: #{e.message.strip}"
end
