"""The SQL store: models, engine set-up, migrations, the reindex lock and every query skillindex
runs."""
