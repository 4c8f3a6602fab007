"""Imports the API modules of each feature so their routes attach to the blueprint."""

from webapp.api import (
    audience,  # noqa: F401 - lists, subscribers, CSV import (issue 3)
    broadcasts,  # noqa: F401,E402 - broadcasts (issue 4)
)
