"""The four DNS checks of one sending identity: SPF, DKIM, DMARC and the bounce domain's MX.

`DnsSubject` is what they read of an identity: its From domain, its transport (the SMTP host,
or the provider and, for Mailgun, its domain), its VERP domain and bounce mailbox host, and
Broadside's DKIM selector and key. Where a provider carries SPF on a Return-Path domain of its
own (SES, Postmark), the SPF check says so rather than asking for a record on the From domain
(broadside.delivery.dns_checks.providers says what each provider documents).

`run` answers one `DnsCheck` per kind, always: a resolver that does not answer gives
"could not ask" naming it, never an exception.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from dataclasses import dataclass

from broadside.core.transport_urls import SMTP_SCHEMES
from broadside.delivery.dns_checks import spf
from broadside.delivery.dns_checks.lookups import CouldNotAsk, Lookups
from broadside.delivery.dns_checks.providers import PROVIDERS, Provider
from broadside.delivery.dns_checks.records import (
    DnsCheck,
    aligned,
    dkim_public_key,
    organisational_domain,
    quoted,
    tags,
)

log = logging.getLogger("broadside.dns_checks")


@dataclass(frozen=True)
class DnsSubject:
    from_domain: str
    scheme: str  # smtp, smtp+starttls, smtps, ses, postmark, resend, mailgun, outbox
    smtp_host: str = ""
    url_domain: str = ""  # Mailgun's sending domain (its URL's host)
    verp_domain: str = ""  # the Return-Path's domain of Broadside's VERP, when set
    mailbox_host: str = ""  # the bounce mailbox's host, when set
    dkim_selector: str = ""
    dkim_private_key: str = ""  # a secret: read for its public key, never shown

    @property
    def provider(self) -> Provider | None:
        return PROVIDERS.get(self.scheme)

    @property
    def checked(self) -> bool:
        """Whether anything leaves through it (the outbox sends nothing)."""
        return bool(self.from_domain) and (self.scheme in SMTP_SCHEMES or self.provider is not None)

    @property
    def return_path_domain(self) -> str:
        """The domain of the envelope sender (MAIL FROM), which SPF judges."""
        provider = self.provider
        if provider is None:
            return self.verp_domain or self.from_domain
        if provider.return_path == "own":
            return provider.own_return_path
        if provider.return_path.startswith("sub:"):
            return f"{provider.return_path[4:]}.{self.from_domain}"
        return self.url_domain or self.from_domain

    @property
    def signs(self) -> bool:
        """Whether its mail carries a DKIM signature of the From domain: Broadside's own
        (a selector and key set), or a provider's (each signs with the domain verified there)."""
        return self.provider is not None or bool(self.dkim_selector and self.dkim_private_key)


def run(subject: DnsSubject, resolver: str) -> list[DnsCheck]:
    """SPF, DKIM, DMARC, MX for `subject`, asked of `resolver` ("host:port", "" the system's)."""
    if not subject.checked:
        return []
    lookups = Lookups(resolver)
    dkim = _answered("dkim", _dkim_name(subject), check_dkim, lookups, subject)

    def dmarc(lookups: Lookups, subject: DnsSubject) -> DnsCheck:
        return check_dmarc(lookups, subject, dkim_state=dkim.state)

    return [_answered("spf", subject.return_path_domain, check_spf, lookups, subject), dkim,
            _answered("dmarc", f"_dmarc.{subject.from_domain}", dmarc, lookups, subject),
            _answered("mx", _bounce_domain(subject), check_mx, lookups, subject)]


Check = Callable[[Lookups, DnsSubject], DnsCheck]


def _answered(kind: str, name: str, check: Check, lookups: Lookups, subject: DnsSubject) -> DnsCheck:
    try:
        return check(lookups, subject)
    except CouldNotAsk as exc:
        return DnsCheck(kind, name, "could_not_ask",
                        f"Could not ask: {exc}. Try again later, or set DNS_RESOLVER to a resolver "
                        "that answers.")
    except Exception:  # a check reports; it never raises into a page
        log.exception("the %s check of %s stopped on an unexpected error", kind, name)
        return DnsCheck(kind, name, "could_not_ask",
                        "The check stopped on an unexpected error (its details are in the log).")


# ------------------------------------------------------------------ SPF


def _mechanism(host: str) -> str:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"a:{host}"
    return f"ip{address.version}:{address}"


def _with(record: str, term: str) -> str:
    """`record` with `term` added before its `all` (or a new record of it)."""
    if not record:
        return f"v=spf1 {term} ~all"
    terms = record.split()
    for i, t in enumerate(terms):
        if t.lstrip("+-~?").lower() == "all" or t.lower().startswith("redirect="):
            return " ".join([*terms[:i], term, *terms[i:]])
    return " ".join([*terms, term, "~all"])


