"""What providers tell us after a send: delivery, bounce and complaint events, from SNS and the
providers' own signed webhooks (`sns`, `providers`, `replay`), their payloads, how they settle
an `unknown` row (`settle`) and suppress a person (`service`). The top floor of the domain: it
writes through the campaigns' ledgers and the audience's suppression."""
