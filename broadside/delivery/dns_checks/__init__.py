"""DNS checks of a sending identity: is its domain set up so that receivers trust its mail?

SPF (does the Return-Path's domain authorise the SMTP host or the provider?), DKIM (is the key
published at the selector Broadside or the provider signs with?), DMARC (is a policy published,
and would this From align?) and the MX of the bounce domain, each answered as data
(`records.DnsCheck`: a state, the owner's sentence, the exact record to add), asked of
DNS_RESOLVER within a time budget (`lookups`), kept in Redis briefly (`subject`).

    lookups.py    the resolver, each question bounded, "could not ask" naming the resolver
    spf.py        SPF evaluation enough to say "authorised" (include, redirect, a, mx, ip4/ip6,
                  10 lookups)
    records.py    `DnsCheck`, organisational domains and alignment, Broadside's DKIM public key
    providers.py  what each provider documents (sources in its docstring)
    checks.py     `DnsSubject` and the four checks
    subject.py    an identity's `DnsSubject`, and its result kept in Redis
"""
