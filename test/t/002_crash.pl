# Crash restarts and token reservations.  A holder killed with SIGKILL makes
# the postmaster restart every process: its locks are gone, no stale name is
# left, the reaper is back, and tokens resume above every one handed out.
# With a small dlock.token_reserve the ceiling on disk is renewed as tokens
# are used, always above the last token given; when it cannot be written,
# locking goes on without tokens (and the log says why) rather than hand out
# one that could repeat; and tokens after that, and after a crash, are above
# every earlier one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node = dlock_node('crash');

# a holder killed: crash restart
my $bg = $node->background_psql('postgres');
$bg->query_safe("SELECT dlock_try('crash', lease => '1 hour')");
my $before = $bg->query_safe("SELECT dlock_token('crash')");
crash_via($node, $bg);
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'dlock lease reaper'"),
	'the reaper is back after the crash');
is($node->safe_psql('postgres', 'SELECT count(*) FROM dlock_names()'),
	'0', 'no names survive the crash');
my $after = take_token($node, 'crash');
cmp_ok($after, '>', $before, 'token after the crash is above the one before');

# small reservations
$node->safe_psql('postgres', 'ALTER SYSTEM SET dlock.token_reserve = 3');
$node->restart;
is($node->safe_psql('postgres', 'SHOW dlock.token_reserve'), '3', 'setting in effect');
my @tokens;
for my $i (1 .. 10)
{
	my $t = take_token($node, 'reserve');
	my $c = token_ceiling($node);
	ok($t < $c && $c <= $t + 3, "token $t below the ceiling on disk $c, by at most 3");
	push @tokens, $t;
}
ok((!grep { $tokens[$_] <= $tokens[ $_ - 1 ] } 1 .. $#tokens), 'tokens increase');

# the next reservation cannot be written
my $tmp = $node->data_dir . '/pg_dlock_tokens.tmp';
mkdir $tmp or die "mkdir $tmp: $!";
my $off = -s $node->logfile;
my $refused = 0;
for my $i (1 .. 5)
{
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT dlock_try('reserve'); SELECT dlock_token('reserve');");
	my @lines = split /\n/, $out;
	is($lines[0], 't', 'locking works while tokens cannot be reserved');
	if ($err =~ /lock "reserve" has no fencing token/) { $refused++; }
	elsif ($rc == 0) { push @tokens, $lines[-1]; }
	else { fail("unexpected error: $err"); }
}
cmp_ok($refused, '>=', 2, 'acquisitions without a token while the file cannot be written');
ok($node->log_contains(qr/could not create file "pg_dlock_tokens\.tmp"/, $off),
	'the log says why');
rmdir $tmp or die "rmdir $tmp: $!";
my ($max) = sort { $b <=> $a } @tokens;
my $t = take_token($node, 'reserve');
cmp_ok($t, '>', $max, 'writable again: the token is above every earlier one');

# and a crash resumes above them too
$bg = $node->background_psql('postgres');
crash_via($node, $bg);
cmp_ok(take_token($node, 'reserve'), '>', $t, 'after a crash, above every earlier token');

$node->stop;
done_testing();
