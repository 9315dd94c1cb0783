# dlock_stats across server lives: kept across a clean restart (the file is
# written at shutdown and removed once read), dropped after a crash and after
# an immediate shutdown (both are crash recovery); a lower dlock.max_stats
# keeps what fits; a standby keeps its own statistics.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node = dlock_node('stats', 'max_prepared_transactions = 2');
my $file = $node->data_dir . '/pg_stat/dlock.stat';

sub counts
{
	my ($name) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce((SELECT acquisitions || '/' || released || '/' || timeouts FROM dlock_stats WHERE name = '$name' AND mode = 'exclusive'), 'none')");
}

# some history: 3 acquisitions, 3 releases and a timeout
$node->safe_psql('postgres', q{
	SELECT dlock_try('kept'), dlock_unlock('kept');
	SELECT dlock_try('kept'), dlock_unlock('kept');
	SELECT dlock_try('kept'), dlock_unlock('kept');
});
my $holder = $node->background_psql('postgres');
$holder->query_safe("SELECT dlock_try('kept', shared => true)");
$node->safe_psql('postgres', "SELECT dlock_lock('kept', timeout => '0.1 s')");
$holder->quit;
is(counts('kept'), '3/3/1', 'counted before the restart');
my $info = $node->safe_psql('postgres', 'SELECT stats_reset FROM dlock_stats_info');

# holds that end with the session are counted; one released behind dlock's
# back (pg_advisory_unlock_all) is not: nobody knows when it ended
my $s = $node->background_psql('postgres');
$s->query_safe("SELECT dlock_try('exit-held'), dlock_try('exit-stale')");
$s->query_safe("SELECT pg_sleep(0.2)");
$s->query_safe("SELECT pg_advisory_unlock_all()");
$s->query_safe("SELECT dlock_try('exit-held', shared => true)");
$s->query_safe("BEGIN; SELECT dlock_try_xact('exit-in-xact')");
$s->quit;
is($node->safe_psql('postgres', q{
	SELECT string_agg(name || ' ' || mode || ' ' || acquisitions || '/' || released, ', ' ORDER BY name, mode)
	  FROM dlock_stats WHERE name LIKE 'exit-%'}),
	'exit-held exclusive 1/0, exit-held shared 1/1, exit-in-xact exclusive 1/1, exit-stale exclusive 1/0',
	'holds ended by the session\'s exit counted; those released behind dlock\'s back not');
# PREPARE TRANSACTION hands the lock to the prepared transaction: the
# session's hold ends there
$node->safe_psql('postgres', q{
	BEGIN; SELECT dlock_try_xact('prepared'); PREPARE TRANSACTION 'p1';});
is(counts('prepared'), '1/1/0', 'a hold passed on at PREPARE ends there');
$node->safe_psql('postgres', "COMMIT PREPARED 'p1'");

# an operator's override (1.6) is counted, and kept with the rest
my $token = $node->safe_psql('postgres', "SELECT dlock_acquire('forced', '1 min', min_hold => '1 hour')");
$node->safe_psql('postgres', "SELECT dlock_force_release('forced', $token)");
my $forced = "SELECT acquisitions || '/' || released || '/' || force_released FROM dlock_stats WHERE name = 'forced'";
is($node->safe_psql('postgres', $forced), '1/1/1', 'an override counted');

# a clean (fast) restart keeps them, and their reset time
$node->restart;
is(counts('kept'), '3/3/1', 'kept across a clean restart');
is($node->safe_psql('postgres', $forced), '1/1/1', 'the count of overrides too');
is($node->safe_psql('postgres', 'SELECT stats_reset FROM dlock_stats_info'), $info,
	'the reset time too');
ok(!-e $file, 'the file is removed once read');
is($node->safe_psql('postgres', "SELECT acquisitions FROM dlock_stats WHERE name = 'kept' AND mode = 'shared'"),
	'1', 'the shared mode has its own row');

