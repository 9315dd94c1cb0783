# dlock.synchronous_grants: a lock granted on a primary is answered only once
# the standbys in synchronous_standby_names have flushed WAL written after
# the grant (src/confirm.c).  A primary whose synchronous standby has left
# it (promoted, or following another primary) then grants nothing: the call
# waits, as a commit would, and a cancel, statement_timeout, terminate, the
# call's own timeout (55P03) or its client going away ends it with nothing
# held; a lease counts from the answer.  Without the setting, or without
# synchronous_standby_names, nothing waits.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $primary = dlock_primary('sync_primary');
my $standby = dlock_standby($primary, 'sync_standby');
$primary->append_conf('postgresql.conf', "synchronous_standby_names = 'sync_standby'");
$primary->reload;
ok($primary->poll_query_until('postgres', "SELECT sync_state = 'sync' FROM pg_stat_replication"),
	'the standby is synchronous');

my $on = 'SET dlock.synchronous_grants = on; ';

# What one session holds after $sql (run with the setting on and a
# statement_timeout): psql's errors, its advisory locks and its view rows.
sub attempt
{
	my ($sql, $timeout) = @_;
	my ($rc, $out, $err) = $primary->psql('postgres',
		"\\set VERBOSITY verbose\n${on}SET statement_timeout = '$timeout';\n$sql;\n"
		  . "ROLLBACK;\nRESET statement_timeout;\n"
		  . "SELECT 'held=' || count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();\n"
		  . "SELECT 'rows=' || count(*) FROM dlock_locks WHERE pid = pg_backend_pid();",
		on_error_stop => 0);
	my ($held) = $out =~ /held=(\d+)/;
	my ($rows) = $out =~ /rows=(\d+)/;
	return ($out, $err, $held, $rows);
}

# with the synchronous standby streaming: answered
my ($out, $err) = attempt("SELECT dlock_try('a')", '30s');
like($out, qr/^t$/m, 'on, the synchronous standby streaming: granted');
like($out, qr/held=1/, 'and held');
is($primary->safe_psql('postgres', "${on}SELECT dlock_acquire('d', '1 min') > 0"), 't',
	'a detached lock too');
$primary->safe_psql('postgres', "SELECT dlock_release('d', token) FROM dlock_locks WHERE name = 'd'");

# the synchronous standby gone: every "yes" waits, and a timeout ends it
# with nothing held
$standby->stop('fast');
my $plain = $primary->background_psql('postgres');
my %calls = (
	'dlock_try' => "SELECT dlock_try('job')",
	'dlock_lock' => "SELECT dlock_lock('job', '10s')",
	'a lease' => "SELECT dlock_try('job', lease => '1 min')",
	'shared' => "SELECT dlock_try('job', shared => true)",
	'a permit' => "SELECT dlock_try('job', permits => 3)",
	'several names' => "SELECT dlock_try(ARRAY['job', 'job2'])",
	'the _ms form' => "SELECT dlock_try_ms('job', false, NULL, NULL, NULL)",
	'transaction scope' => "BEGIN; SELECT dlock_try_xact('job')",);
for my $what (sort keys %calls)
{
	my ($o, $e, $held, $rows) = attempt($calls{$what}, '300ms');
	like($e, qr/ERROR:  57014: canceling statement due to statement timeout\nCONTEXT:  waiting for the synchronous standbys to confirm the grant of locks? "job2?"(?: and 1 more)? \(dlock.synchronous_grants\)/,
		"$what: waits for the synchronous standby until the timeout");
	is("$held/$rows", '0/0', "$what: nothing held afterwards, nothing in the view");
}
is($plain->query_safe("SELECT dlock_try('job') AND dlock_try('job2')"), 't',
	'another session gets the names at once (the setting is off there)');
$plain->query_safe('SELECT dlock_unlock_all()');

# a call's timeout bounds the wait: then 55P03, and nothing held
for my $call ("dlock_lock('tl', '300ms')", "dlock_lock(ARRAY['tl', 'tl2'], '300ms')",
	"dlock_lock_xact('tl', '300ms')", "dlock_acquire('tl', '1 min', timeout => '300ms')")
{
	my ($o, $e, $held, $rows) = attempt("SELECT $call", '30s');
	like($e, qr/ERROR:  55P03: the synchronous standbys did not confirm the grant within the call's timeout\nDETAIL:  The lock was granted and given back/,
		"$call: fails at its timeout, 55P03");
	is("$held/$rows", '0/0', "$call: nothing held afterwards");
}
ok($primary->poll_query_until('postgres', "SELECT count(*) = 0 FROM dlock_locks WHERE name = 'tl'"),
	'the detached one is released too');

