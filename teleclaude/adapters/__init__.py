"""Thin shells around git, the file system and SQLite."""
