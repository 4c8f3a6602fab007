"""Owner pages for subscribers: the searchable table (with its total and the selection for bulk
actions, `bulk_views`), add, edit, unsubscribe, suppress, erase."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_wtf import FlaskForm
from wtforms import BooleanField, SelectField, SelectMultipleField, StringField, TextAreaField
from wtforms.validators import DataRequired, Length
from wtforms.widgets import CheckboxInput, ListWidget

from broadside.audience.lists import all_lists
from broadside.audience.subscribers import bulk, search, service
from broadside.audience.subscribers.language import language_choices, language_name
from broadside.audience.subscribers.time_zone import clock_in, zone_groups
from broadside.audience.subscribers.total import count_matching
from broadside.audience.unsubscribe import suppression
from broadside.campaigns.automations import messages as automations
from broadside.campaigns.codes import lookup as code_lookup
from broadside.core.errors import DomainError
from broadside.core.i18n import _, _l
from broadside.core.timeutil import utcnow
from broadside.delivery import content_retention, transactional
from broadside.segments.service import all_segments
from webapp.extensions import db
from webapp.forms import after_post, place_error
from webapp.htmx import make_response, request, vary_on_htmx
from webapp.params import int_arg
from webapp.subscribers import bp
from webapp.subscribers.filters import current_filters

ATTRIBUTES_HELP = _l("One per line, as name = value.")
LANGUAGE_HELP = _l("What Broadside writes to them, and their version of a broadcast, is in "
                   "this language when there is one.")
TIMEZONE_HELP = _l("A broadcast sent at each reader's own hour reaches them at that hour here; "
                   "without one, at yours.")


class SubscriberForm(FlaskForm):
    email = StringField(_l("Email"), validators=[DataRequired(), Length(max=service.MAX_EMAIL)])
    name = StringField(_l("Name"), validators=[Length(max=service.MAX_NAME)])
    attributes = TextAreaField(_l("Attributes"))
    locale = SelectField(_l("Language"), default="")
    timezone = StringField(_l("Time zone"), default="")

    def offer_languages(self, current: str | None) -> None:
        self.locale.choices = [("", _("List's default")), *language_choices(current)]


class NewSubscriberForm(SubscriberForm):
    lists = SelectMultipleField(_l("Lists"), coerce=int, widget=ListWidget(prefix_label=False),
                                option_widget=CheckboxInput())
    welcome = BooleanField(_l("Send the welcome series of the lists they join"), default=True)


class AddToListForm(FlaskForm):
    list_id = SelectField(_l("Add to list"), coerce=int)
    welcome = BooleanField(_l("Send that list's welcome series"), default=True)


class SuppressForm(FlaskForm):
    detail = StringField(_l("Reason (kept with the suppression)"), validators=[Length(max=1000)])


class ConfirmForm(FlaskForm):
    """Only the CSRF token: for buttons that change state."""


@bp.route("/")
def index():
    filters = current_filters()
    page = search.search(db.session, filters, before=int_arg("before"), after=int_arg("after"))
    # The total is its own request (`total`, loaded by htmx once the table is shown), so the
    # table never waits for a count. HTMX search swaps only the results; without JavaScript
    # the same URL is the whole page.
    partial = bool(request.htmx) and not (
        request.htmx.boosted or request.htmx.history_restore_request)
    template = "subscribers/_table.html" if partial else "subscribers/index.html"
    return vary_on_htmx(make_response(render_template(
        template, page=page, filters=filters, lists=all_lists(db.session),
        bulk_choices=bulk.CHOICES,
        segments=all_segments(db.session),
        statuses=search.STATUS_FILTERS, partial=partial,
        languages=[] if partial else language_choices(None), no_locale=search.NO_LOCALE,
    )))


@bp.route("/total")
def total():
    """How many match the table's filter: the fragment htmx loads into the table's heading,
    or without JavaScript a small page of its own (the table links to it)."""
    filters = current_filters()
    found = count_matching(db.session, filters, window=0)
    template = "subscribers/_total.html" if request.htmx else "subscribers/total.html"
    return vary_on_htmx(make_response(render_template(template, total=found, filters=filters)))


@bp.route("/new", methods=["GET", "POST"])
def new():
    form = NewSubscriberForm()
    form.lists.choices = [(item.id, item.name) for item in all_lists(db.session)]
    form.offer_languages(None)
    if request.method == "GET" and (list_id := int_arg("list")) is not None:
        form.lists.data = [list_id]
    if form.validate_on_submit():
        try:
            subscriber, created = service.save_subscriber(
                db.session, email=form.email.data, name=form.name.data,
                attributes=service.parse_attribute_lines(form.attributes.data),
                list_ids=form.lists.data or [], welcome=bool(form.welcome.data),
                locale=form.locale.data, timezone=form.timezone.data,
            )
        except DomainError as exc:
            db.session.rollback()
            place_error(form, exc)
        else:
            flash(_("%(email)s was added.", email=subscriber.email) if created else
                  _("%(email)s was already known: their details and lists are updated.",
                    email=subscriber.email), "success")
            return after_post(url_for("subscribers.show", subscriber_id=subscriber.id))
    return render_template("subscribers/new.html", form=form, attributes_help=ATTRIBUTES_HELP,
                           language_help=LANGUAGE_HELP, timezone_help=TIMEZONE_HELP,
                           zone_groups=zone_groups(form.timezone.data)), \
        422 if form.errors else 200


@bp.route("/<int:subscriber_id>")
def show(subscriber_id: int):
    detail = service.subscriber_detail(db.session, subscriber_id)
    on = {row.list_id for row in detail.subscriptions}
    add_form = AddToListForm()
    add_form.list_id.choices = [(i.id, i.name) for i in all_lists(db.session) if i.id not in on]
    return render_template("subscribers/show.html", detail=detail, add_form=add_form,
                           automated=automations.messages_of(db.session, subscriber_id),
                           one_off=transactional.messages_to(db.session, subscriber_id,
                                                             detail.subscriber.email),
                           content_days=content_retention.retention_days(db.session),
                           codes=code_lookup.of_person(db.session, subscriber_id),
                           now=utcnow(),  # a pending message is "due" once its time came
                           suppress_form=SuppressForm(formdata=None), form=ConfirmForm(),
                           subscriber=detail.subscriber,
                           language=language_name(detail.subscriber.locale),
                           their_time=clock_in(detail.subscriber.timezone, utcnow()),
                           can_block=suppression.outranks("blocked", detail.subscriber.suppression))


@bp.route("/<int:subscriber_id>/edit", methods=["GET", "POST"])
def edit(subscriber_id: int):
    subscriber = service.get_subscriber(db.session, subscriber_id)
    form = SubscriberForm(data={
        "email": subscriber.email, "name": subscriber.name,
        "attributes": service.format_attribute_lines(subscriber.attributes),
        "locale": subscriber.locale or "", "timezone": subscriber.timezone or "",
    })
    form.offer_languages(subscriber.locale)
    if form.validate_on_submit():
        try:
            service.update_subscriber(
                db.session, subscriber_id, email=form.email.data, name=form.name.data,
                attributes=service.parse_attribute_lines(form.attributes.data),
                locale=form.locale.data, timezone=form.timezone.data,
            )
        except DomainError as exc:
            db.session.rollback()
            place_error(form, exc)
        else:
            flash(_("Saved."), "success")
            return after_post(url_for("subscribers.show", subscriber_id=subscriber_id))
    return render_template("subscribers/edit.html", form=form, subscriber=subscriber,
                           attributes_help=ATTRIBUTES_HELP, language_help=LANGUAGE_HELP,
                           timezone_help=TIMEZONE_HELP, zone_groups=zone_groups(form.timezone.data)), \
        422 if form.errors else 200


@bp.route("/<int:subscriber_id>/lists", methods=["POST"])
def add_to_list(subscriber_id: int):
    form = AddToListForm()
    form.list_id.choices = [(i.id, i.name) for i in all_lists(db.session)]
    if form.validate_on_submit():
        if service.join_list(db.session, subscriber_id, form.list_id.data,
                             welcome=bool(form.welcome.data)):
            flash(_("Added to the list as active."), "success")
        else:
            flash(_("They are already on that list; their status there is unchanged."), "info")
    return redirect(url_for("subscribers.show", subscriber_id=subscriber_id))


@bp.route("/<int:subscriber_id>/lists/<int:list_id>/unsubscribe", methods=["POST"])
def unsubscribe(subscriber_id: int, list_id: int):
    if ConfirmForm().validate_on_submit():
        changed = service.unsubscribe(db.session, subscriber_id, list_id, source="owner")
        flash(_("Unsubscribed from the list.") if changed else
              _("They were already unsubscribed."), "success")
    return redirect(url_for("subscribers.show", subscriber_id=subscriber_id))


@bp.route("/<int:subscriber_id>/suppress", methods=["POST"])
def suppress(subscriber_id: int):
    form = SuppressForm()
    if form.validate_on_submit():
        changed = suppression.suppress(db.session, subscriber_id, "blocked", form.detail.data)
        flash(_("Blocked: they will get no more mail from any list.") if changed else
              _("They were already suppressed."), "success")
    return redirect(url_for("subscribers.show", subscriber_id=subscriber_id))


@bp.route("/<int:subscriber_id>/delete")
def confirm_delete(subscriber_id: int):
    subscriber = service.get_subscriber(db.session, subscriber_id)
    return render_template("subscribers/delete.html", subscriber=subscriber, form=ConfirmForm())


@bp.route("/<int:subscriber_id>/delete", methods=["POST"])
def delete(subscriber_id: int):
    if not ConfirmForm().validate_on_submit():
        return redirect(url_for("subscribers.confirm_delete", subscriber_id=subscriber_id))
    email = service.erase(db.session, subscriber_id)
    flash(_("%(email)s is erased: their data and history are gone.", email=email), "success")
    return redirect(url_for("subscribers.index"))