# a re-entry waits too; when it fails, the first hold stays, once
($out, $err) = attempt("SET dlock.synchronous_grants = off; SELECT dlock_try('held'); ${on}SELECT dlock_try('held')",
	'300ms');
like($err, qr/57014/, 'a re-entry waits too');
like($out, qr/held=1/, 'and its failure leaves the first hold, once');

# a detached lock: the acquisition is undone with the transaction
($out, $err) = attempt("SELECT dlock_acquire('det', '1 min')", '300ms');
like($err, qr/57014: canceling statement due to statement timeout\nCONTEXT:  waiting for the synchronous standbys to confirm the grant of lock "det"/,
	'dlock_acquire waits too');
ok($primary->poll_query_until('postgres', "SELECT count(*) = 0 FROM dlock_locks WHERE name = 'det'"),
	'and its lock is released');

# a session waiting there shows it, and can be cancelled or terminated
my $w = $primary->background_psql('postgres', on_error_stop => 0);
$w->query_safe($on);
my $wpid = $w->query_safe('SELECT pg_backend_pid()');
$w->query_until(qr/started/, "\\echo started\nSELECT dlock_try('waits');\n");
ok($primary->poll_query_until('postgres',
	"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $wpid"),
	'a waiting grant shows as an Extension wait in pg_stat_activity');
is($primary->safe_psql('postgres', "SELECT count(*) FROM pg_locks WHERE pid = $wpid AND locktype = 'advisory'"),
	'1', 'the lock manager has its grant meanwhile');
$primary->safe_psql('postgres', "SELECT pg_cancel_backend($wpid)");
like($w->query('SELECT 1'), qr/^1$/m, 'pg_cancel_backend ends the wait; the session goes on');
like($w->{stderr}, qr/canceling statement due to user request/, 'with the usual message');
$w->{stderr} = '';
is($w->query_safe("SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'"),
	'0', 'holding nothing');
$w->query_until(qr/again/, "\\echo again\nSELECT dlock_try('waits');\n");
ok($primary->poll_query_until('postgres',
	"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $wpid"), 'waiting again');
$primary->safe_psql('postgres', "SELECT pg_terminate_backend($wpid)");
ok($primary->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_locks WHERE pid = $wpid"),
	'pg_terminate_backend ends the session and the lock with it');
eval { $w->quit };

# a client that goes away while its grant waits: its session ends within
# seconds, and the lock with it
my ($cin, $cout, $cerr) = ('', '', '');
my $client = IPC::Run::start([ 'psql', '-XAtq', '-d', $primary->connstr('postgres') ],
	'<', \$cin, '>', \$cout, '2>', \$cerr);
$cin = "${on}SELECT pg_backend_pid();\nSELECT dlock_try('gone');\n";
$client->pump until $cout =~ /^(\d+)$/m;
my ($gpid) = $cout =~ /^(\d+)$/m;
ok($primary->poll_query_until('postgres',
	"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $gpid"), 'a client waits for its grant');
$client->kill_kill;
ok($primary->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $gpid"),
	'the client killed: its session ends (the client is checked while it waits)');
is($plain->query_safe("SELECT dlock_try('gone')"), 't', 'and the lock is free');
$plain->query_safe("SELECT dlock_unlock('gone')");

# a lease of the session's that runs out while a grant waits: the session
# is ended (57L01), holding nothing
my $lw = $primary->background_psql('postgres', on_error_stop => 0);
my $lwpid = $lw->query_safe('SELECT pg_backend_pid()');
# (one line: under load the lease may run out before the wait begins,
# which must end the session all the same)
eval {
	$lw->query_until(qr/waiting/,
		"\\echo waiting\nSELECT dlock_try('short', lease => '2 s');\n${on}SELECT dlock_try('after-short');\n");
};
ok($primary->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $lwpid"),
	'a session whose other lease runs out while its grant waits is ended');
is($plain->query_safe("SELECT dlock_try('after-short') AND dlock_try('short')"), 't',
	'holding neither lock');
$plain->query_safe('SELECT dlock_unlock_all()');
eval { $lw->quit };

