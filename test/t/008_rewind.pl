# Failover and back: A is the primary and B its standby; B is promoted
# (timeline 2); A is rewound with pg_rewind and follows B; then B is lost and
# A is promoted again (timeline 3).  Each new primary's tokens are above
# every token handed out before, on either node.
use strict;
use warnings;

use File::Copy;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node_a = dlock_primary('rewind_a', conf => ['wal_keep_size = 64MB', 'dlock.token_reserve = 10']);
my $node_b = dlock_standby($node_a, 'rewind_b');
my @seen = new_tokens($node_a, 'a1-', 3);

# first failover: A is stopped, B promoted; A hands out more tokens on its
# own timeline before it is stopped (it did not know yet)
$node_b->promote;
$node_b->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die;
push @seen, new_tokens($node_a, 'a2-', 15);
$node_a->safe_psql('postgres', 'CREATE TABLE diverged AS SELECT 1 AS x');
$node_a->stop('fast');
my @on_b = new_tokens($node_b, 'b1-', 3);
$node_b->safe_psql('postgres', 'CHECKPOINT');	# its control file shows timeline 2
my ($max) = sort { $b <=> $a } @seen;
cmp_ok($on_b[0], '>', $max, "B's tokens after its promotion are above all of A's");
is(int($on_b[0] / $SPAN), 2, 'B hands out tokens of timeline 2');
push @seen, @on_b;

# A is rewound to B's timeline and follows it (pg_rewind copies the
# configuration too: A keeps its own)
my $conf = $node_a->data_dir . '/postgresql.conf';
my $keep = $PostgreSQL::Test::Utils::tmp_check . '/rewind_a.conf';
copy($conf, $keep) or die "copy: $!";
command_ok(
	[ 'pg_rewind', '--target-pgdata' => $node_a->data_dir,
	  '--source-server' => $node_b->connstr('postgres') ],
	'pg_rewind of A from B');
move($keep, $conf) or die "move: $!";
$node_a->enable_streaming($node_b);
$node_a->start;
push @seen, new_tokens($node_b, 'b2-', 3);
catch_up($node_b, $node_a);
is($node_a->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'A follows B');

# second failover, back to A
$node_b->stop('immediate');
$node_a->promote;
$node_a->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die;
my @on_a = new_tokens($node_a, 'a3-', 3);
($max) = sort { $b <=> $a } @seen;
cmp_ok($on_a[0], '>', $max, "A's tokens after failing back are above every earlier token");
is(int($on_a[0] / $SPAN), 3, 'A hands out tokens of timeline 3');

$node_a->stop;
done_testing();
