# Semaphore permits held as detached locks across restarts: three detached
# permits of a semaphore of three (one of them held by a waiter process, it
# had to wait for its permit), a fourth refused, two more callers in line; a
# clean restart and a crash restart leave none of them (nor a permit, a
# turnstile or a waiter process),
# and afterwards three new acquisitions succeed again, with tokens above
# every one handed out before, and a fourth is refused.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node = dlock_node('semaphore');

sub count_of
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM ($sql) x");
}

sub holder_ready
{
	return $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'dlock lock holder'");
}

# what pg_locks has of the name: permit 1 (objsubid 1), the turnstile
# (1000), permit p > 1 (1000 + p); granted ones only unless $all
sub subids
{
	my ($all) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(objsubid::text, ',' ORDER BY objsubid), 'none') FROM pg_locks "
		  . "WHERE locktype = 'advisory' AND (classid::bigint << 32 | objid::bigint) = dlock_key('sem') "
		  . "AND (objsubid = 1 OR objsubid >= 1000)"
		  . ($all ? '' : ' AND granted'));
}

# the permits dlock_locks shows held
sub permits
{
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(coalesce(permit::text, 'null'), ',' ORDER BY permit), 'none') "
		  . "FROM dlock_locks WHERE name = 'sem' AND scope = 'detached' AND granted");
}

sub acquire
{
	my ($extra) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(dlock_acquire('sem', '10min', permits => 3$extra)::text, 'null')");
}

# Three permits of 'sem' held, the last one by a waiter process: it had to
# wait for a permit until one of the lock holder's was released.  Checks that
# a fourth is refused, what the view and pg_locks show; the largest token.
sub take_three
{
	my ($tag, $floor) = @_;
	my @tokens = map { acquire('') } 1 .. 3;
	like(join(',', @tokens), qr/^\d+,\d+,\d+$/, "$tag: three detached permits acquired");
	ok($tokens[0] < $tokens[1] && $tokens[1] < $tokens[2], "$tag: their tokens increase");
	cmp_ok($tokens[0], '>', $floor, "$tag: above every token handed out before") if defined $floor;
	is(acquire(''), 'null', "$tag: a fourth dlock_acquire returns NULL");
	is(acquire(", timeout => '200 ms'"), 'null', "$tag: and one that waits returns NULL at its timeout");
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'dlock waiter'"),
		"$tag: its waiter is gone");
	is( $node->safe_psql('postgres', "SELECT dlock_try('sem', permits => 3), dlock_try('sem')"),
		'f|f', "$tag: a session gets no permit, nor the plain lock (permit 1)");

	# a waited acquisition: it gets the permit the release frees
	my $bg = $node->background_psql('postgres');
	$bg->query_until(qr/started/,
		"\\echo started\nSELECT dlock_acquire('sem', '10min', timeout => '1 min', permits => 3);\n");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM dlock_names() WHERE name = 'sem' AND waiting = 'detached'")
	  or die 'the waited acquisition did not queue';
	is($node->safe_psql('postgres', "SELECT dlock_release('sem', $tokens[1])"),
		't', "$tag: a permit released");
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM dlock_locks l JOIN pg_stat_activity a USING (pid) "
			  . "WHERE l.name = 'sem' AND l.scope = 'detached' AND l.granted AND l.permit = 2 "
			  . "AND a.backend_type = 'dlock waiter'"),
		"$tag: the waiter got permit 2");
	$bg->quit;
	my $waited = $node->safe_psql('postgres',
		"SELECT token FROM dlock_locks WHERE name = 'sem' AND scope = 'detached' AND permit = 2");
	cmp_ok($waited, '>', $tokens[2], "$tag: with a larger token");

	is(permits(), '1,2,3', "$tag: dlock_locks shows permits 1, 2, 3");
	is(subids(1), '1,1002,1003', "$tag: pg_locks: objsubids 1, 1002, 1003, no turnstile");
	is(acquire(''), 'null', "$tag: still no fourth");
	return $waited;
}

# after a restart: nothing of the semaphore is left, and its permits are
# all there again for new holders
sub nothing_left
{
	my ($tag) = @_;
	ok(holder_ready(), "$tag: the lock holder runs");
	is(count_of("SELECT 1 FROM dlock_locks WHERE scope = 'detached'"), '0', "$tag: no detached lock");
	is(permits(), 'none', "$tag: no permit in dlock_locks");
	is(subids(1), 'none', "$tag: nothing of the name in pg_locks");
	is(count_of("SELECT 1 FROM pg_stat_activity WHERE backend_type = 'dlock waiter'"),
		'0', "$tag: no waiter process");
	return;
}

# Two callers in line for a permit while the server goes down: a detached
# acquisition (its waiter process) and a session; background sessions to be
# dropped (with the error the restart gives them) once it is done.
sub in_line
{
	my ($tag) = @_;
	my @bg;
	for my $call ("dlock_acquire('sem', '10min', timeout => '5 min', permits => 3)",
		"dlock_lock('sem', timeout => '5 min', permits => 3)")
	{
		my $s = $node->background_psql('postgres', on_error_stop => 0);
		$s->query_until(qr/started/, "\\echo started\nSELECT $call;\n");
		push @bg, $s;
	}
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) = 2 FROM dlock_locks WHERE name = 'sem' AND NOT granted"),
		"$tag: two callers in line");
	return @bg;
}

ok(holder_ready(), 'the lock holder runs');

# a clean restart
my $max = take_three('before a restart');
my @bg = in_line('before a restart');
$node->restart;
eval { $_->quit } for @bg;
nothing_left('after a restart');
$max = take_three('after a restart', $max);

# a crash restart (the permits of the last round still held)
@bg = in_line('before a crash');
my $victim = $node->background_psql('postgres');
crash_via($node, $victim);
eval { $_->quit } for @bg;
nothing_left('after a crash');
$max = take_three('after a crash', $max);

# released: the name is free again
is( $node->safe_psql('postgres',
		"SELECT count(dlock_release('sem', token)) FROM dlock_locks WHERE name = 'sem' AND scope = 'detached'"),
	'3', 'the three permits released');
is(subids(1), 'none', 'nothing of the name left in pg_locks');
is( $node->safe_psql('postgres',
		"SELECT dlock_try('sem', permits => 3), dlock_token('sem') > $max"),
	't|t', 'a session takes a permit, with a larger token');

$node->stop;
done_testing();
