"""The SQL store: models, engine set-up, migrations and every query skillindex runs."""
