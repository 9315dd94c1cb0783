# The token file of a primary holds its timeline from its start or promotion
# on, even if it never hands out a token: A hands out tokens on timeline 1;
# a switchover to B (timeline 2), which hands out tokens; a switchover back
# to A (timeline 3), which hands out none; then A is upgraded with
# pg_upgrade and its file copied as doc/upgrades.md says.  The new cluster's
# tokens are above B's.  (Had A's file still been the one of its timeline-1
# days, the new cluster would have gone on above timeline 1 only, and
# repeated B's tokens.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node_a = dlock_primary('switch_a');
my $node_b = dlock_standby($node_a, 'switch_b');
my @seen = new_tokens($node_a, 'a', 3);

# switchover to B: A stops cleanly and follows B
$node_a->stop('fast');
promote_node($node_b);
push @seen, new_tokens($node_b, 'b', 3);
is(int($seen[-1] / $SPAN), 2, 'B hands out tokens of timeline 2');
$node_a->enable_streaming($node_b);
$node_a->start;
catch_up($node_b, $node_a);

# switchover back to A, which takes no lock at all
$node_b->stop('fast');
promote_node($node_a);
ok(poll_until(sub { token_ceiling($node_a) > 3 * $SPAN }),
	"A's token file holds timeline 3 soon after its promotion, without a lock taken");
$node_a->stop;

# pg_upgrade of A: a new cluster, with A's file copied by the manual's command
my $new = dlock_node('switch_new');
$new->stop;
readme_upgrade_command($node_a, $new);
$new->start;
my @new = new_tokens($new, 'new', 3);
my ($max) = sort { $b <=> $a } @seen;
cmp_ok($new[0], '>', $max, "the new cluster's tokens are above B's");
is(int($new[0] / $SPAN), 4, 'on token timeline 4: its timeline 1 plus A\'s 3');
$new->stop;
done_testing();

# poll a Perl condition for up to 30 s
sub poll_until
{
	my ($cond) = @_;
	for (1 .. 300)
	{
		return 1 if $cond->();
		select(undef, undef, undef, 0.1);
	}
	return 0;
}
