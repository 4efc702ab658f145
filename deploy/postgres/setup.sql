-- PostgreSQL for dprelease: the Prefect server's database and the budget ledger's, with
-- least-privilege roles. Run once as a superuser (deploy/README.md, step 2):
--
--   psql "postgresql://postgres@db.internal/postgres" -v ON_ERROR_STOP=1 -f deploy/postgres/setup.sql
--
-- then give each login role a password interactively (never on a command line):
--
--   psql "postgresql://postgres@db.internal/postgres" -c '\password prefect'   (and dprelease, dprelease_reader)
--
-- Running it again is safe: what exists is kept, the grants are applied again (also the way
-- to restore the grants after a ledger is restored from a backup, deploy/backup.py).
-- Names can be changed with -v, e.g. -v ledger_db=ledger_test; the defaults are below.
--
-- Roles:
--   prefect           LOGIN; owns the database `prefect` (Prefect's migrations need DDL and the
--                     trusted extension pg_trgm, which a database owner may create).
--   ledger_owner      NOLOGIN; owns the database `ledger` and its tables. Nobody logs in as it:
--                     a superuser does `SET ROLE ledger_owner` for the rare schema change.
--   dprelease         LOGIN; what the worker's flow runs and the CLI use (DPRELEASE_LEDGER).
--                     SELECT and INSERT on ledger_entries; SELECT and UPDATE (seq, hash) of the
--                     one-row tables ledger_head and ledger_checkpoint (the write lock is a
--                     SELECT ... FOR UPDATE of the head, which needs UPDATE); SELECT, INSERT
--                     and DELETE of the one-row ledger_format (`dprelease ledger migrate`
--                     stamps it). No UPDATE, DELETE or TRUNCATE of a ledger row, no DDL.
--   dprelease_reader  LOGIN; SELECT only: `dprelease ledger show`, `dprelease audit verify`,
--                     and the backups (pg_dump).
-- Besides the grants, triggers refuse UPDATE, DELETE and TRUNCATE of ledger_entries (and
-- DELETE/TRUNCATE of the head and checkpoint) for every role, the owner's and a superuser's
-- sessions included: fixing a ledger row is never an UPDATE (README, "The ledger").

\if :{?prefect_role}  \else \set prefect_role prefect           \endif
\if :{?prefect_db}    \else \set prefect_db prefect             \endif
\if :{?ledger_db}     \else \set ledger_db ledger               \endif
\if :{?ledger_owner}  \else \set ledger_owner ledger_owner      \endif
\if :{?ledger_writer} \else \set ledger_writer dprelease        \endif
\if :{?ledger_reader} \else \set ledger_reader dprelease_reader \endif

-- roles ------------------------------------------------------------------------------------
SELECT format('CREATE ROLE %I LOGIN', :'prefect_role')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'prefect_role') \gexec
SELECT format('CREATE ROLE %I NOLOGIN', :'ledger_owner')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'ledger_owner') \gexec
SELECT format('CREATE ROLE %I LOGIN', :'ledger_writer')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'ledger_writer') \gexec
SELECT format('CREATE ROLE %I LOGIN', :'ledger_reader')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'ledger_reader') \gexec

-- databases --------------------------------------------------------------------------------
SELECT format('CREATE DATABASE %I OWNER %I ENCODING %L', :'prefect_db', :'prefect_role', 'UTF8')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'prefect_db') \gexec
SELECT format('CREATE DATABASE %I OWNER %I ENCODING %L', :'ledger_db', :'ledger_owner', 'UTF8')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'ledger_db') \gexec

REVOKE ALL ON DATABASE :"prefect_db" FROM PUBLIC;
GRANT ALL ON DATABASE :"prefect_db" TO :"prefect_role";
REVOKE ALL ON DATABASE :"ledger_db" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"ledger_db" TO :"ledger_writer", :"ledger_reader";

-- the ledger's tables (the same as ledger/database.py creates; tests/deploy/test_stack.py
-- compares them) ----------------------------------------------------------------------------
\connect :ledger_db
ALTER SCHEMA public OWNER TO :"ledger_owner";
SET ROLE :"ledger_owner";
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO :"ledger_writer", :"ledger_reader";

