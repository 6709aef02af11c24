"""The PostgreSQL conversation store (the ``postgres`` extra: psycopg 3 and psycopg-pool).

``PostgresStore`` over ``PostgresPool`` (the pool the service's PostgreSQL event log shares);
schema, records and ledger each in their own module. Importing this package without the extra
raises ``MissingExtra``.
"""

from tether.stores.postgres._store import PostgresStore

__all__ = ["PostgresStore"]
