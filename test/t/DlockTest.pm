# DlockTest.pm: what the dlock TAP tests share (test/t/*.pl).
package DlockTest;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(dlock_node dlock_primary dlock_standby promote_node take_token
  new_tokens token_ceiling write_token_file crash_via reaper_pid sqlstate_error);

# The layout of a token: timeline * SPAN + counter.
our $SPAN = 10_000_000_000_000;
push @EXPORT, '$SPAN';

sub new_node
{
	my ($name, $init, @conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%$init);
	$node->append_conf('postgresql.conf',
		join("\n", "shared_preload_libraries = 'dlock'", 'restart_after_crash = on', @conf) . "\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION dlock');
	return $node;
}

# A started node with dlock preloaded and created in "postgres"; extra
# postgresql.conf lines may follow the name.
sub dlock_node
{
	my ($name, @conf) = @_;
	return new_node($name, {}, @conf);
}

# The same, ready to have standbys (and to be rewound: wal_log_hints); with
# archive => 1 it archives its WAL too.
sub dlock_primary
{
	my ($name, %opt) = @_;
	return new_node($name,
		{ allows_streaming => 1, has_archiving => $opt{archive} ? 1 : 0 },
		'wal_log_hints = on', @{ $opt{conf} // [] });
}

# A hot standby streaming from primary, made from a new base backup (which
# copies pg_dlock_tokens too); started and caught up.
my $backups = 0;
sub dlock_standby
{
	my ($primary, $name, @conf) = @_;
	my $backup = 'backup' . ++$backups;
	$primary->backup($backup);
	my $standby = PostgreSQL::Test::Cluster->new($name);
	$standby->init_from_backup($primary, $backup, has_streaming => 1);
	$standby->append_conf('postgresql.conf', join("\n", @conf) . "\n") if @conf;
	$standby->start;
	catch_up($primary, $standby);
	return $standby;
}

# Wait until standby has replayed everything primary wrote (a commit first,
# so that there is a record to replay up to the insert position).
sub catch_up
{
	my ($primary, $standby) = @_;
	$primary->safe_psql('postgres', 'SELECT pg_current_xact_id()');
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	return;
}
push @EXPORT, 'catch_up';

# The timeline a primary writes WAL on.
sub timeline_of
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int");
}
push @EXPORT, 'timeline_of';

# Promote a standby and wait until it takes writes.
sub promote_node
{
	my ($node) = @_;
	$node->promote;
	$node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die 'promotion did not finish';
	return;
}

# n new holds (names prefix1 .. prefixN, in one session that then ends):
# their tokens, in the order they were taken.
sub new_tokens
{
	my ($node, $prefix, $n) = @_;
	my $out = $node->safe_psql('postgres',
		"SELECT string_agg(t::text, ',' ORDER BY g) FROM (SELECT g, CASE WHEN dlock_try('$prefix' || g) "
		  . "THEN dlock_token('$prefix' || g) END AS t FROM generate_series(1, $n) g) s");
	my @t = split /,/, $out;
	is(scalar(@t), $n, "$n tokens from " . $node->name);
	return @t;
}

# psql's error for sql, with its SQLSTATE ("ERROR:  25006: ...").
sub sqlstate_error
{
	my ($node, $sql, %opt) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql", %opt);
	return $err;
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

# Run the commands of doc/upgrades.md's "Upgrading with pg_upgrade", as written,
# with OLD and NEW the data directories of two stopped nodes.
sub readme_upgrade_command
{
	my ($old, $new) = @_;
	my ($commands) = slurp_file('doc/upgrades.md') =~ /## Upgrading with pg_upgrade\n.*?```sh\n(.*?)```/s
	  or die 'no commands in doc/upgrades.md';
	local $ENV{OLD} = $old->data_dir;
	local $ENV{NEW} = $new->data_dir;
	command_ok([ 'bash', '-e', '-c', $commands ], "doc/upgrades.md's command after pg_upgrade");
	return;
}
push @EXPORT, 'readme_upgrade_command';

# CRC-32C (Castagnoli), as pg_crc32c computes it.
sub crc32c
{
	my ($data) = @_;
	my $crc = 0xFFFFFFFF;
	for my $byte (unpack 'C*', $data)
	{
		$crc ^= $byte;
		$crc = ($crc >> 1) ^ (($crc & 1) ? 0x82F63B78 : 0) for 1 .. 8;
	}
	return $crc ^ 0xFFFFFFFF;
}

# Write pg_dlock_tokens with this ceiling (the server must be stopped): the
# file of 1.0 and later has one layout.
sub write_token_file
{
	my ($node, $ceiling) = @_;
	my $head = pack('VVQ<', 0x646c6f63, 1, $ceiling);
	my $path = $node->data_dir . '/pg_dlock_tokens';
	open my $fh, '>:raw', $path or die "open $path: $!";
	print $fh $head . pack('V', crc32c($head)) . "\0" x 4;
	close $fh;
	return;
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
