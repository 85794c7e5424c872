"""Walk, judge and stage: the scanner, frontmatter parsing, validation, hashing, the indexer."""
