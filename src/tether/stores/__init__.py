"""Conversation stores: the Store protocol and memory/SQLite/PostgreSQL implementations."""
