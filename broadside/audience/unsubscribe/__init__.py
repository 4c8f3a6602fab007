"""Leaving: the one-click unsubscribe (`service`), suppression by bounce, complaint or the
owner's block (`suppression`), who left and why (`departures`, `evidence`)."""
