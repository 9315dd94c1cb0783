# The primary restarted after the standby's base backup: its token file
# moved ahead of the copy the standby has.  After the primary is killed and
# the standby promoted, the new primary's tokens are still above every token
# the old one handed out (with tokens counted per data directory, as in 1.0,
# they would have started below them).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $primary = dlock_primary('restarted_primary', conf => ['dlock.token_reserve = 1000']);
my @old = new_tokens($primary, 'a', 3);
my $standby = dlock_standby($primary, 'restarted_standby');
my $copied = token_ceiling($standby);
is($copied, token_ceiling($primary), 'the standby has a copy of the token file');

$primary->restart;
push @old, new_tokens($primary, 'b', 3);
cmp_ok(token_ceiling($primary), '>', $copied, "the primary's token file moved ahead of the standby's copy");
cmp_ok($old[-1], '>=', $copied, "the primary hands out tokens above the standby's copy");

$primary->stop('immediate');
promote_node($standby);
my @new = new_tokens($standby, 'c', 3);
my ($old_max) = sort { $b <=> $a } @old;
cmp_ok($new[0], '>', $old_max, 'the first token of the new primary is above every token of the old one');
ok((!grep { $new[$_] <= $new[ $_ - 1 ] } 1 .. $#new), 'and they increase');

$standby->stop;
done_testing();
