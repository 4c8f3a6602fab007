"""Templates and blocks (`views`: the templates page, a template's preview and edit page, save
as template, a draft's design reset; `block_views`: the blocks page). Reading needs `view`,
changing `write`, as a draft does. Its routes attach to this blueprint; `editor_helpers` gives
the broadcast editor's partial (templates/broadcasts/_template_actions.html) what it shows."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from broadside.campaigns.content import blocks, design
from broadside.core import roles
from broadside.mail.design import FONTS
from webapp.extensions import db
from webapp.permissions import defaults

bp = Blueprint("library", __name__, url_prefix="/templates")
defaults(bp, read=roles.VIEW, change=roles.WRITE)


@bp.app_context_processor
def editor_helpers() -> dict[str, Any]:
    """For the broadcast editor's partial: the blocks one may insert, and where a draft's
    design changes came from."""
    def block_names() -> list[str]:
        return [block.name for block in blocks.list_blocks(db.session)]
    return {"library_block_names": block_names, "block_reference": blocks.reference,
            "design_source": design.source_of, "design_changes": design.design_changes,
            "design_fonts": lambda: FONTS}
