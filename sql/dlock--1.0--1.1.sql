-- dlock 1.0 -> 1.1
\echo Use "ALTER EXTENSION dlock UPDATE TO '1.1'" to load this file. \quit

-- 1.1 changes no SQL object: it is the library (PostgreSQL 15, 17 and 18
-- from one tree, clearer messages, constant-time lookups per name).  Every
-- later change to the SQL objects comes as an upgrade script like this one,
-- and CREATE EXTENSION dlock runs dlock--1.0.sql and then each of them.
