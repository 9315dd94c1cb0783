# Clean restarts and the lease reaper's own life: fencing tokens go on
# increasing across a restart, and the reaper, when it dies, is started again
# by the postmaster, survives a configuration reload, and enforces leases
# afterwards (the holder's session is ended, the log says so, the lock is free).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node = dlock_node('restart');

# tokens across a clean restart
my $before = take_token($node, 'tok');
$node->restart;
my $after = take_token($node, 'tok');
cmp_ok($after, '>', $before, 'token after a clean restart is above the one before');

# the reaper dies (as at a shutdown signal) and comes back
my $rp = reaper_pid($node);
like($rp, qr/^\d+$/, 'the reaper runs');
kill 'TERM', $rp;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 AND min(pid) <> $rp FROM pg_stat_activity WHERE backend_type = 'dlock lease reaper'"),
	'the postmaster starts a new reaper');
$rp = reaper_pid($node);
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
sleep 1;
is(reaper_pid($node), $rp, 'the reaper survives a configuration reload');

# and it enforces a lease again
my $holder = $node->background_psql('postgres');
my $pid = $holder->query_safe('SELECT pg_backend_pid()');
my $off = -s $node->logfile;
is($holder->query_safe("SELECT dlock_try('after-reaper-restart', lease => '1s')"),
	't', 'holder takes the lock with a 1 s lease');
$node->wait_for_log(
	qr/lease of lock "after-reaper-restart" expired, terminating process $pid/, $off);
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
	'the holder session is gone');
eval { $holder->quit };
is($node->safe_psql('postgres', "SELECT dlock_try('after-reaper-restart')"),
	't', 'the lock is free again');

$node->stop;
done_testing();
