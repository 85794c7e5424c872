"""Store to answers: resolution, the catalog, verified disclosure, context files."""