def check_spf(lookups: Lookups, subject: DnsSubject) -> DnsCheck:
    domain = subject.return_path_domain
    provider = subject.provider
    if provider is not None and provider.return_path == "own":
        extra = ("add a custom Return-Path in Postmark: pm-bounces." + subject.from_domain
                 + ". CNAME pm.mtasv.net." if subject.scheme == "postmark" else
                 "set a custom MAIL FROM domain in SES and publish on it "
                 '"v=spf1 include:amazonses.com ~all" with the MX SES shows')
        return DnsCheck("spf", domain, "ok",
                        f"{provider.name} sends with its own Return-Path domain ({domain}), which "
                        f"passes SPF: no SPF record is needed on {subject.from_domain}. For SPF to "
                        f"align with your From as well, {extra}.")
    if provider is not None:
        senders: list[str] = []
        term, who = f"include:{provider.spf_include}", provider.name
        trusted = frozenset({provider.spf_include})
    else:
        senders = lookups.addresses(subject.smtp_host)
        term, who, trusted = _mechanism(subject.smtp_host), f"the SMTP host {subject.smtp_host}", frozenset()
        if not senders:
            return DnsCheck("spf", domain, "wrong",
                            f"The SMTP host {subject.smtp_host} has no address in DNS, so no SPF "
                            "record can authorise it: check the host in the transport URL.")
    verdict = spf.evaluate(lookups, domain, senders, trusted)
    where = (f"{domain} (the Return-Path's domain)" if domain != subject.from_domain else domain)
    fixed = f"{domain}. TXT {quoted(_with(verdict.record, term))}"
    if verdict.result == "pass":
        return DnsCheck("spf", domain, "ok",
                        f"The SPF record of {where} authorises {who} (through {verdict.matched}).")
    if verdict.result == "none":
        return DnsCheck("spf", domain, "missing",
                        f"{where} publishes no SPF record, so receivers cannot tell that {who} may "
                        "send its mail. Add:", f"{domain}. TXT {quoted(f'v=spf1 {term} ~all')}")
    if verdict.result == "permerror":
        return DnsCheck("spf", domain, "wrong",
                        f"The SPF record of {where} is broken: {verdict.problem}. Fix it (fewer "
                        f"include: terms), with {term} in it:", fixed)
    return DnsCheck("spf", domain, "wrong",
                    f"The SPF record of {where} does not authorise {who} (it answers "
                    f"{verdict.result}). Replace it with:", fixed)


# ------------------------------------------------------------------ DKIM


def _dkim_name(subject: DnsSubject) -> str:
    provider = subject.provider
    selector = provider.dkim_selector if provider is not None else subject.dkim_selector
    return f"{selector}._domainkey.{subject.from_domain}" if selector else f"_domainkey.{subject.from_domain}"


def check_dkim(lookups: Lookups, subject: DnsSubject) -> DnsCheck:
    name = _dkim_name(subject)
    provider = subject.provider
    if provider is not None and not provider.dkim_selector:
        return DnsCheck("dkim", name, "unchecked", provider.dkim_advice + ".")
    if provider is not None:
        expected, shown = None, f'{name}. TXT "p=<the key {provider.name} shows you>"'
    elif not (subject.dkim_selector and subject.dkim_private_key):
        return DnsCheck("dkim", name, "unchecked",
                        "Broadside does not sign this identity's mail (no DKIM selector and key are "
                        "set). If your mail server signs it, check the selector it gave you.")
    else:
        key = dkim_public_key(subject.dkim_private_key)
        if key is None:
            return DnsCheck("dkim", name, "wrong",
                            "Broadside's DKIM private key for this identity cannot be read as a key: "
                            "set it again on the identity's page.")
        expected = key[1]
        shown = f"{name}. TXT {quoted(f'v=DKIM1; k={key[0]}; p={key[1]}')}"
    found = [tags(t) for t in lookups.txt(name)]
    found = [t for t in found if "p" in t and t.get("v", "DKIM1") == "DKIM1"]
    if not found:
        return DnsCheck("dkim", name, "missing",
                        f"No DKIM key is published at {name}, so receivers cannot check the "
                        "signature. Add:", shown)
    keys = [t["p"] for t in found]
    if expected is None and any(keys):
        return DnsCheck("dkim", name, "ok", f"A DKIM key is published at {name}.")
    if expected is not None and expected in keys:
        return DnsCheck("dkim", name, "ok", f"The DKIM key at {name} is the one Broadside signs with.")
    why = ("is empty (a revoked key)" if not any(keys) else
           "is not the one Broadside signs with, so every signature would fail")
    return DnsCheck("dkim", name, "wrong", f"The DKIM key published at {name} {why}. Replace it with:",
                    shown)


# ------------------------------------------------------------------ DMARC


