"""The ground floor: what every other package of the domain stands on and nothing of the domain
above it. The database (`db`, `models/`: every table), errors, the clock (`timeutil`),
configuration (`config`, with the transport URLs it validates: `transport_urls`), logging with
redaction (`logs`), the evidence writer (`events`), the Settings row (`site_settings`), owner
accounts and API tokens (`accounts`), the signing of links (`signing`) and the one sentence
said when Redis does not answer (`redis_health`)."""
