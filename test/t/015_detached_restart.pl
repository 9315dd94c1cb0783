# Detached locks across restarts and process deaths: a clean restart and a
# crash restart leave none (and no waiter process), tokens go on above every
# one handed out before; a lock holder or waiter that is terminated takes its
# locks with it and the lock holder comes back; a standby refuses
# dlock_acquire.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node = dlock_primary('detached', conf => ['max_worker_processes = 16']);

sub count_of
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM ($sql) x");
}

sub detached_count
{
	return count_of("SELECT 1 FROM dlock_locks WHERE scope = 'detached'");
}

sub processes
{
	my ($type) = @_;
	return count_of("SELECT 1 FROM pg_stat_activity WHERE backend_type = '$type'");
}

sub holder_ready
{
	return $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'dlock lock holder'");
}

# a detached lock on name that had to wait for a session lock: held by a
# dlock waiter process once this returns; the connections are gone
sub waited_lock
{
	my ($name) = @_;
	my $bg = $node->background_psql('postgres');
	$bg->query_safe("SELECT dlock_try('$name')");
	my $waiter = $node->background_psql('postgres');
	$waiter->query_until(qr/started/,
		"\\echo started\nSELECT dlock_acquire('$name', '1 hour', timeout => '1 min');\n");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM dlock_names() WHERE name = '$name' AND waiting = 'detached'")
	  or die 'the waiter did not queue';
	$bg->query_safe("SELECT dlock_unlock('$name')");
	$bg->quit;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM dlock_locks WHERE name = '$name' AND scope = 'detached' AND granted")
	  or die 'the waited lock was not granted';
	$waiter->quit;
	return;
}

# some held by the lock holder, one by a waiter (it had to wait for a session)
sub take_some
{
	my ($tag) = @_;
	my @tokens;
	for my $i (1 .. 3)
	{
		push @tokens, $node->safe_psql('postgres', "SELECT dlock_acquire('$tag-$i', '1 hour')");
	}
	waited_lock("$tag-waited");
	push @tokens, $node->safe_psql('postgres',
		"SELECT token FROM dlock_locks WHERE name = '$tag-waited' AND scope = 'detached'");
	is(detached_count(), '4', "$tag: four detached locks held, the connections gone");
	is(processes('dlock waiter'), '1', "$tag: one held by a waiter process");
	return (sort { $a <=> $b } @tokens)[-1];
}

ok(holder_ready(), 'the lock holder runs');

# a clean restart
my $max = take_some('clean');
$node->restart;
ok(holder_ready(), 'the lock holder runs again after a restart');
is(detached_count(), '0', 'no detached lock after a restart');
is(count_of("SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"), '0', 'nothing in pg_locks');
is(processes('dlock waiter'), '0', 'no waiter process');
my $t = $node->safe_psql('postgres', "SELECT dlock_acquire('clean-1', '1 hour')");
cmp_ok($t, '>', $max, 'the first token after the restart is above every earlier one');
$node->safe_psql('postgres', "SELECT dlock_release('clean-1', $t)");

# a crash restart
$max = take_some('crash');
my $victim = $node->background_psql('postgres');
crash_via($node, $victim);
ok(holder_ready(), 'the lock holder runs again after a crash');
is(detached_count(), '0', 'no detached lock after a crash');
is(processes('dlock waiter'), '0', 'no waiter process after a crash');
$t = $node->safe_psql('postgres', "SELECT dlock_acquire('crash-1', '1 hour')");
cmp_ok($t, '>', $max, 'the first token after the crash is above every earlier one');

# the lock holder terminated: its locks go with it, and it comes back
my $holder = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock lock holder'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($holder)");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'dlock lock holder' AND pid <> $holder"),
	'a new lock holder starts');
is(detached_count(), '0', "the terminated holder's locks are gone");
is($node->safe_psql('postgres', "SELECT pg_try_advisory_lock(dlock_key('crash-1'))"),
	't', 'and free in the lock manager');
my $t2 = $node->safe_psql('postgres', "SELECT dlock_acquire('crash-2', '1 hour')");
cmp_ok($t2, '>', $t, 'the new holder hands out larger tokens');
my ($rc, $out, $err) = $node->psql('postgres', "SELECT dlock_release('crash-1', $t)");
like($err, qr/not held with token/, 'a lock of the old holder is not held any more');

# a waiter terminated while it holds: that lock goes, the rest stays
waited_lock('w-term');
my $wpid = $node->safe_psql('postgres',
	"SELECT pid FROM dlock_locks WHERE name = 'w-term' AND scope = 'detached'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($wpid)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM dlock_locks WHERE name = 'w-term'"),
	"a terminated waiter's lock is released");
is(detached_count(), '1', "the lock holder's lock is still there");
is($node->safe_psql('postgres', "SELECT pg_try_advisory_lock(dlock_key('w-term'))"), 't', 'the name is free');

# a waiter terminated while it waits: the caller gets an error, nothing stays
my $bg = $node->background_psql('postgres');
$bg->query_safe("SELECT dlock_try('w-wait')");
my $w = $node->background_psql('postgres', on_error_stop => 0);
$w->query_safe('\\set VERBOSITY verbose');
$w->query_until(qr/started/,
	"\\echo started\nSELECT dlock_acquire('w-wait', '1 hour', timeout => '1 min');\n\\echo done\n");
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM dlock_names() WHERE name = 'w-wait' AND waiting = 'detached'")
  or die 'the waiter did not queue';
$wpid = $node->safe_psql('postgres',
	"SELECT pid FROM dlock_names() WHERE name = 'w-wait' AND waiting = 'detached'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($wpid)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'dlock waiter'"),
	'the waiter is gone');
