# DlockTest.pm: what the dlock TAP tests share (test/t/*.pl).
package DlockTest;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(dlock_node take_token token_ceiling crash_via reaper_pid);

# A started node with dlock preloaded and created in "postgres"; extra
# postgresql.conf lines may follow the name.
sub dlock_node
{
	my ($name, @conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		join("\n", "shared_preload_libraries = 'dlock'", 'restart_after_crash = on', @conf) . "\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
	return $node;
}

# Take name in a session of its own and return its fencing token; the lock
# goes with the session.
sub take_token
{
	my ($node, $name) = @_;
	my $out = $node->safe_psql('postgres',
		"SELECT dlock_try('$name'); SELECT dlock_token('$name');");
	my @lines = split /\n/, $out;
	is($lines[0], 't', "$name taken");
	return $lines[-1];
}

# The ceiling recorded in pg_dlock_tokens: magic, version (uint32 each), then
# the ceiling as a little-endian uint64, then a CRC.
sub token_ceiling
{
	my ($node) = @_;
	my $data = slurp_file($node->data_dir . '/pg_dlock_tokens');
	return unpack('Q<', substr($data, 8, 8));
}

sub reaper_pid
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock lease reaper'");
}

# SIGKILL the backend of a background session: the postmaster ends every
# process and reinitializes.  Returns once the server takes queries again.
sub crash_via
{
	my ($node, $bg) = @_;
	my $pid = $bg->query_safe('SELECT pg_backend_pid()');
	my $off = -s $node->logfile;
	kill 'KILL', $pid;
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $off);
	eval { $bg->quit };
	ok($node->poll_query_until('postgres', 'SELECT 1', '1'), 'server back after the crash');
	return;
}

1;