def check_dmarc(lookups: Lookups, subject: DnsSubject, dkim_state: str = "ok") -> DnsCheck:
    """`dkim_state`: the DKIM check's, since a signature whose key is not published (or is
    another) aligns nothing."""
    domain = subject.from_domain
    org = organisational_domain(domain)
    name = f"_dmarc.{domain}"
    records = [t for t in lookups.txt(name) if t.upper().startswith("V=DMARC1")]
    policy_tag = "p"
    if not records and org != domain:
        name, policy_tag = f"_dmarc.{org}", "sp"
        records = [t for t in lookups.txt(name) if t.upper().startswith("V=DMARC1")]
    if not records:
        return DnsCheck("dmarc", f"_dmarc.{org}", "missing",
                        f"No DMARC policy is published for {domain}: large mailbox providers expect "
                        "one from bulk senders. Start with p=none, and read the reports sent to the "
                        "rua address (one that someone reads):",
                        f'_dmarc.{org}. TXT "v=DMARC1; p=none; rua=mailto:dmarc-reports@{org}"')
    if len(records) > 1:
        return DnsCheck("dmarc", name, "wrong",
                        f"{name} publishes {len(records)} DMARC records; receivers ignore them all. "
                        "Keep one.")
    found = tags(records[0])
    policy = found.get(policy_tag) or found.get("p", "")
    if policy.lower() not in ("none", "quarantine", "reject"):
        return DnsCheck("dmarc", name, "wrong",
                        f"The DMARC record at {name} has no valid p= (none, quarantine or reject), "
                        "so receivers ignore it. Replace it with:",
                        f'{name}. TXT "v=DMARC1; p=none; rua=mailto:dmarc-reports@{org}"')
    adkim, aspf = found.get("adkim", "r").lower()[:1], found.get("aspf", "r").lower()[:1]
    return_path = subject.return_path_domain
    dkim_holds = subject.signs and dkim_state in ("ok", "unchecked")
    by_dkim = dkim_holds and aligned(domain, domain, adkim)
    by_spf = aligned(domain, return_path, aspf)
    mode = {"s": "strict", "r": "relaxed"}
    relaxed_note = (" (relaxed alignment compares organisational domains, taken here as the last "
                    "two labels, or three under a suffix like co.uk)")
    if by_dkim or by_spf:
        through = " and ".join(w for w, ok in (
            (f"DKIM (d={domain})", by_dkim), (f"SPF (Return-Path at {return_path})", by_spf)) if ok)
        return DnsCheck("dmarc", name, "ok",
                        f"DMARC p={policy} is published, and this identity's From aligns through "
                        f"{through}.")
    dkim_words = ("its mail carries no DKIM signature of " + domain if not subject.signs
                  else "its DKIM signature cannot be verified (see DKIM)" if not dkim_holds
                  else f"its DKIM signature does not align ({mode[adkim]})")
    return DnsCheck("dmarc", name, "wrong",
                    f"DMARC p={policy} is published, but this identity's mail would fail it: "
                    f"{dkim_words}, and its Return-Path domain {return_path} does not align with "
                    f"{domain} ({mode[aspf]} SPF alignment{relaxed_note if aspf == 'r' else ''}). "
                    "Set up DKIM signing for it, or a Return-Path under " + org + ".")


# ------------------------------------------------------------------ MX


def _bounce_domain(subject: DnsSubject) -> str:
    return subject.return_path_domain


def check_mx(lookups: Lookups, subject: DnsSubject) -> DnsCheck:
    domain = _bounce_domain(subject)
    provider = subject.provider
    if provider is not None and provider.return_path == "own":
        return DnsCheck("mx", domain, "ok",
                        f"Bounces go to {provider.name}'s own Return-Path domain ({domain}), which "
                        f"receives them; {provider.name} reports them through its webhook.")
    exchange = (provider.mx_example if provider is not None
                else f"10 {subject.mailbox_host or 'mail.' + domain}.")
    record = f"{domain}. MX {exchange}"
    found = lookups.mx(domain)
    if not found:
        whose = (" (with the mail server that receives its bounces)"
                 if provider is None and not subject.mailbox_host else "")
        return DnsCheck("mx", domain, "missing",
                        f"{domain} (where bounces are sent) has no MX record, so bounces cannot "
                        f"reach it. Add{whose}:", record)
    hosts = [h for _, h in found]
    if hosts == [""] or hosts == ["."]:
        return DnsCheck("mx", domain, "wrong",
                        f"{domain} publishes a null MX (it accepts no mail), so bounces are lost. "
                        "Replace it with:", record)
    if provider is not None:
        prefix, suffix = provider.mx_pattern
        if not any(h.startswith(prefix) and h.endswith(suffix) for h in hosts):
            return DnsCheck("mx", domain, "wrong",
                            f"{domain}'s MX ({', '.join(hosts)}) is not {provider.name}'s, so its "
                            "bounces do not reach it. Replace it with (the region "
                            f"{provider.name} shows you):", record)
    shown = ", ".join(f"{h} ({p})" for p, h in found[:3])
    return DnsCheck("mx", domain, "ok", f"{domain}, where bounces are sent, receives mail at {shown}.")
