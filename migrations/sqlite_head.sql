-- revision 0020
-- Written by scripts/sqlite_head.py from a database the migrations built; do not edit.

CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);

CREATE TABLE index_run (
	id INTEGER NOT NULL, 
	index_name VARCHAR(100) NOT NULL, 
	started_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	cwd TEXT NOT NULL, 
	all_roots BOOLEAN NOT NULL, 
	roots INTEGER NOT NULL, 
	seen INTEGER NOT NULL, 
	added INTEGER NOT NULL, 
	changed INTEGER NOT NULL, 
	unchanged INTEGER NOT NULL, 
	removed INTEGER NOT NULL, 
	rejected INTEGER NOT NULL, 
	files_read INTEGER NOT NULL, 
	duration_s FLOAT NOT NULL, audit_head VARCHAR(64), audit_events BIGINT, 
	CONSTRAINT pk_index_run PRIMARY KEY (id)
);

CREATE TABLE root (
	id INTEGER NOT NULL, 
	index_name VARCHAR(100) NOT NULL, 
	path TEXT NOT NULL, 
	scope VARCHAR(20) NOT NULL, 
	provider VARCHAR(100) NOT NULL, 
	precedence INTEGER NOT NULL, 
	position INTEGER NOT NULL, 
	max_depth INTEGER NOT NULL, 
	require_description BOOLEAN NOT NULL, 
	validation VARCHAR(20) NOT NULL, 
	name_prefix VARCHAR(200) NOT NULL, 
	present BOOLEAN NOT NULL, 
	last_run_id INTEGER, 
	CONSTRAINT pk_root PRIMARY KEY (id), 
	CONSTRAINT uq_root_index_name UNIQUE (index_name, path)
);

CREATE TABLE candidate (
	id INTEGER NOT NULL, 
	root_id INTEGER NOT NULL, 
	rel_dir TEXT NOT NULL, 
	dir_name TEXT NOT NULL, 
	dir_path TEXT NOT NULL, 
	skill_path TEXT NOT NULL, 
	real_path TEXT NOT NULL, 
	name TEXT, 
	description TEXT, 
	status VARCHAR(20) NOT NULL, 
	enabled BOOLEAN NOT NULL, 
	frontmatter TEXT, 
	tree_key VARCHAR(32) NOT NULL, 
	size BIGINT, 
	mtime_ns BIGINT, 
	inode BIGINT, 
	device BIGINT, 
	xxh3 VARCHAR(32), 
	sha256 VARCHAR(64), 
	first_run_id INTEGER NOT NULL, 
	changed_run_id INTEGER NOT NULL, search_text TEXT, disable_model_invocation BOOLEAN DEFAULT 0 NOT NULL, ctime_ns BIGINT, host_fields TEXT, signature TEXT, 
	CONSTRAINT pk_candidate PRIMARY KEY (id), 
	CONSTRAINT fk_candidate_root_id_root FOREIGN KEY(root_id) REFERENCES root (id) ON DELETE CASCADE, 
	CONSTRAINT uq_candidate_root_id UNIQUE (root_id, rel_dir)
);

CREATE INDEX ix_candidate_name ON candidate (name);

CREATE TABLE finding (
	id INTEGER NOT NULL, 
	candidate_id INTEGER NOT NULL, 
	code VARCHAR(50) NOT NULL, 
	severity VARCHAR(10) NOT NULL, 
	message TEXT NOT NULL, path TEXT, line INTEGER, 
	CONSTRAINT pk_finding PRIMARY KEY (id), 
	CONSTRAINT fk_finding_candidate_id_candidate FOREIGN KEY(candidate_id) REFERENCES candidate (id) ON DELETE CASCADE
);

CREATE INDEX ix_finding_candidate_id ON finding (candidate_id);

CREATE TABLE scan_issue (
	id INTEGER NOT NULL, 
	root_id INTEGER NOT NULL, 
	path TEXT NOT NULL, 
	code VARCHAR(50) NOT NULL, 
	message TEXT NOT NULL, 
	CONSTRAINT pk_scan_issue PRIMARY KEY (id), 
	CONSTRAINT fk_scan_issue_root_id_root FOREIGN KEY(root_id) REFERENCES root (id) ON DELETE CASCADE
);

CREATE INDEX ix_scan_issue_root_id ON scan_issue (root_id);

CREATE TABLE catalog_cache (
	id INTEGER NOT NULL, 
	index_name VARCHAR(100) NOT NULL, 
	"key" VARCHAR(64) NOT NULL, 
	payload TEXT NOT NULL, 
	CONSTRAINT pk_catalog_cache PRIMARY KEY (id), 
	CONSTRAINT uq_catalog_cache_index_name UNIQUE (index_name, "key")
);

