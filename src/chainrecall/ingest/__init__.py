"""Ingest: turning deliveries from real sources into triggers linked into threads.

One module per source (`github`, `chat`, `email`, `ci`) parses a delivery as
the source sends it, decides its thread by natural key, writes a one-line
summary without a model, and finds the triggers it should cite through the
store's aliases (`common.Lookup`). Each answers a validated `NewTrigger` and
stores nothing itself: the HTTP routes (`api/ingest.py`) and the bulk importer
(`bulk.py`) do the storing, one at a time or in batches. Malformed input raises
`InvalidInput` before anything is written.
"""

from __future__ import annotations
