"""The blocks page: reusable pieces of a body, named in it as `[[block: Name]]`.

- GET  /templates/blocks/              the blocks, where each is used, a form for a new one
- POST /templates/blocks/              create one
- GET  /templates/blocks/<id>, POST    edit one (drafts naming it change at their next preview
                                       or send; sent broadcasts keep their copy)
- POST /templates/blocks/<id>/delete   refused, saying where, while a draft, a scheduled
                                       broadcast, a live automation or a transactional
                                       template names it
"""

from __future__ import annotations

from flask import flash, render_template
from flask import url_for as url
from flask_wtf import FlaskForm
from wtforms import SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice

from broadside.campaigns.content import blocks
from broadside.core.errors import DomainError
from broadside.core.i18n import _, _l
from webapp.extensions import db
from webapp.forms import after_post, place_error
from webapp.library import bp
from webapp.library.views import EmptyForm

MAX_TYPED = 200_000  # longer than any valid block: the domain says what is too long
FORMATS = [SelectChoice("markdown", "Markdown"), SelectChoice("html", "HTML")]


class BlockForm(FlaskForm):
    name = StringField(_l("Name"))
    body_format = SelectField(_l("Written in"), choices=FORMATS, validate_choice=False)
    body = TextAreaField(_l("Content"))

    def values(self) -> dict[str, object]:
        return {"name": (self.name.data or "")[:MAX_TYPED],
                "body": (self.body.data or "")[:MAX_TYPED].replace("\r\n", "\n"),
                "body_format": self.body_format.data or "markdown"}


def _render_index(form: BlockForm, status: int = 200):
    rows = [(block, blocks.where_used(db.session, block))
            for block in blocks.list_blocks(db.session)]
    return render_template("library/blocks.html", rows=rows, form=form,
                           action_form=EmptyForm()), status


@bp.route("/blocks/")
def blocks_index():
    return _render_index(BlockForm(formdata=None))


@bp.route("/blocks/", methods=["POST"])
def create_block():
    form = BlockForm()
    try:
        block = blocks.create_block(db.session, **form.values())
    except DomainError as exc:
        db.session.rollback()
        place_error(form, exc)
        return _render_index(form, 422)
    flash(_("Block “%(name)s” saved. Put %(reference)s on a line of its own in a body to use it.",
            name=block.name, reference=blocks.reference(block.name)), "success")
    return after_post(url(".blocks_index"))


def _render_block(block_id: int, form: BlockForm, status: int = 200):
    block = blocks.get_block(db.session, block_id)
    return render_template("library/block.html", block=block, form=form,
                           uses=blocks.where_used(db.session, block),
                           action_form=EmptyForm()), status


@bp.route("/blocks/<int:block_id>")
def block(block_id: int):
    form = BlockForm(formdata=None, obj=blocks.get_block(db.session, block_id))
    return _render_block(block_id, form)


@bp.route("/blocks/<int:block_id>", methods=["POST"])
def save_block(block_id: int):
    form = BlockForm()
    try:
        saved = blocks.update_block(db.session, block_id, **form.values())
    except DomainError as exc:
        db.session.rollback()
        if exc.status_code == 404:
            raise
        place_error(form, exc)
        return _render_block(block_id, form, 422)
    flash(_("Block “%(name)s” saved. Drafts that use it show the change in their preview; sent "
            "broadcasts keep the copy they were sent with.", name=saved.name), "success")
    return after_post(url(".blocks_index"))


@bp.route("/blocks/<int:block_id>/delete", methods=["POST"])
def delete_block(block_id: int):
    try:
        name = blocks.delete_block(db.session, block_id)
    except DomainError as exc:
        db.session.rollback()
        if exc.status_code == 404:
            raise
        flash(exc.message, "error")
        return after_post(url(".block", block_id=block_id))
    flash(_("Block “%(name)s” deleted.", name=name), "success")
    return after_post(url(".blocks_index"))
