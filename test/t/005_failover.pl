# Failover with asynchronous streaming replication: the primary is killed,
# its standby is promoted, and every token the new primary hands out is
# above every token the old one handed out, before and after the standby's
# base backup.  A token is timeline * 10^13 + a counter of that timeline.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

# small reservations, so that the old primary's tokens pass the ceiling in the
# standby's copy of the token file
my $primary = dlock_primary('failover_primary', conf => ['dlock.token_reserve = 10']);
my @old = new_tokens($primary, 'before-backup', 5);
is(int($old[0] / $SPAN), 1, 'the first primary hands out tokens of timeline 1');
# (the standby's end-of-recovery checkpoint is spread over most of an hour and
# has dirty pages to write, the table below, replayed after the base backup,
# which no background writer writes first: so it is still running when the
# tokens below are taken)
my $standby = dlock_standby($primary, 'failover_standby',
	'checkpoint_timeout = 1h', 'checkpoint_completion_target = 0.9',
	'bgwriter_lru_maxpages = 0');
$primary->safe_psql('postgres',
	"CREATE TABLE dirty AS SELECT g, repeat('x', 100) AS pad FROM generate_series(1, 20000) g");
catch_up($primary, $standby);
is($primary->safe_psql('postgres', "SELECT setting FROM pg_settings WHERE name = 'synchronous_standby_names'"),
	'', 'replication is asynchronous');
push @old, new_tokens($primary, 'after-backup', 15);

$primary->stop('immediate');

# No checkpoint completes through the promotion (above), so the control file
# still names the old timeline: tokens must follow the timeline WAL is
# written on, not the last checkpoint's.  (Stopping the checkpointer instead
# no longer works on 19, whose promotion waits for every process to answer a
# signal barrier.)
promote_node($standby);
is($standby->safe_psql('postgres', 'SELECT timeline_id FROM pg_control_checkpoint()'),
	'1', 'promoted, and no checkpoint yet: the control file still says timeline 1');
my @new = new_tokens($standby, 'promoted', 5);
my ($old_max) = sort { $b <=> $a } @old;
my ($new_min) = sort { $a <=> $b } @new;
cmp_ok($new_min, '>', $old_max, 'every token of the new primary is above every token of the old one');
is(int($new_min / $SPAN), 2, 'the new primary hands out tokens of timeline 2');
is(timeline_of($standby),
	'2', 'which is the timeline it writes on');

# and they keep going up across a restart of the new primary
$standby->restart;
my ($after) = new_tokens($standby, 'restarted', 1);
cmp_ok($after, '>', $new[-1], 'after a restart of the new primary, above its earlier tokens');
is(int($after / $SPAN), 2, 'still timeline 2');

$standby->stop;
done_testing();