CREATE TABLE reindex_lock (
	index_name VARCHAR(100) NOT NULL, 
	token VARCHAR(32) NOT NULL, 
	holder TEXT NOT NULL, 
	host VARCHAR(255) NOT NULL, 
	pid INTEGER NOT NULL, 
	acquired_at DATETIME NOT NULL, 
	heartbeat_at DATETIME NOT NULL, 
	expires_at DATETIME NOT NULL, 
	CONSTRAINT pk_reindex_lock PRIMARY KEY (index_name)
);

CREATE TABLE approval (
	id INTEGER NOT NULL, 
	index_name VARCHAR(100) NOT NULL, 
	name TEXT NOT NULL, 
	digest VARCHAR(64) NOT NULL, 
	approved_at DATETIME NOT NULL, 
	note TEXT, 
	CONSTRAINT pk_approval PRIMARY KEY (id), 
	CONSTRAINT uq_approval_index_name UNIQUE (index_name, name, digest)
);

CREATE TABLE resolved_set (
	id INTEGER NOT NULL, 
	index_name VARCHAR(100) NOT NULL, 
	"key" VARCHAR(64) NOT NULL, 
	roots TEXT NOT NULL, 
	winners INTEGER NOT NULL, 
	CONSTRAINT pk_resolved_set PRIMARY KEY (id), 
	CONSTRAINT uq_resolved_set_index_name UNIQUE (index_name, "key")
);

CREATE TABLE resolved_winner (
	set_id INTEGER NOT NULL, 
	ordinal INTEGER NOT NULL, 
	name TEXT NOT NULL, 
	candidate_id INTEGER NOT NULL, 
	collision TEXT, 
	CONSTRAINT pk_resolved_winner PRIMARY KEY (set_id, ordinal), 
	CONSTRAINT fk_resolved_winner_set_id_resolved_set FOREIGN KEY(set_id) REFERENCES resolved_set (id) ON DELETE CASCADE
);

CREATE INDEX ix_resolved_winner_name ON resolved_winner (set_id, name);

CREATE TABLE "resource" (
	id INTEGER NOT NULL, 
	candidate_id INTEGER NOT NULL, 
	rel_path TEXT NOT NULL, 
	kind VARCHAR(20) NOT NULL, 
	size BIGINT NOT NULL, 
	mtime_ns BIGINT NOT NULL, 
	inode BIGINT NOT NULL, 
	device BIGINT NOT NULL, 
	xxh3 VARCHAR(32), 
	sha256 VARCHAR(64), 
	risks TEXT, 
	ctime_ns BIGINT, mode INTEGER, 
	CONSTRAINT pk_resource PRIMARY KEY (id), 
	CONSTRAINT fk_resource_candidate_id_candidate FOREIGN KEY(candidate_id) REFERENCES candidate (id) ON DELETE CASCADE, 
	CONSTRAINT uq_resource_candidate_id UNIQUE (candidate_id, rel_path)
);

