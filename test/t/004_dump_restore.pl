# pg_dump and pg_restore of a database that uses dlock: custom format through
# pg_restore and plain format through psql both give back the extension at
# the same version, a table with a dlock_name column, and a view over
# dlock_key, and the lock functions work in the restored database.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DlockTest;

my $node = dlock_node('dump');
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
	CREATE EXTENSION dlock;
	CREATE TABLE jobs (name dlock_name PRIMARY KEY, every interval);
	INSERT INTO jobs VALUES ('nightly-report', '1 day'), ('café', '1 hour');
	CREATE VIEW job_keys AS SELECT name, dlock_key(name) AS key FROM jobs;
});
my $check = q{
	SELECT (SELECT extversion FROM pg_extension WHERE extname = 'dlock'),
	       (SELECT string_agg(name || '=' || key, ',' ORDER BY name) FROM job_keys),
	       (SELECT atttypid::regtype FROM pg_attribute
	         WHERE attrelid = 'jobs'::regclass AND attname = 'name')};
my $want = $node->safe_psql('src', $check);

my $dir = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$dir/src.dump", '-d', $node->connstr('src') ],
	'pg_dump -Fc');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('dst'), "$dir/src.dump" ],
	'pg_restore');
is($node->safe_psql('dst', $check), $want, 'custom format: same version, rows, keys and types');

$node->command_ok([ 'pg_dump', '-f', "$dir/src.sql", '-d', $node->connstr('src') ],
	'pg_dump, plain format');
$node->safe_psql('postgres', 'CREATE DATABASE dst2');
$node->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', "$dir/src.sql", '-d', $node->connstr('dst2') ],
	'plain dump restored with psql');
is($node->safe_psql('dst2', $check), $want, 'plain format: same version, rows, keys and types');

for my $db ('dst', 'dst2')
{
	is( $node->safe_psql($db,
			"SELECT dlock_try('nightly-report', lease => '1 hour'), dlock_token('nightly-report') > 0, dlock_unlock('nightly-report')"),
		't|t|t',
		"$db: the lock functions work");
}

$node->stop;
done_testing();
