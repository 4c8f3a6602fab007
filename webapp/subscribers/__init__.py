"""Subscribers: the table, the subscriber page, CSV import (importer) and export (export)."""