CREATE TABLE "load_event" (
	id INTEGER NOT NULL, 
	index_name VARCHAR(100) NOT NULL, 
	time DATETIME NOT NULL, 
	event VARCHAR(50) NOT NULL, 
	skill TEXT, 
	resource TEXT, 
	level INTEGER NOT NULL, 
	bytes BIGINT NOT NULL, 
	digest VARCHAR(64), 
	outcome VARCHAR(20) NOT NULL, 
	reason TEXT, 
	session TEXT, 
	path TEXT, prev_hash VARCHAR(64), row_hash VARCHAR(64), principal TEXT, 
	CONSTRAINT pk_load_event PRIMARY KEY (id)
, CONSTRAINT ck_load_event_event_level CHECK ((event = 'catalog.published' AND level = 1) OR (event = 'skill.read' AND level = 2) OR (event = 'skill.command' AND level = 2) OR (event = 'resource.read' AND level = 3)), CONSTRAINT ck_load_event_outcome CHECK (outcome IN ('ok', 'refused', 'mismatch', 'missing', 'not-found', 'error')), CONSTRAINT ck_load_event_bytes CHECK (bytes >= 0), CONSTRAINT ck_load_event_time CHECK (typeof(time) = 'text' AND time GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]' AND strftime('%Y-%m-%d %H:%M:%S', time) = substr(time, 1, 19)));

CREATE INDEX ix_load_event_session ON load_event (session);

CREATE INDEX ix_load_event_skill ON load_event (skill);

CREATE INDEX ix_load_event_index_name_id ON load_event (index_name, id);

CREATE UNIQUE INDEX ix_load_event_chain ON load_event (index_name, prev_hash);

CREATE TRIGGER load_event_no_update BEFORE UPDATE ON load_event
            BEGIN SELECT RAISE(ABORT, 'load_event is append-only: UPDATE refused'); END;

CREATE TRIGGER load_event_no_delete BEFORE DELETE ON load_event
            BEGIN SELECT RAISE(ABORT, 'load_event is append-only: DELETE refused'); END;

CREATE TRIGGER load_event_no_replace BEFORE INSERT ON load_event
    WHEN EXISTS (SELECT 1 FROM load_event
                 WHERE id = NEW.id OR (index_name = NEW.index_name AND prev_hash = NEW.prev_hash))
    BEGIN
        SELECT RAISE(ABORT, 'load_event is append-only: an insert over an existing event refused');
    END;

CREATE VIEW catalog_view AS 
        SELECT r.index_name, c.name, c.description, c.skill_path AS location, c.dir_path,
               r.path AS root, r.scope, r.provider, r.precedence, c.enabled,
               c.xxh3, c.sha256, c.changed_run_id,
               ROW_NUMBER() OVER (
                   PARTITION BY r.index_name, c.name
                   ORDER BY r.precedence DESC, r.position, c.rel_dir
               ) AS rank
        FROM candidate c JOIN root r ON r.id = c.root_id
        WHERE c.status = 'accepted';

CREATE VIEW rejection_view AS 
        SELECT r.index_name, c.name, c.dir_name, c.skill_path AS path, r.path AS root, r.scope,
               r.provider, f.code, f.severity, f.message
        FROM candidate c
        JOIN root r ON r.id = c.root_id
        JOIN finding f ON f.candidate_id = c.id
        WHERE c.status = 'rejected' AND f.severity = 'error';

CREATE VIRTUAL TABLE candidate_fts USING fts5(name, description, search_text, content='candidate', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');

CREATE TRIGGER candidate_fts_insert AFTER INSERT ON candidate BEGIN
            INSERT INTO candidate_fts (rowid, name, description, search_text)
            VALUES (new.id, new.name, new.description, new.search_text);
        END;

CREATE TRIGGER candidate_fts_delete AFTER DELETE ON candidate BEGIN
            INSERT INTO candidate_fts (candidate_fts, rowid, name, description, search_text)
            VALUES ('delete', old.id, old.name, old.description, old.search_text);
        END;

CREATE TRIGGER candidate_fts_update
        AFTER UPDATE OF name, description, search_text ON candidate BEGIN
            INSERT INTO candidate_fts (candidate_fts, rowid, name, description, search_text)
            VALUES ('delete', old.id, old.name, old.description, old.search_text);
            INSERT INTO candidate_fts (rowid, name, description, search_text)
            VALUES (new.id, new.name, new.description, new.search_text);
        END;

CREATE VIEW usage_view AS
    SELECT e.id, e.index_name, e.time, substr(e.time, 1, 10) AS day, e.event, e.skill, e.resource, e.level,
           e.outcome, e.bytes, e.session,
           CASE WHEN e.outcome = 'ok' AND e.level >= 2 THEN 1 ELSE 0 END AS loaded,
           CASE WHEN e.outcome <> 'ok' THEN 1 ELSE 0 END AS failed
    FROM load_event e;

CREATE INDEX ix_load_event_index_name_time ON load_event (index_name, time);

CREATE TABLE verify_run (
	id INTEGER NOT NULL, 
	index_name VARCHAR(100) NOT NULL, 
	time DATETIME NOT NULL, 
	cwd TEXT NOT NULL, 
	roots TEXT NOT NULL, 
	skills INTEGER NOT NULL, 
	files INTEGER NOT NULL, 
	drifted INTEGER NOT NULL, 
	drift TEXT NOT NULL, 
	CONSTRAINT pk_verify_run PRIMARY KEY (id)
);

CREATE INDEX ix_verify_run_index_name_id ON verify_run (index_name, id);

CREATE INDEX ix_load_event_principal ON load_event (principal);

CREATE VIEW load_event_view AS
    SELECT e.id, e.index_name, e.time, e.event, e.skill, e.resource, e.level,
           CASE e.level WHEN 1 THEN 'catalog' WHEN 2 THEN 'body' ELSE 'resource' END
               AS level_name,
           e.bytes, e.digest, e.outcome, e.reason, e.session, e.path, e.principal
    FROM load_event e;

CREATE TABLE usage_day (
	id INTEGER NOT NULL, 
	index_name VARCHAR(100) NOT NULL, 
	day VARCHAR(10) NOT NULL, 
	skill TEXT, 
	body INTEGER DEFAULT '0' NOT NULL, 
	resource INTEGER DEFAULT '0' NOT NULL, 
	bytes BIGINT DEFAULT '0' NOT NULL, 
	refused INTEGER DEFAULT '0' NOT NULL, 
	mismatch INTEGER DEFAULT '0' NOT NULL, 
	missing INTEGER DEFAULT '0' NOT NULL, 
	not_found INTEGER DEFAULT '0' NOT NULL, 
	error INTEGER DEFAULT '0' NOT NULL, 
	attempts INTEGER DEFAULT '0' NOT NULL, 
	published INTEGER DEFAULT '0' NOT NULL, 
	failed INTEGER DEFAULT '0' NOT NULL, 
	first_load DATETIME, 
	last_load DATETIME, 
	CONSTRAINT pk_usage_day PRIMARY KEY (id)
);

CREATE INDEX ix_usage_day_index_name_day_skill ON usage_day (index_name, day, skill);

CREATE TRIGGER load_event_usage_day AFTER INSERT ON load_event BEGIN INSERT INTO usage_day (index_name, day, skill) SELECT NEW.index_name, substr(NEW.time, 1, 10), NEW.skill WHERE NOT EXISTS (SELECT 1 FROM usage_day WHERE index_name = NEW.index_name AND day = substr(NEW.time, 1, 10) AND skill IS NEW.skill); UPDATE usage_day SET body = body + CASE WHEN NEW.outcome = 'ok' AND NEW.level = 2 THEN 1 ELSE 0 END, resource = resource + CASE WHEN NEW.outcome = 'ok' AND NEW.level = 3 THEN 1 ELSE 0 END, bytes = bytes + CASE WHEN NEW.outcome = 'ok' AND NEW.level >= 2 THEN coalesce(NEW.bytes, 0) ELSE 0 END, refused = refused + CASE WHEN NEW.level >= 2 AND NEW.outcome = 'refused' THEN 1 ELSE 0 END, mismatch = mismatch + CASE WHEN NEW.level >= 2 AND NEW.outcome = 'mismatch' THEN 1 ELSE 0 END, missing = missing + CASE WHEN NEW.level >= 2 AND NEW.outcome = 'missing' THEN 1 ELSE 0 END, not_found = not_found + CASE WHEN NEW.level >= 2 AND NEW.outcome = 'not-found' THEN 1 ELSE 0 END, error = error + CASE WHEN NEW.level >= 2 AND NEW.outcome = 'error' THEN 1 ELSE 0 END, attempts = attempts + CASE WHEN NEW.level >= 2 THEN 1 ELSE 0 END, published = published + CASE WHEN NEW.level = 1 THEN 1 ELSE 0 END, failed = failed + CASE WHEN NEW.level >= 2 AND NEW.outcome <> 'ok' THEN 1 ELSE 0 END, first_load = CASE WHEN NEW.outcome = 'ok' AND NEW.level >= 2 AND (first_load IS NULL OR NEW.time < first_load) THEN NEW.time ELSE first_load END, last_load = CASE WHEN NEW.outcome = 'ok' AND NEW.level >= 2 AND (last_load IS NULL OR NEW.time > last_load) THEN NEW.time ELSE last_load END WHERE index_name = NEW.index_name AND day = substr(NEW.time, 1, 10) AND skill IS NEW.skill; END;

CREATE INDEX ix_candidate_real_path ON candidate (real_path);

CREATE INDEX ix_resolved_winner_candidate ON resolved_winner (set_id, candidate_id);

CREATE TRIGGER load_event_in_order BEFORE INSERT ON load_event
    WHEN NEW.time < (SELECT e.time FROM load_event e WHERE e.index_name = NEW.index_name
                     ORDER BY e.id DESC LIMIT 1)
    BEGIN
        SELECT RAISE(ABORT, 'load_event is in time order: an event earlier than its head refused');
    END;

CREATE TABLE advisory_feed (
	id INTEGER NOT NULL, 
	index_name VARCHAR(100) NOT NULL, 
	source TEXT NOT NULL, 
	advisories TEXT NOT NULL, 
	digest VARCHAR(64), 
	etag TEXT, 
	loaded_at DATETIME, 
	checked_at DATETIME NOT NULL, 
	error TEXT, 
	CONSTRAINT pk_advisory_feed PRIMARY KEY (id), 
	CONSTRAINT uq_advisory_feed_index_name UNIQUE (index_name, source)
);

INSERT INTO "candidate_fts" ("candidate_fts") VALUES ('rebuild');

