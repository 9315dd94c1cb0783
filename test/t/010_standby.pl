# A hot standby refuses to take locks: a lock there would exclude nobody on
# the primary (the primary's locks are not replicated).  dlock_key, the view
# and dlock_token still answer; releasing is allowed.  With
# dlock.allow_standby_locks on, a session takes locks local to the standby:
# they exclude the standby's other sessions, carry no fencing token, and
# their leases are enforced by the standby's own reaper.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $primary = dlock_primary('standby_primary');
my $standby = dlock_standby($primary, 'standby_standby');

my $holder = $primary->background_psql('postgres');
is($holder->query_safe("SELECT dlock_try('job')"), 't', 'the primary has job');

for my $call ("dlock_try('job')", "dlock_lock('job', '1s')",
	"dlock_try('job', lease => '1 minute')", "dlock_lock('job', shared => true)",
	"dlock_try_xact('job')", "dlock_lock_xact('job', '1s')")
{
	my ($rc, $out, $err) = $standby->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT $call;\n"
		  . "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();",
		on_error_stop => 0);
	like($err, qr/ERROR:  25006: cannot acquire lock "job" during recovery/, "$call refused on the standby");
	is($out, '0', "$call: no lock taken in that session");
	like($err, qr/DETAIL:  This server is a standby: a lock taken here does not exclude sessions on the primary\./,
		"$call: the detail says why");
	like($err, qr/HINT:  Take the lock on the primary, or set "dlock\.allow_standby_locks" to on for locks that exclude only other sessions of this standby\./,
		"$call: the hint says what to do");
}

# what still answers on a standby
is($standby->safe_psql('postgres', "SELECT dlock_key('job')"),
	$primary->safe_psql('postgres', "SELECT dlock_key('job')"), 'dlock_key: the same key as on the primary');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM dlock_locks'), '0',
	"dlock_locks on the standby: its own locks (none), not the primary's");
like(sqlstate_error($standby, "SELECT dlock_token('job')"),
	qr/ERROR:  55000: lock "job" is not held by this session/, 'dlock_token: not held here');
my ($rc, $out, $err) = $standby->psql('postgres', "SELECT dlock_unlock('job'), dlock_unlock_all()");
is($out, 'f|0', 'releasing is allowed (nothing to release)');
like($err, qr/you don't own a lock of type ExclusiveLock/, 'with the usual warning');

# standby-local locks, when allowed
my $s1 = $standby->background_psql('postgres');
my $s2 = $standby->background_psql('postgres');
$s1->query_safe('SET dlock.allow_standby_locks = on');
$s2->query_safe('SET dlock.allow_standby_locks = on');
is($s1->query_safe("SELECT dlock_try('job')"), 't',
	'allowed: the standby takes job (the primary holds it too: the locks are separate)');
is($s2->query_safe("SELECT dlock_try('job')"), 'f', "it excludes the standby's other sessions");
is($s2->query_safe("SELECT dlock_lock('job', '200ms')"), 'f', 'also when waiting');
is($standby->safe_psql('postgres', "SELECT name, mode, scope, granted, token IS NULL FROM dlock_locks"),
	'job|exclusive|session|t|t', 'the view shows it, without a token');
like(
	sqlstate_error($standby, "SET dlock.allow_standby_locks = on; SELECT dlock_try('own'); SELECT dlock_token('own')"),
	qr/ERROR:  55000: lock "own" has no fencing token\nDETAIL:  The lock was taken while the server was a standby; only a primary hands out fencing tokens\./,
	'dlock_token: no token on a standby, and why');
is($s1->query_safe("SELECT dlock_unlock('job')"), 't', 'released');
$s2->query_safe('BEGIN');
is($s2->query_safe("SELECT dlock_try_xact('job')"), 't', 'transaction scope works too');
is($s1->query_safe("SELECT dlock_try('job')"), 'f', 'and excludes the standby\'s other sessions');
$s2->query_safe('COMMIT');
is($s1->query_safe("SELECT dlock_try('job')"), 't', 'until the transaction ends');
$s1->query_safe("SELECT dlock_unlock('job')");

# a lease on a standby-local lock is enforced by the standby's reaper
like(reaper_pid($standby), qr/^\d+$/, 'the reaper runs on the standby');
my $pid = $s1->query_safe('SELECT pg_backend_pid()');
my $off = -s $standby->logfile;
is($s1->query_safe("SELECT dlock_try('leased', lease => '1s')"), 't', 'a lock with a 1 s lease');
$standby->wait_for_log(qr/lease of lock "leased" expired, terminating process $pid/, $off);
ok($standby->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
	'the holder is ended when the lease runs out');
eval { $s1->quit };
$s2->quit;

# the setting can be given to a role (on the primary: it is replicated)
$primary->safe_psql('postgres',
	'CREATE ROLE standby_app LOGIN; ALTER ROLE standby_app SET dlock.allow_standby_locks = on');
catch_up($primary, $standby);
is($standby->safe_psql('postgres', "SELECT dlock_try('by-role')", extra_params => [ '-U', 'standby_app' ]),
	't', 'allowed for a role');
like(sqlstate_error($standby, "SELECT dlock_try('by-role')"), qr/25006/, 'and only for that role');

$holder->quit;
$standby->stop;
$primary->stop;
done_testing();
