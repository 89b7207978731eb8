"""How packs are rebuilt on a schedule: one Prefect deployment per source (see README.md)."""
