# Leases across a promotion.  The old primary's holders (with leases, still
# alive) are not carried over: the promoted standby starts with no holds and
# grants the lock at once.  Its reaper, running since the standby reached a
# consistent state, enforces leases taken after the promotion.  A lock a
# standby session took while allowed stays held through the promotion, still
# without a token; the session's new holds get tokens of the new timeline.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $primary = dlock_primary('leases_primary');
my $standby = dlock_standby($primary, 'leases_standby');

my $old_holder = $primary->background_psql('postgres');
is($old_holder->query_safe("SELECT dlock_try('job', lease => '1 hour')"), 't', 'old primary: job held, leased');
my $old_xact = $primary->background_psql('postgres');
$old_xact->query_safe('BEGIN');
is($old_xact->query_safe("SELECT dlock_try_xact('xjob', lease => '1 hour')"), 't',
	'old primary: xjob held in an open transaction, leased');
my $local = $standby->background_psql('postgres');
$local->query_safe('SET dlock.allow_standby_locks = on');
is($local->query_safe("SELECT dlock_try('local')"), 't', 'standby: a standby-local lock');
my $local2 = $standby->background_psql('postgres');
$local2->query_safe('SET dlock.allow_standby_locks = on');
is($local2->query_safe("SELECT dlock_try('local-leased', lease => '10s')"), 't',
	'standby: a standby-local lock with a 10 s lease, to run out after the promotion');
my $local_pid = $local2->query_safe('SELECT pg_backend_pid()');
ok($standby->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'dlock lease reaper'"),
	'the reaper runs on the standby');
my $reaper_before = reaper_pid($standby);

promote_node($standby);
my $off = -s $standby->logfile;
is($standby->safe_psql('postgres', "SELECT count(*) FROM dlock_locks WHERE name = 'local-leased'"),
	'1', 'the standby-local leased lock is still held after the promotion');
is($standby->safe_psql('postgres', "SELECT count(*) FROM dlock_locks WHERE name IN ('job', 'xjob')"),
	'0', 'the new primary has none of the old holds');
is($standby->safe_psql('postgres', "SELECT dlock_try('job') AND dlock_try('xjob')"), 't',
	'and grants them at once, while the old holders still run');
is($old_holder->query_safe('SELECT 1'), '1', 'the old holder is alive on the old primary');
is(reaper_pid($standby), $reaper_before, 'the same reaper runs after the promotion');

# the standby-local lock is still held, and still has no token
is($standby->safe_psql('postgres', "SELECT granted, token IS NULL FROM dlock_locks WHERE name = 'local'"),
	't|t', 'the standby-local lock stays held through the promotion');
is($local->query_safe("SELECT dlock_try('after')"), 't', 'that session takes a new lock');
is(int($local->query_safe("SELECT dlock_token('after')") / $SPAN), 2,
	'with a token of the new timeline');

# the standby-local lease taken before the promotion is enforced after it
$standby->wait_for_log(qr/lease of lock "local-leased" expired, terminating process $local_pid/, $off);
ok($standby->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $local_pid"),
	'the lease of a standby-local lock runs out after the promotion: its holder is ended');
eval { $local2->quit };

# leases taken on the new primary are enforced
my $holder = $standby->background_psql('postgres');
my $pid = $holder->query_safe('SELECT pg_backend_pid()');
$off = -s $standby->logfile;
is($holder->query_safe("SELECT dlock_try('leased', lease => '1s')"), 't', 'new primary: a 1 s lease');
$standby->wait_for_log(qr/lease of lock "leased" expired, terminating process $pid/, $off);
ok($standby->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
	'the holder is ended when it runs out');
is($standby->safe_psql('postgres', "SELECT dlock_try('leased')"), 't', 'and the lock is free');
eval { $holder->quit };

# a transaction lock: its statement (still running) is canceled, the session lives on
my $tx = $standby->background_psql('postgres', on_error_stop => 0);
$pid = $tx->query_safe('SELECT pg_backend_pid()');
$off = -s $standby->logfile;
$tx->query_until(qr/taken/,
	"BEGIN;\nSELECT dlock_try_xact('xleased', lease => '1s');\n\\echo taken\nSELECT pg_sleep(60);\n");
$standby->wait_for_log(qr/lease of lock "xleased" expired, canceling the transaction of process $pid/, $off);
ok($standby->poll_query_until('postgres', "SELECT dlock_try('xleased')"), 'its transaction is canceled and the lock freed');
is($standby->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid"),
	'1', 'the session lives on');
ok(!$standby->log_contains(qr/terminating process $pid/, $off), 'it was not terminated');
eval { $tx->quit };

$local->quit;
$old_holder->quit;
$old_xact->quit;
$standby->stop;
$primary->stop;
done_testing();
