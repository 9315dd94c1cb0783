# The token file damaged or unreadable: the server starts, locking works,
# dlock_token refuses with a clear error (no token that could repeat), and the
# log says what is wrong; with the file restored, tokens resume above the
# ones before.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node = dlock_node('token_file');
my $path = $node->data_dir . '/pg_dlock_tokens';
my $before = take_token($node, 'tok2');
$node->stop('fast');
my $good = slurp_file($path);

# restart with the file replaced, check, restore
sub with_file
{
	my ($what, $setup, $log_re) = @_;
	$setup->();
	my $off = -s $node->logfile;
	$node->start;
	is($node->safe_psql('postgres', "SELECT dlock_try('tok2')"),
		't', "$what: locking works");
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT dlock_try('tok2'); SELECT dlock_token('tok2');");
	like($err, qr/lock "tok2" has no fencing token/, "$what: no token, a clear error");
	ok($node->log_contains($log_re, $off), "$what: the log says so");
	my $lines = () = slurp_file($node->logfile, $off) =~ /$log_re/g;
	for my $i (1 .. 5)
	{
		# (waits for the last session's backend, which may still be exiting)
		($rc, $out, $err) = $node->psql('postgres',
			"SELECT dlock_lock('tok3', '10 s'); SELECT dlock_token('tok3');");
		like($err, qr/lock "tok3" has no fencing token/, "$what: no token for later locks either");
	}
	cmp_ok((() = slurp_file($node->logfile, $off) =~ /$log_re/g), '<=', $lines + 1,
		"$what: not logged at every lock (tried again every 10 s at most)");
	$node->stop('fast');
	chmod 0600, $path;
	open my $fh, '>:raw', $path or die "open $path: $!";
	print $fh $good;
	close $fh;
	return;
}

with_file(
	'damaged file',
	sub {
		open my $fh, '>:raw', $path or die "open $path: $!";
		print $fh 'garbage';
		close $fh;
	},
	qr/file "pg_dlock_tokens" is damaged/);
with_file('unreadable file', sub { chmod 0000, $path },
	qr/could not open file "pg_dlock_tokens": Permission denied/);

$node->start;
cmp_ok(take_token($node, 'tok2'), '>', $before,
	'the restored file: tokens above the one before the damage');
$node->stop;

# repaired while the server runs: tokens come back within 10 s, no restart
my $good_again = slurp_file($path);
open my $fh, '>:raw', $path or die "open $path: $!";
print $fh 'garbage';
close $fh;
$node->start;
my ($rc, $out, $err) = $node->psql('postgres', "SELECT dlock_try('tok4'); SELECT dlock_token('tok4');");
like($err, qr/lock "tok4" has no fencing token/, 'damaged: no token');
open $fh, '>:raw', $path or die "open $path: $!";
print $fh $good_again;
close $fh;
ok($node->poll_query_until('postgres',
		"SELECT dlock_try('tok5') AND dlock_token('tok5') > $before AND dlock_unlock('tok5')"),
	'repaired while running: tokens come back, above the earlier ones');
$node->stop;
done_testing();
