# Split brain: the standby is promoted while the old primary still runs and
# still hands out tokens.  Every token the old primary hands out after the
# promotion, also after it restarts, stays below every token of the new
# primary, so a resource that has seen a new-primary token refuses the old
# primary's holders.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $old = dlock_primary('split_old');
my $new = dlock_standby($old, 'split_new');
my @from_old = new_tokens($old, 'before', 3);
promote_node($new);

my @from_new;
for my $round (1 .. 5)
{
	push @from_new, new_tokens($new, "n$round-", 2);
	push @from_old, new_tokens($old, "o$round-", 2);
}
$old->restart;
push @from_old, new_tokens($old, 'after-restart', 2);
$old->safe_psql('postgres', 'SELECT pg_switch_wal()');
push @from_old, new_tokens($old, 'after-switch', 2);

my ($old_max) = sort { $b <=> $a } @from_old;
my ($new_min) = sort { $a <=> $b } @from_new;
cmp_ok($old_max, '<', $new_min,
	'every token of the old primary, before the promotion and while both run, is below every token of the new one');
is(int($old_max / $SPAN), 1, 'the old primary stays on timeline 1');
is(int($new_min / $SPAN), 2, 'the new primary is on timeline 2');

# a resource fencing on tokens: it keeps the highest it saw and refuses lower ones
my $highest = 0;
my @accepted;
for my $t (@from_new[0 .. 1], @from_old)
{
	if ($t >= $highest) { $highest = $t; push @accepted, $t; }
}
is_deeply(\@accepted, [ @from_new[0 .. 1] ],
	"a resource that saw the new primary's tokens refuses every holder of the old one");

$old->stop;
$new->stop;
done_testing();