$w->query_until(qr/done/, "");
like($w->{stderr}, qr/57P01: the dlock waiter process exited while waiting/, 'the caller is told (57P01)');
$w->quit;
is(count_of("SELECT 1 FROM dlock_locks WHERE name = 'w-wait' AND scope = 'detached'"),
	'0', 'nothing left of the wait');
$bg->quit;

# a standby refuses it
my $standby = dlock_standby($node, 'detached_standby');
like(sqlstate_error($standby, "SELECT dlock_acquire('s', '1 min')"),
	qr/25006/, 'dlock_acquire on a standby: 25006');
is($standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dlock lock holder'"),
	'0', 'no lock holder on a standby');

$standby->stop;

# the limits: dlock.max_detached_locks held by the lock holder (53400), no
# background worker slot for a wait (53000), detached locks turned off (55000)
$node->append_conf('postgresql.conf',
	"dlock.max_detached_locks = 2\ndlock.max_detached_locks_per_role = 2\nmax_worker_processes = 4\n");
$node->restart;
ok(holder_ready(), 'the lock holder runs');
$node->safe_psql('postgres', "SELECT dlock_acquire('limit-$_', '1 hour')") for 1 .. 2;
like(sqlstate_error($node, "SELECT dlock_acquire('limit-3', '1 hour')"),
	qr/53400: cannot acquire detached lock "limit-3": the lock holder holds dlock.max_detached_locks \(2\) locks/,
	'the third: 53400');
like(sqlstate_error($node, "SELECT dlock_acquire('limit-1', '1 hour', timeout => '1 s')"),
	qr/53400/, 'also one that would have waited');
$node->safe_psql('postgres',
	"SELECT dlock_release(name, token) FROM dlock_locks WHERE name = 'limit-2'");
is($node->safe_psql('postgres', "SELECT dlock_acquire('limit-3', '1 hour') IS NOT NULL"),
	't', 'room again after a release');
# max_worker_processes = 4: the reaper, the lock holder, the logical
# replication launcher and one waiter
$node->safe_psql('postgres',
	"SELECT dlock_release(name, token) FROM dlock_locks WHERE name = 'limit-3'");
waited_lock('slot-1');
# (1.6) the first in line waits up to a second for a slot, within its timeout
is($node->safe_psql('postgres',
		"SELECT dlock_try('slot-2'); SELECT dlock_acquire('slot-2', '1 hour', timeout => '300 ms') IS NULL"),
	"t\nt", 'no worker slot within a timeout under a second: NULL');
like(sqlstate_error($node, "SELECT dlock_try('slot-2'); SELECT dlock_acquire('slot-2', '1 hour', timeout => '10 s')"),
	qr/53000: cannot wait for detached lock "slot-2": no background worker slot is free/,
	'no worker slot for a second wait, for a second: 53000');
is(count_of("SELECT 1 FROM dlock_locks WHERE name = 'slot-2'"), '0', 'nothing left of it');
$node->safe_psql('postgres',
	"SELECT dlock_release(name, token) FROM dlock_locks WHERE name = 'slot-1'");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'dlock waiter'"),
	'the waiter exits on release');
my $s2 = $node->background_psql('postgres');
$s2->query_safe("SELECT dlock_try('slot-3')");
is($node->safe_psql('postgres', "SELECT dlock_acquire('slot-3', '1 hour', timeout => '100 ms') IS NULL"),
	't', 'the slot is free again: a wait that times out');
$s2->quit;

# PostgreSQL's lock table full: the lock holder answers the error (53200,
# with its hint), records nothing, and goes on
$node->append_conf('postgresql.conf',
	"dlock.max_detached_locks = 20000\ndlock.max_detached_locks_per_role = -1\nmax_locks_per_transaction = 10\n");
$node->restart;
ok(holder_ready(), 'the lock holder runs');
# (new connections fail too while it is full: everything runs in one session)
my $script = join('', map { "SELECT dlock_acquire('full-$_', '1 hour');\n" } 1 .. 20000)
  . "\\echo ==\n"
  . "SELECT count(*) FROM dlock_names() WHERE detached;\n"
  . "SELECT count(dlock_release(name, token)) FROM dlock_names() WHERE detached;\n";
($rc, $out, $err) =
  $node->psql('postgres', "\\set VERBOSITY verbose\n$script", on_error_stop => 0);
my ($tokens, $after) = split /^==$/m, $out;
my $taken = () = $tokens =~ /^\d+$/mg;
like($err, qr/53200: out of shared memory/, "the lock table fills up after $taken detached locks: 53200");
like($err, qr/HINT:  You might need to increase "?max_locks_per_transaction"?/, 'with its hint');
my (undef, $held, $released) = split /\n/, $after;
is($held, $taken, 'exactly the acquisitions that were answered with a token are held');
is($released, $taken, 'and all of them are released');
is(detached_count(), '0', 'none left');
is(processes('dlock lock holder'), '1', 'the lock holder is still there');
$t = $node->safe_psql('postgres', "SELECT dlock_acquire('after-full', '1 hour')");
ok($t > 0, 'and taking a lock works again');

$node->append_conf('postgresql.conf', "dlock.max_detached_locks = 0\n");
$node->restart;
is(processes('dlock lock holder'), '0', 'max_detached_locks = 0: no lock holder');
like(sqlstate_error($node, "SELECT dlock_acquire('off', '1 hour')"),
	qr/55000: cannot acquire detached lock "off": detached locks are turned off/,
	'and dlock_acquire says so (55000)');
$node->stop;
done_testing();
