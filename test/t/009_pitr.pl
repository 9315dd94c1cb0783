# Point-in-time recovery: a base backup is restored from the WAL archive up
# to a restore point; recovery ends on a new timeline, and the restored
# server's tokens are above every token of the original, also those it
# handed out after the restore point and while the restored server runs.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $primary = dlock_primary('pitr_primary', archive => 1, conf => ['dlock.token_reserve = 10']);
my @orig = new_tokens($primary, 'before-backup', 3);
$primary->backup('pitr_backup');
push @orig, new_tokens($primary, 'before-point', 15);
$primary->safe_psql('postgres', "SELECT pg_create_restore_point('dlock_point')");
push @orig, new_tokens($primary, 'after-point', 3);
my $lsn = $primary->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
$primary->safe_psql('postgres', 'SELECT pg_switch_wal()');
$primary->poll_query_until('postgres',
	"SELECT last_archived_wal >= pg_walfile_name('$lsn') FROM pg_stat_archiver")
  or die 'WAL not archived';

my $restored = PostgreSQL::Test::Cluster->new('pitr_restored');
$restored->init_from_backup($primary, 'pitr_backup', has_restoring => 1, standby => 0);
$restored->append_conf('postgresql.conf',
	"recovery_target_name = 'dlock_point'\nrecovery_target_action = 'promote'\narchive_mode = off\n");
$restored->start;
$restored->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'recovery did not end';
is(timeline_of($restored),
	'2', 'recovery ended on timeline 2');
ok($restored->log_contains(qr/starting point-in-time recovery to "dlock_point"/)
	  && !$restored->log_contains(qr/entering standby mode/),
	'it was an archive recovery to the restore point, not a standby');

push @orig, new_tokens($primary, 'while-both-run', 3);
my @mine = new_tokens($restored, 'restored', 3);
my ($max) = sort { $b <=> $a } @orig;
cmp_ok($mine[0], '>', $max, 'the restored server hands out tokens above every token of the original');
is(int($mine[0] / $SPAN), 2, 'tokens of timeline 2');

$restored->stop;
$primary->stop;
done_testing();