CREATE TABLE IF NOT EXISTS ledger_head (
    id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    hash VARCHAR(64) NOT NULL,
    PRIMARY KEY (id)
);
CREATE TABLE IF NOT EXISTS ledger_checkpoint (
    id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    hash VARCHAR(64) NOT NULL,
    PRIMARY KEY (id)
);
CREATE TABLE IF NOT EXISTS ledger_entries (
    seq INTEGER NOT NULL,
    time VARCHAR(40) NOT NULL,
    dataset VARCHAR(200) NOT NULL,
    release_id VARCHAR(200),
    kind VARCHAR(20) NOT NULL,
    status VARCHAR(20) NOT NULL,
    stage VARCHAR(100),
    mechanism VARCHAR(100),
    statistic VARCHAR(200),
    accountant VARCHAR(10),
    sensitivity DOUBLE PRECISION,
    sensitivity_norm VARCHAR(4),
    noise_scale DOUBLE PRECISION,
    rho DOUBLE PRECISION,
    epsilon DOUBLE PRECISION,
    delta DOUBLE PRECISION,
    detail TEXT NOT NULL,
    prev_hash VARCHAR(64) NOT NULL,
    hash VARCHAR(64) NOT NULL,
    PRIMARY KEY (seq)
);
CREATE INDEX IF NOT EXISTS ix_ledger_entries_dataset ON ledger_entries (dataset);
CREATE INDEX IF NOT EXISTS ix_ledger_entries_release_id ON ledger_entries (release_id);
-- the ledger's format (ledger/format.py, FORMAT): a new, empty ledger is stamped with this
-- version's format; one that already holds rows (an older version's, or a restored backup)
-- keeps the table empty, i.e. format 1, until `dprelease ledger migrate` stamps it and records
-- the step in the hash chain
CREATE TABLE IF NOT EXISTS ledger_format (
    id INTEGER NOT NULL,
    format INTEGER NOT NULL,
    written_by VARCHAR(40) NOT NULL,
    PRIMARY KEY (id)
);
INSERT INTO ledger_format (id, format, written_by)
    SELECT 1, 2, 'deploy/postgres/setup.sql' WHERE NOT EXISTS (SELECT FROM ledger_entries)
    ON CONFLICT (id) DO NOTHING;

-- the genesis head, and a checkpoint at the genesis (the same as no checkpoint), so that the
-- writer never needs INSERT on these two tables
INSERT INTO ledger_head (id, seq, hash) VALUES (1, 0, repeat('0', 64)) ON CONFLICT (id) DO NOTHING;
INSERT INTO ledger_checkpoint (id, seq, hash) VALUES (1, 0, repeat('0', 64)) ON CONFLICT (id) DO NOTHING;

CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the dprelease ledger is append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE OR REPLACE TRIGGER ledger_entries_append_only
    BEFORE UPDATE OR DELETE ON ledger_entries FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE OR REPLACE TRIGGER ledger_entries_no_truncate
    BEFORE TRUNCATE ON ledger_entries FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE OR REPLACE TRIGGER ledger_head_kept
    BEFORE DELETE ON ledger_head FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE OR REPLACE TRIGGER ledger_head_no_truncate
    BEFORE TRUNCATE ON ledger_head FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE OR REPLACE TRIGGER ledger_checkpoint_kept
    BEFORE DELETE ON ledger_checkpoint FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE OR REPLACE TRIGGER ledger_checkpoint_no_truncate
    BEFORE TRUNCATE ON ledger_checkpoint FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();

-- grants: exactly these, whatever was granted before
REVOKE ALL ON ledger_entries, ledger_head, ledger_checkpoint, ledger_format
    FROM PUBLIC, :"ledger_writer", :"ledger_reader";
REVOKE ALL ON FUNCTION ledger_append_only() FROM PUBLIC;
GRANT SELECT, INSERT ON ledger_entries TO :"ledger_writer";
GRANT SELECT, UPDATE (seq, hash) ON ledger_head, ledger_checkpoint TO :"ledger_writer";
GRANT SELECT, INSERT, DELETE ON ledger_format TO :"ledger_writer";  -- `ledger migrate` stamps it
GRANT SELECT ON ledger_entries, ledger_head, ledger_checkpoint, ledger_format TO :"ledger_reader";
RESET ROLE;
