"""rankgym.store: the SQLite trajectory store (see ``core`` for the Store and its guarantees).

Layout: ``core`` (the :class:`Store` class), ``schema`` (migrations), ``rows`` (row <-> model
code), ``filters`` (group filters, full-text query quoting), ``queries`` (aggregate reads
for the dashboard and agreement), ``export`` (JSONL, Parquet).
The tables are documented in docs/store.md.
"""

from rankgym.errors import StoreBusy, StoreError
from rankgym.store.core import Store
from rankgym.store.export import ExportResult
from rankgym.store.filters import SEARCH_HITS_LIMIT, fts_query
from rankgym.store.schema import MIGRATIONS, SCHEMA_VERSION
from rankgym.store.schema import statements as _statements

__all__ = [
    "ExportResult",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SEARCH_HITS_LIMIT",
    "Store",
    "StoreBusy",
    "StoreError",
    "_statements",
    "fts_query",
]
