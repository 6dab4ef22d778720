"""panes' tests (a package, so that test-only helpers import as tests.<dir>.<module>)."""
