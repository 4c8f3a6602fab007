"""What each provider documents about the DNS of a sending domain: whose Return-Path carries
SPF, which `include:` authorises it, which DKIM selector it signs with, where its bounces go.

Sources (read for this table; each provider's setup page is the authority when they differ):
- Amazon SES: "Authenticating email with SPF in Amazon SES" (docs.aws.amazon.com/ses/latest/dg/
  send-email-authentication-spf.html): the default MAIL FROM is a subdomain of amazonses.com,
  which passes SPF without a record of yours; a custom MAIL FROM domain needs
  `v=spf1 include:amazonses.com ~all` and an MX to feedback-smtp.<region>.amazonses.com. Easy
  DKIM publishes three CNAMEs `<token>._domainkey` -> `<token>.dkim.amazonses.com` whose tokens
  only the SES console (GetEmailIdentity) knows.
- Postmark: "Introducing full DMARC support with custom Return-Path domains"
  (postmarkapp.com/blog): the Return-Path is pm.mtasv.net (SPF passes on Postmark's domain);
  for alignment a custom Return-Path `pm-bounces.<domain> CNAME pm.mtasv.net`; DKIM selectors are
  dated (`<date>pm._domainkey`), assigned per domain, so only the account knows them.
  `include:spf.mtasv.net` on the From domain is optional.
- Resend: "Add a domain" (resend.com/docs/add-a-domain) and its Domain Connect template
  (github.com/Domain-Connect/Templates, resend.com.mail.json): DKIM TXT at `resend._domainkey`,
  and the Return-Path on the subdomain `send`: MX `feedback-smtp.<region>.amazonses.com` and
  TXT `v=spf1 include:amazonses.com ~all` there.
- Mailgun: "Domain Verification" (documentation.mailgun.com/docs/mailgun/user-manual/domains/
  domains-verify): on the sending domain (the one in the mailgun:// URL) TXT
  `v=spf1 include:mailgun.org ~all` and MX `mxa.mailgun.org`, `mxb.mailgun.org`; the DKIM
  selector is shown under the domain's "DNS records" (it varies by account).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Provider:
    name: str
    spf_include: str
    # Where SPF is judged: "from" (the From domain), "own" (the provider's own Return-Path
    # domain: nothing of ours), "sub:<label>" (a subdomain of the From), "url" (the URL's host).
    return_path: str
    own_return_path: str = ""  # the provider's domain, when return_path is "own"
    dkim_selector: str = ""  # a fixed selector, when documented
    dkim_advice: str = ""  # otherwise, where the owner finds theirs
    mx_pattern: tuple[str, str] = ("", "")  # (prefix, suffix) an MX host must have
    mx_example: str = ""  # the MX to add


PROVIDERS = {
    "ses": Provider(
        "Amazon SES", "amazonses.com", "own", own_return_path="amazonses.com",
        dkim_advice="Easy DKIM publishes three CNAME records whose names only SES knows: copy them "
                    "from the SES console (Verified identities → your domain → DKIM)"),
    "postmark": Provider(
        "Postmark", "spf.mtasv.net", "own", own_return_path="pm.mtasv.net",
        dkim_advice="Postmark gives each domain a dated selector (<date>pm._domainkey): check the "
                    "one in Postmark under Sender Signatures → DNS Settings"),
    "resend": Provider(
        "Resend", "amazonses.com", "sub:send", dkim_selector="resend",
        mx_pattern=("feedback-smtp.", ".amazonses.com"),
        mx_example="10 feedback-smtp.us-east-1.amazonses.com."),
    "mailgun": Provider(
        "Mailgun", "mailgun.org", "url",
        dkim_advice="Mailgun shows the selector it signs with under Domain settings → DNS records: "
                    "check the one it gave you",
        mx_pattern=("mx", ".mailgun.org"), mx_example="10 mxa.mailgun.org."),
}
