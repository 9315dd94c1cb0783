# The limits of the token layout (timeline * 10^13 + counter):
#  - a token file left by dlock 1.0 (tokens counted from 1, jumping 2^30 at
#    every start): every new token is above every 1.0 token;
#  - a timeline's counter used up: no token (a clear error), never a wrap
#    into the next timeline's range; locking goes on;
#  - the largest timeline tokens have room for (922336) works; the next one
#    gives no tokens, with a clear error.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node = dlock_node('limits', 'dlock.token_reserve = 1');
$node->stop;

sub first_token_with_file
{
	my ($ceiling) = @_;
	write_token_file($node, $ceiling);
	$node->start;
	my ($t) = new_tokens($node, "file$ceiling-", 1);
	$node->stop;
	return $t;
}

# a 1.0 server restarted five times handed out tokens below 5 * 2^30 + 1
my $t = first_token_with_file(5 * 2**30 + 1);
is($t, $SPAN + 1, "after a 1.0 token file: the first token of timeline 1, $t, above 1.0's ceiling");
# one that handed out more than 10^13: tokens go on above them
is(first_token_with_file($SPAN + 500), $SPAN + 500, 'a 1.0 ceiling above 10^13: tokens resume above it');

# the counter of timeline 1 used up
write_token_file($node, 2 * $SPAN - 3);
$node->start;
my $s = $node->background_psql('postgres');
my @last;
for my $i (1 .. 3)
{
	is($s->query_safe("SELECT dlock_try('end$i')"), 't', "lock end$i");
	push @last, $s->query_safe("SELECT dlock_token('end$i')");
}
is_deeply(\@last, [ 2 * $SPAN - 3, 2 * $SPAN - 2, 2 * $SPAN - 1 ], "the last tokens of timeline 1");
my $off = -s $node->logfile;
is($s->query_safe("SELECT dlock_try('end4')"), 't', 'locking goes on after the last token');
like(
	sqlstate_error($node, "SELECT dlock_try('end5'); SELECT dlock_token('end5')"),
	qr/ERROR:  55000: lock "end5" has no fencing token\nDETAIL:  The fencing tokens of timeline 1 are used up\.\nHINT:  Tokens go on after the server moves to a new timeline \(a promotion or a point-in-time recovery\)\./,
	'dlock_token: used up, a clear error');
ok($node->log_contains(qr/fencing tokens of timeline 1 are used up/, $off), 'the log says so');
is($node->safe_psql('postgres', "SELECT count(*) FROM dlock_locks WHERE token >= 2 * 10000000000000"),
	'0', 'no token in the next timeline\'s range');
$s->quit;
$node->stop;
is(token_ceiling($node), 2 * $SPAN, 'the ceiling on disk stops at the end of the timeline');

# a file with tokens of a later timeline (copied, or pg_upgrade: 013)
write_token_file($node, 3 * $SPAN + 5);
$off = -s $node->logfile;
$node->start;
like(sqlstate_error($node, "SELECT dlock_try('beyond'); SELECT dlock_token('beyond')"),
	qr/ERROR:  55000: lock "beyond" has no fencing token\nDETAIL:  File "pg_dlock_tokens" holds tokens of a later timeline than this server's \(1\); the server log says more\./,
	'a file with tokens of a later timeline: no tokens, a clear error');
ok($node->log_contains(qr/file "pg_dlock_tokens" holds fencing tokens of timeline 3, later than this server's timeline 1/, $off),
	'the log says which timeline');
$node->stop;

# exactly at the end of timeline 1: used up, and the log says up to where
write_token_file($node, 2 * $SPAN);
$off = -s $node->logfile;
$node->start;
like(sqlstate_error($node, "SELECT dlock_try('at-end'); SELECT dlock_token('at-end')"),
	qr/The fencing tokens of timeline 1 are used up/, 'a file at the end of the timeline: used up');
ok($node->log_contains(qr/fencing tokens of timeline 1 are used up\n.*DETAIL:  File "pg_dlock_tokens" says tokens up to 19999999999999 may have been handed out, the last token of timeline 1\./, $off),
	'the log says up to which token');
$node->stop;
unlink $node->data_dir . '/pg_dlock_tokens';

# the largest timeline tokens have room for, and the one after it
# (pg_resetwal -l sets the timeline from a WAL file name)
sub to_timeline
{
	my ($tli) = @_;
	command_ok([ 'pg_resetwal', '-l', sprintf('%08X%08X%08X', $tli, 1, 0), $node->data_dir ],
		"pg_resetwal to timeline $tli");
	$node->start;
	is(timeline_of($node), $tli, "the server writes on timeline $tli");
	return;
}
to_timeline(922336);
is($node->safe_psql('postgres', "SELECT dlock_try('top'); SELECT dlock_token('top')"),
	"t\n9223360000000000001", 'timeline 922336: its first token, 9223360000000000001');
$node->stop;
$off = -s $node->logfile;
to_timeline(922337);
like(sqlstate_error($node, "SELECT dlock_try('over'); SELECT dlock_token('over')"),
	qr/ERROR:  55000: lock "over" has no fencing token\nDETAIL:  Fencing tokens are on timeline 922337; they have room for timelines up to 922336\./,
	'timeline 922337: no tokens, a clear error');
ok($node->log_contains(qr/fencing tokens are not available on timeline 922337\n.*DETAIL:  Tokens have room for timelines up to 922336\./, $off),
	'the log says so');
is($node->safe_psql('postgres', "SELECT dlock_try('over')"), 't', 'locking works');
$node->stop;
done_testing();
