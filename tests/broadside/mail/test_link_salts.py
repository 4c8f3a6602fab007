"""Every signed link already in a reader's inbox keeps working across a release: the salts and
key derivations that sign them are part of the links' format, never of the code's layout (a
move of the modules once rewrote the sign-up confirmation's salt with their path)."""

from broadside.audience import signup
from broadside.audience.subscribers import personal_data
from broadside.campaigns.analytics import tokens as tracking
from broadside.campaigns.archive import links
from broadside.mail import password_reset, unsubscribe_tokens


def test_the_salts_of_links_in_inboxes_never_change():
    assert unsubscribe_tokens.SALT == "broadside.unsubscribe.v1"
    assert signup.SALT == "broadside.signup-confirm.v1"
    assert links.SALT == "broadside.view-in-browser.v1"
    assert tracking.OPEN_SALT == "broadside.analytics.open.v1"
    assert tracking.CLICK_SALT == "broadside.analytics.click.v1"
    assert personal_data.FORMAT == "broadside.personal-data.v1"
    assert password_reset.SALT == "broadside.password-reset.v1"

