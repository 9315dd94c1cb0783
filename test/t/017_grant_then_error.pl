# An error between the lock manager's grant and dlock's record of it (here:
# the token file cannot be opened, because the session already has every
# file descriptor it may allocate) must never leave the caller holding a lock
# it was told it did not get, nor a record of a wait that ended.  On 1.4 the
# call failed with "exceeded maxAllocatedDescs" and the lock stayed held,
# without a name, lease or token, and on the waiting path the entry stayed
# "waiting".  Now a token that cannot be reserved is not given (as when the
# file cannot be written): the call says true, holds the lock, and the view
# shows it; whatever else fails gives the grant back.
#
# How: COPY ... FROM PROGRAM nested through a trigger holds one allocated
# file per level; at some depth the token file is the one too many.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node = dlock_node('grant_error', 'dlock.token_reserve = 1', 'max_files_per_process = 64');
$node->safe_psql('postgres', q{
CREATE TABLE nest (n int);
CREATE TABLE goal (depth int, call text);
INSERT INTO goal VALUES (0, '');
CREATE FUNCTION nest() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE g goal;
BEGIN
	SELECT * INTO g FROM goal;
	IF NEW.n < g.depth THEN
		EXECUTE format('COPY nest FROM PROGRAM %L', 'echo ' || (NEW.n + 1));
	ELSE
		EXECUTE 'SELECT ' || g.call;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER nest BEFORE INSERT ON nest FOR EACH ROW EXECUTE FUNCTION nest();
});

# Run the call at depth d in one session, and say what that session holds
# afterwards: "copy ok|copy failed", held advisory locks, waiting entries.
sub at_depth
{
	my ($d, $call, $before) = @_;
	$node->safe_psql('postgres', "UPDATE goal SET depth = $d, call = \$q\$$call\$q\$");
	my $sql = "COPY nest FROM PROGRAM 'echo 1';\n"
	  . "SELECT 'held=' || count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND pid = pg_backend_pid();\n"
	  . "SELECT 'waiting=' || count(*) FROM dlock_locks WHERE pid = pg_backend_pid() AND NOT granted;\n"
	  . "SELECT 'named=' || count(*) FROM dlock_locks WHERE pid = pg_backend_pid() AND name = 'x';\n";
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
		'<', \$sql, '>', \$out, '2>', \$err);
	$before->() if $before;
	$h->finish;
	my $ok = $err =~ /ERROR/ ? 0 : 1;
	my ($held) = $out =~ /held=(\d+)/;
	my ($waiting) = $out =~ /waiting=(\d+)/;
	my ($named) = $out =~ /named=(\d+)/;
	return ($ok, $held, $waiting, $named, $err);
}

my $off = -s $node->logfile;
my $bad = 0;
for my $d (1 .. 24)
{
	my ($ok, $held, $waiting, $named, $err) =
	  at_depth($d, "dlock_try('x', lease => '5s')");
	# told true: holds it, and the view names it; told error: holds nothing
	if ($ok ? ($held != 1 || $named != 1) : $held != 0)
	{
		$bad++;
		diag("depth $d: copy " . ($ok ? 'ok' : 'failed') . ", held $held, named $named: $err");
	}
}
is($bad, 0, 'dlock_try: at every depth the answer matches what the session holds');
ok($node->log_contains(qr/pg_dlock_tokens.*maxAllocatedDescs|maxAllocatedDescs.*pg_dlock_tokens/, $off),
	'the token file was the one file too many at some depth');

# the waiting path: another session holds x and lets go while we wait
$bad = 0;
for my $d (1 .. 24)
{
	my $holder = $node->background_psql('postgres');
	# (waits for the session of the depth before, whose backend may still be exiting)
	$holder->query_safe("SELECT dlock_lock('x', timeout => '10s')");
	my ($ok, $held, $waiting, $named, $err) = at_depth(
		$d,
		"dlock_lock('x', timeout => '10s', lease => '5s')",
		sub { sleep 1; $holder->query_safe("SELECT dlock_unlock('x')"); });
	$holder->quit;
	if (($ok ? ($held != 1 || $named != 1) : $held != 0) || $waiting != 0)
	{
		$bad++;
		diag("depth $d (waited): copy " . ($ok ? 'ok' : 'failed')
			  . ", held $held, named $named, waiting $waiting: $err");
	}
}
is($bad, 0, 'dlock_lock after a wait: the answer matches, no entry is left waiting');

$node->stop;
done_testing();
