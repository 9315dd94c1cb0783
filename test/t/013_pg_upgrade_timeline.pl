# pg_upgrade starts the new cluster on timeline 1 without the token file.
# The commands of README.md ("Upgrading with pg_upgrade") copy the file and
# move the new cluster to the timeline after the old one's: its tokens are
# then above every token of the old cluster.  With the file copied but the
# timeline not moved, tokens are refused with a clear log line instead of
# repeating old ones.  (pg_upgrade itself needs two majors side by side; a
# fresh cluster stands in for its output, which is on timeline 1 too.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;
use File::Copy;

# the old cluster has failed over twice: timeline 3
my $old = dlock_node('upgrade_old');
$old->stop;
command_ok([ 'pg_resetwal', '-l', sprintf('%08X%08X%08X', 3, 1, 0), $old->data_dir ],
	'old cluster on timeline 3');
$old->start;
my @old_tokens = new_tokens($old, 'old', 5);
$old->stop;

my $new = dlock_node('upgrade_new');
$new->stop;

# the file copied, the timeline not moved
copy($old->data_dir . '/pg_dlock_tokens', $new->data_dir . '/pg_dlock_tokens') or die "copy: $!";
my $off = -s $new->logfile;
$new->start;
like(sqlstate_error($new, "SELECT dlock_try('x'); SELECT dlock_token('x')"),
	qr/lock "x" has no fencing token/, 'file copied, timeline not moved: no tokens');
ok($new->log_contains(
		qr/file "pg_dlock_tokens" holds fencing tokens of timeline 3, later than this server's timeline 1.*\n.*\n.*HINT:  After pg_upgrade, move the new cluster to a later timeline before its first start/,
		$off),
	'the log says why and what to do');
$new->stop;

# the README's commands
my $readme = slurp_file('README.md');
my ($commands) = $readme =~ /### Upgrading with pg_upgrade\n.*?```sh\n(.*?)```/s
  or die 'no commands in README.md';
$ENV{OLD} = $old->data_dir;
$ENV{NEW} = $new->data_dir;
command_ok([ 'bash', '-e', '-c', $commands ], "README.md's commands after pg_upgrade");
$new->start;
is(timeline_of($new), 4, 'the new cluster is on timeline 4');
my @new_tokens = new_tokens($new, 'new', 5);
my ($old_max) = sort { $b <=> $a } @old_tokens;
cmp_ok($new_tokens[0], '>', $old_max, "its tokens are above every token of the old cluster");
$new->stop;
done_testing();