# a smart shutdown too
$node->stop('smart');
ok(-e $file, 'a smart shutdown writes the file');
$node->start;
is(counts('kept'), '3/3/1', 'kept across a smart shutdown');

# a crash: every process ends, shared memory starts over, and so do the statistics
my $bg = $node->background_psql('postgres');
crash_via($node, $bg);
is(counts('kept'), 'none', 'gone after a crash');
$node->safe_psql('postgres', "SELECT dlock_try('after-crash'), dlock_unlock('after-crash')");
is(counts('after-crash'), '1/1/0', 'counting again after the crash');

# an immediate shutdown is crash recovery at the next start: nothing kept
$node->stop('immediate');
ok(!-e $file, 'an immediate shutdown writes no file');
$node->start;
is(counts('after-crash'), 'none', 'gone after an immediate shutdown');

# a lower bound keeps what fits: 300 names, then dlock.max_stats = 100
$node->safe_psql('postgres',
	"SELECT count(dlock_try('n-' || g) AND dlock_unlock('n-' || g)) FROM generate_series(1, 300) g");
is($node->safe_psql('postgres', 'SELECT entries FROM dlock_stats_info'), '300', '300 names counted');
$node->append_conf('postgresql.conf', "dlock.max_stats = 100\n");
$node->restart;
my ($entries, $max) = split /\|/,
  $node->safe_psql('postgres', 'SELECT entries, max_entries FROM dlock_stats_info');
is($max, 128, 'dlock.max_stats 100: 128 entries (rounded up to 32 parts of 4)');
cmp_ok($entries, '<=', $max, 'what was read back fits the new bound');
cmp_ok($entries, '>', 0, 'and something was kept');
# and the bound holds under new names, counting evictions
$node->safe_psql('postgres',
	"SELECT count(dlock_try('m-' || g) AND dlock_unlock('m-' || g)) FROM generate_series(1, 1000) g");
my ($entries2, $evictions) = split /\|/,
  $node->safe_psql('postgres', 'SELECT entries, evictions FROM dlock_stats_info');
cmp_ok($entries2, '<=', $max, 'never more than the bound');
cmp_ok($evictions, '>=', 1000 + $entries - $max, 'every name that did not fit evicted one');

# a file written by dlock 1.4 or 1.5 (records without their owner) is read
my ($dbid, $key) = split /\|/, $node->safe_psql('postgres',
	"SELECT oid, dlock_key('from-1.5') FROM pg_database WHERE datname = 'postgres'");
$node->stop;
{
	my $name = 'from-1.5';
	# DlockStatsRecord of version 1: dbid, mode, pad, namelen, key, 15
	# counters, last_acquired, usage, name[255], padded to 408 bytes
	my $rec = pack('V C C v q<', $dbid, 0, 0, length($name), $key)
	  . pack('q<15', 7, 0, 7, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0)
	  . pack('q< d<', 0, 1.0) . pack('a255', $name);
	$rec .= "\0" x (408 - length($rec));
	open(my $v1, '>:raw', $file) or die "cannot write $file: $!";
	print $v1 pack('V V q< q< l< x4', 0x444c5301, 408, 0, 0, 1), $rec;
	close $v1;
}
$node->start;
is($node->safe_psql('postgres', "SELECT acquisitions || '/' || released || '/' || force_released FROM dlock_stats WHERE name = 'from-1.5'"),
	'7/7/0', 'a statistics file of dlock 1.5 is read (no overrides in it)');

# a file that is not ours (another layout) is ignored, with a log line
$node->stop;
open(my $fh, '>', $file) or die "cannot write $file: $!";
print $fh 'not a dlock statistics file';
close $fh;
my $off = -s $node->logfile;
$node->start;
$node->wait_for_log(qr/ignoring dlock statistics file/, $off);
is($node->safe_psql('postgres', 'SELECT entries FROM dlock_stats_info'), '0',
	'a foreign file: empty statistics');
ok(!-e $file, 'and the file is removed');

$node->stop;
done_testing();
