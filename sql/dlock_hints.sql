-- dlock's word in reports that PostgreSQL makes (an emit_log_hook): a call
-- that matches no function where a duration was given as a number.
-- (PostgreSQL 19 adds a DETAIL line of its own: dlock_hints_1.out.)
-- a duration given as a number (or by a driver as varchar): PostgreSQL finds no
-- function (42883); its hint says what dlock takes
SELECT dlock_lock('x', timeout => 5);
SELECT dlock_try('x', lease => 30000);
SELECT dlock_lock('x', 5);
SELECT dlock_lock('x', timeout => '5 s'::varchar);
-- other calls that match nothing keep PostgreSQL's hint: a wrong argument name,
-- a number where no duration goes, a function that takes no interval
SELECT dlock_try('x', nonsense => true);
SELECT dlock_try('x', 1);
SELECT dlock_release('x', '123'::varchar);
SELECT dlock_try_ms('x', false, 5.5);
-- naming a function that does not exist (not a call) keeps PostgreSQL's report
DROP FUNCTION dlock_lock(text, integer);
