"""The subscriber table's filters as the query string gives them: the table, its bulk actions
and its export all read the same ones."""

from __future__ import annotations

from flask import request

from broadside.audience.subscribers import search


def current_filters() -> search.Filters:
    return search.Filters.parse(request.args.get("q"), request.args.get("match"),
                                request.args.get("list"), request.args.get("status"),
                                request.args.get("segment"), request.args.get("language"))
