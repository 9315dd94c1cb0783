# pg_upgrade makes a new cluster (another system identifier) on timeline 1,
# without the token file.  With the old cluster's file copied in, by the
# command in doc/upgrades.md ("Upgrading with pg_upgrade"), the new cluster's
# tokens go on above every token of the old one, also after a restart, and a
# standby copied from the new cluster before its first start (the rsync
# method) goes on above it when promoted.  (pg_upgrade itself needs two majors side by side; a
# fresh cluster stands in for its output: a new system, on timeline 1.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

# the old cluster has failed over twice: timeline 3
my $old = dlock_node('upgrade_old');
$old->stop;
command_ok([ 'pg_resetwal', '-l', sprintf('%08X%08X%08X', 3, 1, 0), $old->data_dir ],
	'old cluster on timeline 3');
$old->start;
my @old_tokens = new_tokens($old, 'old', 5);
$old->stop;
my ($old_max) = sort { $b <=> $a } @old_tokens;
is(int($old_max / $SPAN), 3, 'the old cluster hands out tokens of timeline 3');

my $new = dlock_primary('upgrade_new');
$new->stop;
isnt(sysid($new), sysid($old), 'the new cluster is another system');

# the manual's command, while both are stopped
readme_upgrade_command($old, $new);

# a standby copied from the new cluster before its first start, as the
# rsync method of pg_upgrade's documentation does
$new->backup_fs_cold('upgrade_cold');
my $off = -s $new->logfile;
$new->start;
my $standby = PostgreSQL::Test::Cluster->new('upgrade_standby');
$standby->init_from_backup($new, 'upgrade_cold', has_streaming => 1);
$standby->start;
catch_up($new, $standby);

my @new_tokens = new_tokens($new, 'new', 5);
cmp_ok($new_tokens[0], '>', $old_max, 'the new cluster\'s tokens are above every token of the old one');
is(int($new_tokens[0] / $SPAN), 4, 'on token timeline 4: its timeline 1 plus the old 3');
ok($new->log_contains(qr/file "pg_dlock_tokens" comes from another cluster; fencing tokens go on above its tokens/, $off),
	'the log says so');
$new->restart;
my ($after_restart) = new_tokens($new, 'restarted', 1);
cmp_ok($after_restart, '>', $new_tokens[-1], 'after a restart: above its earlier tokens');
is(int($after_restart / $SPAN), 4, 'still token timeline 4 (the offset is kept in the file)');

# failover of the new cluster to that standby
push @new_tokens, $after_restart;
$new->stop('immediate');
promote_node($standby);
my @promoted = new_tokens($standby, 'promoted', 3);
my ($new_max) = sort { $b <=> $a } @new_tokens;
cmp_ok($promoted[0], '>', $new_max, 'its promoted standby\'s tokens are above all of them');
is(int($promoted[0] / $SPAN), 5, 'on token timeline 5: its timeline 2 plus the old 3');

$standby->stop;
done_testing();

sub sysid
{
	my ($node) = @_;
	my ($stdout) = run_command([ 'pg_controldata', $node->data_dir ]);
	return $stdout =~ /Database system identifier:\s+(\d+)/ ? $1 : die 'no system identifier';
}