# leases count from the answer: a session lock that waited longer than its
# lease is answered with its whole lease ahead (the reaper knows of it only
# then); a detached lock keeps its lease while it waits (its lock holder
# enforces it) and starts it again at the answer, or, if it ran out
# meanwhile, the call fails: nobody is told yes for a lock another holds
my $ls = $primary->background_psql('postgres');
$ls->query_safe($on);
$ls->query_until(qr/leasing/, "\\echo leasing\nSELECT 'session=' || dlock_try('ls', lease => '2 s');\n");
my $ld = $primary->background_psql('postgres');
$ld->query_safe($on);
$ld->query_until(qr/leasing/, "\\echo leasing\nSELECT 'detached=' || dlock_acquire('ld', '5 s');\n");
my $lx = $primary->background_psql('postgres', on_error_stop => 0);
$lx->query_safe($on);
$lx->query_until(qr/leasing/, "\\echo leasing\nSELECT dlock_acquire('lx', '1 s');\n");
sleep 3;
is($plain->query_safe("SELECT dlock_try('ls')"), 'f', 'meanwhile the session lock is held (granted, not yet answered)');
is($plain->query_safe("SELECT dlock_acquire('ld', '1 min') IS NULL"), 't', 'and so is the detached one');
like($plain->query_safe("SELECT dlock_acquire('lx', '1 min')"), qr/^\d+$/,
	'a detached lock whose 1 s lease ran out during the wait is free again: another session takes it');

# the standby back: a waiting grant is answered
my $b = $primary->background_psql('postgres');
$b->query_safe($on);
$b->query_until(qr/waiting/, "\\echo waiting\nSELECT 'answer=' || dlock_try('back');\n");
$standby->start;
ok($primary->poll_query_until('postgres', "SELECT sync_state = 'sync' FROM pg_stat_replication"),
	'the standby is back');
like($b->query_safe("SELECT 'held=' || count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'"),
	qr/answer=true\s+held=1/, 'the waiting grant is answered true once it has confirmed');
$b->query_safe('SELECT dlock_unlock_all()');
like($ls->query_safe("SELECT 'ahead=' || (lease_expires - now() > '1 s') FROM dlock_locks WHERE name = 'ls'"),
	qr/session=true\s+ahead=true/, 'the session lock that waited 3 s has its 2 s lease ahead of it');
like($ld->query_safe("SELECT 'ahead=' || (lease_expires - now() > '4 s') FROM dlock_locks WHERE name = 'ld'"),
	qr/detached=\d+\s+ahead=true/, 'the detached lock that waited 3 s has its 5 s lease ahead of it');
$lx->query('SELECT 1');
like($lx->{stderr}, qr/ERROR:  lock "lx" was lost while the synchronous standbys confirmed its grant/,
	'and the one whose lease ran out is told so, not yes');
$lx->{stderr} = '';
is($primary->safe_psql('postgres', "SELECT count(*) FROM dlock_locks WHERE name = 'lx'"), '1',
	'the other session keeps it');
$primary->safe_psql('postgres', "SELECT dlock_release('lx', token) FROM dlock_locks WHERE name = 'lx'");
$lx->quit;
$ls->query_safe("SELECT dlock_unlock('ls')");
$ld->query_safe("SELECT dlock_release('ld', token) FROM dlock_locks WHERE name = 'ld'");
$ls->quit;
$ld->quit;

# on the standby, a standby-local lock waits for nothing
is($standby->safe_psql('postgres',
		"SET dlock.allow_standby_locks = on; ${on}SELECT dlock_try('local')"),
	't', 'a standby-local lock (dlock.allow_standby_locks) is not waited for');

# the synchronous standby promoted: the old primary grants nothing with
# the setting on, and without it says true (split brain)
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die;
($out, $err) = attempt("SELECT dlock_try('split')", '500ms');
like($err, qr/57014/, 'the old primary, its synchronous standby promoted: no grant with the setting on');
is($plain->query_safe("SELECT dlock_try('split')"), 't', 'and a grant without it');
is($standby->safe_psql('postgres', "${on}SELECT dlock_try('split')"), 't',
	'the new primary (no synchronous standby of its own) grants at once');
$plain->query_safe('SELECT dlock_unlock_all()');

# without synchronous_standby_names nothing waits
$primary->append_conf('postgresql.conf', "synchronous_standby_names = ''");
$primary->reload;
ok($primary->poll_query_until('postgres',
		"SELECT dlock_try('free') AND dlock_unlock('free') "
		  . "FROM (SELECT set_config('dlock.synchronous_grants', 'on', false)) s"),
	'no synchronous_standby_names: the setting waits for nothing');

$plain->quit;
$b->quit;
done_testing();
